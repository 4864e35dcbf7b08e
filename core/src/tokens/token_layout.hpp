// Where the tokens of a token file are, decided from the file's first bytes
// and its size alone: no file is opened here, so the fuzzer and the tests
// reach every header rule without writing files. load_tokens.cpp opens,
// reads the prefix, asks this layer, then maps the file.
//
// Every function here throws backplane::Error naming the file (`file`, only
// used in messages) and the problem, with the codes tokens.hpp documents.
#pragma once

#include <backplane/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace backplane::detail {

enum class TokenFormat : std::uint8_t { kLlmc, kNpy, kSafetensors, kRaw };

// "llm.c shard", "NumPy .npy", "safetensors", "raw".
std::string_view token_format_name(TokenFormat format) noexcept;

// The tokens of a file: `count` elements of `dtype`, contiguous from byte
// `data_offset`. data_offset + count * size of dtype never overflows and
// never passes the file's size.
struct TokenLayout {
  TokenFormat format = TokenFormat::kRaw;
  DType dtype = DType::kU8;
  std::uint64_t data_offset = 0;
  std::uint64_t count = 0;
};

// What the caller asks for (TokenFileOptions without the device).
struct TokenRequest {
  std::optional<DType> dtype;  // required for raw files, else a check of the header's
  std::string_view name;       // the safetensors tensor; empty: the file's only one
};

// By content first (NumPy magic, then llm.c magic), then by name (a name
// ending in ".safetensors"), else raw. `prefix` is the file's first bytes
// (eight are enough).
TokenFormat detect_token_format(std::span<const std::byte> prefix, std::string_view file);

// How many of the file's first bytes the header reader of `format` needs,
// judged from `prefix` (at least min(file_size, 12) bytes): the whole header
// where its length field is sane, else what `prefix` holds (the reader then
// reports the bad length). Never more than `file_size`.
std::uint64_t token_header_bytes(TokenFormat format, std::span<const std::byte> prefix, std::uint64_t file_size);

// Detects the format and reads the header. `prefix` must hold at least
// token_header_bytes() bytes of the file (Error(kInvalidArgument) otherwise)
// and at most `file_size`; bytes after the header are ignored.
TokenLayout describe_token_file(std::span<const std::byte> prefix, std::uint64_t file_size, std::string_view file,
                                const TokenRequest& request);

}  // namespace backplane::detail
