// The CUDA backend's devices, copies, conversions and events; memory is in
// cuda_memory.cu, probe in cuda_probe.cu. The SDK has checked every handle,
// ordinal, range and pointer before a hook runs.
#include "cuda_backend.hpp"

#include "cuda_state.hpp"
#include "widen_kernel.hpp"

#include <dlfcn.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace backplane::cuda {
namespace {

using sdk::Failure;
using sdk::format_bytes;
using sdk::integer_type_name;
using sdk::monotonic_ns;

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
  if (kept.count(device.handle) == 0 && driver.cuDevicePrimaryCtxRetain(&context, device.handle) == CUDA_SUCCESS) {
    kept.insert(device.handle);
  }
}

// cuEventElapsedTime answers float milliseconds: 24 bits of mantissa, a
// microsecond's resolution up to about 16 s from the reference. A reference
// is replaced well before that.
constexpr std::int64_t kReferenceLifetimeNs = 8'000'000'000;
// A reference's host time is known to within its bracket of clock readings;
// one wider than this is measured again, at most kReferenceAttempts times.
constexpr std::int64_t kTightBracketNs = 200'000;
constexpr int kReferenceAttempts = 8;

// The device's timing reference, made anew when it is missing or old. With
// the device's context current. Making one waits for the device's stream to
// drain, so that the reference event completes the moment it is recorded:
// its host time is then bracketed by the clock readings around the record
// and its synchronisation. This costs a stall every few seconds, and only
// while timing is requested (a trace is recorded).
std::shared_ptr<TimingReference> timing_reference(const DriverApi& driver, Device& device) {
  const std::lock_guard lock(device.timing_mutex);
  if (device.reference != nullptr && monotonic_ns() - device.reference->host_ns < kReferenceLifetimeNs) {
    return device.reference;
  }
  auto reference = std::make_shared<TimingReference>();
  reference->driver = &driver;
  check(driver, driver.cuEventCreate(&reference->event, CU_EVENT_DEFAULT), "cuEventCreate on " + device.label);
  check(driver, driver.cuStreamSynchronize(device.stream), "cuStreamSynchronize on " + device.label);
  // A thread descheduled between the readings widens the bracket: record
  // again (the event keeps its last recording) until it is tight.
  for (int attempt = 0; attempt < kReferenceAttempts; ++attempt) {
    const std::int64_t before = monotonic_ns();
    check(driver, driver.cuEventRecord(reference->event, device.stream), "cuEventRecord on " + device.label);
    check(driver, driver.cuEventSynchronize(reference->event), "cuEventSynchronize on " + device.label);
    const std::int64_t after = monotonic_ns();
    reference->host_ns = before + (after - before) / 2;
    reference->uncertainty_ns = after - before;
    if (reference->uncertainty_ns <= kTightBracketNs) break;
  }
  device.reference = reference;
  return reference;
}

// Enqueues work on `device`'s stream (after the work already queued on
// `after`'s stream, when that is another device) and returns an event that
// completes with it. `enqueue` receives the stream and throws on failure.
// When the caller asked for device time, the work is bracketed by two timing
// events instead of one that does not time.
template <class Enqueue>
std::unique_ptr<CudaBackend::Event> submit(const DriverApi& driver, Device& device, Device* after,
                                           const Operation& operation, Enqueue&& enqueue) {
  ContextScope scope(driver, device);
  auto event = std::make_unique<CudaBackend::Event>();
  event->driver = &driver;
  event->operation = operation;
  const bool timed = sdk::timing_requested();
  const unsigned int flags = timed ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING;
  const auto on_device = [&](const char* call) { return [&device, call] { return call + (" on " + device.label); }; };
  check(driver, driver.cuEventCreate(&event->event, flags), on_device("cuEventCreate"));
  if (after != nullptr && after != &device) {
    ContextScope other_scope(driver, *after);
    order_after(driver, device, after->stream, after->label, after->label);
  }
  if (timed) {
    event->reference = timing_reference(driver, device);
    check(driver, driver.cuEventCreate(&event->start, CU_EVENT_DEFAULT), on_device("cuEventCreate"));
    check(driver, driver.cuEventRecord(event->start, device.stream), on_device("cuEventRecord"));
  }
  enqueue(device.stream);
  check(driver, driver.cuEventRecord(event->event, device.stream), on_device("cuEventRecord"));
  return event;
}

