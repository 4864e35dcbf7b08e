// The OpenCL backend's hooks. The SDK has checked every handle, ordinal,
// range and pointer before a hook runs; what is left here is OpenCL.
#include "opencl_backend.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace backplane::opencl {
namespace {

using sdk::Failure;
using sdk::format_bytes;
using sdk::monotonic_ns;

const char* type_name(cl_device_type type) {
  if ((type & CL_DEVICE_TYPE_GPU) != 0) return "GPU";
  if ((type & CL_DEVICE_TYPE_ACCELERATOR) != 0) return "ACCELERATOR";
  if ((type & CL_DEVICE_TYPE_CPU) != 0) return "CPU";
  if ((type & CL_DEVICE_TYPE_CUSTOM) != 0) return "CUSTOM";
  return "UNKNOWN";
}

BP_DeviceKind kind_of(cl_device_type type) {
  if ((type & CL_DEVICE_TYPE_GPU) != 0) return BP_DEVICE_KIND_GPU;
  if ((type & CL_DEVICE_TYPE_CPU) != 0) return BP_DEVICE_KIND_CPU;
  return BP_DEVICE_KIND_ACCELERATOR;
}

// The widening pairs, each an OpenCL C kernel: a destination type that holds
// every source value.
struct Widening {
  BP_IntegerType source;
  BP_IntegerType destination;
  const char* kernel;
};
constexpr Widening kWidenings[] = {
    {BP_INTEGER_U8, BP_INTEGER_U16, "widen_u8_u16"},   {BP_INTEGER_U8, BP_INTEGER_U32, "widen_u8_u32"},
    {BP_INTEGER_U8, BP_INTEGER_I32, "widen_u8_i32"},   {BP_INTEGER_U8, BP_INTEGER_I64, "widen_u8_i64"},
    {BP_INTEGER_U16, BP_INTEGER_U32, "widen_u16_u32"}, {BP_INTEGER_U16, BP_INTEGER_I32, "widen_u16_i32"},
    {BP_INTEGER_U16, BP_INTEGER_I64, "widen_u16_i64"}, {BP_INTEGER_U32, BP_INTEGER_I64, "widen_u32_i64"},
};

// Indices are element counts; each work item strides over the range, so the
// global size stays small on CPU devices.
constexpr char kWidenSource[] = R"CL(
#define WIDEN(NAME, S, D)                                                          \
  __kernel void NAME(__global const S* source, ulong source_index,                 \
                     __global D* destination, ulong destination_index, ulong count) { \
    for (ulong i = get_global_id(0); i < count; i += get_global_size(0))           \
      destination[destination_index + i] = (D)source[source_index + i];            \
  }
WIDEN(widen_u8_u16, uchar, ushort)
WIDEN(widen_u8_u32, uchar, uint)
WIDEN(widen_u8_i32, uchar, int)
WIDEN(widen_u8_i64, uchar, long)
WIDEN(widen_u16_u32, ushort, uint)
WIDEN(widen_u16_i32, ushort, int)
WIDEN(widen_u16_i64, ushort, long)
WIDEN(widen_u32_i64, uint, long)
)CL";

const char* kSupportedWidenings = "U8 -> U16/U32/I32/I64, U16 -> U32/I32/I64, U32 -> I64";

}  // namespace

std::string Operation::text() const {
  if (std::string_view(call) == "convert_integers") {
    return std::string(call) + " " + sdk::integer_type_name(source_type) + " to " +
           sdk::integer_type_name(destination_type) + " of " + std::to_string(amount) + " elements on " + device->label;
  }
  std::string text = std::string(call) + " of " + format_bytes(amount) + " " + preposition + " " + device->label;
  if (origin != nullptr) text += " (from " + origin->label + ")";
  return text;
}

// The destructors check for fork themselves: refusal() stops calls, but
// memory_free, event_destroy and backend_destroy still run in a child, and
// there the driver objects are the parent's.
OpenclBackend::Buffer::~Buffer() {
  if (memory == nullptr || forked()) return;  // in a child the memory is the parent's
  if (address != nullptr) api->clEnqueueUnmapMemObject(device->queue, memory, address, 0, nullptr, nullptr);
  api->clReleaseMemObject(memory);  // OpenCL frees it once queued work using it completes
}

