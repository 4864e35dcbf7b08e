#include "tokens/safetensors_tokens.hpp"

#include "safetensors/header_frame.hpp"
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

constexpr std::string_view kSuffix = ".safetensors";

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

}  // namespace

bool has_safetensors_name(std::span<const std::byte> /*prefix*/, std::string_view file) noexcept {
  return file.ends_with(kSuffix);
}

std::uint64_t safetensors_header_bytes(std::span<const std::byte> prefix, std::uint64_t file_size) noexcept {
  const safetensors::detail::HeaderFrame frame = safetensors::detail::frame_header(prefix, file_size);
  return frame.broken ? std::min<std::uint64_t>(prefix.size(), file_size) : frame.end;
}

TokenLayout read_safetensors_tokens(const TokenHeader& input) {
  const safetensors::Header header = safetensors::parse_header(input.prefix, input.file_size, input.file);
  const safetensors::TensorEntry& tensor = select_tensor(header, input.file, input.request.name);
  const DType dtype = safetensors::dtype_of(tensor);
  if (!dtype_is_integer(dtype)) {
    throw Error(ErrorCode::kInvalidFile, fmt::format("{}: tensor {} is {}, not an integer dtype; token files hold "
                                                     "integers",
                                                     input.file, quote(tensor.name), tensor.dtype));
  }
  // Validated: the tensor lies inside the file, its size matches its shape.
  TokenLayout layout;
  layout.dtype = dtype;
  layout.data_offset = header.data_offset + tensor.begin;
  layout.count = tensor.element_count();
  return layout;
}

}  // namespace backplane::detail
