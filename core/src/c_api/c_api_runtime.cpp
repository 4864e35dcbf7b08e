// bp_runtime_*, bp_backend_*, bp_version, errors.
#include "c_api/c_api_support.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

struct bp_runtime {
  bp_runtime(backplane::Runtime* runtime, bool owned) : runtime(runtime), owned(owned) {}
  bp_runtime(const bp_runtime&) = delete;
  bp_runtime& operator=(const bp_runtime&) = delete;
  // Runs when the last reference goes: after bp_runtime_destroy and after the
  // last call in flight on the handle has returned.
  ~bp_runtime() {
    if (owned) delete runtime;
  }

  backplane::Runtime* runtime;
  bool owned;  // false for the process default
  std::once_flag config_once;
  std::optional<std::string> config_path;
};

namespace backplane::c_api {
namespace {

thread_local std::string last_error;

LiveHandles<bp_runtime>& live_runtimes = make_live_handles<bp_runtime>();

bp_runtime* register_runtime(Runtime* runtime, bool owned) {
  return live_runtimes.add(std::make_shared<bp_runtime>(runtime, owned));
}

// `count` strings of `function`'s `what`, each non-NULL.
std::vector<std::string> strings_of(const char* const* strings, std::size_t count, const char* function,
                                    const char* what) {
  std::vector<std::string> copied;
  if (count > 0) require_non_null(strings, function, what);
  for (std::size_t i = 0; i < count; ++i) {
    if (strings[i] == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}[{}] is NULL", function, what, i));
    }
    copied.emplace_back(strings[i]);
  }
  return copied;
}

PluginSource source_of(const bp_plugin_source& given, std::size_t index) {
  constexpr const char* kFunction = "bp_runtime_create";
  const std::string what = fmt::format("sources[{}]", index);
  require_struct_size(given.struct_size, sizeof(bp_plugin_source), kFunction, what.c_str());
  if (given.kind != BP_PLUGIN_SOURCE_PATH && given.kind != BP_PLUGIN_SOURCE_PJRT) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}.kind {} is neither BP_PLUGIN_SOURCE_PATH nor "
                                                         "BP_PLUGIN_SOURCE_PJRT",
                                                         kFunction, what, given.kind));
  }
  if (given.origin < BP_ORIGIN_CODE || given.origin > BP_ORIGIN_PACKAGE) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {}.origin {} is not a BP_ORIGIN_* value", kFunction, what, given.origin));
  }
  auto text = [](const char* value) { return std::string(value == nullptr ? "" : value); };
  PluginSource source;
  source.kind =
      given.kind == BP_PLUGIN_SOURCE_PATH ? PluginSource::Kind::kPluginPath : PluginSource::Kind::kPjrtLibrary;
  source.name = text(given.name);
  source.path = text(given.path);
  source.origin = static_cast<backplane::SearchOrigin>(given.origin);
  source.origin_detail = text(given.origin_detail);
  source.problem = text(given.problem);
  const auto keys = strings_of(given.create_option_keys, given.create_option_count, kFunction,
                               (what + ".create_option_keys").c_str());
  const auto values = strings_of(given.create_option_values, given.create_option_count, kFunction,
                                 (what + ".create_option_values").c_str());
  for (std::size_t i = 0; i < keys.size(); ++i) source.create_options.emplace_back(keys[i], values[i]);
  return source;
}

}  // namespace

void set_last_error(std::string_view message) noexcept {
  try {
    last_error.assign(message);
  } catch (...) {  // assigning can only fail for lack of memory: keep the old text
  }
}

void require_non_null(const void* pointer, const char* function, const char* what) {
  if (pointer == nullptr) throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} is NULL", function, what));
}

void require_struct_size(std::size_t given, std::size_t size, const char* function, const char* what) {
  if (given < size) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}->struct_size {} is smaller than {} (set it to sizeof)",
                                                         function, what, given, size));
  }
}

std::shared_ptr<Runtime> runtime_of(bp_runtime* handle, const char* function) {
  require_non_null(handle, function, "runtime");
  std::shared_ptr<bp_runtime> live = live_runtimes.acquire(handle);
  if (live == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: runtime is not a live handle (destroyed?)", function));
  }
  Runtime* runtime = live->runtime;
  return std::shared_ptr<Runtime>(std::move(live), runtime);  // shares the handle's ownership
}

Device to_device(const bp_device& device) {
  std::string_view backend(device.backend, strnlen(device.backend, sizeof(device.backend)));
  if (backend.size() == sizeof(device.backend)) {
    throw Error(ErrorCode::kInvalidArgument, "bp_device: backend name is not NUL-terminated");
  }
  return Device{std::string(backend), device.ordinal};
}

bp_device from_device(const Device& device) {
  bp_device out{};
  if (device.backend.size() >= sizeof(out.backend)) {
    throw Error(ErrorCode::kInternal, fmt::format("backend name '{}' is too long for bp_device", device.backend));
  }
  device.backend.copy(out.backend, device.backend.size());
  out.ordinal = device.ordinal;
  return out;
}

}  // namespace backplane::c_api

// The C functions below have C linkage and global scope; they call the
// C++ API and the C API's helpers by their short names.
using namespace ::backplane;
using namespace ::backplane::c_api;

