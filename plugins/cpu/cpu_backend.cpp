// The CPU backend. Error model inside this file: exceptions (Failure) thrown
// by the CpuBackend methods, turned into BP_Error* by `guarded` in the table
// entries at the bottom.
#include "cpu_backend.hpp"

#include <backplane/plugin_support.hpp>

#include <pthread.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace backplane::cpu {
namespace {

using plugin::Failure;
using plugin::guarded;
using plugin::require_args;

// ------------------------------------------------------------- helpers --

std::string quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

// A (pointer, size) string from the ABI; NULL is accepted only with size 0.
std::string_view abi_string(const char* data, std::size_t size, const std::string& what) {
  if (data == nullptr && size != 0) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT, what + " is NULL with size " + std::to_string(size));
  }
  return data == nullptr ? std::string_view{} : std::string_view{data, size};
}

// "2.0 GiB (2147483648 bytes)"-style sizes for messages.
std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return std::to_string(bytes) + " bytes";
  char text[64];
  std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
  return text;
}

struct HostMemory {
  std::uint64_t total = 0;
  std::uint64_t free = 0;
};

// Total from /proc/meminfo MemTotal, free from MemAvailable (what a new
// allocation can get without swapping); sysinfo() when /proc is missing.
HostMemory host_memory() {
  HostMemory memory;
  bool have_total = false;
  bool have_available = false;
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemTotal: %llu kB", &kib) == 1) {
      memory.total = kib * 1024;
      have_total = true;
    } else if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) {
      memory.free = kib * 1024;
      have_available = true;
    }
  }
  if (!have_total || !have_available) {
    struct sysinfo info {};
    if (sysinfo(&info) == 0) {
      if (!have_total) memory.total = std::uint64_t{info.totalram} * info.mem_unit;
      if (!have_available) memory.free = std::uint64_t{info.freeram} * info.mem_unit;
    }
  }
  return memory;
}

// The "model name" of the first processor in /proc/cpuinfo (x86), else its
// "Model"/"Hardware"/"cpu model" line (ARM, RISC-V, MIPS), else "unknown model".
std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::string fallback;
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    if (value.empty()) continue;
    if (key == "model name") return value;
    if (fallback.empty() && (key == "Model" || key == "Hardware" || key == "cpu model")) {
      fallback = value;
    }
  }
  return fallback.empty() ? "unknown model" : fallback;
}

long online_cores() {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 0 ? cores : 1;
}

// Strict decimal integer in [minimum, maximum]: no sign, space or suffix.
std::int32_t parse_devices_option(std::string_view key, std::string_view value) {
  std::int32_t parsed = 0;
  const char* end = value.data() + value.size();
  const auto [stop, status] = std::from_chars(value.data(), end, parsed);
  const bool digits_only = !value.empty() && value.find_first_not_of("0123456789") == std::string_view::npos;
  if (!digits_only || status != std::errc{} || stop != end || parsed < 1 || parsed > kMaxDevices) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  "cpu: option " + std::string(key) + " = " + quoted(value) +
                      " is invalid: expected an integer from 1 to " + std::to_string(kMaxDevices));
  }
  return parsed;
}

// A copy range [offset, offset + size) must lie inside a buffer of buffer_size
// bytes; written without offset + size so it cannot overflow.
void check_range(const char* call, const char* role, std::uint64_t offset, std::uint64_t size,
                 std::uint64_t buffer_size) {
  if (offset > buffer_size || size > buffer_size - offset) {
    throw Failure(BP_ERROR_OUT_OF_RANGE,
                  std::string(call) + ": " + role + " range at offset " + std::to_string(offset) +
                      " of size " + std::to_string(size) + " does not fit in buffer size " +
                      std::to_string(buffer_size));
  }
}

void check_host_pointer(const char* call, const char* role, const void* pointer, std::uint64_t size) {
  if (pointer == nullptr && size != 0) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  std::string(call) + ": " + role + " host pointer is NULL with size " + std::to_string(size));
  }
}

// ------------------------------------------------------------ the state --

struct CpuBuffer {
  void* data = nullptr;  // aligned host memory (size 0 gets kAlignment bytes); NULL only when wrapped with size 0
  std::uint64_t size = 0;
  std::int32_t ordinal = 0;
  BP_MemoryKind kind = BP_MEMORY_DEVICE;
  bool owned = true;  // false for memory_wrap: the caller's memory, never freed here
};

