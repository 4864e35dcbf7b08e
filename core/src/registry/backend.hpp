// One live, configured instance of a plugin's backend: the core's policy over
// abi/plugin_client.hpp.
//
// The error rule: every Backend call that can fail throws backplane::Error,
// with the plugin's code and a message that names the call (device calls
// also the device and the size: "<backend>:<ordinal>: <call> of N bytes:
// <plugin message>"). Values (PluginResult, PluginStatus) stay one layer
// down, in PluginClient, where the conformance kit reads them raw. Three
// kinds of call cannot fail for their caller and are noexcept: cleanup
// (free, event and backend destruction log or leak), PluginEvent::query (a
// failing query counts as completed, and the wait reports it) and the device
// times of an event (a trace annotation, which says why it is missing).
// Discovery is the one caller that turns these errors back into a value
// (registry/probe_call.hpp): a plugin that fails there has a status, not an
// error.
#pragma once

#include "abi/plugin_client.hpp"
#include "loader/plugin_library.hpp"
#include "loader/plugin_limits.hpp"

#include <backplane/plugin.h>
#include <backplane/backplane.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace backplane::detail {

using detail::PluginResult;
using detail::PluginStatus;

// Throws Error(code, "<context>: <plugin message>") for a failed call.
// `context` is a callable returning the text; it runs only on failure, so a
// successful call formats nothing (an eagerly formatted context cost ~80 ns
// per call, 25x the call itself).
[[noreturn]] void throw_plugin_error(const PluginError& failure, std::string_view context);
template <class Context>
void throw_if_failed(const PluginStatus& status, Context&& context) {
  if (!status.ok()) [[unlikely]]
    throw_plugin_error(status.error(), context());
}
template <class T, class Context>
T throw_if_failed(PluginResult<T>&& result, Context&& context) {
  if (!result.ok()) [[unlikely]]
    throw_plugin_error(result.error(), context());
  return std::move(result).value();
}

class Backend;

// When the device ran an asynchronous call's work, as the plugin measured it
// (event_timing, ABI 1.3): CLOCK_MONOTONIC nanoseconds, which is the
// trace's steady_clock on Linux. `error` is the plugin's answer when it
// failed to tell; neither is set for an untimed event.
struct DeviceTiming {
  std::optional<std::pair<std::int64_t, std::int64_t>> span;  // begin_ns, end_ns
  std::string error;
};

// The event of an asynchronous plugin call, owned: dropping it destroys the
// plugin's event (which waits for the operation, as the ABI requires), so no
// path forgets one. The Backend must outlive it.
class PluginEvent {
 public:
  PluginEvent() = default;
  PluginEvent(Backend& backend, BP_Event* event) noexcept : backend_(&backend), event_(event) {}
  PluginEvent(PluginEvent&& other) noexcept : backend_(other.backend_), event_(std::exchange(other.event_, nullptr)) {}
  PluginEvent& operator=(PluginEvent&& other) noexcept;
  ~PluginEvent() { reset(); }

  explicit operator bool() const noexcept { return event_ != nullptr; }
  // Waits for the operation and releases the event; throws its asynchronous
  // error as Error("<context>: <plugin message>"), `context` being a callable
  // as for throw_if_failed. An empty event has none.
  template <class Context>
  void wait(Context&& context) {
    throw_if_failed(finish(nullptr), context);
  }
  // As wait(), and when the operation succeeded asks the plugin when the
  // device ran it, into `timing` (left empty for an untimed event).
  template <class Context>
  void wait(DeviceTiming& timing, Context&& context) {
    throw_if_failed(finish(&timing), context);
  }
  // True once completed; a failing query counts as completed (wait reports it).
  bool query() noexcept;
  // Destroys the event now (waiting for the operation).
  void reset() noexcept;
  // Gives the event up without destroying it: for a parent's event in a
  // child of fork(), which must not reach the plugin.
  void leak() noexcept { event_ = nullptr; }

 private:
  // Waits, reads the timing when asked, releases the event.
  PluginStatus finish(DeviceTiming* timing);

  Backend* backend_ = nullptr;
  BP_Event* event_ = nullptr;
};

