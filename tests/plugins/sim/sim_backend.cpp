// The simulated accelerator. Error model inside this file: Failure exceptions,
// turned into BP_Error* by `guarded` in the table entries at the bottom.
//
// Every copy becomes a Transfer (two byte ranges plus what keeps them alive);
// sync copies run it on the caller's thread, async copies queue it on the
// backend's CopyWorker and hand back an event that the worker completes.
#include "sim_backend.hpp"

#include "copy_worker.hpp"

#include <backplane/plugin_support.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace backplane::sim {
namespace {

using plugin::Failure;
using plugin::guarded;
using plugin::require_args;

constexpr std::uint64_t kDefaultMemoryLimit = std::uint64_t{1} << 30;
constexpr std::uint64_t kMaxCopyDelayUs = 60'000'000;
constexpr std::uint64_t kMaxPriority = 1000;
constexpr std::size_t kPinnedAlignment = 64;

[[noreturn]] void fail(BP_ErrorCode code, const std::string& message) { throw Failure(code, "sim: " + message); }

// ------------------------------------------------------------- options --

struct Options {
  std::int32_t devices = 1;
  std::uint64_t memory_limit = kDefaultMemoryLimit;
  std::uint64_t fail_alloc_at = 0;  // 0: never
  std::uint64_t fail_copy_at = 0;   // 0: never
  std::uint64_t copy_delay_us = 0;
  std::optional<std::int32_t> priority;  // what probe reports; unset: the table's
};

std::uint64_t parse_unsigned(std::string_view key, std::string_view value, std::uint64_t low,
                             std::uint64_t high) {
  std::uint64_t number = 0;
  const bool decimal = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
  const auto result = decimal ? std::from_chars(value.data(), value.data() + value.size(), number)
                              : std::from_chars_result{value.data(), std::errc::invalid_argument};
  if (!decimal || result.ec != std::errc{} || number < low || number > high) {
    fail(BP_ERROR_INVALID_ARGUMENT, "option " + std::string(key) + " = \"" + std::string(value) +
                                        "\" is invalid: expected an integer from " + std::to_string(low) +
                                        " to " + std::to_string(high));
  }
  return number;
}

Options parse_options(const BP_BackendCreateArgs& args) {
  if (args.options == nullptr && args.option_count > 0) {
    fail(BP_ERROR_INVALID_ARGUMENT, "backend_create: options is NULL but option_count is " +
                                        std::to_string(args.option_count));
  }
  Options options;
  for (const BP_KeyValue* option = args.options; option != args.options + args.option_count; ++option) {
    require_args(option, "sim: backend_create option");
    if ((option->key == nullptr && option->key_size > 0) || (option->value == nullptr && option->value_size > 0)) {
      fail(BP_ERROR_INVALID_ARGUMENT, "backend_create: an option has a NULL key or value with a non-zero size");
    }
    const std::string_view key = option->key_size ? std::string_view(option->key, option->key_size) : "";
    const std::string_view value =
        option->value_size ? std::string_view(option->value, option->value_size) : "";
    if (key == "devices") {
      options.devices = static_cast<std::int32_t>(parse_unsigned(key, value, 1, 64));
    } else if (key == "memory_limit") {
      options.memory_limit = parse_unsigned(key, value, 0, UINT64_MAX);
    } else if (key == "fail_alloc_at") {
      options.fail_alloc_at = parse_unsigned(key, value, 0, UINT64_MAX);
    } else if (key == "fail_copy_at") {
      options.fail_copy_at = parse_unsigned(key, value, 0, UINT64_MAX);
    } else if (key == "copy_delay_us") {
      options.copy_delay_us = parse_unsigned(key, value, 0, kMaxCopyDelayUs);
    } else if (key == "probe_priority") {
      options.priority = static_cast<std::int32_t>(parse_unsigned(key, value, 0, kMaxPriority));
    } else {
      fail(BP_ERROR_INVALID_ARGUMENT,
           "unknown option \"" + std::string(key) + "\" = \"" + std::string(value) +
               "\" (known options: devices, memory_limit, fail_alloc_at, fail_copy_at, copy_delay_us, "
               "probe_priority)");
    }
  }
  return options;
}

// "1000 bytes", or "1073741824 bytes (1.0 GiB)" from one MiB on.
std::string describe_bytes(std::uint64_t bytes) {
  std::string text = std::to_string(bytes) + " bytes";
  if (bytes < (std::uint64_t{1} << 20)) return text;
  const bool gib = bytes >= (std::uint64_t{1} << 30);
  char scaled[48];
  std::snprintf(scaled, sizeof(scaled), " (%.1f %s)", static_cast<double>(bytes) / (gib ? 1073741824.0 : 1048576.0),
                gib ? "GiB" : "MiB");
  return text + scaled;
}

// ------------------------------------------------------------- buffers --

// Storage is shared so a buffer freed while an async copy still reads or
// writes it stays alive until that copy is done.
struct Buffer {
  std::shared_ptr<std::byte> storage;
  std::uint64_t size = 0;
  std::int32_t ordinal = 0;
  BP_MemoryKind kind = BP_MEMORY_DEVICE;
  bool wrapped = false;  // memory_wrap: a view into another allocation, not counted in use
};

std::shared_ptr<std::byte> allocate_storage(std::uint64_t size) {
  const auto bytes = static_cast<std::size_t>(std::max<std::uint64_t>(size, 1));
  auto* data = static_cast<std::byte*>(::operator new(bytes, std::align_val_t{kPinnedAlignment}));
  return std::shared_ptr<std::byte>(
      data, [](std::byte* pointer) { ::operator delete(pointer, std::align_val_t{kPinnedAlignment}); });
}

// One copy, resolved and checked: `size` bytes from `from` to `to`.
struct Transfer {
  std::shared_ptr<std::byte> keep_source;       // device/pinned storage, if any
  std::shared_ptr<std::byte> keep_destination;  // idem
  const std::byte* from = nullptr;
  std::byte* to = nullptr;
  std::uint64_t size = 0;
  std::uint64_t number = 0;  // 1-based copy count of the backend
  bool inject_failure = false;

