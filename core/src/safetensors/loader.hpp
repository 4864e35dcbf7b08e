// Internals of load(): choosing tensors and the streamed path.
#pragma once

#include "safetensors/mapped_file.hpp"

#include "placement/placement.hpp"

#include <backplane/safetensors.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace backplane::safetensors::detail {

// The Array shape of a validated entry. Throws Error(kUnsupported) naming
// the file and tensor for a dimension above INT64_MAX.
std::vector<std::int64_t> array_shape(const TensorEntry& tensor, const std::string& file);

// Streams `tensors` (entries of file.header(), in data order) from the file
// into new buffers on `device` (not host-addressable) through staging; returns
// the arrays, ready, in the same order. Throws as load() documents.
std::vector<Array> stream_tensors(::backplane::detail::Placement& placement, const MappedFile& file,
                                  const std::shared_ptr<::backplane::detail::LiveDevice>& device,
                                  const std::vector<const TensorEntry*>& tensors, const ProgressCallback& progress);

}  // namespace backplane::safetensors::detail
