// A test-only stand-in for the pjrt adapter plugin (backplane-pjrt.so): the
// core's instances, sources and naming are tested with it, without a real
// PJRT library. Its `library` is a text file of `key=value` lines that says
// what the "PJRT library" answers:
//   available=0|1     default 1
//   reason=TEXT       the probe's reason (default "fake PJRT library")
//   devices=N         0..16, default 1: devices "fake PJRT device N"
//   memories=A,B,...  each device's memory kinds (ABI 1.4), default none
// The probe's reason ends with what the core gave it: " (library PATH;
// create options: KEY=TYPE:VALUE, ...)", so a test reads its options back
// (PATH: the file the core's descriptor leads to, as the real adapter names it).
//
// Options: `library` and `backend` (the pjrt_<name> the core gives; both
// required), `create.<key>` (any value, recorded), and
// nothing else (an unknown key fails backend_create naming it). Devices have
// no memory: memory calls are refused.
#include <backplane/plugin.h>
#include <backplane/plugin_support.hpp>

#include <unistd.h>

#include <climits>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using backplane::plugin_sdk::Failure;
using backplane::plugin_sdk::guarded;
using backplane::plugin_sdk::require_args;

struct FakeBackend {
  std::string library;
  std::vector<std::pair<std::string, std::string>> create_options;
  bool probed = false;
  bool available = true;
  std::string reason;
  int devices = 1;
  std::vector<std::string> device_names;
  std::vector<std::string> memories;
  std::vector<BP_KeyValue> memory_views;
};

FakeBackend& backend_of(BP_Backend* backend, const char* call) {
  if (backend == nullptr) throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": backend is NULL");
  return *reinterpret_cast<FakeBackend*>(backend);
}

std::string text_of(const char* data, std::size_t size) {
  return data == nullptr ? std::string() : std::string(data, size);
}

// How the real adapter names its library: the core hands over a
// /proc/self/fd/N of the file it judged, named here by where it leads.
std::string library_name(const std::string& path) {
  if (!path.starts_with("/proc/self/fd/")) return path;
  char target[PATH_MAX];
  const ssize_t size = ::readlink(path.c_str(), target, sizeof(target));
  return size > 0 && static_cast<std::size_t>(size) < sizeof(target) ? std::string(target, size) : path;
}

// Reads the library file once, on the first probe.
void read_library(FakeBackend& self) {
  if (self.probed) return;
  std::ifstream file(self.library);
  if (!file) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT, "fake PJRT library " + library_name(self.library) + " cannot be read");
  }
  std::string reason = "fake PJRT library";
  std::string line;
  while (std::getline(file, line)) {
    const std::size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    const std::string key = line.substr(0, equals);
    const std::string value = line.substr(equals + 1);
    if (key == "available") self.available = value != "0";
    if (key == "reason") reason = value;
    if (key == "devices") self.devices = std::stoi(value);
    if (key == "memories") {
      std::size_t start = 0;
      while (start <= value.size()) {
        std::size_t end = value.find(',', start);
        if (end == std::string::npos) end = value.size();
        if (end > start) self.memories.push_back(value.substr(start, end - start));
        start = end + 1;
      }
    }
  }
  if (self.devices < 0 || self.devices > 16) throw Failure(BP_ERROR_INVALID_ARGUMENT, "devices must be 0..16");
  std::string options;
  for (const auto& [key, value] : self.create_options) options += (options.empty() ? "" : ", ") + key + "=" + value;
  self.reason = reason + " (library " + library_name(self.library) + "; create options: " + options + ")";
  for (int ordinal = 0; ordinal < self.devices; ++ordinal) {
    self.device_names.push_back("fake PJRT device " + std::to_string(ordinal));
  }
  for (const std::string& kind : self.memories) {
    self.memory_views.push_back({sizeof(BP_KeyValue), kind.data(), kind.size(), "", 0});
  }
  self.probed = true;
}