  std::string failure_message(std::uint64_t fail_copy_at) const {
    return "sim: copy #" + std::to_string(number) + " of " + std::to_string(size) +
           " bytes failed: injected device fault (fail_copy_at = " + std::to_string(fail_copy_at) + ")";
  }

  void move_bytes() const {
    if (size > 0) std::memmove(to, from, static_cast<std::size_t>(size));
  }
};

// -------------------------------------------------------------- events --

struct EventState {
  bool done = false;
  BP_ErrorCode code = 0;  // 0: succeeded
  std::string message;
};

// ------------------------------------------------------------- backend --

class SimBackend {
 public:
  explicit SimBackend(const Options& options) : options_(options), in_use_(static_cast<std::size_t>(options.devices)) {
    for (std::int32_t ordinal = 0; ordinal < options_.devices; ++ordinal) {
      device_names_.push_back("Simulated accelerator " + std::to_string(ordinal));
    }
    limit_text_ = std::to_string(options_.memory_limit);
    delay_text_ = std::to_string(options_.copy_delay_us);
    attributes_ = {
        {sizeof(BP_KeyValue), "simulated", 9, "true", 4},
        {sizeof(BP_KeyValue), "memory_limit", 12, limit_text_.data(), limit_text_.size()},
        {sizeof(BP_KeyValue), "copy_delay_us", 13, delay_text_.data(), delay_text_.size()},
    };
    reason_ = "simulated accelerator: " + std::to_string(options_.devices) + " device(s) of " +
              describe_bytes(options_.memory_limit);
  }

  ~SimBackend() { worker_.stop(); }

  SimBackend(const SimBackend&) = delete;
  SimBackend& operator=(const SimBackend&) = delete;

  const Options& options() const { return options_; }
  const std::string& reason() const { return reason_; }

  void device_info(BP_DeviceInfoArgs& args) {
    require_device(args.ordinal, "device_info");
    const auto index = static_cast<std::size_t>(args.ordinal);
    args.name = device_names_[index].data();
    args.name_size = device_names_[index].size();
    args.kind = BP_DEVICE_KIND_ACCELERATOR;
    args.memory_total = options_.memory_limit;
    {
      std::lock_guard lock(mutex_);
      args.memory_free = options_.memory_limit - in_use_[index];
    }
    args.attributes = attributes_.data();
    args.attribute_count = attributes_.size();
  }

