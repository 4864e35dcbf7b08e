// bp_safetensors_*, bp_tensor_map_*: inspect, load and save safetensors files.
#include "c_api/c_api_support.hpp"

#include <backplane/safetensors.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

using MetadataEntries = std::optional<std::vector<std::pair<std::string, std::string>>>;

MetadataEntries entries_of(const std::optional<backplane::safetensors::Metadata>& metadata) {
  if (!metadata) return std::nullopt;
  return std::vector<std::pair<std::string, std::string>>(metadata->begin(), metadata->end());
}

}  // namespace

struct bp_safetensors_header {
  backplane::safetensors::Header header;
  MetadataEntries metadata;  // indexable copy of header.metadata
};

struct bp_tensor_map {
  std::vector<std::pair<std::string, backplane::Array>> tensors;  // bytewise name order
  MetadataEntries metadata;
};

namespace backplane::c_api {
namespace {

LiveHandles<bp_safetensors_header> live_headers;
LiveHandles<bp_tensor_map> live_maps;

// The header or map kept alive while the result is held (hold it for the whole call).
std::shared_ptr<const bp_safetensors_header> header_of(const bp_safetensors_header* header, const char* function) {
  auto live = live_headers.acquire(header);
  if (!live) throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: header is NULL or destroyed", function));
  return live;
}

std::shared_ptr<const bp_tensor_map> map_of(const bp_tensor_map* map, const char* function) {
  auto live = live_maps.acquire(map);
  if (!live) throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: map is NULL or destroyed", function));
  return live;
}

void check_struct_size(std::size_t given, std::size_t expected, const char* function) {
  if (given < expected) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: out->struct_size {} is smaller than {} (set it to sizeof)", function, given, expected));
  }
}

void metadata_count(const MetadataEntries& metadata, int64_t* out, const char* function) {
  require_non_null(out, function, "out");
  *out = metadata ? static_cast<int64_t>(metadata->size()) : -1;
}

void metadata_entry(const MetadataEntries& metadata, size_t index, const char** key, const char** value,
                    const char* function) {
  require_non_null(key, function, "key");
  require_non_null(value, function, "value");
  const std::size_t size = metadata ? metadata->size() : 0;
  if (index >= size) {
    throw Error(ErrorCode::kOutOfRange, fmt::format("{}: index {} is out of range: {} metadata entries{}", function,
                                                    index, size, metadata ? "" : " (the file has no __metadata__)"));
  }
  *key = (*metadata)[index].first.c_str();
  *value = (*metadata)[index].second.c_str();
}

}  // namespace
}  // namespace backplane::c_api

using namespace backplane;
using namespace backplane::c_api;

