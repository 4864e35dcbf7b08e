// The OpenCL backend: any OpenCL 1.2+ driver the ICD loader finds (PoCL's CPU
// device in CI, a GPU driver elsewhere). Written on the plugin SDK
// (backplane/plugin_sdk.hpp), which generates the ABI table, handle checks,
// range checks and error translation around this class.
//
// Discovery: probe opens libOpenCL.so.1 with dlopen (opencl_loader.hpp) and
// asks every platform for its devices. Devices are numbered across platforms
// in a stable order: platforms sorted by (name, vendor, version), which does
// not depend on the order the loader reads /etc/OpenCL/vendors in, and each
// platform's devices in the order it reports them. A platform that fails to
// answer is skipped and named in the reason. Asking for devices starts the
// driver, which may start its own threads (PoCL starts two); the probe
// creates no context, queue or memory.
//
// Priority (ABI 1.2, reported by probe): 50 when any device found is a GPU,
// an accelerator or a custom device, so that it ranks above the native cpu
// backend (10) and below cuda (100); 5 when every device is a CPU (PoCL), so
// that an OpenCL view of the host never displaces the cpu backend. The table
// declares 5, so a core that predates probe-reported priorities keeps cpu.
//
// Memory: BP_MEMORY_DEVICE is a cl_mem from clCreateBuffer, reachable only
// through copies (no address). BP_MEMORY_PINNED_HOST is a cl_mem made with
// CL_MEM_ALLOC_HOST_PTR and mapped for its whole life; its address is the
// mapped host pointer. Copies are non-blocking clEnqueue{Write,Read,Copy}Buffer
// calls on one in-order queue per device (made on the device's first use),
// flushed at once; their cl_event is the ABI event. Copies between two
// devices go through host memory. memory_free on a buffer an in-flight copy
// still uses is safe: OpenCL releases the memory when that copy completes.
//
// Device time (ABI 1.3): queues are made with CL_QUEUE_PROFILING_ENABLE, as
// OpenCL fixes profiling when a queue is created and the one in-order queue
// per device is what orders the work. For a timed call event_timing reads
// CL_PROFILING_COMMAND_START/END and adds the offset of the device's clock
// from CLOCK_MONOTONIC, measured by a marker enqueued on an idle queue
// between two host clock readings (clGetDeviceAndHostTimer is OpenCL 2.1,
// and its host clock is the driver's choice). The offset is measured again
// when it is older than a few seconds; measuring drains the queue, which
// happens only while timing is requested (a trace is recorded).
//
// convert_integers: U8 -> U16/U32/I32/I64, U16 -> U32/I32/I64, U32 -> I64,
// between device buffers of one device, offsets aligned to the element
// sizes. The OpenCL C kernels are built on the first conversion per device;
// a failed build is an error carrying the driver's build log.
//
// Fork: in a child of a process that listed OpenCL platforms, probe answers
// unavailable and every call that would reach the driver fails UNAVAILABLE
// saying so (refusal(), opencl_loader.hpp's forked_message()); destroying
// frees only the bookkeeping.
//
// Options (string values):
//   library = PATH          the ICD loader to open instead of libOpenCL.so.1.
//   build_options = TEXT    extra options for clBuildProgram of the widening
//                           kernels (e.g. a vendor's tuning flag); default none.
#ifndef BACKPLANE_PLUGINS_OPENCL_OPENCL_BACKEND_HPP
#define BACKPLANE_PLUGINS_OPENCL_OPENCL_BACKEND_HPP

#include "opencl_loader.hpp"

#include <dlpack/dlpack.h>
#include <backplane/plugin_sdk.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#ifndef BP_OPENCL_PLUGIN_VERSION
#define BP_OPENCL_PLUGIN_VERSION "unversioned"
#endif

namespace backplane::opencl {

namespace sdk = backplane::plugin_sdk;

inline constexpr std::int32_t kCpuOnlyPriority = 5;       // below cpu (10)
inline constexpr std::int32_t kAcceleratorPriority = 50;  // above cpu, below cuda (100)

// One OpenCL device, numbered across platforms. Started (context and queue)
// on first use, through the backend's sdk::Devices.
struct Device : sdk::DeviceBase {
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  cl_device_type type = 0;
  std::string name, vendor, platform_name, opencl_version, driver_version;
  std::uint64_t global_memory = 0;
  std::uint64_t max_allocation = 0;
  std::uint32_t compute_units = 0;

  cl_context context = nullptr;      // set when started
  cl_command_queue queue = nullptr;  // set when started
  std::mutex mutex;                  // guards the kernels
  bool widen_built = false;
  cl_program widen_program = nullptr;
  std::map<std::pair<BP_IntegerType, BP_IntegerType>, cl_kernel> widen_kernels;

