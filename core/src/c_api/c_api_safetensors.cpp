// bp_safetensors_*, bp_tensor_map_*: inspect, load and save safetensors files.
#include "c_api/c_api_support.hpp"
#include "safetensors/text.hpp"

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
  backplane::c_api::NamedArrays tensors;  // bytewise name order
  MetadataEntries metadata;
};

namespace backplane::c_api {
namespace {

LiveHandles<bp_safetensors_header>& live_headers = make_live_handles<bp_safetensors_header>();
LiveHandles<bp_tensor_map>& live_maps = make_live_handles<bp_tensor_map>();

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

void metadata_count(const MetadataEntries& metadata, int64_t* out, const char* function) {
  require_non_null(out, function, "out");
  *out = metadata ? static_cast<int64_t>(metadata->size()) : -1;
}

// A NUL-terminated result would silently cut `text` at its first NUL byte
// (safetensors allows "\u0000" in names and metadata): refuse it, naming the
// thing (`what` `named`, the NUL escaped) and the function that carries it whole.
void refuse_nul(std::string_view text, std::string_view what, std::string_view named, std::string_view where,
                const char* function, const char* sized_function) {
  if (text.find('\0') == std::string_view::npos) return;
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{}: {} {} has a NUL byte in its {}, which a NUL-terminated string cannot carry (use {})",
                          function, what, safetensors::detail::quote(named), where, sized_function));
}

const std::pair<std::string, std::string>& metadata_at(const MetadataEntries& metadata, size_t index,
                                                       const char* function) {
  const std::size_t size = metadata ? metadata->size() : 0;
  if (index >= size) {
    throw Error(ErrorCode::kOutOfRange, fmt::format("{}: index {} is out of range: {} metadata entries{}", function,
                                                    index, size, metadata ? "" : " (the file has no __metadata__)"));
  }
  return (*metadata)[index];
}

void metadata_entry(const MetadataEntries& metadata, size_t index, const char** key, const char** value,
                    const char* function, const char* sized_function) {
  require_non_null(key, function, "key");
  require_non_null(value, function, "value");
  const auto& entry = metadata_at(metadata, index, function);
  refuse_nul(entry.first, "metadata key", entry.first, "key", function, sized_function);
  refuse_nul(entry.second, "metadata key", entry.first, "value", function, sized_function);
  *key = entry.first.c_str();
  *value = entry.second.c_str();
}

void metadata_entry_n(const MetadataEntries& metadata, size_t index, const char** key, size_t* key_size,
                      const char** value, size_t* value_size, const char* function) {
  require_non_null(key, function, "key");
  require_non_null(key_size, function, "key_size");
  require_non_null(value, function, "value");
  require_non_null(value_size, function, "value_size");
  const auto& entry = metadata_at(metadata, index, function);
  *key = entry.first.c_str();
  *key_size = entry.first.size();
  *value = entry.second.c_str();
  *value_size = entry.second.size();
}

const std::string& tensor_name(const bp_tensor_map& map, size_t index, const char* function) {
  return entry_at(map.tensors, index, function, "tensors").first;
}

const Array& tensor_named(const bp_tensor_map& map, std::string_view name, const char* function) {
  auto found = std::lower_bound(map.tensors.begin(), map.tensors.end(), name,
                                [](const auto& entry, std::string_view key) { return entry.first < key; });
  if (found == map.tensors.end() || found->first != name) {
    throw Error(ErrorCode::kNotFound, fmt::format("{}: no tensor {} among the {} loaded", function,
                                                  safetensors::detail::quote(name), map.tensors.size()));
  }
  return found->second;
}

// texts[i] as a string: sizes[i] bytes when `sizes` is given, else up to its NUL.
std::string text_at(const char* const* texts, const size_t* sizes, size_t i, const char* function, const char* what) {
  if (sizes != nullptr && sizes[i] == 0) return {};
  require_non_null(texts[i], function, what);
  return sizes != nullptr ? std::string(texts[i], sizes[i]) : std::string(texts[i]);
}