struct FreeAligned {
  void operator()(void* data) const noexcept { std::free(data); }
};

// An async copy has already run when the event is handed out.
struct CpuEvent {
  std::uint64_t serial = 0;
};

class CpuBackend {
 public:
  explicit CpuBackend(std::int32_t devices) : device_count_(devices) {}

  std::int32_t device_count() const noexcept { return device_count_; }

  void check_ordinal(const char* call, std::int32_t ordinal) const {
    if (ordinal < 0 || ordinal >= device_count_) {
      throw Failure(BP_ERROR_OUT_OF_RANGE,
                    std::string(call) + ": cpu device ordinal " + std::to_string(ordinal) +
                        " is out of range: the backend has " + std::to_string(device_count_) +
                        " device(s), cpu:0.." + "cpu:" + std::to_string(device_count_ - 1));
    }
  }

  // Names, attributes and the probe reason, read from the OS on first use and
  // owned by the backend until it is destroyed.
  void describe() {
    std::call_once(described_, [this] {
      model_ = cpu_model();
      cores_ = std::to_string(online_cores());
      alignment_ = std::to_string(kAlignment);
      attributes_ = {
          {sizeof(BP_KeyValue), "model", 5, model_.data(), model_.size()},
          {sizeof(BP_KeyValue), "cores", 5, cores_.data(), cores_.size()},
          {sizeof(BP_KeyValue), "alignment", 9, alignment_.data(), alignment_.size()},
      };
      device_names_.reserve(static_cast<std::size_t>(device_count_));
      for (std::int32_t ordinal = 0; ordinal < device_count_; ++ordinal) {
        device_names_.push_back("CPU " + std::to_string(ordinal) + " (" + model_ + ")");
      }
      probe_reason_ = "host CPU " + model_ + ", " + cores_ + " core(s), exposed as " +
                      std::to_string(device_count_) + " device(s)";
    });
  }

  const std::string& probe_reason() {
    describe();
    return probe_reason_;
  }

  void fill_info(BP_DeviceInfoArgs& args) {
    check_ordinal("device_info", args.ordinal);
    describe();
    const std::string& name = device_names_[static_cast<std::size_t>(args.ordinal)];
    const HostMemory memory = host_memory();
    args.name = name.data();
    args.name_size = name.size();
    args.kind = BP_DEVICE_KIND_CPU;
    args.memory_total = memory.total;
    args.memory_free = memory.free;
    args.attributes = attributes_.data();
    args.attribute_count = attributes_.size();
  }