OpenclBackend::Event::~Event() {
  if (event == nullptr || forked()) return;
  api->clWaitForEvents(1, &event);
  api->clReleaseEvent(event);
}

OpenclBackend::~OpenclBackend() {
  if (forked()) return;
  for (Device& device : devices_) {
    for (const auto& [pair, kernel] : device.widen_kernels) api_->clReleaseKernel(kernel);
    if (device.widen_program != nullptr) api_->clReleaseProgram(device.widen_program);
    if (device.queue != nullptr) {
      api_->clFinish(device.queue);
      api_->clReleaseCommandQueue(device.queue);
    }
    if (device.context != nullptr) api_->clReleaseContext(device.context);
  }
}

std::unique_ptr<OpenclBackend> OpenclBackend::create(const sdk::Options& options) {
  options.allow_only({"library", "build_options"});
  const std::string_view* library = options.find("library");
  if (library != nullptr && library->empty()) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  "opencl: option library = \"\" is invalid: expected the path of an OpenCL ICD loader");
  }
  const std::string_view* build_options = options.find("build_options");
  return std::make_unique<OpenclBackend>(library != nullptr ? std::string(*library) : std::string(kLoaderLibrary),
                                         build_options != nullptr ? std::string(*build_options) : std::string());
}

std::string_view OpenclBackend::refusal() {
  if (!forked()) return {};
  static const std::string message = forked_message();
  return message;
}

sdk::DeviceDescription OpenclBackend::describe(std::int32_t ordinal) {
  const Device& device = devices_.at(ordinal);
  return {device.name,
          kind_of(device.type),
          {{"vendor", device.vendor},
           {"platform", device.platform_name},
           {"opencl_version", device.opencl_version},
           {"driver_version", device.driver_version},
           {"device_type", type_name(device.type)},
           {"global_memory_size", std::to_string(device.global_memory)},
           {"max_allocation_size", std::to_string(device.max_allocation)},
           {"compute_units", std::to_string(device.compute_units)}}};
}

// OpenCL has no portable free-memory query, and total less what this backend
// holds would miss every other user of the device: free is unknown.
sdk::MemoryFigures OpenclBackend::memory(std::int32_t ordinal) {
  return {devices_.at(ordinal).global_memory, std::nullopt};
}

Device& OpenclBackend::start(Device& device, const char* call) {
  return devices_.start(device, [&](Device& starting) {
    const cl_context_properties properties[] = {CL_CONTEXT_PLATFORM,
                                                reinterpret_cast<cl_context_properties>(starting.platform), 0};
    cl_int result = CL_SUCCESS;
    // A context made by an earlier try whose queue failed is kept for the next.
    if (starting.context == nullptr) {
      starting.context = api_->clCreateContext(properties, 1, &starting.id, nullptr, nullptr, &result);
      check(result, std::string(call) + ": clCreateContext on " + starting.label);
    }
    // In order, so that work on one device completes in submission order.
    starting.queue = api_->clCreateCommandQueue(starting.context, starting.id, CL_QUEUE_PROFILING_ENABLE, &result);
    check(result, std::string(call) + ": clCreateCommandQueue on " + starting.label);
  });
}

std::unique_ptr<OpenclBackend::Event> OpenclBackend::track(Device& device, cl_event event, const Operation& operation) {
  auto tracked = std::make_unique<Event>();
  tracked->api = api_;
  tracked->event = event;
  tracked->operation = operation;
  if (sdk::timing_requested()) tracked->timed_on = &device;
  return tracked;
}