extern "C" {

bp_status bp_safetensors_inspect(const char* path, bp_safetensors_header** out) {
  return guarded([&] {
    require_non_null(path, "bp_safetensors_inspect", "path");
    require_non_null(out, "bp_safetensors_inspect", "out");
    auto handle = std::make_shared<bp_safetensors_header>();
    handle->header = safetensors::read_header(path);
    handle->metadata = entries_of(handle->header.metadata);
    *out = live_headers.add(std::move(handle));
  });
}

void bp_safetensors_header_destroy(bp_safetensors_header* header) {
  live_headers.remove(header);  // NULL or destroyed twice: nothing
}

bp_status bp_safetensors_header_sizes(const bp_safetensors_header* header, uint64_t* header_size,
                                      uint64_t* data_offset, uint64_t* file_size) {
  return guarded([&] {
    const auto live = header_of(header, "bp_safetensors_header_sizes");
    const auto& cxx = live->header;
    if (header_size != nullptr) *header_size = cxx.header_size;
    if (data_offset != nullptr) *data_offset = cxx.data_offset;
    if (file_size != nullptr) *file_size = cxx.file_size;
  });
}

bp_status bp_safetensors_header_tensor_count(const bp_safetensors_header* header, size_t* out) {
  return guarded([&] {
    const auto live = header_of(header, "bp_safetensors_header_tensor_count");
    const auto& cxx = live->header;
    require_non_null(out, "bp_safetensors_header_tensor_count", "out");
    *out = cxx.tensors.size();
  });
}

bp_status bp_safetensors_header_tensor(const bp_safetensors_header* header, size_t index,
                                       bp_safetensors_tensor_info* out) {
  return guarded([&] {
    const auto live = header_of(header, "bp_safetensors_header_tensor");
    const auto& cxx = live->header;
    require_non_null(out, "bp_safetensors_header_tensor", "out");
    check_struct_size(out->struct_size, sizeof(bp_safetensors_tensor_info), "bp_safetensors_header_tensor");
    if (index >= cxx.tensors.size()) {
      throw Error(ErrorCode::kOutOfRange, fmt::format("bp_safetensors_header_tensor: index {} is out of range: {} "
                                                      "tensors",
                                                      index, cxx.tensors.size()));
    }
    const safetensors::TensorEntry& tensor = cxx.tensors[index];
    out->name = tensor.name.c_str();
    out->dtype_name = tensor.dtype.c_str();
    out->dtype = static_cast<bp_dtype>(safetensors::dtype_of(tensor));
    out->rank = tensor.shape.size();
    out->shape = tensor.shape.empty() ? nullptr : tensor.shape.data();
    out->begin = tensor.begin;
    out->end = tensor.end;
  });
}

bp_status bp_safetensors_header_metadata_count(const bp_safetensors_header* header, int64_t* out) {
  return guarded([&] {
    metadata_count(header_of(header, "bp_safetensors_header_metadata_count")->metadata, out,
                   "bp_safetensors_header_metadata_count");
  });
}

bp_status bp_safetensors_header_metadata(const bp_safetensors_header* header, size_t index, const char** key,
                                         const char** value) {
  return guarded([&] {
    metadata_entry(header_of(header, "bp_safetensors_header_metadata")->metadata, index, key, value,
                   "bp_safetensors_header_metadata");
  });
}

bp_status bp_safetensors_load(bp_runtime* runtime, const char* path, const bp_device* device,
                              const bp_safetensors_load_options* options, bp_tensor_map** out) {
  return guarded([&] {
    const auto runtime_lease = runtime_of(runtime, "bp_safetensors_load");
    Runtime& cxx = *runtime_lease;
    require_non_null(path, "bp_safetensors_load", "path");
    require_non_null(out, "bp_safetensors_load", "out");
    safetensors::LoadOptions load_options;
    if (options != nullptr) {
      // API 0.1 callers pass the struct without cancellable_progress.
      constexpr std::size_t api_0_1_size = offsetof(bp_safetensors_load_options, cancellable_progress);
      if (options->struct_size < api_0_1_size) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("bp_safetensors_load: options->struct_size {} is smaller than {}",
                                options->struct_size, api_0_1_size));
      }
      const bool has_cancellable = options->struct_size >= sizeof(bp_safetensors_load_options);
      if (options->name_count > 0) require_non_null(options->names, "bp_safetensors_load", "options->names");
      for (size_t i = 0; i < options->name_count; ++i) {
        require_non_null(options->names[i], "bp_safetensors_load", "options->names[i]");
        load_options.names.emplace_back(options->names[i]);
      }
      bp_cancellable_progress_callback cancellable = has_cancellable ? options->cancellable_progress : nullptr;
      if (options->progress != nullptr || cancellable != nullptr) {
        load_options.progress = [progress = options->progress, cancellable, user_data = options->user_data,
                                 file = std::string(path)](std::uint64_t done, std::uint64_t total) {
          if (progress != nullptr) progress(done, total, user_data);
          // The loader drains its copies when this throws, then rethrows.
          if (cancellable != nullptr && cancellable(done, total, user_data) != 0) {
            throw Error(ErrorCode::kCancelled,
                        fmt::format("{}: load cancelled by the progress callback after {} of {} bytes", file, done,
                                    total));
          }
        };
      }
    }
    // NULL means "the default device": load() resolves nullopt the same way.
    std::optional<Device> where;
    if (device != nullptr) where = device_or_default(cxx, device);
    safetensors::Loaded loaded = safetensors::load(cxx, path, where, load_options);
    auto map = std::make_shared<bp_tensor_map>();
    map->tensors.assign(std::make_move_iterator(loaded.tensors.begin()), std::make_move_iterator(loaded.tensors.end()));
    map->metadata = entries_of(loaded.metadata);
    *out = live_maps.add(std::move(map));
  });
}