  BP_Buffer* allocate(std::int32_t ordinal, BP_MemoryKind kind, std::uint64_t size, void** address) {
    check_ordinal("memory_allocate", ordinal);
    if (kind != BP_MEMORY_DEVICE && kind != BP_MEMORY_PINNED_HOST) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    "memory_allocate: unknown memory kind " + std::to_string(kind) + " on cpu:" +
                        std::to_string(ordinal));
    }
    // aligned_alloc wants a multiple of the alignment; 0 becomes one line.
    void* data = nullptr;
    if (size <= SIZE_MAX - kAlignment) {
      const std::size_t rounded = size == 0 ? kAlignment : (size + kAlignment - 1) / kAlignment * kAlignment;
      data = std::aligned_alloc(kAlignment, rounded);
    }
    if (data == nullptr) {
      const HostMemory memory = host_memory();
      throw Failure(BP_ERROR_OUT_OF_MEMORY,
                    "memory_allocate of " + format_bytes(size) + " (" + std::to_string(size) +
                        " bytes) on cpu:" + std::to_string(ordinal) + " failed: out of memory (" +
                        format_bytes(memory.free) + " free of " + format_bytes(memory.total) + ")");
    }
    std::unique_ptr<void, FreeAligned> owned(data);
    auto buffer = std::make_unique<CpuBuffer>(CpuBuffer{data, size, ordinal, kind});
    auto* handle = reinterpret_cast<BP_Buffer*>(buffer.get());
    {
      const std::lock_guard lock(mutex_);
      buffers_.emplace(handle, std::move(buffer));
    }
    owned.release();
    *address = data;
    return handle;
  }

  // Any host memory is memory of every cpu device; nothing more to check.
  BP_Buffer* wrap(std::int32_t ordinal, void* address, std::uint64_t size) {
    check_ordinal("memory_wrap", ordinal);
    if (address == nullptr && size != 0) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    "memory_wrap: address is NULL for " + std::to_string(size) + " bytes on cpu:" +
                        std::to_string(ordinal));
    }
    if (address != nullptr && size > UINTPTR_MAX - reinterpret_cast<std::uintptr_t>(address)) {
      throw Failure(BP_ERROR_OUT_OF_RANGE, "memory_wrap: " + std::to_string(size) +
                                               " bytes from the address run past the end of the address space");
    }
    auto buffer = std::make_unique<CpuBuffer>(CpuBuffer{address, size, ordinal, BP_MEMORY_DEVICE, false});
    auto* handle = reinterpret_cast<BP_Buffer*>(buffer.get());
    const std::lock_guard lock(mutex_);
    buffers_.emplace(handle, std::move(buffer));
    return handle;
  }

  void free(BP_Buffer* handle) {
    if (handle == nullptr) return;
    std::unique_ptr<CpuBuffer> buffer;
    {
      const std::lock_guard lock(mutex_);
      const auto found = buffers_.find(handle);
      if (found == buffers_.end()) {
        throw Failure(BP_ERROR_INVALID_ARGUMENT,
                      "memory_free: buffer handle is not a live buffer of this cpu backend "
                      "(already freed, or from another backend)");
      }
      buffer = std::move(found->second);
      buffers_.erase(found);
    }
    if (buffer->owned) std::free(buffer->data);
  }

  // A snapshot of a live buffer; the caller must keep it alive while copying.
  CpuBuffer buffer(const char* call, const char* role, BP_Buffer* handle) const {
    if (handle == nullptr) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": " + role + " buffer is NULL");
    }
    const std::lock_guard lock(mutex_);
    const auto found = buffers_.find(handle);
    if (found == buffers_.end()) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    std::string(call) + ": " + role +
                        " buffer handle is not a live buffer of this cpu backend "
                        "(already freed, or from another backend)");
    }
    return *found->second;
  }

  BP_Event* completed_event() {
    auto event = std::make_unique<CpuEvent>();
    auto* handle = reinterpret_cast<BP_Event*>(event.get());
    const std::lock_guard lock(mutex_);
    event->serial = ++event_serial_;
    events_.emplace(handle, std::move(event));
    return handle;
  }

  void check_event(const char* call, BP_Event* handle) const {
    if (handle == nullptr) throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": event is NULL");
    const std::lock_guard lock(mutex_);
    if (!events_.contains(handle)) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    std::string(call) + ": event handle is not a live event of this cpu backend");
    }
  }

  void destroy_event(BP_Event* handle) {
    const std::lock_guard lock(mutex_);
    if (events_.erase(handle) == 0) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    "event_destroy: event handle is not a live event of this cpu backend");
    }
  }

  // For fork(): see install_fork_handlers.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }

  ~CpuBackend() {
    for (auto& [handle, buffer] : buffers_) std::free(buffer->data);
  }

  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

 private:
  const std::int32_t device_count_;

  std::once_flag described_;
  std::string model_;
  std::string cores_;
  std::string alignment_;
  std::vector<BP_KeyValue> attributes_;
  std::vector<std::string> device_names_;
  std::string probe_reason_;

  mutable std::mutex mutex_;  // guards buffers_, events_, event_serial_
  std::unordered_map<BP_Buffer*, std::unique_ptr<CpuBuffer>> buffers_;
  std::unordered_map<BP_Event*, std::unique_ptr<CpuEvent>> events_;
  std::uint64_t event_serial_ = 0;
};

// Live backends of this plugin, so that a NULL, foreign or destroyed backend
// handle is an error instead of a crash.
struct LiveBackends {
  std::mutex mutex;
  std::unordered_set<BP_Backend*> handles;
};

LiveBackends& live_backends() {
  static LiveBackends live;
  return live;
}

