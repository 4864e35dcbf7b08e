#include "tokens/megatron_index.hpp"

#include "tokens/object_file.hpp"

#include "remote/object_url.hpp"

#include "tokens/byte_fields.hpp"
#include "util/page_advice.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

namespace backplane::detail {
namespace {

constexpr std::string_view kIndexSuffix = ".idx";
constexpr std::string_view kDataSuffix = ".bin";

struct Counts {
  std::uint64_t sequences = 0;
  std::uint64_t documents = 0;
  std::uint64_t arrays_end = 0;  // the end of the document indices
  bool fits = false;             // arrays_end did not overflow
};

Counts counts_of(std::span<const std::byte> prefix) noexcept {
  Counts counts;
  counts.sequences = read_little_endian<std::uint64_t>(prefix, 18);
  counts.documents = read_little_endian<std::uint64_t>(prefix, 26);
  std::uint64_t sequence_bytes = 0;
  std::uint64_t document_bytes = 0;
  std::uint64_t arrays = 0;
  counts.fits =
      multiply_fits(counts.sequences, 12, sequence_bytes) && multiply_fits(counts.documents, 8, document_bytes) &&
      add_fits(sequence_bytes, document_bytes, arrays) && add_fits(arrays, kMegatronHeaderBytes, counts.arrays_end);
  return counts;
}

// One array of a mapped index, read front to back once: the pages behind the
// reader are dropped every kStride bytes, so that reading an index of
// gigabytes keeps only a few strides of it resident (the page cache keeps
// the rest for the next reader). Does nothing where the index was copied.
class DropBehind {
 public:
  static constexpr std::size_t kStride = std::size_t{4} << 20;

  DropBehind(const TokenHeader& header, std::size_t start)
      : index_(header.prefix), mapped_(header.prefix_mapped), dropped_(start) {}

  // Every byte of the array before `offset` has been read.
  void read_up_to(std::size_t offset) noexcept {
    if (!mapped_ || offset < dropped_ + kStride) return;
    drop_pages({index_.data() + dropped_, offset - dropped_}, {index_.data(), index_.size()});
    dropped_ = offset;
  }