  void allocate(BP_MemoryAllocateArgs& args) {
    require_device(args.ordinal, "memory_allocate");
    if (args.kind != BP_MEMORY_DEVICE && args.kind != BP_MEMORY_PINNED_HOST) {
      fail(BP_ERROR_INVALID_ARGUMENT, "memory_allocate: unknown memory kind " + std::to_string(args.kind));
    }
    const std::uint64_t number = ++allocations_;
    const std::string where = "memory_allocate of " + describe_bytes(args.size) + " on sim:" +
                              std::to_string(args.ordinal);
    if (number == options_.fail_alloc_at) {
      fail(BP_ERROR_OUT_OF_MEMORY, where + " failed: injected out of memory at allocation #" +
                                       std::to_string(number) + " (fail_alloc_at = " +
                                       std::to_string(options_.fail_alloc_at) + ")");
    }
    const bool on_device = args.kind == BP_MEMORY_DEVICE;
    const auto index = static_cast<std::size_t>(args.ordinal);
    if (on_device) {  // reserve first, so two threads cannot both take the last bytes
      std::lock_guard lock(mutex_);
      const std::uint64_t free = options_.memory_limit - in_use_[index];
      if (args.size > free) {
        fail(BP_ERROR_OUT_OF_MEMORY, where + " failed: out of memory (" + describe_bytes(free) + " free of " +
                                         describe_bytes(options_.memory_limit) + ")");
      }
      in_use_[index] += args.size;
    }
    try {
      auto buffer = std::make_unique<Buffer>(Buffer{allocate_storage(args.size), args.size, args.ordinal, args.kind});
      auto* handle = reinterpret_cast<BP_Buffer*>(buffer.get());
      void* address = buffer->storage.get();  // device memory: an address the core never dereferences
      std::lock_guard lock(mutex_);
      buffers_.emplace(handle, std::move(buffer));
      args.buffer = handle;
      args.address = address;
    } catch (...) {
      if (on_device) {
        std::lock_guard lock(mutex_);
        in_use_[index] -= args.size;
      }
      throw;
    }
  }

  // Like cuPointerGetAttribute: the address must lie in a live device
  // allocation of that device, and the range inside that allocation.
  void wrap(BP_MemoryWrapArgs& args) {
    require_device(args.ordinal, "memory_wrap");
    if (args.address == nullptr && args.size > 0) fail(BP_ERROR_INVALID_ARGUMENT, "memory_wrap: address is NULL");
    auto buffer = std::make_unique<Buffer>(Buffer{nullptr, args.size, args.ordinal, BP_MEMORY_DEVICE, true});
    const auto address = reinterpret_cast<std::uintptr_t>(args.address);
    std::lock_guard lock(mutex_);
    if (args.address != nullptr) {
      const Buffer* home = nullptr;
      for (const auto& [handle, candidate] : buffers_) {
        const auto start = reinterpret_cast<std::uintptr_t>(candidate->storage.get());
        if (!candidate->wrapped && candidate->kind == BP_MEMORY_DEVICE && address >= start &&
            address - start <= candidate->size) {
          home = candidate.get();
          break;
        }
      }
      const std::string where = "memory_wrap of " + describe_bytes(args.size) + " on sim:" +
                                std::to_string(args.ordinal);
      if (home == nullptr) {
        fail(BP_ERROR_INVALID_ARGUMENT, where + ": the address is not in a live device allocation of this backend");
      }
      if (home->ordinal != args.ordinal) {
        fail(BP_ERROR_INVALID_ARGUMENT, where + ": the address is memory of sim:" + std::to_string(home->ordinal));
      }
      const std::uint64_t offset = address - reinterpret_cast<std::uintptr_t>(home->storage.get());
      if (args.size > home->size - offset) {
        fail(BP_ERROR_OUT_OF_RANGE, where + ": the range runs past the end of its " + describe_bytes(home->size) +
                                        " allocation (it starts " + std::to_string(offset) + " bytes in)");
      }
      // Does not own the bytes, as a device would not: once their owner frees
      // them, a copy still using this handle reads freed memory (and the
      // address sanitizer says so). memory_free waits for the queue instead.
      buffer->storage = std::shared_ptr<std::byte>(std::shared_ptr<std::byte>(), home->storage.get() + offset);
    }
    auto* handle = reinterpret_cast<BP_Buffer*>(buffer.get());
    buffers_.emplace(handle, std::move(buffer));
    args.buffer = handle;
  }