std::unique_ptr<OpenclBackend::Buffer> OpenclBackend::allocate(std::int32_t ordinal, BP_MemoryKind kind,
                                                               std::uint64_t size) {
  Device& device = start(devices_.at(ordinal), "memory_allocate");
  const bool pinned = kind == BP_MEMORY_PINNED_HOST;
  // OpenCL has no empty buffers: size 0 holds one byte nobody copies.
  const std::uint64_t bytes = std::max<std::uint64_t>(size, 1);
  const auto what = [&] {
    return std::string("clCreateBuffer") + (pinned ? "(CL_MEM_ALLOC_HOST_PTR)" : "") + " of " + format_bytes(size) +
           " on " + device.label;
  };
  if (bytes > SIZE_MAX) throw Failure(BP_ERROR_OUT_OF_MEMORY, what() + " failed: larger than the address space");
  cl_int result = CL_SUCCESS;
  const cl_mem_flags flags = CL_MEM_READ_WRITE | (pinned ? CL_MEM_ALLOC_HOST_PTR : 0);
  cl_mem memory = api_->clCreateBuffer(device.context, flags, static_cast<std::size_t>(bytes), nullptr, &result);
  if (result == CL_INVALID_BUFFER_SIZE && bytes > device.max_allocation) {
    throw Failure(BP_ERROR_OUT_OF_MEMORY, what() + " failed: CL_INVALID_BUFFER_SIZE (" + device.label +
                                              " allocates at most " + format_bytes(device.max_allocation) +
                                              " at once)");
  }
  check(result, what);
  auto buffer = std::make_unique<Buffer>();
  buffer->ordinal = ordinal;
  buffer->kind = kind;
  buffer->size = size;
  buffer->api = api_;
  buffer->device = &device;
  buffer->memory = memory;
  if (pinned) {
    // Mapped for the buffer's whole life: the mapped pointer is its address.
    void* mapped = api_->clEnqueueMapBuffer(device.queue, memory, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                            static_cast<std::size_t>(bytes), 0, nullptr, nullptr, &result);
    check(result,
          [&] { return "clEnqueueMapBuffer of " + format_bytes(size) + " of pinned host memory on " + device.label; });
    buffer->address = mapped;
  }
  return buffer;
}

std::unique_ptr<OpenclBackend::Event> OpenclBackend::copy_to_device(Buffer& destination, std::uint64_t offset,
                                                                    const void* source, std::uint64_t size, sdk::Mode) {
  if (size == 0) return nullptr;
  if (destination.address != nullptr) {  // pinned host memory: mapped, so written directly
    std::memmove(static_cast<std::byte*>(destination.address) + offset, source, size);
    return nullptr;
  }
  Device& device = *destination.device;
  const Operation what{.call = "clEnqueueWriteBuffer", .amount = size, .preposition = "to", .device = &device};
  cl_event event = nullptr;
  check(
      api_->clEnqueueWriteBuffer(device.queue, destination.memory, CL_FALSE, offset, size, source, 0, nullptr, &event),
      [&] { return what.text(); });
  auto tracked = track(device, event, what);
  check(api_->clFlush(device.queue), [&] { return "clFlush after " + what.text(); });
  return tracked;
}

std::unique_ptr<OpenclBackend::Event> OpenclBackend::copy_to_host(Buffer& source, std::uint64_t offset,
                                                                  void* destination, std::uint64_t size, sdk::Mode) {
  if (size == 0) return nullptr;
  if (source.address != nullptr) {
    std::memmove(destination, static_cast<const std::byte*>(source.address) + offset, size);
    return nullptr;
  }
  Device& device = *source.device;
  const Operation what{.call = "clEnqueueReadBuffer", .amount = size, .preposition = "from", .device = &device};
  cl_event event = nullptr;
  check(api_->clEnqueueReadBuffer(device.queue, source.memory, CL_FALSE, offset, size, destination, 0, nullptr, &event),
        [&] { return what.text(); });
  auto tracked = track(device, event, what);
  check(api_->clFlush(device.queue), [&] { return "clFlush after " + what.text(); });
  return tracked;
}

