// The emulator's driver, devices and primary contexts: what probe reads
// without a context, the configuration, failure injection, and the context
// stack and peer access.
#include "emulator.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace emulator {
namespace {

long env_long(const char* name, long fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::strtol(text, nullptr, 10) : fallback;
}

// "64M", "1G", "4096" (binary suffixes K, M, G).
std::uint64_t parse_size(const char* text) {
  char* end = nullptr;
  std::uint64_t value = std::strtoull(text, &end, 10);
  switch (end != nullptr ? *end : '\0') {
    case 'K':
    case 'k': return value << 10;
    case 'M':
    case 'm': return value << 20;
    case 'G':
    case 'g': return value << 30;
    default: return value;
  }
}

Config read_config() {
  Config config;
  config.version = static_cast<int>(env_long("BP_FAKE_CUDA_VERSION", 13000));
  config.init_result = static_cast<int>(env_long("BP_FAKE_CUDA_INIT", 0));
  config.devices = static_cast<int>(env_long("BP_FAKE_CUDA_DEVICES", 0));
  if (const char* memory = std::getenv("BP_FAKE_CUDA_MEMORY"); memory != nullptr && *memory != '\0') {
    for (const char* item = memory; item != nullptr; item = std::strchr(item, ',')) {
      if (*item == ',') ++item;
      config.memory.push_back(parse_size(item));
    }
  }
  config.peer = env_long("BP_FAKE_CUDA_PEER", 1) != 0;
  config.fail_call = env_long("BP_FAKE_CUDA_FAIL_CALL", 0);
  if (const char* function = std::getenv("BP_FAKE_CUDA_FAIL_FUNCTION")) config.fail_function = function;
  config.fail_result = static_cast<int>(env_long("BP_FAKE_CUDA_FAIL_RESULT", CUDA_ERROR_UNKNOWN));
  config.sticky_after = env_long("BP_FAKE_CUDA_STICKY_AFTER", 0);
  config.sticky_result = static_cast<int>(env_long("BP_FAKE_CUDA_STICKY_RESULT", CUDA_ERROR_ILLEGAL_ADDRESS));
  config.delay_us = env_long("BP_FAKE_CUDA_OP_DELAY_US", 0);
  return config;
}

std::atomic<bool> initialised_flag{false};
std::atomic<int> context_calls{0};
std::atomic<long> counted_calls{0};
thread_local std::vector<Context*> context_stack;

struct ErrorText {
  CUresult result;
  const char* name;
  const char* text;
};

// The driver's own names and texts for the results the emulator returns or
// a test injects.
constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "peer access is not supported between these two devices"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* find_error(CUresult result) {
  for (const ErrorText& error : kErrors) {
    if (error.result == result) return &error;
  }
  return nullptr;
}

int device_count() { return initialised() ? config().devices : 0; }

}  // namespace

const Config& config() {
  static const Config config = read_config();
  return config;
}

std::uint64_t capacity(int ordinal) {
  const auto& memory = config().memory;
  // The default keeps the ordinal in the total, so tests can tell devices apart.
  if (memory.empty()) return (std::uint64_t{24} << 30) + static_cast<std::uint64_t>(ordinal);
  return memory[std::min<std::size_t>(static_cast<std::size_t>(ordinal), memory.size() - 1)];
}

std::mutex& state_mutex() {
  static std::mutex mutex;
  return mutex;
}

bool initialised() { return initialised_flag.load(); }

CUresult enter(const char* function) {
  ++context_calls;
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  const Config& settings = config();
  if (settings.fail_call > 0 && (settings.fail_function.empty() || settings.fail_function == function) &&
      ++counted_calls == settings.fail_call) {
    return static_cast<CUresult>(settings.fail_result);
  }
  return CUDA_SUCCESS;
}

Context* primary_context(int device) {
  if (device < 0 || device >= device_count()) return nullptr;
  static std::vector<Context*> contexts;  // never freed: handles outlive any user
  std::lock_guard lock(state_mutex());
  if (contexts.empty()) {
    for (int ordinal = 0; ordinal < config().devices; ++ordinal) {
      auto* context = new Context;
      context->device = ordinal;
      context->peers.assign(static_cast<std::size_t>(config().devices), false);
      contexts.push_back(context);
    }
  }
  return contexts[static_cast<std::size_t>(device)];
}

bool is_live_context(CUcontext handle) {
  if (handle == nullptr) return false;
  for (int device = 0; device < device_count(); ++device) {
    Context* context = primary_context(device);
    if (reinterpret_cast<CUcontext>(context) == handle) {
      std::lock_guard lock(state_mutex());
      return context->references > 0;
    }
  }
  return false;
}