  void release(BP_Buffer* handle) {
    if (handle == nullptr) return;
    bool wrapped = false;
    {
      std::lock_guard lock(mutex_);
      const auto found = buffers_.find(handle);
      if (found == buffers_.end()) {
        fail(BP_ERROR_INVALID_ARGUMENT, "memory_free: not a live buffer of this sim backend "
                                        "(freed already, or allocated by another backend)");
      }
      wrapped = found->second->wrapped;
      if (found->second->kind == BP_MEMORY_DEVICE && !wrapped) {
        in_use_[static_cast<std::size_t>(found->second->ordinal)] -= found->second->size;
      }
      buffers_.erase(found);  // our own storage lives on while a queued copy holds it
    }
    // Wrapped memory goes back to its owner after this returns: nothing queued
    // may still use it then.
    if (wrapped) worker_.drain();
  }

  // ---- building transfers (all checks happen here, before any data moves)

  Transfer plan(const BP_CopyToDeviceArgs& args, const char* call) {
    if (args.source == nullptr && args.size > 0) fail(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": source is NULL");
    const Buffer destination = find(args.destination, call, "destination");
    check_range(call, "destination", args.destination_offset, args.size, destination.size);
    Transfer transfer;
    transfer.keep_destination = destination.storage;
    transfer.to = destination.storage.get() + args.destination_offset;
    transfer.from = static_cast<const std::byte*>(args.source);
    return count(std::move(transfer), args.size);
  }

  Transfer plan(const BP_CopyToHostArgs& args, const char* call) {
    if (args.destination == nullptr && args.size > 0) {
      fail(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": destination is NULL");
    }
    const Buffer source = find(args.source, call, "source");
    check_range(call, "source", args.source_offset, args.size, source.size);
    Transfer transfer;
    transfer.keep_source = source.storage;
    transfer.from = source.storage.get() + args.source_offset;
    transfer.to = static_cast<std::byte*>(args.destination);
    return count(std::move(transfer), args.size);
  }

  Transfer plan(const BP_CopyDeviceToDeviceArgs& args, const char* call) {
    const Buffer source = find(args.source, call, "source");
    const Buffer destination = find(args.destination, call, "destination");
    check_range(call, "source", args.source_offset, args.size, source.size);
    check_range(call, "destination", args.destination_offset, args.size, destination.size);
    Transfer transfer;
    transfer.keep_source = source.storage;
    transfer.keep_destination = destination.storage;
    transfer.from = source.storage.get() + args.source_offset;
    transfer.to = destination.storage.get() + args.destination_offset;
    return count(std::move(transfer), args.size);
  }

  void run_now(const Transfer& transfer) {
    if (transfer.inject_failure) throw Failure(BP_ERROR_DEVICE, transfer.failure_message(options_.fail_copy_at));
    transfer.move_bytes();
  }

  BP_Event* submit(Transfer transfer) {
    auto state = std::make_shared<EventState>();
    auto* handle = reinterpret_cast<BP_Event*>(state.get());
    {
      std::lock_guard lock(mutex_);
      events_.emplace(handle, state);
    }
    try {
      worker_.submit([this, state, transfer = std::move(transfer)] { complete(*state, transfer); });
    } catch (...) {
      forget_event(handle);
      throw;
    }
    return handle;
  }

  // ---- events

  std::shared_ptr<EventState> event(BP_Event* handle, const char* call) {
    if (handle == nullptr) fail(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": event is NULL");
    std::lock_guard lock(mutex_);
    const auto found = events_.find(handle);
    if (found == events_.end()) {
      fail(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": not a live event of this sim backend");
    }
    return found->second;
  }

  BP_Error* wait(BP_Event* handle) {
    const std::shared_ptr<EventState> state = event(handle, "event_wait");
    std::unique_lock lock(mutex_);
    completed_.wait(lock, [&] { return state->done; });
    return state->code == 0 ? nullptr : plugin::make_error(state->code, state->message);
  }

