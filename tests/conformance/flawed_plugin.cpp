// backplane-flawed.so: the CPU backend with one deliberate flaw, chosen by the
// plugin option `flaw`, so the tests can show the conformance suite catches
// each one (and passes the unflawed and the honestly unavailable variants).
//
//   flaw = none                 the CPU backend as it is (must conform)
//   flaw = unavailable          probe says unavailable with a reason, no
//                               devices, device calls refused (must conform)
//   flaw = no_reason            unavailable, but without a reason
//   flaw = ignore_offset        copy_to_device(_async) writes at offset 0
//   flaw = accept_out_of_range  copy_to_host(_async) returns success for an
//                               out-of-range copy (and copies nothing)
//   flaw = zero_memory          device_info answers memory_total 0 (the
//                               devices check fails; the devices exist)
//   flaw = probe_error          probe returns an error instead of an answer
//   flaw = crash_in_allocate    memory_allocate aborts the process
//
// The flaw is per backend instance; instances created without the option
// have none. Test-only: built next to this file, never installed.
#include "cpu_backend.hpp"

#include <backplane/plugin_support.hpp>

#include <cstddef>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace cpu = backplane::cpu;
using backplane::plugin::make_error;
using backplane::plugin_sdk::Mode;

enum class Flaw {
  kNone,
  kUnavailable,
  kNoReason,
  kIgnoreOffset,
  kAcceptOutOfRange,
  kZeroMemory,
  kProbeError,
  kCrashInAllocate,
  kWildPriority,        // probe reports a priority far outside the expected range
  kPriorityPastStruct,  // probe writes priority whatever the caller's struct_size
};

std::mutex g_mutex;
std::map<BP_Backend*, Flaw> g_flaws;

Flaw flaw_of(BP_Backend* backend) {
  const std::lock_guard lock(g_mutex);
  const auto found = g_flaws.find(backend);
  return found == g_flaws.end() ? Flaw::kNone : found->second;
}

bool unavailable(BP_Backend* backend) {
  const Flaw flaw = flaw_of(backend);
  return flaw == Flaw::kUnavailable || flaw == Flaw::kNoReason;
}

template <class Args>
bool well_formed(const Args* args) {
  return args != nullptr && args->struct_size >= sizeof(Args);
}

BP_Error* backend_create(BP_BackendCreateArgs* args) noexcept {
  if (!well_formed(args) || (args->options == nullptr && args->option_count != 0)) {
    return cpu::Entries::backend_create(args);
  }
  Flaw flaw = Flaw::kNone;
  std::vector<BP_KeyValue> rest;
  for (std::size_t index = 0; index < args->option_count; ++index) {
    const BP_KeyValue& option = args->options[index];
    if (option.key == nullptr || std::string_view(option.key, option.key_size) != "flaw") {
      rest.push_back(option);
      continue;
    }
    const std::string_view value(option.value == nullptr ? "" : option.value, option.value_size);
    if (value == "none")
      flaw = Flaw::kNone;
    else if (value == "unavailable")
      flaw = Flaw::kUnavailable;
    else if (value == "no_reason")
      flaw = Flaw::kNoReason;
    else if (value == "ignore_offset")
      flaw = Flaw::kIgnoreOffset;
    else if (value == "accept_out_of_range")
      flaw = Flaw::kAcceptOutOfRange;
    else if (value == "zero_memory")
      flaw = Flaw::kZeroMemory;
    else if (value == "probe_error")
      flaw = Flaw::kProbeError;
    else if (value == "crash_in_allocate")
      flaw = Flaw::kCrashInAllocate;
    else if (value == "wild_priority")
      flaw = Flaw::kWildPriority;
    else if (value == "priority_past_struct")
      flaw = Flaw::kPriorityPastStruct;
    else
      return make_error(BP_ERROR_INVALID_ARGUMENT, "flawed: option flaw = \"" + std::string(value) + "\" is unknown");
  }
  BP_BackendCreateArgs forwarded = *args;
  forwarded.options = rest.data();
  forwarded.option_count = rest.size();
  if (BP_Error* error = cpu::Entries::backend_create(&forwarded)) return error;
  args->backend = forwarded.backend;
  const std::lock_guard lock(g_mutex);
  g_flaws[forwarded.backend] = flaw;
  return nullptr;
}

void backend_destroy(BP_Backend* backend) noexcept {
  {
    const std::lock_guard lock(g_mutex);
    g_flaws.erase(backend);
  }
  cpu::Entries::backend_destroy(backend);
}