void save(const char* path, const char* const* names, const size_t* name_sizes, const bp_array* const* arrays,
          size_t count, const char* const* metadata_keys, const size_t* metadata_key_sizes,
          const char* const* metadata_values, const size_t* metadata_value_sizes, int64_t metadata_count,
          const char* function, const bp_save_options* options = nullptr) {
  safetensors::SaveOptions chosen;
  if (options != nullptr) {
    if (options->struct_size < BP_STRUCT_SIZE(bp_save_options, durable)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: options->struct_size {} is too small (sizeof(bp_save_options) is {})", function,
                              options->struct_size, sizeof(bp_save_options)));
    }
    chosen.durable = options->durable != 0;
  }
  require_non_null(path, function, "path");
  if (count > 0) {
    require_non_null(names, function, "names");
    require_non_null(arrays, function, "arrays");
  }
  std::map<std::string, Array> tensors;
  for (size_t i = 0; i < count; ++i) {
    std::string name = text_at(names, name_sizes, i, function, "names[i]");
    Array array = *array_of(arrays[i], function);
    auto [where, inserted] = tensors.emplace(std::move(name), std::move(array));
    if (!inserted) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: tensor {} is named twice", function, safetensors::detail::quote(where->first)));
    }
  }
  std::optional<safetensors::Metadata> metadata;
  if (metadata_count < -1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: metadata_count {} (use -1 for no metadata)", function, metadata_count));
  }
  if (metadata_count >= 0) {
    metadata.emplace();
    if (metadata_count > 0) {
      require_non_null(metadata_keys, function, "metadata_keys");
      require_non_null(metadata_values, function, "metadata_values");
    }
    for (int64_t i = 0; i < metadata_count; ++i) {
      const auto at = static_cast<size_t>(i);
      std::string key = text_at(metadata_keys, metadata_key_sizes, at, function, "metadata_keys[i]");
      std::string value = text_at(metadata_values, metadata_value_sizes, at, function, "metadata_values[i]");
      auto [where, inserted] = metadata->emplace(std::move(key), std::move(value));
      if (!inserted) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: metadata key {} is given twice", function,
                                                             safetensors::detail::quote(where->first)));
      }
    }
  }
  safetensors::save(path, tensors, metadata, chosen);
}

}  // namespace
}  // namespace backplane::c_api

// The C functions below have C linkage and global scope; they call the
// C++ API and the C API's helpers by their short names.
using namespace ::backplane;
using namespace ::backplane::c_api;
namespace safetensors = ::backplane::safetensors;

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

bp_status bp_safetensors_header_sizes(const bp_safetensors_header* header, uint64_t* header_size, uint64_t* data_offset,
                                      uint64_t* file_size) {
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
    // API 0.2 callers pass the struct without name_size.
    constexpr std::size_t api_0_2_size = BP_STRUCT_SIZE(bp_safetensors_tensor_info, end);
    require_struct_size(out->struct_size, api_0_2_size, "bp_safetensors_header_tensor", "out");
    const bool has_name_size = out->struct_size >= sizeof(bp_safetensors_tensor_info);
    if (index >= cxx.tensors.size()) {
      throw Error(ErrorCode::kOutOfRange, fmt::format("bp_safetensors_header_tensor: index {} is out of range: {} "
                                                      "tensors",
                                                      index, cxx.tensors.size()));
    }
    const safetensors::TensorEntry& tensor = cxx.tensors[index];
    if (!has_name_size) {
      refuse_nul(tensor.name, "tensor", tensor.name, "name", "bp_safetensors_header_tensor",
                 "the API 0.3 bp_safetensors_tensor_info, whose name_size carries it");
    }
    out->name = tensor.name.c_str();
    if (has_name_size) out->name_size = tensor.name.size();
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
                   "bp_safetensors_header_metadata", "bp_safetensors_header_metadata_n");
  });
}