class Backend {
 public:
  struct ProbeAnswer {
    bool available = false;
    std::string reason;
    // The table's priority, or the one the probe reported (ABI 1.2).
    int priority = 0;
    // The table's, or what the probe stated (ABI 1.4), checked by the
    // table's rules; BP_CAPABILITY_PROBE_IN_CHILD is always the table's.
    BP_Capabilities capabilities = 0;
    std::int32_t dlpack_device_type = 0;
  };

  // What a probe in the probe helper found (BP_CAPABILITY_PROBE_IN_CHILD):
  // the answer and every device's description, taken there.
  struct ProbeSnapshot {
    ProbeAnswer answer;
    std::vector<DeviceInfo> devices;
  };

  // Calls backend_create with the plugin options; throws Error("backend_create
  // failed: <plugin message>"), and kPlugin for a success that set no backend.
  // `name` is the backend's name (an instance of a plugin serving several,
  // "pjrt_cpu"); empty: the table's.
  static std::unique_ptr<Backend> create(std::shared_ptr<PluginLibrary> library, const PluginOptions& options,
                                         std::string name = {});
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // The plugin's answer; throws Error("probe failed (<code>): <plugin
  // message>"), and kPlugin for a reason past kMaxPluginTextSize or a
  // capability or DLPack type the table's rules refuse (naming the field).
  // The backend's capabilities and DLPack type are the answer's from then on.
  ProbeAnswer probe();
  // Takes what the probe in the helper found instead of probing here: until
  // begin_device_use, device_count and device_info answer from it without a
  // call; device_count always does (the ordinals are the child's). Throws
  // kPlugin when the snapshot's capabilities or DLPack type break the
  // table's rules (the child is not trusted). Before the backend is shared.
  void adopt_snapshot(ProbeSnapshot snapshot);

  // Inline: bench_abi_call measures the fixed cost of an ABI call with it.
  int device_count() {
    if (snapshot_devices_ >= 0) [[unlikely]]
      return snapshot_devices_;
    PluginResult<std::int32_t> count = client_.device_count();
    if (!count.ok() || *count < 0 || *count > kMaxPluginDevices) [[unlikely]]
      throw_device_count_error(count);
    return *count;
  }
  // With memory_kinds as the plugin stated them (ABI 1.4) or, when it
  // states none, derived from the capabilities.
  DeviceInfo device_info(int ordinal);
  // A device of this backend is about to be used (its LiveDevice is made):
  // from now on device_info asks the plugin, also for a snapshot's backend.
  void begin_device_use() { in_use_.store(true, std::memory_order_release); }

  std::string_view name() const { return name_; }
  const BP_PluginApi& api() const { return library_->api(); }
  BP_Backend* handle() const { return handle_; }
  // The DLPack device type in effect (the table's, ABI 1.2, or the probe's,
  // 1.4); 0 when none.
  std::int32_t dlpack_device_type() const { return dlpack_device_type_; }
  // Called before the first device use: the plugin then stays loaded until exit.
  void mark_used() { library_->keep_loaded(); }

  // ---- device operations (placement). Each throws Error("<backend>:<ordinal>:
  // <call> of N bytes: <plugin message>") with the plugin's code, and marks the
  // backend used on first call. Thread-safe as the ABI requires of plugins.
  //
  // Fork: a backend whose memory is host memory (BP_CAPABILITY_HOST_ADDRESSABLE)
  // keeps working in a child. Any other backend made before fork() is refused
  // there without calling the plugin: a device's driver state (contexts,
  // streams, a simulator's threads) stays in the parent, and a plugin that
  // does not expect fork could hang or crash. Each device operation then
  // throws kUnavailable (see fork_error); event waits report it; frees,
  // event and backend destruction leak instead of calling the plugin.

  // False in a child of fork() for a backend made before it that is not
  // host-addressable.
  bool usable_here() const noexcept;
  // In effect: the table's, or what the probe stated (ABI 1.4).
  BP_Capabilities capabilities() const { return capabilities_; }
  bool has(BP_Capabilities capability) const { return (capabilities() & capability) != 0; }
  // True when the plugin times its asynchronous work on the device (ABI 1.3).
  bool times_events() const { return has(BP_CAPABILITY_EVENT_TIMING) && BP_TABLE_HAS_CALL(&api(), event_timing); }