BP_Error* probe(BP_ProbeArgs* args) noexcept {
  if (well_formed(args) && flaw_of(args->backend) == Flaw::kProbeError) {
    return make_error(BP_ERROR_DEVICE, "flawed: probe exploded (on purpose)");
  }
  BP_Error* error = cpu::Entries::probe(args);
  if (error == nullptr && BP_STRUCT_HAS_FIELD(args, BP_ProbeArgs, reason_size)) {
    // Both flaws write the ABI 1.2 field; the second even past a 1.1 struct.
    const Flaw flaw = flaw_of(args->backend);
    if (flaw == Flaw::kWildPriority && BP_STRUCT_HAS_FIELD(args, BP_ProbeArgs, priority)) args->priority = 1 << 30;
    if (flaw == Flaw::kPriorityPastStruct) args->priority = 7;
  }
  if (error != nullptr || !unavailable(args->backend)) return error;
  static constexpr char kReason[] = "flawed: no such hardware (unavailable on purpose)";
  args->available = 0;
  const bool with_reason = flaw_of(args->backend) == Flaw::kUnavailable;
  args->reason = with_reason ? kReason : nullptr;
  args->reason_size = with_reason ? sizeof(kReason) - 1 : 0;
  return nullptr;
}

BP_Error* device_count(BP_DeviceCountArgs* args) noexcept {
  BP_Error* error = cpu::Entries::device_count(args);
  if (error == nullptr && unavailable(args->backend)) args->count = 0;
  return error;
}

BP_Error* device_info(BP_DeviceInfoArgs* args) noexcept {
  if (well_formed(args) && unavailable(args->backend)) {
    return make_error(BP_ERROR_OUT_OF_RANGE, "flawed: device_info: the backend has no devices");
  }
  BP_Error* error = cpu::Entries::device_info(args);
  if (error == nullptr && flaw_of(args->backend) == Flaw::kZeroMemory) args->memory_total = 0;
  return error;
}

BP_Error* memory_allocate(BP_MemoryAllocateArgs* args) noexcept {
  if (well_formed(args) && unavailable(args->backend)) {
    return make_error(BP_ERROR_OUT_OF_RANGE, "flawed: memory_allocate: the backend has no devices");
  }
  if (well_formed(args) && flaw_of(args->backend) == Flaw::kCrashInAllocate) std::abort();
  return cpu::Entries::memory_allocate(args);
}

template <BP_Error* (*Copy)(BP_CopyToDeviceArgs*) noexcept>
BP_Error* copy_to_device_flawed(BP_CopyToDeviceArgs* args) noexcept {
  if (!well_formed(args) || flaw_of(args->backend) != Flaw::kIgnoreOffset) return Copy(args);
  BP_CopyToDeviceArgs at_zero = *args;
  at_zero.destination_offset = 0;
  BP_Error* error = Copy(&at_zero);
  args->event = at_zero.event;
  return error;
}

template <BP_Error* (*Copy)(BP_CopyToHostArgs*) noexcept>
BP_Error* copy_to_host_flawed(BP_CopyToHostArgs* args) noexcept {
  BP_Error* error = Copy(args);
  if (error != nullptr && error->code == BP_ERROR_OUT_OF_RANGE && well_formed(args) &&
      flaw_of(args->backend) == Flaw::kAcceptOutOfRange) {
    error->destroy(error);
    return nullptr;
  }
  return error;
}

constexpr char kName[] = "flawed";
constexpr char kVersion[] = "test-only";

constexpr BP_PluginApi kApi = {
    .struct_size = sizeof(BP_PluginApi),
    .abi_major = BP_ABI_MAJOR,
    .abi_minor = BP_ABI_MINOR,
    .name = kName,
    .name_size = sizeof(kName) - 1,
    .version = kVersion,
    .version_size = sizeof(kVersion) - 1,
    .priority = 1,
    .capabilities = cpu::CpuBackend::kIdentity.capabilities,
    .backend_create = backend_create,
    .backend_destroy = backend_destroy,
    .probe = probe,
    .device_count = device_count,
    .device_info = device_info,
    .memory_allocate = memory_allocate,
    .memory_free = cpu::Entries::memory_free,
    .copy_to_device = copy_to_device_flawed<cpu::Entries::copy_to_device<Mode::kBlocking>>,
    .copy_to_host = copy_to_host_flawed<cpu::Entries::copy_to_host<Mode::kBlocking>>,
    .copy_device_to_device = cpu::Entries::copy_device_to_device<Mode::kBlocking>,
    .copy_to_device_async = copy_to_device_flawed<cpu::Entries::copy_to_device<Mode::kAsync>>,
    .copy_to_host_async = copy_to_host_flawed<cpu::Entries::copy_to_host<Mode::kAsync>>,
    .copy_device_to_device_async = cpu::Entries::copy_device_to_device<Mode::kAsync>,
    .event_wait = cpu::Entries::event_wait,
    .event_query = cpu::Entries::event_query,
    .event_destroy = cpu::Entries::event_destroy,
    .convert_integers = nullptr,
    .memory_wrap = cpu::Entries::memory_wrap,
    .dlpack_device_type = 1,  // kDLCPU
    .event_timing = nullptr,
};

}  // namespace

extern "C" BP_PLUGIN_EXPORT const BP_PluginApi* backplane_plugin_entry(const BP_PluginEntryArgs* /*args*/) noexcept {
  return &kApi;
}
