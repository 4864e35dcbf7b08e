// Megatron-Core's indexed dataset: PREFIX.idx describes the tokens of
// PREFIX.bin, which has no header. The index, little-endian and unaligned:
//   bytes 0-8    the magic "MMIDIDX\0\0"
//   bytes 9-16   u64 version, 1
//   byte  17     u8 dtype code: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
//                6 float64, 7 float32, 8 uint16
//   bytes 18-25  u64 S, the number of sequences
//   bytes 26-33  u64 D, the number of document indices
//   then int32 lengths[S], int64 byte pointers[S] into the .bin, int64
//   document indices[D] (sequence indices from 0 to S; document d is the
//   sequences from entry d to entry d + 1), and, in multimodal files, int8
//   modes[S], told apart by the file's size.
#pragma once

#include "tokens/token_layout.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace backplane::detail {

inline constexpr std::string_view kMegatronMagic{"MMIDIDX\0\0", 9};
inline constexpr std::uint64_t kMegatronHeaderBytes = 34;  // up to the arrays

// True when the first nine bytes are the magic.
bool has_megatron_magic(std::span<const std::byte> prefix) noexcept;
// The format's row: the magic, or a name ending in ".idx" (whose reader
// then says what is wrong with its magic, rather than the file being read as
// raw tokens).
bool recognises_megatron_index(std::span<const std::byte> prefix, std::string_view file) noexcept;

// The whole index (header and arrays, with the modes where the file is long
// enough to hold them) where the counts in `prefix` are sane, else what
// `prefix` holds (the reader then reports the bad count). Never more than
// `file_size`.
std::uint64_t megatron_index_bytes(std::span<const std::byte> prefix, std::uint64_t file_size) noexcept;

// Reads the index. The layout names PREFIX.bin as its data file, from byte
// 0, with the tokens of every sequence, which the pointers must lay out end
// to end (as IndexedDatasetBuilder writes them), and where each document
// starts: the first token of its first sequence (an empty document gives
// none). Throws Error(kInvalidFile) naming the file and the field: the
// magic, another version, an unknown or floating-point dtype code, counts
// whose arrays overrun the file or leave bytes over, a negative length, a
// pointer where the sequences before it do not end, document indices that
// do not run from 0 to S in order. A mapped index (header.prefix_mapped) is
// read once, front to back, and its pages dropped behind the reader.
TokenLayout read_megatron_index(const TokenHeader& header);

// The index to read for `path`: PREFIX.idx when `path` is PREFIX.bin or
// PREFIX and that index exists; nullopt for any other path (it is read as it
// is, an index included).
std::optional<std::string> megatron_index_file_for(const std::string& path);

}  // namespace backplane::detail