BP_Error* backend_create(BP_BackendCreateArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "backend_create");
    auto created = std::make_unique<FakeBackend>();
    bool has_library = false;
    bool has_backend = false;
    for (std::size_t i = 0; i < args->option_count; ++i) {
      const BP_KeyValue& option = args->options[i];
      std::string key = text_of(option.key, option.key_size);
      std::string value = text_of(option.value, option.value_size);
      if (key == "library") {
        created->library = std::move(value);
        has_library = true;
      } else if (key == "backend") {
        has_backend = value.starts_with("pjrt_");
      } else if (key.starts_with("create.")) {
        created->create_options.emplace_back(key.substr(7), std::move(value));
      } else {
        throw Failure(BP_ERROR_INVALID_ARGUMENT, "fake pjrt: unknown option '" + key + "'");
      }
    }
    if (!has_library) throw Failure(BP_ERROR_INVALID_ARGUMENT, "fake pjrt: option 'library' is required");
    // The core names each instance, as the real adapter's messages need.
    if (!has_backend) throw Failure(BP_ERROR_INVALID_ARGUMENT, "fake pjrt: option 'backend' (pjrt_<name>) is required");
    args->backend = reinterpret_cast<BP_Backend*>(created.release());
    return nullptr;
  });
}

void backend_destroy(BP_Backend* backend) noexcept { delete reinterpret_cast<FakeBackend*>(backend); }

BP_Error* probe(BP_ProbeArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "probe");
    FakeBackend& self = backend_of(args->backend, "probe");
    read_library(self);
    args->available = self.available ? 1 : 0;
    args->reason = self.reason.data();
    args->reason_size = self.reason.size();
    return nullptr;
  });
}

BP_Error* device_count(BP_DeviceCountArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "device_count");
    FakeBackend& self = backend_of(args->backend, "device_count");
    read_library(self);
    args->count = self.available ? self.devices : 0;
    return nullptr;
  });
}

BP_Error* device_info(BP_DeviceInfoArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "device_info");
    FakeBackend& self = backend_of(args->backend, "device_info");
    read_library(self);
    if (args->ordinal < 0 || args->ordinal >= self.devices) {
      throw Failure(BP_ERROR_OUT_OF_RANGE, "fake pjrt: no device " + std::to_string(args->ordinal));
    }
    const std::string& name = self.device_names[static_cast<std::size_t>(args->ordinal)];
    args->name = name.data();
    args->name_size = name.size();
    args->kind = BP_DEVICE_KIND_CPU;
    args->memory_total = std::uint64_t{1} << 30;
    args->memory_free = BP_MEMORY_FREE_UNKNOWN;
    if (BP_STRUCT_HAS_FIELD(args, BP_DeviceInfoArgs, memory_count) && !self.memory_views.empty()) {
      args->memories = self.memory_views.data();
      args->memory_count = self.memory_views.size();
    }
    return nullptr;
  });
}

template <class Args>
BP_Error* refuse(Args* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "memory call");
    throw Failure(BP_ERROR_UNSUPPORTED, "fake pjrt: its devices have no memory");
  });
}

BP_Error* memory_free(BP_MemoryFreeArgs* args) noexcept {
  if (args != nullptr && args->buffer == nullptr) return nullptr;
  return refuse(args);
}

void event_destroy(BP_Backend*, BP_Event*) noexcept {}

constexpr char kName[] = "pjrt";
constexpr char kVersion[] = "fake-adapter";

const BP_PluginApi kApi = {
    .struct_size = sizeof(BP_PluginApi),
    .abi_major = BP_ABI_MAJOR,
    .abi_minor = BP_ABI_MINOR,
    .name = kName,
    .name_size = sizeof(kName) - 1,
    .version = kVersion,
    .version_size = sizeof(kVersion) - 1,
    .priority = 20,
    .capabilities = 0,
    .backend_create = backend_create,
    .backend_destroy = backend_destroy,
    .probe = probe,
    .device_count = device_count,
    .device_info = device_info,
    .memory_allocate = refuse<BP_MemoryAllocateArgs>,
    .memory_free = memory_free,
    .copy_to_device = refuse<BP_CopyToDeviceArgs>,
    .copy_to_host = refuse<BP_CopyToHostArgs>,
    .copy_device_to_device = refuse<BP_CopyDeviceToDeviceArgs>,
    .copy_to_device_async = refuse<BP_CopyToDeviceArgs>,
    .copy_to_host_async = refuse<BP_CopyToHostArgs>,
    .copy_device_to_device_async = refuse<BP_CopyDeviceToDeviceArgs>,
    .event_wait = refuse<BP_EventArgs>,
    .event_query = refuse<BP_EventArgs>,
    .event_destroy = event_destroy,
    .convert_integers = nullptr,
    .memory_wrap = nullptr,
    .dlpack_device_type = 0,
    .event_timing = nullptr,
};

}  // namespace

extern "C" BP_PLUGIN_EXPORT const BP_PluginApi* backplane_plugin_entry(const BP_PluginEntryArgs* /*args*/) noexcept {
  return &kApi;
}
