// The CUDA backend; see cuda_backend.hpp for what it implements and promises.
#include "cuda_backend.hpp"

#include "cuda_state.hpp"
#include "widen_kernel.hpp"

#include <backplane/plugin_support.hpp>

#include <dlfcn.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace backplane::cuda {
namespace {

using plugin::Failure;
using plugin::guarded;
using plugin::require_args;

const char* integer_type_name(BP_IntegerType type) {
  switch (type) {
    case BP_INTEGER_U8: return "U8";
    case BP_INTEGER_U16: return "U16";
    case BP_INTEGER_U32: return "U32";
    case BP_INTEGER_I32: return "I32";
    case BP_INTEGER_I64: return "I64";
    default: return "unknown";
  }
}

// -------------------------------------------------------------- handles --

std::mutex& live_backends_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::unordered_set<BP_Backend*>& live_backends() {
  static std::unordered_set<BP_Backend*> backends;
  return backends;
}

bool is_live(BP_Backend* handle) {
  std::lock_guard lock(live_backends_mutex());
  return live_backends().count(handle) != 0;
}

}  // namespace

BP_Backend& backend_of(BP_Backend* handle, const char* call) {
  if (handle == nullptr) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": backend is NULL");
  }
  if (!is_live(handle)) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  std::string(call) + ": backend is not a live cuda backend");
  }
  return *handle;
}

namespace {

BP_Buffer& buffer_of(BP_Backend& backend, BP_Buffer* handle, const char* call, const char* role) {
  std::lock_guard lock(backend.mutex);
  if (handle == nullptr || backend.buffers.count(handle) == 0) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  std::string(call) + ": " + role +
                      (handle == nullptr ? " is NULL" : " is not a live buffer of this backend"));
  }
  return *handle;
}

BP_Event& event_of(BP_Backend& backend, BP_Event* handle, const char* call) {
  std::lock_guard lock(backend.mutex);
  if (handle == nullptr || backend.events.count(handle) == 0) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  std::string(call) + (handle == nullptr ? ": event is NULL"
                                                         : ": event is not a live event of this backend"));
  }
  return *handle;
}

void check_range(const BP_Buffer& buffer, std::uint64_t offset, std::uint64_t size,
                 const char* call, const char* role) {
  if (offset > buffer.size || size > buffer.size - offset) {
    throw Failure(BP_ERROR_OUT_OF_RANGE,
                  std::string(call) + ": " + role + " range of " + std::to_string(size) +
                      " bytes at offset " + std::to_string(offset) + " exceeds the buffer's " +
                      std::to_string(buffer.size) + " bytes");
  }
}

void ensure_probed(BP_Backend& backend) {
  std::lock_guard lock(backend.mutex);
  if (backend.probed) return;
  run_probe(backend);
  backend.probed = true;
}

}  // namespace

// The backend, probed and available, or an UNAVAILABLE error with the reason.
BP_Backend& usable_backend(BP_Backend* handle, const char* call) {
  BP_Backend& backend = backend_of(handle, call);
  require_driver_process(call);
  ensure_probed(backend);
  if (!backend.available) {
    throw Failure(BP_ERROR_UNAVAILABLE,
                  std::string(call) + ": the cuda backend is unavailable: " + backend.reason);
  }
  return backend;
}

