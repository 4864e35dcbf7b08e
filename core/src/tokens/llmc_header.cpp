#include "tokens/llmc_header.hpp"

#include "tokens/byte_fields.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace backplane::detail {
namespace {

std::uint32_t header_field(std::span<const std::byte> prefix, std::size_t index) noexcept {
  return read_little_endian<std::uint32_t>(prefix, index * 4);
}

}  // namespace

bool has_llmc_magic(std::span<const std::byte> prefix) noexcept {
  if (prefix.size() < 4) return false;
  const std::uint32_t magic = header_field(prefix, 0);
  return magic == kLlmcMagicU16 || magic == kLlmcMagicU32;
}

std::uint64_t llmc_header_bytes(std::span<const std::byte> /*prefix*/, std::uint64_t file_size) noexcept {
  return std::min(kLlmcHeaderBytes, file_size);
}

TokenLayout read_llmc_header(std::span<const std::byte> prefix, std::uint64_t file_size, std::string_view file) {
  if (file_size < kLlmcHeaderBytes) {
    throw Error(ErrorCode::kInvalidFile,
                fmt::format("{}: llm.c shard header is truncated: the file is {} bytes, the header alone is {} "
                            "(256 int32)",
                            file, file_size, kLlmcHeaderBytes));
  }
  if (prefix.size() < kLlmcHeaderBytes) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} bytes given to read an llm.c shard header of {}", file,
                                                         prefix.size(), kLlmcHeaderBytes));
  }
  const std::uint32_t magic = header_field(prefix, 0);
  const std::uint32_t version = header_field(prefix, 1);
  TokenLayout layout;
  layout.data_offset = kLlmcHeaderBytes;
  std::uint32_t expected_version = 0;
  if (magic == kLlmcMagicU16) {
    layout.dtype = DType::kU16;
    expected_version = 1;
  } else if (magic == kLlmcMagicU32) {
    layout.dtype = DType::kU32;
    expected_version = 7;
  } else {
    throw Error(ErrorCode::kInvalidFile,
                fmt::format("{}: not an llm.c shard: header field 0 (magic) is {}, expected {} (uint16 tokens) or {} "
                            "(uint32 tokens)",
                            file, magic, kLlmcMagicU16, kLlmcMagicU32));
  }
  if (version != expected_version) {
    throw Error(
        ErrorCode::kInvalidFile,
        fmt::format("{}: llm.c shard header field 1 (version) is {}, but magic {} ({} tokens) needs version {}", file,
                    static_cast<std::int32_t>(version), magic, dtype_name(layout.dtype), expected_version));
  }
  layout.count = header_field(prefix, 2);
  const auto token_bytes = static_cast<std::uint64_t>(dtype_bits(layout.dtype) / 8);
  // At most 2^32 tokens of 4 bytes: no overflow, yet checked like every size.
  std::uint64_t data_bytes = 0;
  std::uint64_t expected_size = 0;
  if (!multiply_fits(layout.count, token_bytes, data_bytes) || !add_fits(data_bytes, kLlmcHeaderBytes, expected_size) ||
      expected_size != file_size) {
    throw Error(ErrorCode::kInvalidFile,
                fmt::format("{}: llm.c shard header says {} tokens ({} bytes with the header) but the file is {} bytes",
                            file, layout.count, expected_size, file_size));
  }
  return layout;
}

}  // namespace backplane::detail