bp_status bp_safetensors_header_metadata_n(const bp_safetensors_header* header, size_t index, const char** key,
                                           size_t* key_size, const char** value, size_t* value_size) {
  return guarded([&] {
    metadata_entry_n(header_of(header, "bp_safetensors_header_metadata_n")->metadata, index, key, key_size, value,
                     value_size, "bp_safetensors_header_metadata_n");
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
      constexpr std::size_t api_0_1_size = BP_STRUCT_SIZE(bp_safetensors_load_options, user_data);
      if (options->struct_size < api_0_1_size) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("bp_safetensors_load: options->struct_size {} is smaller than {}", options->struct_size,
                                api_0_1_size));
      }
      constexpr std::size_t api_0_2_size = BP_STRUCT_SIZE(bp_safetensors_load_options, cancellable_progress);
      const bool has_cancellable = options->struct_size >= api_0_2_size;
      const size_t* name_sizes =
          options->struct_size >= sizeof(bp_safetensors_load_options) ? options->name_sizes : nullptr;
      if (options->name_count > 0) require_non_null(options->names, "bp_safetensors_load", "options->names");
      for (size_t i = 0; i < options->name_count; ++i) {
        load_options.names.push_back(
            text_at(options->names, name_sizes, i, "bp_safetensors_load", "options->names[i]"));
      }
      bp_cancellable_progress_callback cancellable = has_cancellable ? options->cancellable_progress : nullptr;
      if (options->progress != nullptr || cancellable != nullptr) {
        load_options.progress = [progress = options->progress, cancellable, user_data = options->user_data,
                                 file = std::string(path)](std::uint64_t done, std::uint64_t total) {
          if (progress != nullptr) progress(done, total, user_data);
          // The loader drains its copies when this throws, then rethrows.
          if (cancellable != nullptr && cancellable(done, total, user_data) != 0) {
            throw Error(
                ErrorCode::kCancelled,
                fmt::format("{}: load cancelled by the progress callback after {} of {} bytes", file, done, total));
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
    const std::string& name = tensor_name(*cxx, index, "bp_tensor_map_name");
    refuse_nul(name, "tensor", name, "name", "bp_tensor_map_name", "bp_tensor_map_name_n");
    *out = name.c_str();
  });
}

bp_status bp_tensor_map_name_n(const bp_tensor_map* map, size_t index, const char** out, size_t* size) {
  return guarded([&] {
    const auto cxx = map_of(map, "bp_tensor_map_name_n");
    require_non_null(out, "bp_tensor_map_name_n", "out");
    require_non_null(size, "bp_tensor_map_name_n", "size");
    const std::string& name = tensor_name(*cxx, index, "bp_tensor_map_name_n");
    *out = name.c_str();
    *size = name.size();
  });
}

bp_status bp_tensor_map_get(const bp_tensor_map* map, const char* name, bp_array** out) {
  return guarded([&] {
    const auto cxx = map_of(map, "bp_tensor_map_get");
    require_non_null(name, "bp_tensor_map_get", "name");
    require_non_null(out, "bp_tensor_map_get", "out");
    *out = new_array_handle(tensor_named(*cxx, name, "bp_tensor_map_get"));
  });
}

bp_status bp_tensor_map_get_n(const bp_tensor_map* map, const char* name, size_t size, bp_array** out) {
  return guarded([&] {
    const auto cxx = map_of(map, "bp_tensor_map_get_n");
    if (size > 0) require_non_null(name, "bp_tensor_map_get_n", "name");
    require_non_null(out, "bp_tensor_map_get_n", "out");
    *out = new_array_handle(tensor_named(*cxx, std::string_view(size > 0 ? name : "", size), "bp_tensor_map_get_n"));
  });
}

bp_status bp_tensor_map_metadata_count(const bp_tensor_map* map, int64_t* out) {
  return guarded([&] {
    metadata_count(map_of(map, "bp_tensor_map_metadata_count")->metadata, out, "bp_tensor_map_metadata_count");
  });
}

bp_status bp_tensor_map_metadata(const bp_tensor_map* map, size_t index, const char** key, const char** value) {
  return guarded([&] {
    metadata_entry(map_of(map, "bp_tensor_map_metadata")->metadata, index, key, value, "bp_tensor_map_metadata",
                   "bp_tensor_map_metadata_n");
  });
}

bp_status bp_tensor_map_metadata_n(const bp_tensor_map* map, size_t index, const char** key, size_t* key_size,
                                   const char** value, size_t* value_size) {
  return guarded([&] {
    metadata_entry_n(map_of(map, "bp_tensor_map_metadata_n")->metadata, index, key, key_size, value, value_size,
                     "bp_tensor_map_metadata_n");
  });
}

bp_status bp_safetensors_save(const char* path, const char* const* names, const bp_array* const* arrays, size_t count,
                              const char* const* metadata_keys, const char* const* metadata_values,
                              int64_t metadata_count) {
  return guarded([&] {
    save(path, names, nullptr, arrays, count, metadata_keys, nullptr, metadata_values, nullptr, metadata_count,
         "bp_safetensors_save");
  });
}

bp_status bp_safetensors_save_n(const char* path, const char* const* names, const size_t* name_sizes,
                                const bp_array* const* arrays, size_t count, const char* const* metadata_keys,
                                const size_t* metadata_key_sizes, const char* const* metadata_values,
                                const size_t* metadata_value_sizes, int64_t metadata_count) {
  return guarded([&] {
    save(path, names, name_sizes, arrays, count, metadata_keys, metadata_key_sizes, metadata_values,
         metadata_value_sizes, metadata_count, "bp_safetensors_save_n");
  });
}

bp_status bp_safetensors_save_with(const char* path, const char* const* names, const size_t* name_sizes,
                                   const bp_array* const* arrays, size_t count, const char* const* metadata_keys,
                                   const size_t* metadata_key_sizes, const char* const* metadata_values,
                                   const size_t* metadata_value_sizes, int64_t metadata_count,
                                   const bp_save_options* options) {
  return guarded([&] {
    save(path, names, name_sizes, arrays, count, metadata_keys, metadata_key_sizes, metadata_values,
         metadata_value_sizes, metadata_count, "bp_safetensors_save_with", options);
  });
}

}  // extern "C"