namespace {

Device& device_at(BP_Backend& backend, std::int32_t ordinal, const char* call) {
  if (ordinal < 0 || static_cast<std::size_t>(ordinal) >= backend.devices.size()) {
    throw Failure(BP_ERROR_OUT_OF_RANGE,
                  std::string(call) + ": cuda:" + std::to_string(ordinal) +
                      " does not exist (this backend has " +
                      std::to_string(backend.devices.size()) + " devices)");
  }
  return *backend.devices[static_cast<std::size_t>(ordinal)];
}

// ------------------------------------------------------------ first use --

// Once a device has a context, this plugin must stay mapped until exit (the
// static CUDA runtime inside it registered the kernels with the driver):
// re-open ourselves with RTLD_NODELETE so a dlclose cannot unmap us.
void keep_plugin_loaded() {
  static std::once_flag once;
  std::call_once(once, [] {
    static const char anchor = 0;
    Dl_info info{};
    if (dladdr(&anchor, &info) != 0 && info.dli_fname != nullptr) {
      dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    }
  });
}

// The static CUDA runtime in this plugin keeps per-context state (the loaded
// kernel module) in a device's primary context. If the last backend released
// that context the driver would destroy it under the runtime's feet, so the
// first use of a device in the process takes one extra reference that is
// never dropped: the context lives until exit, as it does under PyTorch.
void keep_context_alive(const DriverApi& driver, const Device& device) {
  static std::mutex mutex;
  static std::set<CUdevice> kept;
  std::lock_guard lock(mutex);
  CUcontext context = nullptr;
  if (kept.count(device.handle) == 0 &&
      driver.cuDevicePrimaryCtxRetain(&context, device.handle) == CUDA_SUCCESS) {
    kept.insert(device.handle);
  }
}

}  // namespace

// Retains the device's primary context and creates its stream, once.
Device& start_device(BP_Backend& backend, std::int32_t ordinal, const char* call) {
  Device& device = device_at(backend, ordinal, call);
  const DriverApi& driver = *backend.driver;
  std::lock_guard lock(device.mutex);
  if (device.context != nullptr) return device;
  CUcontext context = nullptr;
  check(driver, driver.cuDevicePrimaryCtxRetain(&context, device.handle),
        "cuDevicePrimaryCtxRetain on " + device.label);
  CUstream stream = nullptr;
  CUresult result = driver.cuCtxPushCurrent(context);
  if (result == CUDA_SUCCESS) {
    result = driver.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
    CUcontext popped = nullptr;
    driver.cuCtxPopCurrent(&popped);
  }
  if (result != CUDA_SUCCESS) {
    driver.cuDevicePrimaryCtxRelease(device.handle);
    check(driver, result, "creating the stream of " + device.label);
  }
  keep_plugin_loaded();
  keep_context_alive(driver, device);
  device.stream = stream;
  device.context = context;
  return device;
}

