// The format table, and the raw format: the last row, whose reader says
// which formats the file is not.
#include "tokens/token_formats.hpp"

#include "tokens/llmc_header.hpp"
#include "tokens/megatron_index.hpp"
#include "tokens/npy_header.hpp"
#include "tokens/safetensors_tokens.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <array>
#include <string>
#include <vector>

namespace backplane::detail {
namespace {

bool recognises_any(std::span<const std::byte> /*prefix*/, std::string_view /*file*/) noexcept { return true; }
std::uint64_t no_header(std::span<const std::byte> /*prefix*/, std::uint64_t /*file_size*/) noexcept { return 0; }

TokenLayout read_raw(const TokenHeader& header);

constexpr std::array kFormats{
    TokenFormat{
        .name = "NumPy .npy",
        .with_article = "a NumPy .npy file",
        .recognised_by = "the magic `\\x93NUMPY`",
        .recognises = [](std::span<const std::byte> prefix,
                         std::string_view) noexcept { return has_npy_magic(prefix); },
        .header_bytes = npy_header_bytes,
        .read = [](const TokenHeader& header) { return read_npy_header(header.prefix, header.file_size, header.file); },
    },
    TokenFormat{
        .name = "llm.c shard",
        .with_article = "an llm.c shard",
        .recognised_by = "int32 0 of the header is 20240520 or 20240801",
        .recognises = [](std::span<const std::byte> prefix,
                         std::string_view) noexcept { return has_llmc_magic(prefix); },
        .header_bytes = llmc_header_bytes,
        .read =
            [](const TokenHeader& header) { return read_llmc_header(header.prefix, header.file_size, header.file); },
    },
    TokenFormat{
        .name = "Megatron-Core indexed dataset",
        .with_article = "a Megatron-Core indexed dataset",
        .recognised_by = "the magic `MMIDIDX\\0\\0`, or the name ends in `.idx`",
        .recognises = recognises_megatron_index,
        .header_bytes = megatron_index_bytes,
        .read = read_megatron_index,
        .index_file_for = megatron_index_file_for,
    },
    TokenFormat{
        .name = "safetensors",
        .with_article = "a safetensors file",
        .recognised_by = "the name ends in `.safetensors`",
        .recognises = has_safetensors_name,
        .header_bytes = safetensors_header_bytes,
        .read = read_safetensors_tokens,
        .names_tensors = true,
    },
    TokenFormat{
        .name = "raw",
        .with_article = "a raw token file",
        .recognised_by = "any other file",
        .recognises = recognises_any,
        .header_bytes = no_header,
        .read = read_raw,
        .needs_dtype = true,
    },
};

TokenLayout read_raw(const TokenHeader& header) {
  const std::string_view file = header.file;
  if (!header.request.dtype) {
    std::vector<std::string> others;
    for (const TokenFormat& format : kFormats) {
      if (!format.needs_dtype) others.push_back(fmt::format("not {}", format.with_article));
    }
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: a raw token file ({}) needs a dtype", file, fmt::join(others, ", ")));
  }
  const DType dtype = *header.request.dtype;
  if (header.file_size == 0) throw Error(ErrorCode::kInvalidFile, fmt::format("{}: the file is empty", file));
  const auto token_bytes = static_cast<std::uint64_t>(dtype_bits(dtype) / 8);
  if (header.file_size % token_bytes != 0) {
    throw Error(ErrorCode::kInvalidFile, fmt::format("{}: {} bytes is not a whole number of {} tokens ({} bytes each)",
                                                     file, header.file_size, dtype_name(dtype), token_bytes));
  }
  TokenLayout layout;
  layout.dtype = dtype;
  layout.count = header.file_size / token_bytes;
  return layout;
}

}  // namespace

std::span<const TokenFormat> token_formats() noexcept { return kFormats; }

const TokenFormat& detect_token_format(std::span<const std::byte> prefix, std::string_view file) noexcept {
  return detect_token_format(prefix, file, kFormats);
}

const TokenFormat& detect_token_format(std::span<const std::byte> prefix, std::string_view file,
                                       std::span<const TokenFormat> formats) noexcept {
  for (const TokenFormat& format : formats) {
    if (format.recognises(prefix, file)) return format;
  }
  return formats.back();  // the last row recognises every file
}

}  // namespace backplane::detail
