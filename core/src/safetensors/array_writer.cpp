// save() of Arrays: the HostTensor writer's plan, with tensor bytes fetched
// from each array's device one tensor at a time, so device data never needs
// more host memory than its largest tensor.
#include <backplane/safetensors.hpp>

#include "safetensors/text.hpp"
#include "util/atomic_file.hpp"

#include <fmt/format.h>

namespace backplane::safetensors {

void save(const std::filesystem::path& path, const std::map<std::string, Array>& arrays,
          const std::optional<Metadata>& metadata) {
  save(path, arrays, metadata, SaveOptions{});
}

void save(const std::filesystem::path& path, const std::map<std::string, Array>& arrays,
          const std::optional<Metadata>& metadata, const SaveOptions& options) {
  std::vector<TensorSpec> specs;
  std::vector<const Array*> sources;
  specs.reserve(arrays.size());
  for (const auto& [name, array] : arrays) {
    if (!array.valid()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("cannot save {}: tensor {} is an empty Array", path.string(), detail::quote(name)));
    }
    std::vector<std::uint64_t> shape(array.shape().begin(), array.shape().end());
    specs.push_back(TensorSpec{name, std::string(dtype_name(array.dtype())), std::move(shape)});
    sources.push_back(&array);
  }
  // Refuses what the HostTensor writer refuses, before the file is created.
  const FilePlan plan = plan_file(specs, metadata);

  ::backplane::detail::AtomicFile file(path);
  file.write(std::as_bytes(std::span(plan.prefix)));
  std::vector<std::byte> staging;
  for (std::size_t position = 0; position < plan.order.size(); ++position) {
    const Array& array = *sources[plan.order[position]];
    const std::uint64_t size = array.nbytes();
    if (size != plan.header.tensors[position].byte_size()) {
      throw Error(ErrorCode::kInternal, fmt::format("save: tensor {} holds {} bytes, its header entry {}",
                                                    detail::quote(specs[plan.order[position]].name), size,
                                                    plan.header.tensors[position].byte_size()));
    }
    array.block_until_ready();
    if (const void* host = array.host_data(); host != nullptr) {
      file.write(std::span(static_cast<const std::byte*>(host), static_cast<std::size_t>(size)));
      continue;
    }
    staging.resize(static_cast<std::size_t>(size));
    array.copy_to_host(staging.data(), size);
    file.write(staging);
  }
  file.commit(options.durable);
}

}  // namespace backplane::safetensors