// Why the widening kernel cannot run on `device` (empty when it can), found
// once per device. A driver that cannot start the CUDA runtime, or a GPU
// this build has no code for, makes every launch fail; answering UNSUPPORTED
// up front lets the caller widen on the host instead of failing transfers.
const std::string& widen_unavailable(const DriverApi& driver, Device& device) {
  std::lock_guard lock(device.mutex);
  if (!device.widen_checked) {
    ContextScope scope(driver, device);
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

CUdeviceptr device_pointer(const void* address) { return reinterpret_cast<CUdeviceptr>(address); }

// Host <-> device: under unified addressing one cuMemcpyAsync serves both
// directions, on the device's stream.
std::unique_ptr<CudaBackend::Event> copy_with_host(const DriverApi& driver, Device& device, CUdeviceptr target,
                                                   CUdeviceptr origin, const Operation& operation) {
  return submit(driver, device, nullptr, operation, [&](CUstream stream) {
    if (operation.amount == 0) return;
    check(driver, driver.cuMemcpyAsync(target, origin, operation.amount, stream),
          [&] { return operation.text() + " (cuMemcpyAsync)"; });
  });
}

}  // namespace

std::string Operation::text() const {
  const std::string call_name = std::string(call) + (mode == sdk::Mode::kAsync ? "_async" : "");
  if (std::string_view(call) == "convert_integers") {
    return call_name + " of " + std::to_string(amount) + " " + integer_type_name(source_type) + " to " +
           integer_type_name(destination_type) + " on " + to->label;
  }
  std::string text = call_name + " of " + format_bytes(amount);
  if (from != nullptr) text += " from " + from->label;
  if (to != nullptr) text += " to " + to->label;
  return text;
}

void order_after(const DriverApi& driver, const Device& waiting, CUstream producer, const std::string& context_label,
                 const std::string& producer_name) {
  CUevent queued = nullptr;
  check(driver, driver.cuEventCreate(&queued, CU_EVENT_DISABLE_TIMING),
        [&] { return "cuEventCreate on " + context_label; });
  CUresult result = driver.cuEventRecord(queued, producer);
  if (result == CUDA_SUCCESS) result = driver.cuStreamWaitEvent(waiting.stream, queued, 0);
  driver.cuEventDestroy(queued);  // released once the wait no longer needs it
  check(driver, result, [&] { return "ordering " + waiting.label + " after " + producer_name; });
}

// ------------------------------------------------------------- lifetime --

CudaBackend::CudaBackend() = default;

CudaBackend::~CudaBackend() {
  // In a child the contexts are the parent's: only the bookkeeping goes.
  if (driver_ == nullptr || driver_forked()) return;
  const DriverApi& driver = *driver_;
  for (Device& device : devices_) {
    if (!device.started()) continue;
    if (driver.cuCtxPushCurrent(device.context) == CUDA_SUCCESS) {
      driver.cuStreamSynchronize(device.stream);
      driver.cuStreamDestroy(device.stream);
      CUcontext popped = nullptr;
      driver.cuCtxPopCurrent(&popped);
    }
    driver.cuDevicePrimaryCtxRelease(device.handle);
  }
}

std::unique_ptr<CudaBackend> CudaBackend::create(const sdk::Options& options) {
  options.allow_only({});
  return std::make_unique<CudaBackend>();
}

CudaBackend::Event::~Event() {
  if (event == nullptr || driver_forked()) return;  // a parent's event: the driver must not be called
  driver->cuEventSynchronize(event);
  driver->cuEventDestroy(event);
  if (start != nullptr) driver->cuEventDestroy(start);
}

TimingReference::~TimingReference() {
  if (event != nullptr && !driver_forked()) driver->cuEventDestroy(event);
}

std::string_view CudaBackend::refusal() {
  if (!driver_forked()) return {};
  static const std::string message = forked_driver_message();
  return message;
}

sdk::Probe CudaBackend::probe() {
  ProbeResult result = run_probe();
  driver_ = result.driver;
  devices_.assign(std::move(result.devices));
  return std::move(result.probe);
}

std::int32_t CudaBackend::device_count() { return devices_.count(); }

sdk::DeviceDescription CudaBackend::describe(std::int32_t ordinal) {
  const Device& device = devices_.at(ordinal);
  return {device.name, BP_DEVICE_KIND_GPU, device.attributes};
}

// Free memory needs a context. Use ours once the device is in use, or the
// primary context when someone in the process (another library) already
// holds it active; otherwise free is unknown rather than a context created
// just to ask (probe and info must not initialise devices).
sdk::MemoryFigures CudaBackend::memory(std::int32_t ordinal) {
  Device& device = devices_.at(ordinal);
  const DriverApi& driver = *driver_;
  sdk::MemoryFigures memory{device.memory_total, std::nullopt};
  unsigned int flags = 0;
  int active = 0;
  CUcontext context = device.started() ? device.context : nullptr;
  const bool borrow = context == nullptr &&
                      driver.cuDevicePrimaryCtxGetState(device.handle, &flags, &active) == CUDA_SUCCESS &&
                      active != 0 && driver.cuDevicePrimaryCtxRetain(&context, device.handle) == CUDA_SUCCESS;
  if (context != nullptr && driver.cuCtxPushCurrent(context) == CUDA_SUCCESS) {
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    if (driver.cuMemGetInfo(&free_bytes, &total_bytes) == CUDA_SUCCESS) memory.free = free_bytes;
    CUcontext popped = nullptr;
    driver.cuCtxPopCurrent(&popped);
  }
  if (borrow) driver.cuDevicePrimaryCtxRelease(device.handle);
  return memory;
}

Device& CudaBackend::start_device(std::int32_t ordinal) {
  return devices_.start(ordinal, [this](Device& device) {
    const DriverApi& driver = *driver_;
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
  });
}

void CudaBackend::try_enable_peer_access(Device& destination, Device& source) {
  {
    std::lock_guard lock(peer_mutex_);
    if (!peer_pairs_tried_.emplace(destination.ordinal, source.ordinal).second) return;
  }
  const DriverApi& driver = *driver_;
  int can_access = 0;
  if (driver.cuDeviceCanAccessPeer(&can_access, destination.handle, source.handle) == CUDA_SUCCESS && can_access != 0) {
    // Current context: destination's (we run inside submit). Already enabled
    // (by another backend instance or library) is fine.
    driver.cuCtxEnablePeerAccess(source.context, 0);
  }
}

// --------------------------------------------------------------- copies --

std::unique_ptr<CudaBackend::Event> CudaBackend::copy_to_device(Buffer& destination, std::uint64_t offset,
                                                                const void* source, std::uint64_t size,
                                                                sdk::Mode mode) {
  const Operation operation{.call = "copy_to_device", .mode = mode, .amount = size, .to = destination.device};
  return copy_with_host(*driver_, *destination.device, device_pointer(destination.address) + offset,
                        device_pointer(source), operation);
}

std::unique_ptr<CudaBackend::Event> CudaBackend::copy_to_host(Buffer& source, std::uint64_t offset, void* destination,
                                                              std::uint64_t size, sdk::Mode mode) {
  const Operation operation{.call = "copy_to_host", .mode = mode, .amount = size, .from = source.device};
  return copy_with_host(*driver_, *source.device, device_pointer(destination), device_pointer(source.address) + offset,
                        operation);
}

std::unique_ptr<CudaBackend::Event> CudaBackend::copy_device_to_device(Buffer& source, std::uint64_t source_offset,
                                                                       Buffer& destination,
                                                                       std::uint64_t destination_offset,
                                                                       std::uint64_t size, sdk::Mode mode) {
  const DriverApi& driver = *driver_;
  Device& to = *destination.device;
  Device& from = *source.device;
  const Operation operation{.call = "copy_device_to_device", .mode = mode, .amount = size, .from = &from, .to = &to};
  const bool peer = &to != &from && source.kind == BP_MEMORY_DEVICE && destination.kind == BP_MEMORY_DEVICE;
  return submit(driver, to, &from, operation, [&](CUstream stream) {
    if (size == 0) return;
    const CUdeviceptr target = device_pointer(destination.address) + destination_offset;
    const CUdeviceptr origin = device_pointer(source.address) + source_offset;
    if (peer) {
      try_enable_peer_access(to, from);
      check(driver, driver.cuMemcpyPeerAsync(target, to.context, origin, from.context, size, stream),
            [&] { return operation.text() + " (cuMemcpyPeerAsync)"; });
    } else {
      check(driver, driver.cuMemcpyAsync(target, origin, size, stream),
            [&] { return operation.text() + " (cuMemcpyAsync)"; });
    }
  });
}

// ----------------------------------------------------------- conversion --

std::unique_ptr<CudaBackend::Event> CudaBackend::convert_integers(Buffer& source, std::uint64_t source_offset,
                                                                  BP_IntegerType source_type, Buffer& destination,
                                                                  std::uint64_t destination_offset,
                                                                  BP_IntegerType destination_type,
                                                                  std::uint64_t count) {
  const char* call = "convert_integers";
  if (!widen_supported(source_type, destination_type)) {
    const std::string pair = std::string(integer_type_name(source_type)) + " to " + integer_type_name(destination_type);
    throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": cannot widen " + pair +
                                                 " (supported: U8 -> U16/U32/I32/I64, U16 -> U32/I32/I64, U32 -> I64)");
  }
  if (source.kind != BP_MEMORY_DEVICE || destination.kind != BP_MEMORY_DEVICE || source.device != destination.device) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  std::string(call) + ": source and destination must be device memory of the same device");
  }
  const std::uint64_t source_element = integer_type_size(source_type);
  const std::uint64_t destination_element = integer_type_size(destination_type);
  if (source_offset % source_element != 0 || destination_offset % destination_element != 0) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": offsets must be multiples of the element sizes");
  }
  const std::uint64_t source_bytes = count * source_element;  // the SDK checked that these fit
  const std::uint64_t destination_bytes = count * destination_element;
  if (&source == &destination && count != 0 && source_offset < destination_offset + destination_bytes &&
      destination_offset < source_offset + source_bytes) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": source and destination ranges overlap");
  }
  const DriverApi& driver = *driver_;
  Device& device = *source.device;
  if (const std::string& unavailable = widen_unavailable(driver, device); !unavailable.empty()) {
    throw Failure(BP_ERROR_UNSUPPORTED, std::string(call) + ": " + unavailable);
  }
  const Operation operation{
      .call = call, .amount = count, .to = &device, .source_type = source_type, .destination_type = destination_type};
  return submit(driver, device, nullptr, operation, [&](CUstream stream) {
    const LaunchStatus status = launch_widen(static_cast<const std::byte*>(source.address) + source_offset, source_type,
                                             static_cast<std::byte*>(destination.address) + destination_offset,
                                             destination_type, count, stream);
    if (status.code != 0) {
      throw Failure(BP_ERROR_DEVICE, operation.text() + " failed: kernel launch: " + status.name + ": " + status.text);
    }
  });
}