namespace {

// ----------------------------------------------------------- submission --

// Enqueues work on `device`'s stream (after the work already queued on
// `after`'s stream, when that is another device) and returns an event that
// completes with it. `enqueue` receives the stream and throws on failure.
template <class Enqueue>
CUevent submit(BP_Backend& backend, Device& device, Device* after, Enqueue&& enqueue) {
  const DriverApi& driver = *backend.driver;
  ContextScope scope(driver, device);
  CUevent completion = nullptr;
  check(driver, driver.cuEventCreate(&completion, CU_EVENT_DISABLE_TIMING),
        "cuEventCreate on " + device.label);
  try {
    if (after != nullptr && after != &device) {
      ContextScope other_scope(driver, *after);
      CUevent queued = nullptr;
      check(driver, driver.cuEventCreate(&queued, CU_EVENT_DISABLE_TIMING),
            "cuEventCreate on " + after->label);
      CUresult result = driver.cuEventRecord(queued, after->stream);
      if (result == CUDA_SUCCESS) result = driver.cuStreamWaitEvent(device.stream, queued, 0);
      driver.cuEventDestroy(queued);  // released once the wait no longer needs it
      check(driver, result, "ordering " + device.label + " after " + after->label);
    }
    enqueue(device.stream);
    check(driver, driver.cuEventRecord(completion, device.stream),
          "cuEventRecord on " + device.label);
  } catch (...) {
    driver.cuEventDestroy(completion);
    throw;
  }
  return completion;
}

// Why the widening kernel cannot run on `device` (empty when it can), found
// once per device. A driver that cannot start the CUDA runtime, or a GPU
// this build has no code for, makes every launch fail; answering UNSUPPORTED
// up front lets the caller widen on the host instead of failing transfers.
const std::string& widen_unavailable(BP_Backend& backend, Device& device) {
  std::lock_guard lock(device.mutex);
  if (!device.widen_checked) {
    ContextScope scope(*backend.driver, device);
    const LaunchStatus status = widen_kernel_status();
    if (status.code != 0) {
      device.widen_unavailable = std::string("the widening kernel cannot run on ") + device.label +
                                 " (cudaFuncGetAttributes: " + status.name + ": " + status.text +
                                 "); widen on the host instead";
    }
    device.widen_checked = true;
  }
  return device.widen_unavailable;
}

// Waits for `event`; throws with `operation` named when the work failed.
void wait_for(const DriverApi& driver, CUevent event, const std::string& operation) {
  check(driver, driver.cuEventSynchronize(event), operation);
}

// Hands an async call's event to the caller, or (sync) waits for it here.
BP_Event* finish(BP_Backend& backend, Device& device, CUevent event, std::string operation,
                 bool async) {
  const DriverApi& driver = *backend.driver;
  if (!async) {
    const CUresult result = driver.cuEventSynchronize(event);
    driver.cuEventDestroy(event);
    check(driver, result, operation);
    return nullptr;
  }
  auto handle = std::make_unique<BP_Event>();
  handle->device = &device;
  handle->event = event;
  handle->operation = std::move(operation);
  try {
    std::lock_guard lock(backend.mutex);
    backend.events.insert(handle.get());
  } catch (...) {  // std::bad_alloc: finish the work, then report
    driver.cuEventSynchronize(event);
    driver.cuEventDestroy(event);
    throw;
  }
  return handle.release();
}

// Waits for and releases an event this backend no longer tracks. Never throws.
void release_event(const DriverApi& driver, BP_Event* event) {
  if (event->event != nullptr) {
    driver.cuEventSynchronize(event->event);
    driver.cuEventDestroy(event->event);
  }
  delete event;
}

// Lets `destination` read `source`'s memory directly where the hardware
// allows it; otherwise cuMemcpyPeerAsync stages through the host. Best effort.
void try_enable_peer_access(BP_Backend& backend, Device& destination, Device& source) {
  {
    std::lock_guard lock(backend.mutex);
    if (!backend.peer_pairs_tried.emplace(destination.ordinal, source.ordinal).second) return;
  }
  const DriverApi& driver = *backend.driver;
  int can_access = 0;
  if (driver.cuDeviceCanAccessPeer(&can_access, destination.handle, source.handle) ==
          CUDA_SUCCESS &&
      can_access != 0) {
    // Current context: destination's (we run inside submit). Already enabled
    // (by another backend instance or library) is fine.
    driver.cuCtxEnablePeerAccess(source.context, 0);
  }
}

// ---------------------------------------------------------------- copies --

BP_Error* copy_to_device_impl(BP_CopyToDeviceArgs* args, bool async) {
  const char* call = async ? "copy_to_device_async" : "copy_to_device";
  require_args(args, call);
  BP_Backend& backend = usable_backend(args->backend, call);
  BP_Buffer& destination = buffer_of(backend, args->destination, call, "destination");
  check_range(destination, args->destination_offset, args->size, call, "destination");
  if (args->source == nullptr && args->size != 0) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": source is NULL");
  }
  Device& device = *destination.device;
  std::string operation =
      std::string(call) + " of " + format_bytes(args->size) + " to " + device.label;
  const CUevent event = submit(backend, device, nullptr, [&](CUstream stream) {
    if (args->size == 0) return;
    check(*backend.driver,
          backend.driver->cuMemcpyAsync(destination.address + args->destination_offset,
                                        reinterpret_cast<CUdeviceptr>(args->source),
                                        args->size, stream),
          operation + " (cuMemcpyAsync)");
  });
  args->event = finish(backend, device, event, std::move(operation), async);
  return nullptr;
}

BP_Error* copy_to_host_impl(BP_CopyToHostArgs* args, bool async) {
  const char* call = async ? "copy_to_host_async" : "copy_to_host";
  require_args(args, call);
  BP_Backend& backend = usable_backend(args->backend, call);
  BP_Buffer& source = buffer_of(backend, args->source, call, "source");
  check_range(source, args->source_offset, args->size, call, "source");
  if (args->destination == nullptr && args->size != 0) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": destination is NULL");
  }
  Device& device = *source.device;
  std::string operation =
      std::string(call) + " of " + format_bytes(args->size) + " from " + device.label;
  const CUevent event = submit(backend, device, nullptr, [&](CUstream stream) {
    if (args->size == 0) return;
    check(*backend.driver,
          backend.driver->cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(args->destination),
                                        source.address + args->source_offset, args->size,
                                        stream),
          operation + " (cuMemcpyAsync)");
  });
  args->event = finish(backend, device, event, std::move(operation), async);
  return nullptr;
}