// Host memory survives fork(), so this backend works in a child, provided no
// lock is left held by a thread that stayed in the parent (the core's
// transfer threads call in here). fork() therefore takes every lock of the
// plugin first and releases them on both sides. No code path waits for
// `live.mutex` while holding a backend's mutex, so taking that one first
// cannot deadlock. glibc drops the handlers if the plugin is unloaded.
void install_fork_handlers() {
  static const bool installed = [] {
    auto prepare = [] {
      LiveBackends& live = live_backends();
      live.mutex.lock();
      for (BP_Backend* handle : live.handles) reinterpret_cast<CpuBackend*>(handle)->lock_for_fork();
    };
    auto release = [] {
      LiveBackends& live = live_backends();
      for (BP_Backend* handle : live.handles) reinterpret_cast<CpuBackend*>(handle)->unlock_after_fork();
      live.mutex.unlock();
    };
    return pthread_atfork(prepare, release, release) == 0;
  }();
  (void)installed;
}

CpuBackend& backend_of(BP_Backend* handle, const char* call) {
  if (handle == nullptr) throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": backend is NULL");
  LiveBackends& live = live_backends();
  const std::lock_guard lock(live.mutex);
  if (!live.handles.contains(handle)) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  std::string(call) + ": backend handle is not a live cpu backend");
  }
  return *reinterpret_cast<CpuBackend*>(handle);
}

// ------------------------------------------------------------- copies --

void run_copy_to_device(BP_CopyToDeviceArgs& args, const char* call) {
  CpuBackend& backend = backend_of(args.backend, call);
  const CpuBuffer destination = backend.buffer(call, "destination", args.destination);
  check_host_pointer(call, "source", args.source, args.size);
  check_range(call, "destination", args.destination_offset, args.size, destination.size);
  if (args.size != 0) {
    std::memcpy(static_cast<std::byte*>(destination.data) + args.destination_offset, args.source, args.size);
  }
}

void run_copy_to_host(BP_CopyToHostArgs& args, const char* call) {
  CpuBackend& backend = backend_of(args.backend, call);
  const CpuBuffer source = backend.buffer(call, "source", args.source);
  check_host_pointer(call, "destination", args.destination, args.size);
  check_range(call, "source", args.source_offset, args.size, source.size);
  if (args.size != 0) {
    std::memcpy(args.destination, static_cast<const std::byte*>(source.data) + args.source_offset, args.size);
  }
}

void run_copy_device_to_device(BP_CopyDeviceToDeviceArgs& args, const char* call) {
  CpuBackend& backend = backend_of(args.backend, call);
  const CpuBuffer source = backend.buffer(call, "source", args.source);
  const CpuBuffer destination = backend.buffer(call, "destination", args.destination);
  check_range(call, "source", args.source_offset, args.size, source.size);
  check_range(call, "destination", args.destination_offset, args.size, destination.size);
  if (args.size != 0) {  // memmove: source and destination may be one buffer
    std::memmove(static_cast<std::byte*>(destination.data) + args.destination_offset,
                 static_cast<const std::byte*>(source.data) + args.source_offset, args.size);
  }
}

}  // namespace

// ------------------------------------------------------ table entries --

BP_Error* backend_create(BP_BackendCreateArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "backend_create");
    if (args->options == nullptr && args->option_count != 0) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT, "backend_create: options is NULL with option_count " +
                                                   std::to_string(args->option_count));
    }
    std::int32_t devices = 1;
    for (std::size_t index = 0; index < args->option_count; ++index) {
      const BP_KeyValue& option = args->options[index];
      require_args(&option, "backend_create: option");
      const std::string where = "backend_create: option " + std::to_string(index);
      const std::string_view key = abi_string(option.key, option.key_size, where + " key");
      const std::string_view value = abi_string(option.value, option.value_size, where + " value");
      if (key == "devices") {
        devices = parse_devices_option(key, value);
      } else {
        throw Failure(BP_ERROR_INVALID_ARGUMENT, "cpu: unknown option " + quoted(key) + " = " + quoted(value) +
                                                     " (known options: devices)");
      }
    }
    install_fork_handlers();
    auto backend = std::make_unique<CpuBackend>(devices);
    auto* handle = reinterpret_cast<BP_Backend*>(backend.get());
    LiveBackends& live = live_backends();
    const std::lock_guard lock(live.mutex);
    live.handles.insert(handle);
    backend.release();
    args->backend = handle;
    return nullptr;
  });
}