std::unique_ptr<OpenclBackend::Event> OpenclBackend::copy_device_to_device(Buffer& source, std::uint64_t source_offset,
                                                                           Buffer& destination,
                                                                           std::uint64_t destination_offset,
                                                                           std::uint64_t size, sdk::Mode mode) {
  if (size == 0) return nullptr;
  // Pinned host memory on either side is a host pointer.
  if (source.address != nullptr) {
    return copy_to_device(destination, destination_offset,
                          static_cast<const std::byte*>(source.address) + source_offset, size, mode);
  }
  if (destination.address != nullptr) {
    return copy_to_host(source, source_offset, static_cast<std::byte*>(destination.address) + destination_offset, size,
                        mode);
  }
  Device& from = *source.device;
  Device& to = *destination.device;
  if (&from != &to) {
    // Different contexts: through host memory the event keeps alive.
    std::vector<std::byte> staging(size);
    check(api_->clEnqueueReadBuffer(from.queue, source.memory, CL_TRUE, source_offset, size, staging.data(), 0, nullptr,
                                    nullptr),
          [&] {
            return "clEnqueueReadBuffer of " + format_bytes(size) + " from " + from.label + " (for a copy to " +
                   to.label + ")";
          });
    const Operation what{
        .call = "clEnqueueWriteBuffer", .amount = size, .preposition = "to", .device = &to, .origin = &from};
    cl_event event = nullptr;
    check(api_->clEnqueueWriteBuffer(to.queue, destination.memory, CL_FALSE, destination_offset, size, staging.data(),
                                     0, nullptr, &event),
          [&] { return what.text(); });
    auto tracked = track(to, event, what);
    tracked->staging = std::move(staging);  // the vector's heap block does not move
    check(api_->clFlush(to.queue), [&] { return "clFlush after " + what.text(); });
    return tracked;
  }
  const Operation what{.call = "clEnqueueCopyBuffer", .amount = size, .preposition = "on", .device = &to};
  const bool overlap = source.memory == destination.memory && source_offset < destination_offset + size &&
                       destination_offset < source_offset + size;
  cl_event event = nullptr;
  if (overlap) {
    // OpenCL refuses overlapping copies (CL_MEM_COPY_OVERLAP): through a
    // temporary buffer, released at once (OpenCL frees it after the copies).
    cl_int result = CL_SUCCESS;
    cl_mem temporary = api_->clCreateBuffer(to.context, CL_MEM_READ_WRITE, size, nullptr, &result);
    check(result, [&] {
      return "clCreateBuffer of " + format_bytes(size) + " on " + to.label + " (to stage an overlapping copy)";
    });
    result = api_->clEnqueueCopyBuffer(to.queue, source.memory, temporary, source_offset, 0, size, 0, nullptr, nullptr);
    if (result == CL_SUCCESS) {
      result = api_->clEnqueueCopyBuffer(to.queue, temporary, destination.memory, 0, destination_offset, size, 0,
                                         nullptr, &event);
    }
    api_->clReleaseMemObject(temporary);
    check(result, [&] { return what.text() + " (overlapping, staged)"; });
  } else {
    check(api_->clEnqueueCopyBuffer(to.queue, source.memory, destination.memory, source_offset, destination_offset,
                                    size, 0, nullptr, &event),
          [&] { return what.text(); });
  }
  auto tracked = track(to, event, what);
  check(api_->clFlush(to.queue), [&] { return "clFlush after " + what.text(); });
  return tracked;
}