BP_Error* copy_device_to_device_impl(BP_CopyDeviceToDeviceArgs* args, bool async) {
  const char* call = async ? "copy_device_to_device_async" : "copy_device_to_device";
  require_args(args, call);
  BP_Backend& backend = usable_backend(args->backend, call);
  BP_Buffer& source = buffer_of(backend, args->source, call, "source");
  BP_Buffer& destination = buffer_of(backend, args->destination, call, "destination");
  check_range(source, args->source_offset, args->size, call, "source");
  check_range(destination, args->destination_offset, args->size, call, "destination");
  Device& to = *destination.device;
  Device& from = *source.device;
  std::string operation = std::string(call) + " of " + format_bytes(args->size) + " from " +
                          from.label + " to " + to.label;
  const bool peer = &to != &from && source.kind == BP_MEMORY_DEVICE &&
                    destination.kind == BP_MEMORY_DEVICE;
  const DriverApi& driver = *backend.driver;
  const CUevent event = submit(backend, to, &from, [&](CUstream stream) {
    if (args->size == 0) return;
    const CUdeviceptr target = destination.address + args->destination_offset;
    const CUdeviceptr origin = source.address + args->source_offset;
    if (peer) {
      try_enable_peer_access(backend, to, from);
      check(driver,
            driver.cuMemcpyPeerAsync(target, to.context, origin, from.context, args->size, stream),
            operation + " (cuMemcpyPeerAsync)");
    } else {
      check(driver, driver.cuMemcpyAsync(target, origin, args->size, stream),
            operation + " (cuMemcpyAsync)");
    }
  });
  args->event = finish(backend, to, event, std::move(operation), async);
  return nullptr;
}

}  // namespace

// ------------------------------------------------------------------ ABI --

BP_Error* backend_create(BP_BackendCreateArgs* args) {
  return guarded([&]() -> BP_Error* {
    require_args(args, "backend_create");
    if (args->option_count != 0) {
      if (args->options == nullptr) {
        throw Failure(BP_ERROR_INVALID_ARGUMENT, "backend_create: options is NULL");
      }
      const BP_KeyValue& option = args->options[0];
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    "backend_create: the cuda backend has no option '" +
                        std::string(option.key, option.key_size) + "'");
    }
    auto backend = std::make_unique<BP_Backend>();
    std::lock_guard lock(live_backends_mutex());
    live_backends().insert(backend.get());
    args->backend = backend.release();
    return nullptr;
  });
}

void backend_destroy(BP_Backend* handle) {
  {
    std::lock_guard lock(live_backends_mutex());
    if (handle == nullptr || live_backends().erase(handle) == 0) return;
  }
  std::unique_ptr<BP_Backend> backend(handle);
  if (backend->driver == nullptr) return;  // never available: nothing to release
  // In a child the contexts, memory and events are the parent's: only the
  // bookkeeping is freed here.
  if (driver_forked()) return;
  const DriverApi& driver = *backend->driver;
  for (BP_Event* event : backend->events) release_event(driver, event);
  for (BP_Buffer* buffer : backend->buffers) {
    try {
      release_buffer(driver, buffer);
    } catch (...) {  // destroy reports nothing; the memory goes with the context
    }
  }
  for (const auto& device : backend->devices) {
    if (device->context == nullptr) continue;
    if (driver.cuCtxPushCurrent(device->context) == CUDA_SUCCESS) {
      driver.cuStreamSynchronize(device->stream);
      driver.cuStreamDestroy(device->stream);
      CUcontext popped = nullptr;
      driver.cuCtxPopCurrent(&popped);
    }
    driver.cuDevicePrimaryCtxRelease(device->handle);
  }
}

