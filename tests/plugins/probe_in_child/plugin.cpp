// The CPU backend behind a table that declares BP_CAPABILITY_PROBE_IN_CHILD,
// named child_probe, which says where each of its calls ran: with the option
// `pid_log=FILE`, backend_create, probe, device_count, device_info and
// memory_allocate each append "<call> <pid>\n" to FILE. A test reads it to
// check that the probe ran in the probe helper and that, in the caller, only
// backend_create ran until a device was used. Every other option goes to the
// CPU backend (`devices`).
#include "cpu_backend.hpp"

#include <backplane/plugin.h>

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

namespace cpu = backplane::cpu;
using backplane::plugin_sdk::Mode;

std::mutex logs_mutex;
std::map<BP_Backend*, std::string>& logs() {
  static auto* by_backend = new std::map<BP_Backend*, std::string>();  // never destroyed: used until unload
  return *by_backend;
}

void record(BP_Backend* backend, const char* call) {
  std::string file;
  {
    const std::lock_guard lock(logs_mutex);
    const auto found = logs().find(backend);
    if (found == logs().end()) return;
    file = found->second;
  }
  const std::string line = std::string(call) + " " + std::to_string(::getpid()) + "\n";
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  [[maybe_unused]] const ssize_t written = ::write(fd, line.data(), line.size());
  ::close(fd);
}

BP_Error* backend_create(BP_BackendCreateArgs* args) noexcept {
  if (args == nullptr || args->struct_size < sizeof(*args)) return cpu::Entries::backend_create(args);
  std::string log;
  std::vector<BP_KeyValue> rest;
  for (std::size_t i = 0; i < args->option_count; ++i) {
    const BP_KeyValue& option = args->options[i];
    if (std::string(option.key, option.key_size) == "pid_log") {
      log.assign(option.value, option.value_size);
    } else {
      rest.push_back(option);
    }
  }
  BP_BackendCreateArgs forwarded = *args;
  forwarded.options = rest.data();
  forwarded.option_count = rest.size();
  BP_Error* error = cpu::Entries::backend_create(&forwarded);
  args->backend = forwarded.backend;
  if (error == nullptr && !log.empty()) {
    {
      const std::lock_guard lock(logs_mutex);
      logs()[args->backend] = log;
    }
    record(args->backend, "backend_create");
  }
  return error;
}

BP_Error* probe(BP_ProbeArgs* args) noexcept {
  if (args != nullptr) record(args->backend, "probe");
  return cpu::Entries::probe(args);
}

BP_Error* device_count(BP_DeviceCountArgs* args) noexcept {
  if (args != nullptr) record(args->backend, "device_count");
  return cpu::Entries::device_count(args);
}

BP_Error* device_info(BP_DeviceInfoArgs* args) noexcept {
  if (args != nullptr) record(args->backend, "device_info");
  return cpu::Entries::device_info(args);
}

BP_Error* memory_allocate(BP_MemoryAllocateArgs* args) noexcept {
  if (args != nullptr) record(args->backend, "memory_allocate");
  return cpu::Entries::memory_allocate(args);
}

constexpr char kName[] = "child_probe";
constexpr char kVersion[] = "probe-in-child-fixture";

constexpr BP_PluginApi kApi = {
    .struct_size = sizeof(BP_PluginApi),
    .abi_major = BP_ABI_MAJOR,
    .abi_minor = BP_ABI_MINOR,
    .name = kName,
    .name_size = sizeof(kName) - 1,
    .version = kVersion,
    .version_size = sizeof(kVersion) - 1,
    .priority = 5,
    .capabilities = cpu::CpuBackend::kIdentity.capabilities | BP_CAPABILITY_PROBE_IN_CHILD,
    .backend_create = backend_create,
    .backend_destroy = cpu::Entries::backend_destroy,
    .probe = probe,
    .device_count = device_count,
    .device_info = device_info,
    .memory_allocate = memory_allocate,
    .memory_free = cpu::Entries::memory_free,
    .copy_to_device = cpu::Entries::copy_to_device<Mode::kBlocking>,
    .copy_to_host = cpu::Entries::copy_to_host<Mode::kBlocking>,
    .copy_device_to_device = cpu::Entries::copy_device_to_device<Mode::kBlocking>,
    .copy_to_device_async = cpu::Entries::copy_to_device<Mode::kAsync>,
    .copy_to_host_async = cpu::Entries::copy_to_host<Mode::kAsync>,
    .copy_device_to_device_async = cpu::Entries::copy_device_to_device<Mode::kAsync>,
    .event_wait = cpu::Entries::event_wait,
    .event_query = cpu::Entries::event_query,
    .event_destroy = cpu::Entries::event_destroy,
    .convert_integers = nullptr,
    .memory_wrap = cpu::Entries::memory_wrap,
    .dlpack_device_type = cpu::CpuBackend::kIdentity.dlpack_device_type,
    .event_timing = nullptr,
};

}  // namespace

extern "C" BP_PLUGIN_EXPORT const BP_PluginApi* backplane_plugin_entry(const BP_PluginEntryArgs* /*args*/) noexcept {
  return &kApi;
}