Context* current_context() { return context_stack.empty() ? nullptr : context_stack.back(); }

CUresult sticky_of(const Context* context) {
  std::lock_guard lock(state_mutex());
  return static_cast<CUresult>(context->sticky);
}

void poison(Context* context, CUresult result) {
  std::lock_guard lock(state_mutex());
  if (context->sticky == 0) context->sticky = result;
}

}  // namespace emulator

using namespace emulator;

extern "C" int bp_fake_cuda_context_calls(void) { return context_calls.load(); }

CUresult cuGetErrorName(CUresult error, const char** name) {
  const ErrorText* known = find_error(error);
  if (known == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *name = known->name;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  const ErrorText* known = find_error(error);
  if (known == nullptr || text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *text = known->text;
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = config().version;
  return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  const auto result = static_cast<CUresult>(config().init_result);
  if (result == CUDA_SUCCESS) initialised_flag.store(true);
  return result;
}

CUresult cuDeviceGetCount(int* count) {
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  *count = device_count();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int size, CUdevice device) {
  if (device < 0 || device >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<std::size_t>(size), "Fake GPU %d", device);
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(std::size_t* bytes, CUdevice device) {
  if (device < 0 || device >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = capacity(device);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (device < 0 || device >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; return CUDA_SUCCESS;
    default: return CUDA_ERROR_NOT_SUPPORTED;
  }
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device) {
  if (device < 0 || device >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  for (int index = 0; index < 16; ++index) uuid->bytes[index] = static_cast<char>(index + 16 * device);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char* bus_id, int size, CUdevice device) {
  if (device < 0 || device >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(bus_id, static_cast<std::size_t>(size), "00000000:%02X:00.0", 0x65 + device);
  return CUDA_SUCCESS;
}

CUresult cuDeviceCanAccessPeer(int* can, CUdevice device, CUdevice peer) {
  if (device < 0 || device >= device_count() || peer < 0 || peer >= device_count()) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *can = device != peer && config().peer ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice device, unsigned int* flags, int* active) {
  Context* context = primary_context(device);
  if (context == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(state_mutex());
  *flags = 0;
  *active = context->references > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* handle, CUdevice device) {
  if (CUresult entered = enter("cuDevicePrimaryCtxRetain"); entered != CUDA_SUCCESS) return entered;
  Context* context = primary_context(device);
  if (context == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(state_mutex());
  ++context->references;
  *handle = reinterpret_cast<CUcontext>(context);
  return CUDA_SUCCESS;
}

// A context whose last reference goes is reset: its sticky error and peer
// mappings go with it. Its memory stays (the real driver frees it; nothing
// here depends on that).
CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  if (CUresult entered = enter("cuDevicePrimaryCtxRelease"); entered != CUDA_SUCCESS) return entered;
  Context* context = primary_context(device);
  if (context == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(state_mutex());
  if (context->references == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--context->references == 0) {
    context->sticky = 0;
    context->peers.assign(context->peers.size(), false);
  }
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext handle) {
  if (CUresult entered = enter("cuCtxPushCurrent"); entered != CUDA_SUCCESS) return entered;
  if (!is_live_context(handle)) return CUDA_ERROR_INVALID_CONTEXT;
  context_stack.push_back(reinterpret_cast<Context*>(handle));
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext* handle) {
  if (CUresult entered = enter("cuCtxPopCurrent"); entered != CUDA_SUCCESS) return entered;
  if (context_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (handle != nullptr) *handle = reinterpret_cast<CUcontext>(context_stack.back());
  context_stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult cuCtxEnablePeerAccess(CUcontext peer_handle, unsigned int flags) {
  if (CUresult entered = enter("cuCtxEnablePeerAccess"); entered != CUDA_SUCCESS) return entered;
  Context* context = current_context();
  if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!is_live_context(peer_handle)) return CUDA_ERROR_INVALID_CONTEXT;
  auto* peer = reinterpret_cast<Context*>(peer_handle);
  if (peer == context || !config().peer) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  std::lock_guard lock(state_mutex());
  if (context->sticky != 0) return static_cast<CUresult>(context->sticky);
  auto enabled = context->peers[static_cast<std::size_t>(peer->device)];
  if (enabled) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  context->peers[static_cast<std::size_t>(peer->device)] = true;
  return CUDA_SUCCESS;
}
