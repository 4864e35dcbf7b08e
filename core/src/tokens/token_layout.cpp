// describe_token_file: the row of the format table that recognises the
// file, the checks every format shares (the caller's dtype, a tensor name
// only where there are tensors), then the row's reader.
#include "tokens/token_layout.hpp"

#include "tokens/token_formats.hpp"

#include "safetensors/text.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <string>
#include <vector>

namespace backplane::detail {
namespace {

using safetensors::detail::quote;

void check_request(const TokenRequest& request, const TokenFormat& format, std::span<const TokenFormat> formats,
                   std::string_view file) {
  if (request.dtype && !dtype_is_integer(*request.dtype)) {
    const std::string_view name = dtype_name(*request.dtype);
    throw Error(ErrorCode::kInvalidArgument,
                name.empty()
                    ? fmt::format("{}: dtype {} is not a dtype", file, static_cast<int>(*request.dtype))
                    : fmt::format("{}: dtype {} is not an integer dtype; token files hold integers", file, name));
  }
  if (!request.name.empty() && !format.names_tensors) {
    std::vector<std::string_view> named;
    for (const TokenFormat& candidate : formats) {
      if (candidate.names_tensors) named.push_back(candidate.name);
    }
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: a tensor name ({}) applies to {} files only; this is {}", file, quote(request.name),
                            fmt::join(named, " and "), format.with_article));
  }
}

}  // namespace

TokenLayout describe_token_file(std::span<const std::byte> prefix, std::uint64_t file_size, std::string_view file,
                                const TokenRequest& request) {
  return describe_token_file(prefix, file_size, file, request, token_formats());
}

TokenLayout describe_token_file(std::span<const std::byte> prefix, std::uint64_t file_size, std::string_view file,
                                const TokenRequest& request, std::span<const TokenFormat> formats, bool prefix_mapped) {
  if (prefix.size() > file_size) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} bytes given as the start of a file of {}", file, prefix.size(), file_size));
  }
  const TokenFormat& format = detect_token_format(prefix, file, formats);
  check_request(request, format, formats, file);
  TokenLayout layout = format.read({prefix, file_size, file, request, prefix_mapped});
  layout.format = &format;
  if (!format.needs_dtype && request.dtype && *request.dtype != layout.dtype) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: dtype {} was asked for, but the {} header says {}", file, dtype_name(*request.dtype),
                            format.name, dtype_name(layout.dtype)));
  }
  return layout;
}

}  // namespace backplane::detail