cl_kernel OpenclBackend::widen_kernel(Device& device, BP_IntegerType source_type, BP_IntegerType destination_type) {
  // Called with device.mutex held.
  if (!device.widen_built) {
    const char* source = kWidenSource;
    const std::size_t length = sizeof(kWidenSource) - 1;
    cl_int result = CL_SUCCESS;
    cl_program program = api_->clCreateProgramWithSource(device.context, 1, &source, &length, &result);
    check(result, "convert_integers: clCreateProgramWithSource on " + device.label);
    result = api_->clBuildProgram(program, 1, &device.id, build_options_.c_str(), nullptr, nullptr);
    if (result != CL_SUCCESS) {
      std::string log;
      std::size_t size = 0;
      if (api_->clGetProgramBuildInfo(program, device.id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) == CL_SUCCESS) {
        log.resize(size);
        api_->clGetProgramBuildInfo(program, device.id, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
        while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
      }
      api_->clReleaseProgram(program);
      constexpr std::size_t kMaxLog = 16 * 1024;
      if (log.size() > kMaxLog) log = log.substr(0, kMaxLog) + "\n[build log cut at 16 KiB]";
      throw Failure(error_code_for(result),
                    "convert_integers: building the widening kernels on " + device.label + " failed: clBuildProgram" +
                        (build_options_.empty() ? "" : " with options \"" + build_options_ + "\"") + ": " +
                        error_name(result) + "; build log:\n" + (log.empty() ? "(empty)" : log));
    }
    for (const Widening& widening : kWidenings) {
      cl_kernel kernel = api_->clCreateKernel(program, widening.kernel, &result);
      if (result != CL_SUCCESS) {
        for (const auto& [pair, made] : device.widen_kernels) api_->clReleaseKernel(made);
        device.widen_kernels.clear();
        api_->clReleaseProgram(program);
        check(result, std::string("convert_integers: clCreateKernel(") + widening.kernel + ") on " + device.label);
      }
      device.widen_kernels[{widening.source, widening.destination}] = kernel;
    }
    device.widen_program = program;
    device.widen_built = true;
  }
  return device.widen_kernels.at({source_type, destination_type});
}

std::unique_ptr<OpenclBackend::Event> OpenclBackend::convert_integers(Buffer& source, std::uint64_t source_offset,
                                                                      BP_IntegerType source_type, Buffer& destination,
                                                                      std::uint64_t destination_offset,
                                                                      BP_IntegerType destination_type,
                                                                      std::uint64_t count) {
  const bool supported = std::any_of(std::begin(kWidenings), std::end(kWidenings), [&](const Widening& widening) {
    return widening.source == source_type && widening.destination == destination_type;
  });
  if (!supported) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  std::string("convert_integers: cannot widen ") + sdk::integer_type_name(source_type) + " to " +
                      sdk::integer_type_name(destination_type) + " (supported: " + kSupportedWidenings + ")");
  }
  if (source.kind != BP_MEMORY_DEVICE || destination.kind != BP_MEMORY_DEVICE || source.device != destination.device) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  "convert_integers: source and destination must be device memory of the same opencl device");
  }
  const std::uint64_t source_size = sdk::integer_size(source_type);
  const std::uint64_t destination_size = sdk::integer_size(destination_type);
  if (source_offset % source_size != 0 || destination_offset % destination_size != 0) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  "convert_integers: offsets must be multiples of the element sizes (source offset " +
                      std::to_string(source_offset) + " for " + sdk::integer_type_name(source_type) +
                      ", destination offset " + std::to_string(destination_offset) + " for " +
                      sdk::integer_type_name(destination_type) + ")");
  }
  if (count == 0) return nullptr;
  Device& device = start(*source.device, "convert_integers");
  const Operation what{.call = "convert_integers",
                       .amount = count,
                       .preposition = "on",
                       .device = &device,
                       .source_type = source_type,
                       .destination_type = destination_type};
  const auto failed = [&](const char* call) { return [&what, call] { return what.text() + ": " + call; }; };
  const cl_ulong source_index = source_offset / source_size;
  const cl_ulong destination_index = destination_offset / destination_size;
  const cl_ulong elements = count;
  const std::size_t global = static_cast<std::size_t>(
      std::min<std::uint64_t>(count, std::uint64_t{std::max(device.compute_units, 1u)} * 4096));
  cl_event event = nullptr;
  {
    // One kernel object per pair and device: arguments and launch together.
    const std::lock_guard lock(device.mutex);
    cl_kernel kernel = widen_kernel(device, source_type, destination_type);
    check(api_->clSetKernelArg(kernel, 0, sizeof(cl_mem), &source.memory), failed("clSetKernelArg"));
    check(api_->clSetKernelArg(kernel, 1, sizeof(cl_ulong), &source_index), failed("clSetKernelArg"));
    check(api_->clSetKernelArg(kernel, 2, sizeof(cl_mem), &destination.memory), failed("clSetKernelArg"));
    check(api_->clSetKernelArg(kernel, 3, sizeof(cl_ulong), &destination_index), failed("clSetKernelArg"));
    check(api_->clSetKernelArg(kernel, 4, sizeof(cl_ulong), &elements), failed("clSetKernelArg"));
    check(api_->clEnqueueNDRangeKernel(device.queue, kernel, 1, nullptr, &global, nullptr, 0, nullptr, &event),
          failed("clEnqueueNDRangeKernel"));
  }
  auto tracked = track(device, event, what);
  check(api_->clFlush(device.queue), [&] { return "clFlush after " + what.text(); });
  return tracked;
}