  bool query(BP_Event* handle) {
    const std::shared_ptr<EventState> state = event(handle, "event_query");
    std::lock_guard lock(mutex_);
    return state->done;
  }

  void destroy(BP_Event* handle) {
    const std::shared_ptr<EventState> state = event(handle, "event_destroy");
    {
      std::unique_lock lock(mutex_);
      completed_.wait(lock, [&] { return state->done; });
    }
    forget_event(handle);
  }

 private:
  void require_device(std::int32_t ordinal, const char* call) const {
    if (ordinal < 0 || ordinal >= options_.devices) {
      fail(BP_ERROR_OUT_OF_RANGE, std::string(call) + ": device ordinal " + std::to_string(ordinal) +
                                      " is out of range (the sim backend has " +
                                      std::to_string(options_.devices) + " device(s))");
    }
  }

  Buffer find(BP_Buffer* handle, const char* call, const char* role) const {
    if (handle == nullptr) fail(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": " + role + " buffer is NULL");
    std::lock_guard lock(mutex_);
    const auto found = buffers_.find(handle);
    if (found == buffers_.end()) {
      fail(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": " + role +
                                          " is not a live buffer of this sim backend "
                                          "(freed already, or allocated by another backend)");
    }
    return *found->second;
  }

  static void check_range(const char* call, const char* role, std::uint64_t offset, std::uint64_t size,
                          std::uint64_t buffer_size) {
    const bool fits = offset <= buffer_size && buffer_size - offset >= size;
    if (!fits) {
      fail(BP_ERROR_OUT_OF_RANGE, std::string(call) + ": " + role + " offset " + std::to_string(offset) +
                                      " + size " + std::to_string(size) + " exceeds buffer size " +
                                      std::to_string(buffer_size));
    }
  }

  Transfer count(Transfer transfer, std::uint64_t size) {
    transfer.size = size;
    transfer.number = ++copies_;
    transfer.inject_failure = transfer.number == options_.fail_copy_at;
    return transfer;
  }

  // Runs on the worker thread.
  void complete(EventState& state, const Transfer& transfer) noexcept {
    if (options_.copy_delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(options_.copy_delay_us));
    BP_ErrorCode code = 0;
    std::string message;
    if (transfer.inject_failure) {
      code = BP_ERROR_DEVICE;
      try {
        message = transfer.failure_message(options_.fail_copy_at);
      } catch (...) {
        message.clear();  // the code alone still reports the failure
      }
    } else {
      transfer.move_bytes();
    }
    {
      std::lock_guard lock(mutex_);
      state.done = true;
      state.code = code;
      state.message = std::move(message);
    }
    completed_.notify_all();
  }

  void forget_event(BP_Event* handle) {
    std::lock_guard lock(mutex_);
    events_.erase(handle);
  }

  const Options options_;
  std::vector<std::string> device_names_;
  std::string limit_text_;
  std::string delay_text_;
  std::vector<BP_KeyValue> attributes_;
  std::string reason_;

  std::atomic<std::uint64_t> allocations_{0};
  std::atomic<std::uint64_t> copies_{0};

  mutable std::mutex mutex_;  // guards in_use_, buffers_, events_ and every EventState
  std::condition_variable completed_;
  std::vector<std::uint64_t> in_use_;  // device bytes allocated, per ordinal
  std::map<BP_Buffer*, std::unique_ptr<Buffer>> buffers_;
  std::map<BP_Event*, std::shared_ptr<EventState>> events_;

  CopyWorker worker_;  // last: stopped (and joined) before the members above go
};

// Backends of this plugin that exist, so stale or foreign handles are refused.
std::mutex registry_mutex;
std::set<BP_Backend*>& registry() {
  static std::set<BP_Backend*> backends;
  return backends;
}

SimBackend& resolve(BP_Backend* handle, const char* call) {
  std::lock_guard lock(registry_mutex);
  if (handle == nullptr || registry().count(handle) == 0) {
    fail(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": backend is NULL or not a live sim backend");
  }
  return *reinterpret_cast<SimBackend*>(handle);
}

template <class Args>
BP_Error* sync_copy(Args* args, const char* call) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, call);
    SimBackend& backend = resolve(args->backend, call);
    backend.run_now(backend.plan(*args, call));
    return nullptr;
  });
}

