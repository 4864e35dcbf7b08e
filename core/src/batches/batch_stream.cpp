// BatchStream: the public face over three parts. The plan (stream_plan.hpp)
// checks the options and sources once and says which windows a step holds;
// the gather (step_gather.hpp) makes a step ready on the producer's thread;
// the queue (step_queue.hpp) runs that thread `prefetch` steps ahead and hands
// the steps out. This file wires them, with the one gather pool that the
// plan's document scan and the gather share, and adds what only the whole
// knows: fork() and the stats that combine the parts.
#include "batches/gather_pool.hpp"
#include "batches/step_gather.hpp"
#include "batches/step_queue.hpp"
#include "batches/stream_plan.hpp"
#include "util/fork.hpp"
#include "util/page_advice.hpp"

#include <backplane/batch_stream.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>

namespace backplane {
namespace {

// Numbers the streams of the process for the trace: "batch stream 3".
std::uint64_t next_trace_id() {
  static std::atomic<std::uint64_t> streams{0};
  return ++streams;
}

}  // namespace

// Hidden: the public class is exported, and a nested class would be with it.
class __attribute__((visibility("hidden"))) BatchStream::Impl {
 public:
  Impl(Runtime& runtime, std::vector<Array> sources, BatchStreamOptions options, const BatchStreamState* resume)
      : pool(detail::gather_thread_count(options.threads)),
        plan(runtime, std::move(sources), std::move(options), resume, pool),
        gather(plan, pool, trace_id),
        queue(
            plan.first_step(), plan.options().prefetch, [this](std::int64_t step) { return gather.gather(step); },
            trace_id) {}

  // True in a child process forked after the stream was made.
  bool inherited() const noexcept { return detail::fork_generation() != generation; }

  const std::uint64_t generation = detail::fork_generation();
  const std::uint64_t trace_id = next_trace_id();
  // The stream's one pool of threads: the plan scans the documents on it,
  // the gather copies the windows. Declared before both, so it outlives them.
  detail::GatherPool pool;
  const detail::StreamPlan plan;
  // next() from any thread: one caller at a time takes a step, so each step
  // goes to exactly one caller. Never taken in a forked child (next() refuses
  // there first), where a parent thread inside next() at fork time would have
  // left it locked for ever.
  std::mutex consumer;
  detail::StepGather gather;
  detail::StepQueue queue;  // last: its producer thread stops first
};

BatchStream::BatchStream(Runtime& runtime, std::vector<Array> sources, BatchStreamOptions options,
                         const BatchStreamState* resume)
    : impl_(std::make_unique<Impl>(runtime, std::move(sources), std::move(options), resume)) {}

BatchStream::~BatchStream() {
  // A stream inherited through fork(): its threads and any lock they held
  // stayed in the parent, so it is left as it is, never freed.
  if (impl_ && impl_->inherited()) (void)impl_.release();
}

std::vector<Array> BatchStream::next() { return next_batch().tokens; }

StreamBatch BatchStream::next_batch() {
  if (impl_->inherited()) {
    throw Error(ErrorCode::kUnavailable,
                "BatchStream: the stream was made in the parent process before fork(); its threads are not in this "
                "one; make a new stream here (from state() if it should continue)");
  }
  const std::lock_guard lock(impl_->consumer);
  return impl_->queue.next();
}

std::int64_t BatchStream::step() const { return impl_->queue.step(); }

BatchStreamState BatchStream::state() const { return impl_->plan.state_at(impl_->queue.step()); }

BatchStreamStats BatchStream::stats() const {
  const std::int64_t next = impl_->queue.step();
  BatchStreamStats stats = impl_->queue.stats(!impl_->inherited());
  stats.step = next - 1;
  stats.epoch = next > 0 ? impl_->plan.epoch(next - 1) : 0;
  stats.gather_seconds = impl_->gather.seconds();
  stats.read_bytes = impl_->gather.read_bytes();
  if (stats.elapsed_seconds > 0) {
    stats.windows_per_second = static_cast<double>(stats.windows) / stats.elapsed_seconds;
    stats.data_stall_fraction = std::min(1.0, stats.wait_seconds / stats.elapsed_seconds);
  }
  return stats;
}

std::uint64_t BatchStream::resident_bytes() const { return detail::resident_bytes(impl_->plan.file_mappings()); }

std::vector<Window> BatchStream::windows(std::int64_t step) const { return impl_->plan.windows(step); }

}  // namespace backplane