void OpenclBackend::wait(Event& event) {
  const cl_int waited = api_->clWaitForEvents(1, &event.event);
  cl_int status = CL_COMPLETE;
  const cl_int asked =
      api_->clGetEventInfo(event.event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
  if (asked == CL_SUCCESS && status < 0) {
    throw Failure(error_code_for(status), event.operation.text() + " failed: " + error_name(status));
  }
  check(waited, [&] { return "clWaitForEvents for " + event.operation.text(); });
  check(asked, [&] { return "clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS) for " + event.operation.text(); });
}

namespace {

// Device clocks drift from the host's by parts per million: measured again
// after this long, the offset stays within a few microseconds.
constexpr std::int64_t kOffsetLifetimeNs = 8'000'000'000;
// A bracket of host readings this tight ends the measuring; else up to
// kOffsetAttempts markers are timed and the tightest kept.
constexpr std::int64_t kTightBracketNs = 200'000;
constexpr int kOffsetAttempts = 8;

}  // namespace

std::int64_t OpenclBackend::clock_offset(Device& device) {
  const std::lock_guard lock(device.timing_mutex);
  const std::int64_t now = monotonic_ns();
  if (device.clock_measured_ns >= 0 && now - device.clock_measured_ns < kOffsetLifetimeNs) {
    return device.clock_offset_ns;
  }
  // On an idle queue the marker completes as soon as it is enqueued, between
  // the two host readings.
  check(api_->clFinish(device.queue), "clFinish on " + device.label + " (timing its clock)");
  // The offset is known to within the bracket of host readings; a thread
  // descheduled between them widens it, so the tightest of a few is kept.
  std::int64_t best_bracket = -1;
  for (int attempt = 0; attempt < kOffsetAttempts; ++attempt) {
    cl_event marker = nullptr;
    const std::int64_t before = monotonic_ns();
    check(api_->clEnqueueMarkerWithWaitList(device.queue, 0, nullptr, &marker),
          "clEnqueueMarkerWithWaitList on " + device.label);
    const cl_int waited = api_->clWaitForEvents(1, &marker);
    const std::int64_t after = monotonic_ns();
    cl_ulong device_end = 0;
    const cl_int asked =
        api_->clGetEventProfilingInfo(marker, CL_PROFILING_COMMAND_END, sizeof(device_end), &device_end, nullptr);
    api_->clReleaseEvent(marker);
    check(waited, "clWaitForEvents for a marker on " + device.label);
    check(asked, "clGetEventProfilingInfo(CL_PROFILING_COMMAND_END) for a marker on " + device.label);
    if (best_bracket < 0 || after - before < best_bracket) {
      best_bracket = after - before;
      device.clock_offset_ns = before + (after - before) / 2 - static_cast<std::int64_t>(device_end);
      device.clock_measured_ns = after;
    }
    if (best_bracket <= kTightBracketNs) break;
  }
  return device.clock_offset_ns;
}

std::optional<sdk::DeviceSpan> OpenclBackend::timing(Event& event) {
  if (event.timed_on == nullptr) return std::nullopt;
  cl_ulong begin = 0;
  cl_ulong end = 0;
  check(api_->clGetEventProfilingInfo(event.event, CL_PROFILING_COMMAND_START, sizeof(begin), &begin, nullptr),
        [&] { return "clGetEventProfilingInfo(CL_PROFILING_COMMAND_START) for " + event.operation.text(); });
  check(api_->clGetEventProfilingInfo(event.event, CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr),
        [&] { return "clGetEventProfilingInfo(CL_PROFILING_COMMAND_END) for " + event.operation.text(); });
  const std::int64_t offset = clock_offset(*event.timed_on);
  return sdk::DeviceSpan{static_cast<std::int64_t>(begin) + offset, static_cast<std::int64_t>(end) + offset};
}

// Done once the command completed or failed (a negative status).
bool OpenclBackend::query(Event& event) {
  cl_int status = CL_QUEUED;
  check(api_->clGetEventInfo(event.event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr),
        [&] { return "clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS) for " + event.operation.text(); });
  return status <= CL_COMPLETE;
}

}  // namespace backplane::opencl