  std::mutex timing_mutex;              // guards the two below
  std::int64_t clock_offset_ns = 0;     // CLOCK_MONOTONIC minus the device's profiling clock
  std::int64_t clock_measured_ns = -1;  // CLOCK_MONOTONIC when it was measured; -1 never
};

// What a copy or conversion does, for its messages and its event's: the
// numbers, formatted into text only when a message is needed (a failure),
// never on the success path.
struct Operation {
  const char* call = "";         // the OpenCL call, or "convert_integers"
  std::uint64_t amount = 0;      // bytes; elements for a conversion
  const char* preposition = "";  // "to", "from" or "on" the device
  const Device* device = nullptr;
  const Device* origin = nullptr;              // the other device of a copy between two: "(from opencl:1)"
  BP_IntegerType source_type = BP_INTEGER_U8;  // conversions only
  BP_IntegerType destination_type = BP_INTEGER_U8;

  // "clEnqueueWriteBuffer of 4.00 MiB to opencl:0", "convert_integers U8 to
  // U16 of 10 elements on opencl:0" (opencl_backend.cpp).
  std::string text() const;
};

class OpenclBackend {
 public:
  static constexpr sdk::Identity kIdentity{
      .name = "opencl",
      .version = BP_OPENCL_PLUGIN_VERSION,
      .priority = kCpuOnlyPriority,
      // Probed in the probe helper (ABI 1.4): asking for devices loads the
      // driver, and PoCL brings LLVM and replaces the process's handlers of
      // SIGSEGV, SIGBUS, SIGXFSZ and others. A process that never uses an
      // opencl device then never loads it; one that does, loads it at that
      // first use (an allocation, a wrap or a copy).
      .capabilities = BP_CAPABILITY_PROBE_IN_CHILD | BP_CAPABILITY_PINNED_HOST | BP_CAPABILITY_ASYNC |
                      BP_CAPABILITY_CONVERT_INTEGERS | BP_CAPABILITY_EVENT_TIMING,
      .dlpack_device_type = kDLOpenCL,
  };

  struct Buffer : sdk::BufferBase {
    const Api* api = nullptr;
    Device* device = nullptr;
    cl_mem memory = nullptr;
    ~Buffer();  // unmaps pinned memory, releases the cl_mem
  };

  struct Event {
    const Api* api = nullptr;
    cl_event event = nullptr;
    Operation operation;             // what completes, for wait's error
    std::vector<std::byte> staging;  // host bytes the copy reads, for copies between devices
    Device* timed_on = nullptr;      // set when the caller asked for device time
    ~Event();                        // waits, then releases the cl_event
  };

  OpenclBackend(std::string library, std::string build_options)
      : library_(std::move(library)), build_options_(std::move(build_options)) {}
  ~OpenclBackend();
  static std::unique_ptr<OpenclBackend> create(const sdk::Options& options);

  std::string_view refusal();
  sdk::Probe probe();
  std::int32_t device_count() const { return devices_.count(); }
  sdk::DeviceDescription describe(std::int32_t ordinal);
  sdk::MemoryFigures memory(std::int32_t ordinal);
  // The device's buffers, the default, and mapped host buffers (ABI 1.4).
  sdk::MemoryList memories(std::int32_t /*ordinal*/) const {
    return {{"device", "OpenCL buffers"}, {"pinned_host", "mapped buffers (CL_MEM_ALLOC_HOST_PTR)"}};
  }
  std::unique_ptr<Buffer> allocate(std::int32_t ordinal, BP_MemoryKind kind, std::uint64_t size);
  std::unique_ptr<Event> copy_to_device(Buffer& destination, std::uint64_t offset, const void* source,
                                        std::uint64_t size, sdk::Mode mode);
  std::unique_ptr<Event> copy_to_host(Buffer& source, std::uint64_t offset, void* destination, std::uint64_t size,
                                      sdk::Mode mode);
  std::unique_ptr<Event> copy_device_to_device(Buffer& source, std::uint64_t source_offset, Buffer& destination,
                                               std::uint64_t destination_offset, std::uint64_t size, sdk::Mode mode);
  std::unique_ptr<Event> convert_integers(Buffer& source, std::uint64_t source_offset, BP_IntegerType source_type,
                                          Buffer& destination, std::uint64_t destination_offset,
                                          BP_IntegerType destination_type, std::uint64_t count);
  void wait(Event& event);
  bool query(Event& event);
  std::optional<sdk::DeviceSpan> timing(Event& event);

 private:
  // The device, started: its context and in-order queue made.
  Device& start(Device& device, const char* call);
  cl_kernel widen_kernel(Device& device, BP_IntegerType source_type, BP_IntegerType destination_type);
  std::unique_ptr<Event> track(Device& device, cl_event event, const Operation& operation);
  // CLOCK_MONOTONIC minus `device`'s profiling clock, measured when stale.
  std::int64_t clock_offset(Device& device);

  const std::string library_;
  const std::string build_options_;
  const Api* api_ = nullptr;  // set by an available probe
  sdk::Devices<Device> devices_;
};

// The generated entries, for tests that drive the backend directly.
using Entries = sdk::Entries<OpenclBackend>;

}  // namespace backplane::opencl

#endif  // BACKPLANE_PLUGINS_OPENCL_OPENCL_BACKEND_HPP
