// The producer/consumer handoff of a batch stream (step_queue.hpp).
#include "batches/step_queue.hpp"

#include "util/thread_name.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <system_error>

namespace backplane::detail {
namespace {

double seconds(std::chrono::steady_clock::duration duration) { return std::chrono::duration<double>(duration).count(); }

}  // namespace

StepQueue::StepQueue(std::int64_t first_step, std::int64_t prefetch, Prepare prepare, std::uint64_t trace_id)
    : prefetch_(prefetch),
      prepare_(std::move(prepare)),
      trace_id_(trace_id),
      next_to_prepare_(first_step),
      next_to_hand_out_(first_step) {
  try {
    producer_ = std::thread([this] { produce(); });
  } catch (const std::system_error& error) {
    // Said as the gather pool says it: which thread, and what the system
    // answered (a thread or address-space limit), never "internal error".
    throw Error(ErrorCode::kUnavailable,
                fmt::format("BatchStream: cannot start the producer thread: {}", error.what()));
  }
}

StepQueue::~StepQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (producer_.joinable()) producer_.join();
}

void StepQueue::produce() noexcept {
  try {
    name_this_thread(fmt::format("batch stream {} producer", trace_id_), fmt::format("bp-stream-{}", trace_id_));
    produce_steps();
  } catch (...) {
    // Out of memory outside a step's own preparation: the consumer gets it
    // from next() (no allocation here), and nothing more is produced.
    std::lock_guard lock(mutex_);
    if (!failure_) failure_ = std::current_exception();
    changed_.notify_all();
  }
}

std::shared_ptr<StepQueue::Entry> StepQueue::prepare_step(std::int64_t step, std::exception_ptr& failure) {
  try {
    if (step > kLastStep) {
      throw Error(ErrorCode::kOutOfRange,
                  fmt::format("BatchStream: step {} was the last a stream hands out (2^63 - {})", kLastStep,
                              INT64_MAX - kLastStep + 1));
    }
    auto entry = std::make_shared<Entry>();
    entry->prepared = prepare_(step);
    entry->arrived = entry->prepared.arrivals.empty();  // host targets: the gather was the transfer
    return entry;
  } catch (...) {
    failure = std::current_exception();  // handed to the consumer by next()
    return nullptr;
  }
}

void StepQueue::produce_steps() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (!failure_ && queue_.size() < static_cast<std::size_t>(prefetch_)) {
      const std::int64_t step = next_to_prepare_++;
      lock.unlock();
      std::exception_ptr failure;
      std::shared_ptr<Entry> entry = prepare_step(step, failure);
      lock.lock();
      // A failure next() met meanwhile is of an earlier step: it stays.
      if (!failure_) {
        failure_ = failure;
        if (entry) queue_.push_back(std::move(entry));
      }
      changed_.notify_all();
      continue;
    }
    const auto pending = std::find_if(queue_.begin(), queue_.end(), [](const auto& entry) { return !entry->arrived; });
    if (pending == queue_.end()) {
      changed_.wait(lock);
      continue;
    }
    const std::weak_ptr<Entry> watched = *pending;
    const std::vector<std::shared_ptr<Completion>> arrivals = (*pending)->prepared.arrivals;
    lock.unlock();
    for (const std::shared_ptr<Completion>& arrival : arrivals) {
      try {
        arrival->wait();
      } catch (const Error&) {
        // The consumer gets this error from its own wait in next().
      }
    }
    const Clock::time_point now = Clock::now();
    lock.lock();
    // Gone when next() handed it out meanwhile, and timed it there.
    if (const std::shared_ptr<Entry> entry = watched.lock()) record_arrival_locked(*entry, now);
  }
}

void StepQueue::record_arrival_locked(Entry& entry, Clock::time_point now) {
  if (entry.arrived) return;
  entry.arrived = true;
  PreparedStep& prepared = entry.prepared;
  stats_.transfer_seconds += seconds(now - prepared.issued);
  if (prepared.transfer.active()) {
    // Copies of successive steps overlap: each on a lane free since its issue.
    const trace::LaneHold lane(fmt::format("batch stream {} transfers", trace_id_), prepared.issued);
    std::uint64_t bytes = 0;
    for (const Array& array : prepared.arrays) bytes += array.nbytes();
    prepared.transfer.end(lane.track(), {{"stream", trace_id_}, {"step", prepared.step}, {"bytes", bytes}}, now);
  } else {
    prepared.transfer.discard();
  }
}

StreamBatch StepQueue::next() {
  const Clock::time_point start = Clock::now();
  trace::Span waiting(trace::category::kBatchStream, trace::event::kWait, 0, start);
  std::unique_lock lock(mutex_);
  if (!first_call_) {
    first_call_ = start;
    step_span_ = trace::Span(trace::category::kBatchStream, trace::event::kStep, 0, start);
  }
  changed_.wait(lock, [&] { return !queue_.empty() || failure_; });
  if (queue_.empty()) std::rethrow_exception(failure_);
  const std::shared_ptr<Entry> entry = std::move(queue_.front());
  queue_.pop_front();
  changed_.notify_all();
  lock.unlock();
  std::uint64_t bytes = 0;
  std::uint64_t windows = 0;
  try {
    for (const Array& array : entry->prepared.arrays) {
      array.block_until_ready();
      bytes += array.nbytes();
      windows += static_cast<std::uint64_t>(array.shape().front());  // its rows: this step's share of B
    }
    // One buffer holds both of a device's piece arrays.
    for (const DocumentPieces& pieces : entry->prepared.documents) pieces.cu_seqlens.block_until_ready();
  } catch (...) {
    lock.lock();
    // This step is the earliest not handed out: its error replaces any of
    // a later step, and the steps after it are dropped.
    failure_ = std::current_exception();
    queue_.clear();
    changed_.notify_all();
    throw;
  }
  const Clock::time_point now = Clock::now();
  lock.lock();
  record_arrival_locked(*entry, now);
  const std::int64_t step = entry->prepared.step;
  next_to_hand_out_.store(step + 1);
  ++stats_.steps;
  stats_.windows += windows;
  stats_.bytes += bytes;
  stats_.wait_seconds += seconds(now - start);
  // On the caller's track: the step from the previous batch in hand to this
  // one, and inside it the wait for this one. The next step runs until the
  // next batch is handed out.
  if (waiting.active()) {
    step_span_.end({}, {{"stream", trace_id_}, {"step", step}}, now);
    waiting.end({}, {{"stream", trace_id_}, {"step", step}}, now);
  }
  step_span_ = trace::Span(trace::category::kBatchStream, trace::event::kStep, 0, now);
  last_return_ = now;
  return {entry->prepared.arrays, entry->prepared.documents};
}

BatchStreamStats StepQueue::stats(bool lock) const {
  std::unique_lock guard(mutex_, std::defer_lock);
  if (lock) guard.lock();
  BatchStreamStats stats = stats_;
  if (first_call_ && stats_.steps > 0) stats.elapsed_seconds = seconds(last_return_ - *first_call_);
  return stats;
}

}  // namespace backplane::detail