BP_Error* probe(BP_ProbeArgs* args) {
  return guarded([&]() -> BP_Error* {
    require_args(args, "probe");
    BP_Backend& backend = backend_of(args->backend, "probe");
    ensure_probed(backend);
    if (driver_forked()) {  // probed in the parent: its answer no longer holds
      static const std::string forked = forked_driver_message();
      args->available = 0;
      args->reason = forked.data();
      args->reason_size = forked.size();
      return nullptr;
    }
    args->available = backend.available ? 1 : 0;
    args->reason = backend.reason.data();
    args->reason_size = backend.reason.size();
    return nullptr;
  });
}

BP_Error* device_count(BP_DeviceCountArgs* args) {
  return guarded([&]() -> BP_Error* {
    require_args(args, "device_count");
    BP_Backend& backend = backend_of(args->backend, "device_count");
    ensure_probed(backend);
    args->count = static_cast<std::int32_t>(backend.devices.size());
    return nullptr;
  });
}

BP_Error* device_info(BP_DeviceInfoArgs* args) {
  return guarded([&]() -> BP_Error* {
    require_args(args, "device_info");
    BP_Backend& backend = backend_of(args->backend, "device_info");
    ensure_probed(backend);
    require_driver_process("device_info");
    Device& device = device_at(backend, args->ordinal, "device_info");
    const DriverApi& driver = *backend.driver;

    // Free memory needs a context. Use ours once the device is in use, or the
    // primary context when someone in the process (another library) already
    // holds it active; otherwise report total as free rather than create a
    // context just to ask (probe and info must not initialise devices).
    std::uint64_t memory_free = device.memory_total;
    unsigned int flags = 0;
    int active = 0;
    CUcontext context = nullptr;
    {
      std::lock_guard lock(device.mutex);
      context = device.context;
    }
    const bool borrow = context == nullptr &&
                        driver.cuDevicePrimaryCtxGetState(device.handle, &flags, &active) ==
                            CUDA_SUCCESS &&
                        active != 0 &&
                        driver.cuDevicePrimaryCtxRetain(&context, device.handle) == CUDA_SUCCESS;
    if (context != nullptr && driver.cuCtxPushCurrent(context) == CUDA_SUCCESS) {
      std::size_t free_bytes = 0;
      std::size_t total_bytes = 0;
      if (driver.cuMemGetInfo(&free_bytes, &total_bytes) == CUDA_SUCCESS) {
        memory_free = free_bytes;
      }
      CUcontext popped = nullptr;
      driver.cuCtxPopCurrent(&popped);
    }
    if (borrow) driver.cuDevicePrimaryCtxRelease(device.handle);

    args->name = device.name.data();
    args->name_size = device.name.size();
    args->kind = BP_DEVICE_KIND_GPU;
    args->memory_total = device.memory_total;
    args->memory_free = memory_free;
    args->attributes = device.attributes.data();
    args->attribute_count = device.attributes.size();
    return nullptr;
  });
}

BP_Error* copy_to_device(BP_CopyToDeviceArgs* args) {
  return guarded([&] { return copy_to_device_impl(args, false); });
}
BP_Error* copy_to_host(BP_CopyToHostArgs* args) {
  return guarded([&] { return copy_to_host_impl(args, false); });
}
BP_Error* copy_device_to_device(BP_CopyDeviceToDeviceArgs* args) {
  return guarded([&] { return copy_device_to_device_impl(args, false); });
}
BP_Error* copy_to_device_async(BP_CopyToDeviceArgs* args) {
  return guarded([&] { return copy_to_device_impl(args, true); });
}
BP_Error* copy_to_host_async(BP_CopyToHostArgs* args) {
  return guarded([&] { return copy_to_host_impl(args, true); });
}
BP_Error* copy_device_to_device_async(BP_CopyDeviceToDeviceArgs* args) {
  return guarded([&] { return copy_device_to_device_impl(args, true); });
}

BP_Error* event_wait(BP_EventArgs* args) {
  return guarded([&]() -> BP_Error* {
    require_args(args, "event_wait");
    BP_Backend& backend = backend_of(args->backend, "event_wait");
    require_driver_process("event_wait");
    BP_Event& event = event_of(backend, args->event, "event_wait");
    wait_for(*backend.driver, event.event, event.operation);
    return nullptr;
  });
}