template <class Args>
BP_Error* async_copy(Args* args, const char* call) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, call);
    SimBackend& backend = resolve(args->backend, call);
    args->event = backend.submit(backend.plan(*args, call));
    return nullptr;
  });
}

}  // namespace

// ------------------------------------------------------ table entries --

BP_Error* backend_create(BP_BackendCreateArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "backend_create");
    auto backend = std::make_unique<SimBackend>(parse_options(*args));
    auto* handle = reinterpret_cast<BP_Backend*>(backend.get());
    std::lock_guard lock(registry_mutex);
    registry().insert(handle);
    args->backend = reinterpret_cast<BP_Backend*>(backend.release());
    return nullptr;
  });
}

void backend_destroy(BP_Backend* backend) noexcept {
  BP_Error* error = guarded([&]() -> BP_Error* {
    if (backend == nullptr) return nullptr;
    {
      std::lock_guard lock(registry_mutex);
      if (registry().erase(backend) == 0) return nullptr;  // not ours: nothing to free
    }
    delete reinterpret_cast<SimBackend*>(backend);  // drains and joins the worker
    return nullptr;
  });
  if (error != nullptr) error->destroy(error);
}

BP_Error* probe(BP_ProbeArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "probe");
    const SimBackend& backend = resolve(args->backend, "probe");
    const std::string& reason = backend.reason();
    args->available = 1;
    args->reason = reason.data();
    args->reason_size = reason.size();
    // In/out since ABI 1.2; an older core's struct ends before it.
    if (backend.options().priority && BP_STRUCT_HAS_FIELD(args, BP_ProbeArgs, priority)) {
      args->priority = *backend.options().priority;
    }
    return nullptr;
  });
}

BP_Error* device_count(BP_DeviceCountArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "device_count");
    args->count = resolve(args->backend, "device_count").options().devices;
    return nullptr;
  });
}

BP_Error* device_info(BP_DeviceInfoArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "device_info");
    resolve(args->backend, "device_info").device_info(*args);
    return nullptr;
  });
}

BP_Error* memory_allocate(BP_MemoryAllocateArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "memory_allocate");
    resolve(args->backend, "memory_allocate").allocate(*args);
    return nullptr;
  });
}

BP_Error* memory_wrap(BP_MemoryWrapArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "memory_wrap");
    resolve(args->backend, "memory_wrap").wrap(*args);
    return nullptr;
  });
}

BP_Error* memory_free(BP_MemoryFreeArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "memory_free");
    resolve(args->backend, "memory_free").release(args->buffer);
    return nullptr;
  });
}

BP_Error* copy_to_device(BP_CopyToDeviceArgs* args) noexcept { return sync_copy(args, "copy_to_device"); }
BP_Error* copy_to_host(BP_CopyToHostArgs* args) noexcept { return sync_copy(args, "copy_to_host"); }
BP_Error* copy_device_to_device(BP_CopyDeviceToDeviceArgs* args) noexcept {
  return sync_copy(args, "copy_device_to_device");
}
BP_Error* copy_to_device_async(BP_CopyToDeviceArgs* args) noexcept {
  return async_copy(args, "copy_to_device_async");
}
BP_Error* copy_to_host_async(BP_CopyToHostArgs* args) noexcept { return async_copy(args, "copy_to_host_async"); }
BP_Error* copy_device_to_device_async(BP_CopyDeviceToDeviceArgs* args) noexcept {
  return async_copy(args, "copy_device_to_device_async");
}

BP_Error* event_wait(BP_EventArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "event_wait");
    return resolve(args->backend, "event_wait").wait(args->event);
  });
}

BP_Error* event_query(BP_EventArgs* args) noexcept {
  return guarded([&]() -> BP_Error* {
    require_args(args, "event_query");
    args->done = resolve(args->backend, "event_query").query(args->event) ? 1 : 0;
    return nullptr;
  });
}

void event_destroy(BP_Backend* backend, BP_Event* event) noexcept {
  BP_Error* error = guarded([&]() -> BP_Error* {
    if (event == nullptr) return nullptr;
    resolve(backend, "event_destroy").destroy(event);
    return nullptr;
  });
  if (error != nullptr) error->destroy(error);
}

}  // namespace backplane::sim