// --------------------------------------------------------------- events --

void CudaBackend::wait(Event& event) {
  check(*event.driver, event.driver->cuEventSynchronize(event.event), [&] { return event.operation.text(); });
}

// True once the work finished, successfully or not; wait reports how it ended.
bool CudaBackend::query(Event& event) { return event.driver->cuEventQuery(event.event) != CUDA_ERROR_NOT_READY; }

std::optional<sdk::DeviceSpan> CudaBackend::timing(Event& event) {
  if (event.start == nullptr) return std::nullopt;
  const DriverApi& driver = *event.driver;
  float since_reference_ms = 0;
  float duration_ms = 0;
  check(driver, driver.cuEventElapsedTime(&since_reference_ms, event.reference->event, event.start),
        [&] { return "cuEventElapsedTime for the start of " + event.operation.text(); });
  check(driver, driver.cuEventElapsedTime(&duration_ms, event.start, event.event),
        [&] { return "cuEventElapsedTime for " + event.operation.text(); });
  const auto begin =
      event.reference->host_ns + static_cast<std::int64_t>(static_cast<double>(since_reference_ms) * 1e6);
  return sdk::DeviceSpan{begin, begin + static_cast<std::int64_t>(static_cast<double>(duration_ms) * 1e6)};
}

}  // namespace backplane::cuda