// done = 1 once the work finished, successfully or not; event_wait reports
// how it ended.
BP_Error* event_query(BP_EventArgs* args) {
  return guarded([&]() -> BP_Error* {
    require_args(args, "event_query");
    BP_Backend& backend = backend_of(args->backend, "event_query");
    require_driver_process("event_query");
    BP_Event& event = event_of(backend, args->event, "event_query");
    args->done = backend.driver->cuEventQuery(event.event) == CUDA_ERROR_NOT_READY ? 0 : 1;
    return nullptr;
  });
}

void event_destroy(BP_Backend* handle, BP_Event* event) {
  if (handle == nullptr || event == nullptr || !is_live(handle)) return;
  if (driver_forked()) return;  // the parent's event: leaked, the driver must not be called
  {
    std::lock_guard lock(handle->mutex);
    if (handle->events.erase(event) == 0) return;  // not ours: nothing to release
  }
  release_event(*handle->driver, event);
}

BP_Error* convert_integers(BP_ConvertIntegersArgs* args) {
  return guarded([&]() -> BP_Error* {
    const char* call = "convert_integers";
    require_args(args, call);
    BP_Backend& backend = usable_backend(args->backend, call);
    BP_Buffer& source = buffer_of(backend, args->source, call, "source");
    BP_Buffer& destination = buffer_of(backend, args->destination, call, "destination");
    const std::string pair = std::string(integer_type_name(args->source_type)) + " to " +
                             integer_type_name(args->destination_type);
    if (!widen_supported(args->source_type, args->destination_type)) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    std::string(call) + ": cannot widen " + pair +
                        " (supported: U8 -> U16/U32/I32/I64, U16 -> U32/I32/I64, U32 -> I64)");
    }
    if (source.kind != BP_MEMORY_DEVICE || destination.kind != BP_MEMORY_DEVICE ||
        source.device != destination.device) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    std::string(call) + ": source and destination must be device memory of "
                                        "the same device");
    }
    const std::uint64_t source_element = integer_type_size(args->source_type);
    const std::uint64_t destination_element = integer_type_size(args->destination_type);
    if (args->count > UINT64_MAX / destination_element) {
      throw Failure(BP_ERROR_OUT_OF_RANGE,
                    std::string(call) + ": count " + std::to_string(args->count) + " is too large");
    }
    const std::uint64_t source_bytes = args->count * source_element;
    const std::uint64_t destination_bytes = args->count * destination_element;
    check_range(source, args->source_offset, source_bytes, call, "source");
    check_range(destination, args->destination_offset, destination_bytes, call, "destination");
    if (args->source_offset % source_element != 0 ||
        args->destination_offset % destination_element != 0) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    std::string(call) + ": offsets must be multiples of the element sizes");
    }
    if (&source == &destination && args->count != 0 &&
        args->source_offset < args->destination_offset + destination_bytes &&
        args->destination_offset < args->source_offset + source_bytes) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    std::string(call) + ": source and destination ranges overlap");
    }
    Device& device = *source.device;
    if (const std::string& unavailable = widen_unavailable(backend, device); !unavailable.empty()) {
      throw Failure(BP_ERROR_UNSUPPORTED, std::string(call) + ": " + unavailable);
    }
    std::string operation = std::string(call) + " of " + std::to_string(args->count) + " " +
                            pair + " on " + device.label;
    const CUevent event = submit(backend, device, nullptr, [&](CUstream stream) {
      const LaunchStatus status = launch_widen(
          reinterpret_cast<const void*>(source.address + args->source_offset), args->source_type,
          reinterpret_cast<void*>(destination.address + args->destination_offset),
          args->destination_type, args->count, stream);
      if (status.code != 0) {
        throw Failure(BP_ERROR_DEVICE, operation + " failed: kernel launch: " + status.name +
                                           ": " + status.text);
      }
    });
    args->event = finish(backend, device, event, std::move(operation), true);
    return nullptr;
  });
}

}  // namespace backplane::cuda