void backend_destroy(BP_Backend* backend) noexcept {
  BP_Error* error = guarded([&]() -> BP_Error* {
    if (backend == nullptr) return nullptr;
    LiveBackends& live = live_backends();
    {
      const std::lock_guard lock(live.mutex);
      if (live.handles.erase(backend) == 0) {
        throw Failure(BP_ERROR_INVALID_ARGUMENT, "backend_destroy: not a live cpu backend");
      }
    }
    delete reinterpret_cast<CpuBackend*>(backend);
    return nullptr;
  });
  if (error != nullptr) error->destroy(error);  // nowhere to report it: void call
}

BP_Error* probe(BP_ProbeArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "probe");
    const std::string& reason = backend_of(args->backend, "probe").probe_reason();
    args->available = 1;
    args->reason = reason.data();
    args->reason_size = reason.size();
    return nullptr;
  });
}

BP_Error* device_count(BP_DeviceCountArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "device_count");
    args->count = backend_of(args->backend, "device_count").device_count();
    return nullptr;
  });
}

BP_Error* device_info(BP_DeviceInfoArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "device_info");
    backend_of(args->backend, "device_info").fill_info(*args);
    return nullptr;
  });
}

BP_Error* memory_allocate(BP_MemoryAllocateArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "memory_allocate");
    CpuBackend& backend = backend_of(args->backend, "memory_allocate");
    void* address = nullptr;
    args->buffer = backend.allocate(args->ordinal, args->kind, args->size, &address);
    args->address = address;
    return nullptr;
  });
}

BP_Error* memory_wrap(BP_MemoryWrapArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "memory_wrap");
    args->buffer = backend_of(args->backend, "memory_wrap").wrap(args->ordinal, args->address, args->size);
    return nullptr;
  });
}

BP_Error* memory_free(BP_MemoryFreeArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "memory_free");
    backend_of(args->backend, "memory_free").free(args->buffer);
    return nullptr;
  });
}

BP_Error* copy_to_device(BP_CopyToDeviceArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "copy_to_device");
    run_copy_to_device(*args, "copy_to_device");
    return nullptr;
  });
}

BP_Error* copy_to_host(BP_CopyToHostArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "copy_to_host");
    run_copy_to_host(*args, "copy_to_host");
    return nullptr;
  });
}

BP_Error* copy_device_to_device(BP_CopyDeviceToDeviceArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "copy_device_to_device");
    run_copy_device_to_device(*args, "copy_device_to_device");
    return nullptr;
  });
}

BP_Error* copy_to_device_async(BP_CopyToDeviceArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "copy_to_device_async");
    run_copy_to_device(*args, "copy_to_device_async");
    args->event = backend_of(args->backend, "copy_to_device_async").completed_event();
    return nullptr;
  });
}

BP_Error* copy_to_host_async(BP_CopyToHostArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "copy_to_host_async");
    run_copy_to_host(*args, "copy_to_host_async");
    args->event = backend_of(args->backend, "copy_to_host_async").completed_event();
    return nullptr;
  });
}

BP_Error* copy_device_to_device_async(BP_CopyDeviceToDeviceArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "copy_device_to_device_async");
    run_copy_device_to_device(*args, "copy_device_to_device_async");
    args->event = backend_of(args->backend, "copy_device_to_device_async").completed_event();
    return nullptr;
  });
}

BP_Error* event_wait(BP_EventArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "event_wait");
    backend_of(args->backend, "event_wait").check_event("event_wait", args->event);
    return nullptr;  // the copy ran inline and succeeded, or it was never submitted
  });
}

BP_Error* event_query(BP_EventArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "event_query");
    backend_of(args->backend, "event_query").check_event("event_query", args->event);
    args->done = 1;
    return nullptr;
  });
}

void event_destroy(BP_Backend* backend, BP_Event* event) noexcept {
  BP_Error* error = guarded([&]() -> BP_Error* {
    if (event == nullptr) return nullptr;
    backend_of(backend, "event_destroy").destroy_event(event);
    return nullptr;
  });
  if (error != nullptr) error->destroy(error);  // nowhere to report it: void call
}

}  // namespace backplane::cpu