  struct Allocation {
    BP_Buffer* buffer = nullptr;
    void* address = nullptr;  // the plugin's native address, may be NULL
  };
  Allocation allocate(int ordinal, BP_MemoryKind kind, std::uint64_t size);
  // Errors are logged and dropped: a free that fails leaves nothing to undo.
  void free(BP_Buffer* buffer) noexcept;
  // True when the plugin can adopt foreign memory (ABI 1.1 memory_wrap).
  bool wraps_memory() const;
  // A buffer handle over `size` bytes at `address` that the caller owns; free
  // releases the handle only. Throws kUnsupported (naming the plugin's ABI
  // version) without wraps_memory(), or the plugin's error.
  BP_Buffer* wrap(int ordinal, void* address, std::uint64_t size);

  // Synchronous copies; `ordinal` only names the device in messages.
  void copy_to_device(int ordinal, BP_Buffer* destination, std::uint64_t offset, const void* source,
                      std::uint64_t size);
  void copy_to_host(int ordinal, BP_Buffer* source, std::uint64_t offset, void* destination, std::uint64_t size);
  void copy_device_to_device(int ordinal, BP_Buffer* source, std::uint64_t source_offset, BP_Buffer* destination,
                             std::uint64_t destination_offset, std::uint64_t size);
  // Asynchronous copies: the operation is done when its event is.
  PluginEvent copy_to_device_async(int ordinal, BP_Buffer* destination, std::uint64_t offset, const void* source,
                                   std::uint64_t size);
  PluginEvent copy_to_host_async(int ordinal, BP_Buffer* source, std::uint64_t offset, void* destination,
                                 std::uint64_t size);
  PluginEvent copy_device_to_device_async(int ordinal, BP_Buffer* source, std::uint64_t source_offset,
                                          BP_Buffer* destination, std::uint64_t destination_offset, std::uint64_t size);
  // Requires BP_CAPABILITY_CONVERT_INTEGERS (throws kUnsupported otherwise).
  PluginEvent convert_integers(int ordinal, BP_Buffer* source, std::uint64_t source_offset, BP_IntegerType source_type,
                               BP_Buffer* destination, std::uint64_t destination_offset,
                               BP_IntegerType destination_type, std::uint64_t count);

 private:
  friend class PluginEvent;
  PluginStatus wait_event(BP_Event* event);
  bool query_event(BP_Event* event) noexcept;
  DeviceTiming event_timing(BP_Event* event) noexcept;
  // The `timed` field of an asynchronous call: set while a trace is recorded.
  std::int32_t timing_request() const;
  void destroy_event(BP_Event* event) noexcept;

  Backend(std::shared_ptr<PluginLibrary> library, BP_Backend* handle, std::string name);
  // Takes the stated capabilities and DLPack type once checked.
  void take_statement(const ProbeAnswer& answer);
  // The memory kinds of a device whose plugin states none (ABI 1.4).
  std::vector<std::string> derived_memory_kinds() const;
  // Throws fork_error unless usable_here(); marks the plugin used.
  void note_device_use(int ordinal) {
    if (!usable_here()) [[unlikely]]
      throw fork_error(ordinal);
    std::call_once(used_once_, [this] { mark_used(); });
  }
  Error fork_error(int ordinal) const;
  [[noreturn]] void throw_device_count_error(const PluginResult<std::int32_t>& count) const;

  std::shared_ptr<PluginLibrary> library_;
  BP_Backend* handle_;
  // With a snapshot, its device count (the ordinals are the child's); else
  // -1. Beside client_, read on device_count's fast path: the snapshot
  // itself, behind a pointer, cost that path a quarter of its time.
  int snapshot_devices_ = -1;
  detail::PluginClient client_;
  const std::string name_;
  BP_Capabilities capabilities_;
  std::int32_t dlpack_device_type_;
  std::unique_ptr<const ProbeSnapshot> snapshot_;  // set before the backend is shared
  std::atomic<bool> in_use_{false};
  std::once_flag used_once_;
  std::uint64_t fork_generation_;  // fork_generation() when created
  int created_pid_;                // getpid() when created, for fork_error
};

}  // namespace backplane::detail