 private:
  std::span<const std::byte> index_;
  bool mapped_;
  std::size_t dropped_;
};

// The dtype of a code, or nullopt where the code is a float or unknown.
std::optional<DType> dtype_of_code(std::uint8_t code) noexcept {
  switch (code) {
    case 1: return DType::kU8;
    case 2: return DType::kI8;
    case 3: return DType::kI16;
    case 4: return DType::kI32;
    case 5: return DType::kI64;
    case 8: return DType::kU16;
    default: return std::nullopt;
  }
}

// The first token of each document: the pointer of its first sequence. A
// document of no tokens (no sequences, or only empty ones) starts where the
// next one does, or at the end: it gives no start of its own. The indices
// and pointers have been checked.
std::vector<std::int64_t> document_starts(const TokenHeader& header, const Counts& counts, std::size_t pointers,
                                          std::size_t documents, std::uint64_t tokens, std::uint64_t token_bytes) {
  const std::span<const std::byte> prefix = header.prefix;
  std::vector<std::int64_t> starts;
  if (counts.documents < 2) return starts;
  starts.reserve(static_cast<std::size_t>(counts.documents - 1));
  DropBehind documents_read(header, documents);
  DropBehind pointers_read(header, pointers);  // the indices run in order
  for (std::size_t entry = 0; entry + 1 < counts.documents; ++entry) {
    const auto sequence = read_little_endian<std::uint64_t>(prefix, documents + entry * 8);
    documents_read.read_up_to(documents + entry * 8);
    if (sequence < counts.sequences) pointers_read.read_up_to(pointers + static_cast<std::size_t>(sequence) * 8);
    const std::uint64_t start =
        sequence == counts.sequences
            ? tokens
            : read_little_endian<std::uint64_t>(prefix, pointers + static_cast<std::size_t>(sequence) * 8) /
                  token_bytes;
    if (start < tokens && (starts.empty() || static_cast<std::uint64_t>(starts.back()) < start)) {
      starts.push_back(static_cast<std::int64_t>(start));
    }
  }
  return starts;
}

bool exists(const std::string& path) {
  if (is_object_url(path)) return object_exists(path);
  std::error_code error;
  return std::filesystem::exists(path, error);
}

}  // namespace

bool has_megatron_magic(std::span<const std::byte> prefix) noexcept {
  return prefix.size() >= kMegatronMagic.size() &&
         std::memcmp(prefix.data(), kMegatronMagic.data(), kMegatronMagic.size()) == 0;
}

bool recognises_megatron_index(std::span<const std::byte> prefix, std::string_view file) noexcept {
  return has_megatron_magic(prefix) || file.ends_with(kIndexSuffix);
}

std::uint64_t megatron_index_bytes(std::span<const std::byte> prefix, std::uint64_t file_size) noexcept {
  if (prefix.size() < kMegatronHeaderBytes) return std::min<std::uint64_t>(prefix.size(), file_size);
  const Counts counts = counts_of(prefix);
  if (!counts.fits || counts.arrays_end > file_size) return std::min<std::uint64_t>(prefix.size(), file_size);
  return file_size;  // the arrays and, where present, the modes: the index is all header
}

TokenLayout read_megatron_index(const TokenHeader& header) {
  const std::span<const std::byte> prefix = header.prefix;
  const std::uint64_t file_size = header.file_size;
  const std::string_view file = header.file;
  const auto invalid = [&](const std::string& why) {
    return Error(ErrorCode::kInvalidFile, fmt::format("{}: Megatron index {}", file, why));
  };
  if (file_size < kMegatronHeaderBytes) {
    throw invalid(
        fmt::format("is truncated: the file is {} bytes, the header alone is {}", file_size, kMegatronHeaderBytes));
  }
  if (prefix.size() < kMegatronHeaderBytes) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} bytes given to read a Megatron index header of {}",
                                                         file, prefix.size(), kMegatronHeaderBytes));
  }
  if (!has_megatron_magic(prefix)) throw invalid("magic (bytes 0-8) is not MMIDIDX\\0\\0");
  const auto version = read_little_endian<std::uint64_t>(prefix, 9);
  if (version != 1) throw invalid(fmt::format("version (bytes 9-16) is {}; this reader knows version 1", version));
  const auto code = static_cast<std::uint8_t>(prefix[17]);
  const std::optional<DType> dtype = dtype_of_code(code);
  if (!dtype) {
    throw invalid(code == 6 || code == 7
                      ? fmt::format("dtype code (byte 17) is {} ({}): token files hold integers", code,
                                    code == 6 ? "float64" : "float32")
                      : fmt::format("dtype code (byte 17) is {}, not one of 1 (uint8), 2 (int8), 3 (int16), 4 "
                                    "(int32), 5 (int64), 8 (uint16)",
                                    code));
  }
  const Counts counts = counts_of(prefix);
  const std::uint64_t modes_end = counts.arrays_end + counts.sequences;  // cannot overflow past a file's size
  if (!counts.fits || counts.arrays_end > file_size || (file_size != counts.arrays_end && file_size != modes_end)) {
    throw invalid(fmt::format(
        "says {} sequences and {} document indices, {} bytes with the header ({} with the modes of a multimodal "
        "index), but the file is {} bytes",
        counts.sequences, counts.documents, counts.fits ? fmt::format("{}", counts.arrays_end) : "more than 2^64",
        counts.fits ? fmt::format("{}", modes_end) : "more", file_size));
  }
  if (prefix.size() < counts.arrays_end) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} bytes given to read a Megatron index of {}", file,
                                                         prefix.size(), counts.arrays_end));
  }
  const auto token_bytes = static_cast<std::uint64_t>(dtype_bits(*dtype) / 8);
  const std::size_t lengths = kMegatronHeaderBytes;
  const std::size_t pointers = lengths + static_cast<std::size_t>(counts.sequences) * 4;
  const std::size_t documents = pointers + static_cast<std::size_t>(counts.sequences) * 8;
  // The sequences end to end: each pointer where the ones before it end.
  std::uint64_t end = 0;
  DropBehind lengths_read(header, lengths);
  DropBehind pointers_read(header, pointers);
  for (std::size_t sequence = 0; sequence < counts.sequences; ++sequence) {
    lengths_read.read_up_to(lengths + sequence * 4);
    pointers_read.read_up_to(pointers + sequence * 8);
    const auto length = static_cast<std::int32_t>(read_little_endian<std::uint32_t>(prefix, lengths + sequence * 4));
    const auto pointer = static_cast<std::int64_t>(read_little_endian<std::uint64_t>(prefix, pointers + sequence * 8));
    if (length < 0) throw invalid(fmt::format("length of sequence {} is {}", sequence, length));
    if (pointer < 0 || static_cast<std::uint64_t>(pointer) != end) {
      throw invalid(fmt::format("pointer of sequence {} is byte {}, but the sequences before it end at byte {}",
                                sequence, pointer, end));
    }
    std::uint64_t bytes = 0;
    if (!multiply_fits(static_cast<std::uint64_t>(length), token_bytes, bytes) || !add_fits(end, bytes, end)) {
      throw invalid(fmt::format("sequence {} ends past 2^64 bytes", sequence));
    }
  }
  // Document indices: sequence numbers from 0 to S, in order.
  std::uint64_t previous = 0;
  DropBehind documents_read(header, documents);
  for (std::size_t entry = 0; entry < counts.documents; ++entry) {
    documents_read.read_up_to(documents + entry * 8);
    const auto index = read_little_endian<std::uint64_t>(prefix, documents + entry * 8);
    const bool last = entry + 1 == counts.documents;
    if ((entry == 0 && index != 0) || index < previous || index > counts.sequences ||
        (last && index != counts.sequences)) {
      throw invalid(fmt::format("document index {} is {}: the indices run from 0 to the {} sequences, in order", entry,
                                static_cast<std::int64_t>(index), counts.sequences));
    }
    previous = index;
  }
  if (counts.documents == 0 && counts.sequences != 0) {
    throw invalid(fmt::format("has {} sequences but no document indices (at least 0 and {})", counts.sequences,
                              counts.sequences));
  }
  const std::string_view name = file.ends_with(kIndexSuffix) ? file.substr(0, file.size() - kIndexSuffix.size()) : file;
  const std::string data_file = std::string(name) + std::string(kDataSuffix);
  // One rule for a dataset of no tokens, whatever its .bin holds (nothing,
  // or bytes the index does not lay out): refused here, from the index alone.
  if (end == 0) {
    throw invalid(
        fmt::format("lays out no tokens ({} sequences{}): a dataset of no tokens is refused, whatever {} "
                    "holds",
                    counts.sequences, counts.sequences == 0 ? "" : ", all of length 0", data_file));
  }
  TokenLayout layout;
  layout.document_starts = document_starts(header, counts, pointers, documents, end / token_bytes, token_bytes);
  layout.dtype = *dtype;
  layout.data_offset = 0;
  layout.count = end / token_bytes;
  layout.data_file = data_file;
  return layout;
}

std::optional<std::string> megatron_index_file_for(const std::string& path) {
  if (path.ends_with(kIndexSuffix)) return std::nullopt;
  const std::string prefix = path.ends_with(kDataSuffix) ? path.substr(0, path.size() - kDataSuffix.size()) : path;
  std::string index = prefix + std::string(kIndexSuffix);
  if (!path.ends_with(kDataSuffix) && exists(path)) return std::nullopt;  // a file of its own: read as it is
  if (!exists(index)) return std::nullopt;
  return index;
}

}  // namespace backplane::detail
