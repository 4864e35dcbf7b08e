// The handoff of a batch stream: a producer thread prepares steps in order,
// from the first step on, into a queue of at most `prefetch` steps; next()
// takes the oldest. While the queue is full the producer waits for the
// arrival of the batches it sent, so transfer times are measured where the
// copies end; a copy that next() sees end first is timed there (an upper
// bound, when it sat ready in the queue).
//
// One failure state: the first error of the earliest step. When preparing a
// step fails (or the producer itself does), nothing more is prepared and
// next() throws that error once the steps prepared before it are handed out;
// when next() finds a handed-out batch failed, the queue is dropped. Either
// way every later next() throws the same error, and step() still names the
// step that failed.
#pragma once

#include "batches/step_gather.hpp"
#include "trace/trace.hpp"

#include <backplane/array.hpp>
#include <backplane/batch_stream.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace backplane::detail {

class StepQueue {
 public:
  using Prepare = std::function<PreparedStep(std::int64_t step)>;

  // Starts the producer thread, which prepares steps first_step, first_step
  // + 1, ... with `prepare`, keeping at most `prefetch` of them ready. The
  // step after kLastStep is never prepared: it fails with kOutOfRange.
  // `trace_id` numbers the stream in the trace and in its thread's name.
  StepQueue(std::int64_t first_step, std::int64_t prefetch, Prepare prepare, std::uint64_t trace_id);
  // Stops the producer and waits for it (steps in flight included).
  ~StepQueue();
  StepQueue(const StepQueue&) = delete;
  StepQueue& operator=(const StepQueue&) = delete;

  // The next step's arrays, ready to read; blocks while it is being
  // prepared. One caller at a time.
  StreamBatch next();
  // The step next() hands out next. Lock-free: a child forked while the
  // producer held the lock can still read it.
  std::int64_t step() const noexcept { return next_to_hand_out_.load(); }
  // The handoff's share of the stats: steps, windows, bytes, wait, transfer and
  // elapsed seconds. `lock`: false in a forked child, where no other thread
  // uses the queue and the lock may have been held by one left in the parent.
  BatchStreamStats stats(bool lock) const;

 private:
  using Clock = std::chrono::steady_clock;

  // A prepared step in the queue. `arrived` is set (under the lock) by
  // whichever side sees the copies end first, which records the transfer.
  struct Entry {
    PreparedStep prepared;
    bool arrived = false;
  };

  void produce() noexcept;
  void produce_steps();
  // The prepared step, or the error that preparing it threw.
  std::shared_ptr<Entry> prepare_step(std::int64_t step, std::exception_ptr& failure);
  // With the lock held: marks `entry` arrived now, once.
  void record_arrival_locked(Entry& entry, Clock::time_point now);

  const std::int64_t prefetch_;
  const Prepare prepare_;
  // For the trace's track and thread names: "batch stream 3 transfers #0".
  const std::uint64_t trace_id_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<Entry>> queue_;
  std::exception_ptr failure_;
  bool stopping_ = false;
  std::int64_t next_to_prepare_;
  std::atomic<std::int64_t> next_to_hand_out_;
  BatchStreamStats stats_;
  std::optional<Clock::time_point> first_call_;
  Clock::time_point last_return_;
  // NVTX: the step in progress, from the previous batch handed out (or the
  // first next() call) to the next.
  trace::Span step_span_;
  std::thread producer_;  // last: it starts once everything above exists
};

}  // namespace backplane::detail
