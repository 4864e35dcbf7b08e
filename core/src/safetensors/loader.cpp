// load(): opens and validates the file, picks the tensors, then either wraps
// the mapping (host-addressable devices) or streams (stream_loader.cpp).
#include "safetensors/loader.hpp"

#include "safetensors/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>

namespace backplane::safetensors {
namespace {

// The entries to load, in data order (the order the stream reads them).
std::vector<const TensorEntry*> select(const Header& header, const std::vector<std::string>& names,
                                       const std::string& file) {
  std::vector<const TensorEntry*> selected;
  if (names.empty()) {
    for (const TensorEntry& tensor : header.tensors) selected.push_back(&tensor);
    return selected;
  }
  const std::set<std::string_view> wanted(names.begin(), names.end());
  for (const std::string_view name : wanted) {
    if (header.find(name) != nullptr) continue;
    constexpr std::size_t kListed = 5;
    std::vector<std::string> existing;
    for (std::size_t index = 0; index < std::min(kListed, header.tensors.size()); ++index) {
      existing.push_back(detail::quote(header.tensors[index].name));
    }
    std::string listing =
        header.tensors.empty()
            ? "the file has no tensors"
            : fmt::format("it has {} tensor{}: {}{}", header.tensors.size(), header.tensors.size() == 1 ? "" : "s",
                          fmt::join(existing, ", "), header.tensors.size() > kListed ? ", ..." : "");
    throw Error(ErrorCode::kNotFound, fmt::format("{}: no tensor named {}; {}", file, detail::quote(name), listing));
  }
  for (const TensorEntry& tensor : header.tensors) {
    if (wanted.contains(tensor.name)) selected.push_back(&tensor);
  }
  return selected;
}

}  // namespace

namespace detail {

std::vector<std::int64_t> array_shape(const TensorEntry& tensor, const std::string& file) {
  std::vector<std::int64_t> shape;
  shape.reserve(tensor.shape.size());
  for (const std::uint64_t dimension : tensor.shape) {
    if (dimension > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("{}: tensor {} has a dimension of {}, above the largest array extent (2^63 - 1)", file,
                              quote(tensor.name), dimension));
    }
    shape.push_back(static_cast<std::int64_t>(dimension));
  }
  return shape;
}

}  // namespace detail

Loaded load(Runtime& runtime, const std::filesystem::path& path, std::optional<Device> device,
            const LoadOptions& options) {
  const Device target = device ? *device : runtime.default_device().device;
  // The device first: a bad device is reported without touching the file.
  const auto placement = ::backplane::detail::placement_of(runtime);
  const auto live = placement->device(target);
  std::shared_ptr<const detail::MappedFile> file = detail::MappedFile::open(path, live->host_addressable());
  const Header& header = file->header();
  const std::vector<const TensorEntry*> selected = select(header, options.names, file->name());

  std::vector<std::vector<std::int64_t>> shapes;
  std::uint64_t total = 0;
  for (const TensorEntry* tensor : selected) {
    shapes.push_back(detail::array_shape(*tensor, file->name()));
    total += tensor->byte_size();
  }

  Loaded loaded;
  loaded.metadata = header.metadata;
  if (live->host_addressable()) {
    for (std::size_t index = 0; index < selected.size(); ++index) {
      const TensorEntry& tensor = *selected[index];
      // Unaligned data stays zero-copy: every placement read of host memory
      // goes through memcpy, and NumPy / DLPack consumers accept unaligned
      // byte offsets. Files from the reference writer are always aligned.
      const std::byte* data = file->data() + header.data_offset + tensor.begin;
      loaded.tensors.emplace(tensor.name,
                             Array::wrap_host(runtime, target, dtype_of(tensor), std::move(shapes[index]), data, file));
    }
    if (options.progress) options.progress(total, total);
  } else {
    std::vector<Array> arrays = detail::stream_tensors(*placement, *file, live, selected, options.progress);
    for (std::size_t index = 0; index < selected.size(); ++index) {
      loaded.tensors.emplace(selected[index]->name, std::move(arrays[index]));
    }
  }
  loaded.header = header;
  return loaded;
}

}  // namespace backplane::safetensors
