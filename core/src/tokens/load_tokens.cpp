// load_tokens and load_token_files: open once, read the header's bytes with
// pread, describe the layout (token_layout.cpp), then map the whole file and
// wrap the tokens as a zero-copy array.
#include <backplane/tokens.hpp>

#include "tokens/glob_paths.hpp"
#include "tokens/token_file.hpp"
#include "tokens/token_layout.hpp"

#include "placement/placement.hpp"

#include <fmt/format.h>

#include <memory>
#include <utility>

namespace backplane {
namespace {

// Enough for every llm.c header, every NumPy header numpy writes for an
// integer array, and most safetensors headers: one read for almost any file.
constexpr std::uint64_t kFirstRead = 4096;

Device host_device(Runtime& runtime, const TokenFileOptions& options, const std::filesystem::path& path) {
  const Device device = options.device ? *options.device : runtime.resolve("cpu");
  const auto live = detail::placement_of(runtime)->device(device);
  if (!live->host_addressable()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: token files are mapped into host memory, and {} is not host-addressable (load "
                            "onto cpu, then move batches with take_windows or device_put)",
                            path.string(), live->selector()));
  }
  return device;
}

}  // namespace

Array load_tokens(Runtime& runtime, const std::filesystem::path& path, const TokenFileOptions& options) {
  // The device first: a bad device is reported without touching the file.
  const Device device = host_device(runtime, options, path);
  detail::TokenFile file(path);
  const detail::TokenRequest request{options.dtype, options.name};
  std::span<const std::byte> prefix = file.prefix(kFirstRead);
  const detail::TokenFormat format = detail::detect_token_format(prefix, file.name());
  const std::uint64_t header_bytes = detail::token_header_bytes(format, prefix, file.size());
  if (header_bytes > prefix.size()) prefix = file.prefix(header_bytes);
  const detail::TokenLayout layout = detail::describe_token_file(prefix, file.size(), file.name(), request);

  // describe_token_file has refused an empty raw file, and every header is
  // at least 8 bytes: the file is not empty, so it can be mapped.
  std::shared_ptr<const detail::TokenFileMapping> mapping = file.map();
  const std::byte* tokens = mapping->data() + layout.data_offset;
  // count <= the file's size, an off_t: it fits an int64 extent.
  return Array::wrap_host(runtime, device, layout.dtype, {static_cast<std::int64_t>(layout.count)}, tokens,
                          std::move(mapping));
}

std::vector<Array> load_token_files(Runtime& runtime, std::string_view pattern, const TokenFileOptions& options,
                                    std::vector<std::string>* paths) {
  std::vector<std::string> matched = detail::glob_paths(pattern, options.allow_empty_match);
  std::vector<Array> arrays;
  arrays.reserve(matched.size());
  for (const std::string& path : matched) arrays.push_back(load_tokens(runtime, path, options));
  if (paths != nullptr) *paths = std::move(matched);
  return arrays;
}

}  // namespace backplane