void bp_tensor_map_destroy(bp_tensor_map* map) {
  live_maps.remove(map);  // NULL or destroyed twice: nothing
}

bp_status bp_tensor_map_count(const bp_tensor_map* map, size_t* out) {
  return guarded([&] {
    const auto cxx = map_of(map, "bp_tensor_map_count");
    require_non_null(out, "bp_tensor_map_count", "out");
    *out = cxx->tensors.size();
  });
}

bp_status bp_tensor_map_name(const bp_tensor_map* map, size_t index, const char** out) {
  return guarded([&] {
    const auto cxx = map_of(map, "bp_tensor_map_name");
    require_non_null(out, "bp_tensor_map_name", "out");
    if (index >= cxx->tensors.size()) {
      throw Error(ErrorCode::kOutOfRange, fmt::format("bp_tensor_map_name: index {} is out of range: {} tensors",
                                                      index, cxx->tensors.size()));
    }
    *out = cxx->tensors[index].first.c_str();
  });
}

bp_status bp_tensor_map_get(const bp_tensor_map* map, const char* name, bp_array** out) {
  return guarded([&] {
    const auto cxx = map_of(map, "bp_tensor_map_get");
    require_non_null(name, "bp_tensor_map_get", "name");
    require_non_null(out, "bp_tensor_map_get", "out");
    auto found = std::lower_bound(cxx->tensors.begin(), cxx->tensors.end(), std::string_view(name),
                                  [](const auto& entry, std::string_view key) { return entry.first < key; });
    if (found == cxx->tensors.end() || found->first != name) {
      throw Error(ErrorCode::kNotFound,
                  fmt::format("bp_tensor_map_get: no tensor '{}' among the {} loaded", name, cxx->tensors.size()));
    }
    *out = new_array_handle(found->second);
  });
}

bp_status bp_tensor_map_metadata_count(const bp_tensor_map* map, int64_t* out) {
  return guarded([&] {
    metadata_count(map_of(map, "bp_tensor_map_metadata_count")->metadata, out, "bp_tensor_map_metadata_count");
  });
}

bp_status bp_tensor_map_metadata(const bp_tensor_map* map, size_t index, const char** key, const char** value) {
  return guarded([&] {
    metadata_entry(map_of(map, "bp_tensor_map_metadata")->metadata, index, key, value, "bp_tensor_map_metadata");
  });
}

bp_status bp_safetensors_save(const char* path, const char* const* names, const bp_array* const* arrays, size_t count,
                              const char* const* metadata_keys, const char* const* metadata_values,
                              int64_t metadata_count) {
  return guarded([&] {
    require_non_null(path, "bp_safetensors_save", "path");
    if (count > 0) {
      require_non_null(names, "bp_safetensors_save", "names");
      require_non_null(arrays, "bp_safetensors_save", "arrays");
    }
    std::map<std::string, Array> tensors;
    for (size_t i = 0; i < count; ++i) {
      require_non_null(names[i], "bp_safetensors_save", "names[i]");
      if (!tensors.emplace(names[i], *array_of(arrays[i], "bp_safetensors_save")).second) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("bp_safetensors_save: tensor '{}' is named twice", names[i]));
      }
    }
    std::optional<safetensors::Metadata> metadata;
    if (metadata_count < -1) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("bp_safetensors_save: metadata_count {} (use -1 for no metadata)", metadata_count));
    }
    if (metadata_count >= 0) {
      metadata.emplace();
      if (metadata_count > 0) {
        require_non_null(metadata_keys, "bp_safetensors_save", "metadata_keys");
        require_non_null(metadata_values, "bp_safetensors_save", "metadata_values");
      }
      for (int64_t i = 0; i < metadata_count; ++i) {
        require_non_null(metadata_keys[i], "bp_safetensors_save", "metadata_keys[i]");
        require_non_null(metadata_values[i], "bp_safetensors_save", "metadata_values[i]");
        if (!metadata->emplace(metadata_keys[i], metadata_values[i]).second) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("bp_safetensors_save: metadata key '{}' is given twice", metadata_keys[i]));
        }
      }
    }
    safetensors::save(path, tensors, metadata);
  });
}

}  // extern "C"
