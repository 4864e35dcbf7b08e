// When an array's data has arrived, and whether it did.
//
// Two kinds: one finished by a transfer job (finish_*), and one tracking a
// plugin event directly (an asynchronous copy issued on the caller's thread),
// which holds whatever the copy reads or writes until the event completed.
//
// Fork: a completion made before fork() and not done by then never finishes in
// the child (the thread or device that would finish it stays in the parent).
// In the child it reports kUnavailable "the transfer was in flight in the
// parent process when it forked" instead of waiting, and the child never takes
// its mutexes (a parent thread may have held them at fork time).
#pragma once

#include "registry/device.hpp"
#include "trace/trace.hpp"

#include <backplane/error.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace backplane::detail {

// A transfer as the trace shows it (docs/tracing.md): one complete event from
// the moment the completion is traced (the copy was issued or queued) to the
// moment it is found done, on a lane of `lane` ("sim:0 transfers #k"), with
// args bytes, route, source, target and the achieved GB/s.
struct TransferTrace {
  // From the call that issued the transfer; its category is the direction
  // (trace::category::kHostToDevice, ...), its name the operation
  // (trace::event::kDevicePut, ...). Ended when the transfer is recorded.
  trace::Span span;
  std::string route;  // plan_put's route, or how the batch went
  std::uint64_t bytes = 0;
  std::string source;  // "cpu:0"
  std::string target;  // "sim:0"
  // When the device ran it, where the plugin times its events (ABI 1.3).
  DeviceTiming device{};
};

// Records a transfer that finished on the calling thread without a
// completion, from transfer.begin to now. No-op while tracing is off.
void trace_finished(TransferTrace transfer) noexcept;

class Completion {
 public:
  // `description` names the operation, size and devices; it prefixes errors.
  explicit Completion(std::string description);
  // Tracks an asynchronous call's event on `device`, holding `keep_alive`
  // (what the call reads or writes) until the event completed.
  Completion(std::string description, std::shared_ptr<detail::LiveDevice> device, PluginEvent event,
             std::vector<std::shared_ptr<const void>> keep_alive);
  // An already finished completion carrying `error`.
  static std::shared_ptr<Completion> failed(std::string description, const Error& error);
  // A pending event is waited for (event_destroy waits), so buffers return to
  // their caches only once nothing writes them any more.
  ~Completion();
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  // Records this completion's transfer on the trace when it finishes. Call
  // before anything can finish it (right after making it); a no-op while
  // tracing is off.
  void trace_as(TransferTrace transfer);

  void finish_ok();
  // `message` is what went wrong; the description is prepended.
  void finish_error(ErrorCode code, const std::string& message);

  // Blocks until done; throws Error(code, "<description> failed: <why>").
  void wait();
  // Done (successfully or not); never throws.
  bool ready() noexcept;
  // Done and successful; never throws.
  bool succeeded() noexcept;

 private:
  // Records the traced transfer (and releases its lane); `failure` when it failed.
  void record_trace(const std::string* failure) noexcept;
  // With event_mutex_ held: collects the event's result and releases it.
  void settle_event_locked() noexcept;
  // True when made before a fork() this process is a child of.
  bool from_parent() const noexcept;
  // The result as it was at fork time, for from_parent() completions: set
  // before done_ was published, and never written after.
  void throw_if_failed() const;

  const std::string description_;
  const std::uint64_t generation_;  // fork_generation() when made

  std::mutex event_mutex_;                      // serialises waits on the plugin event
  std::shared_ptr<detail::LiveDevice> device_;  // keeps the event's backend alive
  PluginEvent event_;
  std::vector<std::shared_ptr<const void>> keep_alive_;

  // Set by trace_as before the completion is shared; read by whoever finishes it.
  std::optional<TransferTrace> trace_;
  trace::LaneHold trace_lane_;

  std::mutex mutex_;  // guards the result
  std::condition_variable done_signal_;
  std::atomic<bool> done_{false};  // written with mutex_ held; read lock-free after fork
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

}  // namespace backplane::detail