extern "C" {

const char* bp_version(void) { return BACKPLANE_VERSION; }

const char* bp_last_error(void) { return last_error.c_str(); }

const char* bp_status_name(bp_status status) {
  if (!backplane::detail::is_status(status)) return "unknown status";
  return to_string(static_cast<ErrorCode>(status)).data();  // static, NUL-terminated literals
}

bp_status bp_runtime_create(const bp_runtime_options* options, bp_runtime** out) {
  return guarded([&] {
    require_non_null(out, "bp_runtime_create", "out");
    Runtime::Options cxx_options;
    if (options != nullptr) {
      constexpr std::size_t kSize_0_6 = BP_STRUCT_SIZE(bp_runtime_options, skip_default_paths);
      if (options->struct_size < kSize_0_6) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("bp_runtime_create: options->struct_size {} is smaller than {}, API 0.6's (set it to "
                                "sizeof)",
                                options->struct_size, kSize_0_6));
      }
      if (options->plugin_path_count > 0) require_non_null(options->plugin_paths, "bp_runtime_create", "plugin_paths");
      for (size_t i = 0; i < options->plugin_path_count; ++i) {
        require_non_null(options->plugin_paths[i], "bp_runtime_create", "plugin_paths[i]");
        cxx_options.plugin_paths.emplace_back(options->plugin_paths[i]);
      }
      if (options->config_file != nullptr) cxx_options.config_file = options->config_file;
      cxx_options.ignore_environment = options->ignore_environment != 0;
      cxx_options.skip_default_paths = options->skip_default_paths != 0;
      if (options->struct_size >= sizeof(bp_runtime_options)) {
        if (options->source_count > 0) require_non_null(options->sources, "bp_runtime_create", "sources");
        for (std::size_t i = 0; i < options->source_count; ++i) {
          cxx_options.sources.push_back(source_of(options->sources[i], i));
        }
        for (auto& path :
             strings_of(options->python_paths, options->python_path_count, "bp_runtime_create", "python_paths")) {
          cxx_options.python_paths.emplace_back(std::move(path));
        }
      }
    }
    auto runtime = std::make_unique<Runtime>(std::move(cxx_options));
    auto handle = std::make_shared<bp_runtime>(runtime.get(), true);
    runtime.release();  // the handle owns it now
    *out = live_runtimes.add(std::move(handle));
  });
}

bp_status bp_runtime_default(bp_runtime** out) {
  return guarded([&] {
    require_non_null(out, "bp_runtime_default", "out");
    static bp_runtime* handle = register_runtime(&Runtime::process_default(), false);
    *out = handle;
  });
}

bp_status bp_runtime_default_set_python_paths(const char* const* paths, size_t count) {
  return guarded([&] {
    std::vector<std::filesystem::path> copied;
    for (auto& path : strings_of(paths, count, "bp_runtime_default_set_python_paths", "paths")) {
      copied.emplace_back(std::move(path));
    }
    Runtime::set_process_default_python_paths(std::move(copied));
  });
}

void bp_runtime_destroy(bp_runtime* runtime) {
  // Liveness first (a destroyed handle must not even be read), and the
  // process default is never destroyed.
  // The runtime itself goes with the last reference: here, or when the last
  // call in flight on another thread returns.
  live_runtimes.remove_if(runtime, [](const bp_runtime& handle) { return handle.owned; });
}

bp_status bp_runtime_config_path(bp_runtime* runtime, const char** out) {
  return guarded([&] {
    auto cxx = runtime_of(runtime, "bp_runtime_config_path");
    require_non_null(out, "bp_runtime_config_path", "out");
    auto config = cxx->config();
    std::call_once(runtime->config_once, [&] {
      if (config.path) runtime->config_path = config.path->string();
    });
    *out = runtime->config_path ? runtime->config_path->c_str() : nullptr;
  });
}

bp_status bp_backend_count(bp_runtime* runtime, size_t* out) {
  return guarded([&] {
    auto cxx = runtime_of(runtime, "bp_backend_count");
    require_non_null(out, "bp_backend_count", "out");
    *out = cxx->backends().size();
  });
}

bp_status bp_backend_get(bp_runtime* runtime, size_t index, bp_backend_info* out) {
  return guarded([&] {
    auto cxx = runtime_of(runtime, "bp_backend_get");
    require_non_null(out, "bp_backend_get", "out");
    constexpr std::size_t kSize_0_3 = BP_STRUCT_SIZE(bp_backend_info, capabilities);
    if (out->struct_size < kSize_0_3) {
      require_struct_size(out->struct_size, sizeof(bp_backend_info), "bp_backend_get", "out");
    }
    const auto& backends = cxx->backends();
    if (index >= backends.size()) {
      throw Error(ErrorCode::kOutOfRange,
                  fmt::format("bp_backend_get: index {} is out of range: {} backends", index, backends.size()));
    }
    // The runtime's list never changes after discovery, so these stay valid.
    const BackendInfo& info = backends[index];
    out->name = info.name.c_str();
    out->status = static_cast<bp_backend_status>(info.status);
    out->status_name = to_string(info.status).data();
    out->reason = info.reason.c_str();
    out->plugin_path = info.plugin_path.c_str();
    out->abi_version = info.abi_version.c_str();
    out->priority = info.priority;
    out->capabilities = info.capabilities;
    if (out->struct_size >= BP_STRUCT_SIZE(bp_backend_info, dlpack_device_type)) {  // API 0.4
      out->dlpack_device_type = info.dlpack_device_type;
    }
    if (out->struct_size >= BP_STRUCT_SIZE(bp_backend_info, library)) {  // API 0.7
      out->origin_detail = info.origin_detail.c_str();
      out->library = info.library.c_str();
    }
  });
}

bp_status bp_backend_is_available(bp_runtime* runtime, const char* name, int32_t* out) {
  return guarded([&] {
    auto cxx = runtime_of(runtime, "bp_backend_is_available");
    require_non_null(name, "bp_backend_is_available", "name");
    require_non_null(out, "bp_backend_is_available", "out");
    *out = cxx->is_available(name) ? 1 : 0;
  });
}

}  // extern "C"
