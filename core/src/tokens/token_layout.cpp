// Detection, the raw and safetensors layouts, and the checks every format
// shares (the caller's dtype, a tensor name only where there are tensors).
#include "tokens/token_layout.hpp"

#include "tokens/byte_fields.hpp"
#include "tokens/llmc_header.hpp"
#include "tokens/npy_header.hpp"

#include "safetensors/text.hpp"

#include <backplane/error.hpp>
#include <backplane/safetensors.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

namespace backplane::detail {
namespace {

using safetensors::detail::quote;

constexpr std::string_view kSafetensorsSuffix = ".safetensors";

std::uint64_t safetensors_header_bytes(std::span<const std::byte> prefix, std::uint64_t file_size) noexcept {
  const std::uint64_t have = std::min<std::uint64_t>(prefix.size(), file_size);
  if (have < 8) return have;
  const auto length = read_little_endian<std::uint64_t>(prefix, 0);
  if (length > safetensors::kMaxHeaderSize || length + 8 > file_size) return have;
  return length + 8;
}

TokenLayout raw_layout(std::uint64_t file_size, std::string_view file, const TokenRequest& request) {
  if (!request.dtype) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: a raw token file (not NumPy .npy, not an llm.c shard, not named *.safetensors) "
                            "needs a dtype",
                            file));
  }
  if (file_size == 0) throw Error(ErrorCode::kInvalidFile, fmt::format("{}: the file is empty", file));
  const auto token_bytes = static_cast<std::uint64_t>(dtype_bits(*request.dtype) / 8);
  if (file_size % token_bytes != 0) {
    throw Error(ErrorCode::kInvalidFile, fmt::format("{}: {} bytes is not a whole number of {} tokens ({} bytes each)",
                                                     file, file_size, dtype_name(*request.dtype), token_bytes));
  }
  return {TokenFormat::kRaw, *request.dtype, 0, file_size / token_bytes};
}

const safetensors::TensorEntry& select_tensor(const safetensors::Header& header, std::string_view file,
                                              std::string_view name) {
  std::vector<std::string> names;
  for (const auto& tensor : header.tensors) names.push_back(quote(tensor.name));
  constexpr std::size_t kListed = 5;
  const std::string listing =
      fmt::format("{}{}", fmt::join(names.begin(), names.begin() + std::min(kListed, names.size()), ", "),
                  names.size() > kListed ? ", ..." : "");
  if (!name.empty()) {
    const safetensors::TensorEntry* found = header.find(name);
    if (found == nullptr) {
      throw Error(ErrorCode::kNotFound,
                  header.tensors.empty()
                      ? fmt::format("{}: no tensor named {}; the file has no tensors", file, quote(name))
                      : fmt::format("{}: no tensor named {}; it has {}", file, quote(name), listing));
    }
    return *found;
  }
  if (header.tensors.empty()) throw Error(ErrorCode::kNotFound, fmt::format("{}: the file has no tensors", file));
  if (header.tensors.size() > 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the file has {} tensors ({}): name the one that holds the tokens", file,
                            header.tensors.size(), listing));
  }
  return header.tensors.front();
}

TokenLayout safetensors_layout(std::span<const std::byte> prefix, std::uint64_t file_size, std::string_view file,
                               std::string_view name) {
  const safetensors::Header header = safetensors::parse_header(prefix, file_size, file);
  const safetensors::TensorEntry& tensor = select_tensor(header, file, name);
  const DType dtype = safetensors::dtype_of(tensor);
  if (!dtype_is_integer(dtype)) {
    throw Error(ErrorCode::kInvalidFile, fmt::format("{}: tensor {} is {}, not an integer dtype; token files hold "
                                                     "integers",
                                                     file, quote(tensor.name), tensor.dtype));
  }
  // Validated: the tensor lies inside the file, its size matches its shape.
  return {TokenFormat::kSafetensors, dtype, header.data_offset + tensor.begin, tensor.element_count()};
}

// "an llm.c shard", "a raw token file": the format in a sentence.
std::string_view with_article(TokenFormat format) noexcept {
  switch (format) {
    case TokenFormat::kLlmc: return "an llm.c shard";
    case TokenFormat::kNpy: return "a NumPy .npy file";
    case TokenFormat::kSafetensors: return "a safetensors file";
    case TokenFormat::kRaw: return "a raw token file";
  }
  return "a file of unknown format";
}

void check_request(const TokenRequest& request, TokenFormat format, std::string_view file) {
  if (request.dtype && !dtype_is_integer(*request.dtype)) {
    const std::string_view name = dtype_name(*request.dtype);
    throw Error(ErrorCode::kInvalidArgument,
                name.empty()
                    ? fmt::format("{}: dtype {} is not a dtype", file, static_cast<int>(*request.dtype))
                    : fmt::format("{}: dtype {} is not an integer dtype; token files hold integers", file, name));
  }
  if (!request.name.empty() && format != TokenFormat::kSafetensors) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: a tensor name ({}) applies to safetensors files only; this is {}", file,
                            quote(request.name), with_article(format)));
  }
}

}  // namespace

std::string_view token_format_name(TokenFormat format) noexcept {
  switch (format) {
    case TokenFormat::kLlmc: return "llm.c shard";
    case TokenFormat::kNpy: return "NumPy .npy";
    case TokenFormat::kSafetensors: return "safetensors";
    case TokenFormat::kRaw: return "raw";
  }
  return "unknown";
}

TokenFormat detect_token_format(std::span<const std::byte> prefix, std::string_view file) {
  if (has_npy_magic(prefix)) return TokenFormat::kNpy;
  if (has_llmc_magic(prefix)) return TokenFormat::kLlmc;
  if (file.ends_with(kSafetensorsSuffix)) return TokenFormat::kSafetensors;
  return TokenFormat::kRaw;
}

std::uint64_t token_header_bytes(TokenFormat format, std::span<const std::byte> prefix, std::uint64_t file_size) {
  switch (format) {
    case TokenFormat::kLlmc: return std::min(kLlmcHeaderBytes, file_size);
    case TokenFormat::kNpy: return npy_header_bytes(prefix, file_size);
    case TokenFormat::kSafetensors: return safetensors_header_bytes(prefix, file_size);
    case TokenFormat::kRaw: return 0;
  }
  return 0;
}

TokenLayout describe_token_file(std::span<const std::byte> prefix, std::uint64_t file_size, std::string_view file,
                                const TokenRequest& request) {
  if (prefix.size() > file_size) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} bytes given as the start of a file of {}", file, prefix.size(), file_size));
  }
  const TokenFormat format = detect_token_format(prefix, file);
  check_request(request, format, file);
  TokenLayout layout;
  switch (format) {
    case TokenFormat::kLlmc: layout = read_llmc_header(prefix, file_size, file); break;
    case TokenFormat::kNpy: layout = read_npy_header(prefix, file_size, file); break;
    case TokenFormat::kSafetensors: layout = safetensors_layout(prefix, file_size, file, request.name); break;
    case TokenFormat::kRaw: return raw_layout(file_size, file, request);
  }
  if (request.dtype && *request.dtype != layout.dtype) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: dtype {} was asked for, but the {} header says {}", file, dtype_name(*request.dtype),
                            token_format_name(format), dtype_name(layout.dtype)));
  }
  return layout;
}

}  // namespace backplane::detail
