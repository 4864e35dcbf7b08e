#include "placement/completion.hpp"

#include "util/caught_error.hpp"
#include "util/fork.hpp"

#include <fmt/format.h>

namespace backplane::detail {

Completion::Completion(std::string description)
    : description_(std::move(description)), generation_(fork_generation()) {}

Completion::Completion(std::string description, std::shared_ptr<detail::LiveDevice> device, PluginEvent event,
                       std::vector<std::shared_ptr<const void>> keep_alive)
    : description_(std::move(description)),
      generation_(fork_generation()),
      device_(std::move(device)),
      event_(std::move(event)),
      keep_alive_(std::move(keep_alive)) {}

std::shared_ptr<Completion> Completion::failed(std::string description, const Error& error) {
  auto arrival = std::make_shared<Completion>(std::move(description));
  arrival->finish_error(error.code(), error.what());
  return arrival;
}

Completion::~Completion() {
  if (from_parent()) {
    // The event is the parent's: waiting on it here could block forever or
    // touch driver state that did not survive fork. It is leaked; nothing in
    // this process writes the kept buffers, so they can go back to the cache.
    keep_alive_.clear();
    event_.leak();
    return;
  }
  const std::lock_guard lock(event_mutex_);
  settle_event_locked();
}

bool Completion::from_parent() const noexcept { return generation_ != fork_generation(); }

void Completion::throw_if_failed() const {
  if (code_ != ErrorCode::kOk) throw Error(code_, fmt::format("{} failed: {}", description_, message_));
}

namespace {

// The device's own span of the transfer, as args of the host event and as an
// event of its own on a "DEVICE device time" lane. The host event keeps the
// host times, so that it still bounds the whole transfer as observed.
void record_device_time(const TransferTrace& transfer, trace::Args& args) {
  if (!transfer.device.error.empty()) args.emplace_back("device_time_error", transfer.device.error);
  if (!transfer.device.span) return;
  const auto begin = trace::from_monotonic_ns(transfer.device.span->first);
  const auto end = trace::from_monotonic_ns(transfer.device.span->second);
  args.emplace_back("device_begin_us", trace::timestamp_us(begin));
  args.emplace_back("device_end_us", trace::timestamp_us(end));
  args.emplace_back("device_dur_us", std::chrono::duration<double, std::micro>(end - begin).count());
  // Device spans arrive in the order the core finds them done, not the order
  // they ran: a lane is taken from the device begin and freed no earlier than
  // the device end, so events on one lane never overlap.
  // The device that ran the copy: the source of a download, else the target.
  const std::string& device =
      transfer.span.category() == trace::category::kDeviceToHost ? transfer.source : transfer.target;
  const trace::Track lane = trace::acquire_lane(fmt::format("{} device time", device), begin);
  trace::Args device_args{{"bytes", transfer.bytes}, {"route", transfer.route}, {"device", device}};
  const double seconds = std::chrono::duration<double>(end - begin).count();
  if (seconds > 0) device_args.emplace_back("gbps", static_cast<double>(transfer.bytes) / seconds / 1e9);
  trace::complete(lane, transfer.span.category(), transfer.span.name(), begin, end, std::move(device_args));
  trace::release_lane(lane, end);
}

void record_transfer(TransferTrace& transfer, trace::Track lane, const std::string* failure) {
  if (!transfer.span.active() || !trace::recording()) {
    transfer.span.discard();
    return;
  }
  const auto end = trace::Clock::now();
  const double seconds = std::chrono::duration<double>(end - transfer.span.begin()).count();
  trace::Args args{{"bytes", transfer.bytes},
                   {"route", transfer.route},
                   {"source", transfer.source},
                   {"target", transfer.target},
                   {"device", transfer.target}};
  if (seconds > 0) args.emplace_back("gbps", static_cast<double>(transfer.bytes) / seconds / 1e9);
  if (failure != nullptr) args.emplace_back("error", *failure);
  record_device_time(transfer, args);
  transfer.span.end(lane, std::move(args), end);
}

}  // namespace

void trace_finished(TransferTrace transfer) noexcept {
  if (!trace::enabled()) return;
  try {
    const trace::LaneHold lane(fmt::format("{} transfers", transfer.target), transfer.span.begin());
    record_transfer(transfer, lane.track(), nullptr);
  } catch (...) {  // no memory to build the event
  }
}

void Completion::trace_as(TransferTrace transfer) {
  if (!trace::enabled()) return;
  trace_lane_ = trace::LaneHold(fmt::format("{} transfers", transfer.target), transfer.span.begin());
  trace_ = std::move(transfer);
}

void Completion::record_trace(const std::string* failure) noexcept {
  if (failure != nullptr && trace::enabled()) {
    try {
      trace::instant({}, trace::category::kError, description_, {{"message", *failure}});
    } catch (...) {  // no memory to build the event
    }
  }
  if (!trace_) return;
  try {
    record_transfer(*trace_, trace_lane_.track(), failure);
  } catch (...) {  // no memory to build the event
  }
  trace_.reset();
  trace_lane_ = trace::LaneHold();
}

void Completion::finish_ok() {
  record_trace(nullptr);
  {
    const std::lock_guard lock(mutex_);
    done_.store(true, std::memory_order_release);
  }
  done_signal_.notify_all();
}

void Completion::finish_error(ErrorCode code, const std::string& message) {
  record_trace(&message);
  {
    const std::lock_guard lock(mutex_);
    code_ = code == ErrorCode::kOk ? ErrorCode::kInternal : code;
    message_ = message;
    done_.store(true, std::memory_order_release);
  }
  done_signal_.notify_all();
}

void Completion::settle_event_locked() noexcept {
  if (!event_) return;
  std::optional<CaughtError> failure;
  try {
    const auto context = [this] { return device_->selector(); };
    if (trace_ && trace::recording()) {
      event_.wait(trace_->device, context);
    } else {
      event_.wait(context);
    }
  } catch (...) {
    failure = caught_error();
  }
  event_.reset();
  // Release the staging and source buffers before anyone sees "done", so
  // memory statistics read after a wait are already settled.
  keep_alive_.clear();
  if (failure) {
    finish_error(failure->code, failure->message);
  } else {
    finish_ok();
  }
}

void Completion::wait() {
  if (from_parent()) {
    if (!done_.load(std::memory_order_acquire)) {
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("{} failed: the transfer was in flight in the parent process when it forked; its "
                              "data never arrives in this process: put the array again here from a source that "
                              "was complete before fork()",
                              description_));
    }
    throw_if_failed();
    return;
  }
  {
    const std::lock_guard lock(event_mutex_);
    settle_event_locked();
  }
  std::unique_lock lock(mutex_);
  done_signal_.wait(lock, [this] { return done_.load(std::memory_order_relaxed); });
  throw_if_failed();
}

bool Completion::ready() noexcept {
  // In a child, a parent's completion is settled for good: done, or failed by
  // wait() for having been in flight.
  if (from_parent()) return true;
  {
    std::unique_lock lock(event_mutex_, std::try_to_lock);
    // Busy means another thread is settling the event right now: not done yet.
    if (lock.owns_lock() && event_ && event_.query()) settle_event_locked();
  }
  const std::lock_guard lock(mutex_);
  return done_.load(std::memory_order_relaxed);
}

bool Completion::succeeded() noexcept {
  if (from_parent()) return done_.load(std::memory_order_acquire) && code_ == ErrorCode::kOk;
  if (!ready()) return false;
  const std::lock_guard lock(mutex_);
  return code_ == ErrorCode::kOk;
}

}  // namespace backplane::detail
