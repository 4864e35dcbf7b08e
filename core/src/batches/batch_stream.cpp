// BatchStream: a producer thread prepares steps ahead of the consumer (draw
// the windows, gather them on the pool, send them to the device) into a
// queue of at most `prefetch` steps; next() takes the oldest. While the queue
// is full the producer waits for the arrival of the batches it sent, so
// transfer times are measured where the copies end; a copy that next() sees
// end first is timed there (an upper bound, when it sat ready in the queue).
#include "batches/gather_pool.hpp"
#include "batches/sampler.hpp"
#include "placement/array_state.hpp"
#include "placement/gather.hpp"
#include "placement/transfer.hpp"
#include "trace/trace.hpp"
#include "util/bytes.hpp"
#include "util/fork.hpp"
#include "util/page_advice.hpp"
#include "util/thread_name.hpp"

#include <backplane/batch_stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace backplane {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration duration) { return std::chrono::duration<double>(duration).count(); }

[[noreturn]] void refuse(ErrorCode code, const std::string& why) {
  throw Error(code, fmt::format("BatchStream: {}", why));
}

// FNV-1a 64 of the first and the last 4 KiB (the whole of a smaller source):
// cheap on a cold 100 GiB file (two reads), and enough to tell shards apart.
std::uint64_t fingerprint(const std::byte* data, std::uint64_t size) {
  constexpr std::uint64_t kEdge = 4096;
  std::uint64_t hash = 0xCBF29CE484222325;
  const auto add = [&](const std::byte* begin, std::uint64_t count) {
    for (std::uint64_t index = 0; index < count; ++index) {
      hash = (hash ^ static_cast<std::uint8_t>(begin[index])) * 0x100000001B3;
    }
  };
  const std::uint64_t head = std::min(size, kEdge);
  add(data, head);
  add(data + (size - std::min(size, kEdge)), std::min(size, kEdge));
  return hash;
}

struct Source {
  Array array;  // keeps the memory alive
  const std::byte* data = nullptr;
  std::uint64_t tokens = 0;
  std::uint64_t starts = 0;  // windows that fit
  bool droppable = false;    // a file mapping whose pages may be given back
};

// One step in the queue. `arrived` is set (under the stream's lock) by
// whichever side sees the copies end first, which records the transfer time.
struct Prepared {
  std::int64_t step = 0;
  std::vector<Array> arrays;
  // What the producer waits on to time the copies: holding these rather
  // than the arrays lets a batch's memory go back to the cache as soon as
  // the consumer drops it.
  std::vector<std::shared_ptr<detail::Completion>> arrivals;
  std::exception_ptr failure;
  Clock::time_point issued;
  detail::trace::Span transfer;  // from `issued` to the arrival
  bool arrived = false;
};

}  // namespace

class BatchStream::Impl {
 public:
  Impl(Runtime& runtime, std::vector<Array> sources, BatchStreamOptions options, const BatchStreamState* resume);
  ~Impl();

  std::vector<Array> next();
  std::int64_t step() const;
  BatchStreamState state() const;
  BatchStreamStats stats() const;
  std::uint64_t resident_bytes() const;
  std::vector<Window> windows(std::int64_t step) const;

  // True in a child process forked after the stream was made.
  bool inherited() const noexcept { return detail::fork_generation() != generation_; }
  void abandon_threads() noexcept;

 private:
  void check_options(std::size_t source_count);
  void open_sources(std::vector<Array> sources);
  void check_resume(const BatchStreamState& saved) const;
  void produce();
  void produce_steps();
  std::shared_ptr<Prepared> prepare(std::int64_t step);
  Array gather_for(std::size_t device, std::span<const Window> windows, std::int64_t step);
  void advise(std::int64_t step) const;
  // With the lock held: marks `entry` arrived now, once.
  void record_arrival_locked(Prepared& entry, Clock::time_point now);

  const std::uint64_t generation_ = detail::fork_generation();
  // For the trace's track names: "batch stream 3 transfers #0".
  const std::uint64_t trace_id_ = next_trace_id();
  static std::uint64_t next_trace_id() {
    static std::atomic<std::uint64_t> counter{0};
    return ++counter;
  }
  BatchStreamOptions options_;
  std::shared_ptr<detail::Placement> placement_;
  std::vector<std::shared_ptr<detail::LiveDevice>> targets_;
  std::vector<Source> sources_;
  DType from_ = DType::kU8;
  DType to_ = DType::kU8;
  std::int64_t global_batch_ = 0;
  BatchStreamState identity_;  // what a saved state must match (its step unused)
  std::unique_ptr<detail::WindowSampler> sampler_;
  std::unique_ptr<detail::GatherPool> pool_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<Prepared>> queue_;
  std::int64_t next_to_prepare_ = 0;
  // Atomic so that step() and state() take no lock: a child forked while the
  // producer held the lock can still read where the stream stood.
  std::atomic<std::int64_t> next_to_hand_out_{0};
  bool stopping_ = false;
  bool producer_failed_ = false;
  std::exception_ptr consumer_failure_;
  std::exception_ptr producer_error_;  // the producer thread itself failed
  BatchStreamStats stats_;
  std::optional<Clock::time_point> first_call_;
  Clock::time_point last_return_;
  // The step in progress, from the previous batch handed out (or the first
  // next() call) to the next.
  detail::trace::Span step_span_;
  std::thread producer_;
};

void BatchStream::Impl::check_options(std::size_t source_count) {
  if (source_count == 0) refuse(ErrorCode::kInvalidArgument, "no token sources given");
  if (options_.batch_size < 1) {
    refuse(ErrorCode::kInvalidArgument, fmt::format("batch_size must be at least 1, got {}", options_.batch_size));
  }
  if (options_.context < 1) {
    refuse(ErrorCode::kInvalidArgument, fmt::format("context must be at least 1, got {}", options_.context));
  }
  if (options_.context == INT64_MAX) {
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("context must be below 2^63 - 1 (a window is context + 1 tokens), got {}", options_.context));
  }
  if (options_.world_size < 1 || options_.rank < 0 || options_.rank >= options_.world_size) {
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("rank {} is not in [0, world_size = {})", options_.rank, options_.world_size));
  }
  if (options_.prefetch < 1 || options_.prefetch > kMaxPrefetch) {
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("prefetch must be in [1, {}], got {}", kMaxPrefetch, options_.prefetch));
  }
  if (__builtin_mul_overflow(options_.batch_size, options_.world_size, &global_batch_)) {
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("batch_size {} x world_size {} overflows", options_.batch_size, options_.world_size));
  }
  if (!options_.weights.empty()) {
    if (options_.weights.size() != source_count) {
      refuse(ErrorCode::kInvalidArgument,
             fmt::format("{} weights for {} sources", options_.weights.size(), source_count));
    }
    double sum = 0;
    for (std::size_t index = 0; index < options_.weights.size(); ++index) {
      const double weight = options_.weights[index];
      if (!std::isfinite(weight) || weight < 0) {
        refuse(ErrorCode::kInvalidArgument,
               fmt::format("weight {} (of source {}) is not a finite number >= 0", weight, index));
      }
      sum += weight;
    }
    if (!(sum > 0) || !std::isfinite(sum)) {
      refuse(ErrorCode::kInvalidArgument, "the weights are all zero (or sum to infinity)");
    }
  }
  if (options_.threads > 256) {
    refuse(ErrorCode::kInvalidArgument, fmt::format("threads must be at most 256, got {}", options_.threads));
  }
}

void BatchStream::Impl::open_sources(std::vector<Array> sources) {
  const std::int64_t window = options_.context + 1;
  std::uint64_t total_starts = 0;
  const detail::MemoryMappings mappings = detail::MemoryMappings::of_this_process();
  for (std::size_t index = 0; index < sources.size(); ++index) {
    const detail::ArrayState& state = detail::ArrayAccess::state(sources[index], "BatchStream");
    const detail::ArrayStorage& storage = *state.storage;
    if (state.shape.size() != 1) {
      refuse(ErrorCode::kUnsupported,
             fmt::format("source {} must be 1-D, got shape [{}]", index, fmt::join(state.shape, ", ")));
    }
    if (storage.host == nullptr) {
      refuse(ErrorCode::kUnsupported, fmt::format("source {} lives on {}, which is not host memory; keep token "
                                                  "arrays on a cpu device (load_tokens does)",
                                                  index, storage.device->selector()));
    }
    if (!dtype_is_integer(state.dtype)) {
      refuse(ErrorCode::kUnsupported,
             fmt::format("source {} holds {}, not integer tokens", index, dtype_name(state.dtype)));
    }
    if (index > 0 && state.dtype != from_) {
      refuse(ErrorCode::kUnsupported, fmt::format("source {} holds {} but source 0 holds {}; give every source the "
                                                  "same token dtype",
                                                  index, dtype_name(state.dtype), dtype_name(from_)));
    }
    from_ = state.dtype;
    detail::wait_for(storage);  // a source may still be arriving from another device
    Source source;
    source.array = sources[index];
    source.data = storage.host + state.offset;
    source.tokens = state.elements;
    source.starts = static_cast<std::int64_t>(source.tokens) >= window ? source.tokens - options_.context : 0;
    const detail::HostRange range{source.data, state.nbytes};
    source.droppable = mappings.pages_are_releasable(range);
    if (options_.release_pages && !source.droppable) {
      refuse(ErrorCode::kInvalidArgument,
             fmt::format("release_pages: source {} is not in a shared mapping (as /proc/self/maps shows it), and "
                         "giving back the pages of private or heap memory could lose its data; load it with "
                         "load_tokens",
                         index));
    }
    detail::advise_random(range);
    total_starts += source.starts;
    identity_.sources.push_back({source.tokens, state.dtype, fingerprint(source.data, state.nbytes)});
    sources_.push_back(std::move(source));
  }
  if (total_starts == 0) {
    const auto longest = std::max_element(sources_.begin(), sources_.end(),
                                          [](const Source& a, const Source& b) { return a.tokens < b.tokens; });
    refuse(ErrorCode::kOutOfRange,
           fmt::format("a window of context + 1 = {} tokens is longer than every source (the longest has {})", window,
                       longest->tokens));
  }
  if (options_.weights.empty()) {
    if (static_cast<std::uint64_t>(global_batch_) > total_starts) {
      refuse(ErrorCode::kOutOfRange,
             fmt::format("{} distinct windows per global step (batch_size {} x world_size {}) do not fit in the {} "
                         "window starts of the sources",
                         global_batch_, options_.batch_size, options_.world_size, total_starts));
    }
    return;
  }
  for (std::size_t index = 0; index < sources_.size(); ++index) {
    if (options_.weights[index] > 0 && sources_[index].starts < static_cast<std::uint64_t>(global_batch_)) {
      refuse(ErrorCode::kOutOfRange,
             fmt::format("source {} has {} window starts, fewer than the {} windows of a global step; with weights "
                         "every source of positive weight needs at least that many",
                         index, sources_[index].starts, global_batch_));
    }
  }
}

BatchStream::Impl::Impl(Runtime& runtime, std::vector<Array> sources, BatchStreamOptions options,
                        const BatchStreamState* resume)
    : options_(std::move(options)) {
  check_options(sources.size());
  placement_ = detail::placement_of(runtime);
  std::vector<Device> devices = options_.devices;
  if (devices.empty()) devices.push_back(runtime.default_device().device);
  for (std::size_t index = 0; index < devices.size(); ++index) {
    for (std::size_t earlier = 0; earlier < index; ++earlier) {
      if (devices[earlier] == devices[index]) {
        refuse(ErrorCode::kInvalidArgument, fmt::format("device {} is listed twice", devices[index].selector()));
      }
    }
    targets_.push_back(placement_->device(devices[index]));
  }
  if (options_.batch_size % static_cast<std::int64_t>(targets_.size()) != 0) {
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("batch_size {} does not split evenly over {} devices", options_.batch_size, targets_.size()));
  }
  open_sources(std::move(sources));
  to_ = options_.dtype.value_or(from_);
  if (!dtype_is_integer(to_)) {
    refuse(ErrorCode::kUnsupported, fmt::format("cannot hand out {} tokens as {}; only integer dtypes convert",
                                                dtype_name(from_), dtype_name(to_)));
  }
  if (const std::string loss = detail::value_loss(from_, to_); !loss.empty()) refuse(ErrorCode::kInvalidArgument, loss);
  identity_.seed = options_.seed;
  identity_.global_batch = global_batch_;
  identity_.context = options_.context;
  identity_.weights = options_.weights;
  if (resume != nullptr) {
    check_resume(*resume);
    next_to_prepare_ = resume->step;
    next_to_hand_out_.store(resume->step);
  }
  std::vector<std::uint64_t> starts;
  for (const Source& source : sources_) starts.push_back(source.starts);
  sampler_ = std::make_unique<detail::WindowSampler>(options_.seed, std::move(starts), options_.weights,
                                                     static_cast<std::uint64_t>(global_batch_));
  const unsigned threads =
      options_.threads != 0 ? options_.threads : std::clamp(std::thread::hardware_concurrency(), 4U, 8U);
  pool_ = std::make_unique<detail::GatherPool>(threads);
  producer_ = std::thread([this] { produce(); });
}

void BatchStream::Impl::check_resume(const BatchStreamState& saved) const {
  const auto differs = [](const char* what, const auto& saved_value, const auto& value) {
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("cannot resume: the state was saved with {} {}, this stream has {}", what, saved_value, value));
  };
  // Steps are counted in int64 with prefetch steps of look-ahead on top.
  if (saved.step < 0 || saved.step > INT64_MAX - 2 * kMaxPrefetch) {
    refuse(ErrorCode::kInvalidArgument, fmt::format("cannot resume at step {}", saved.step));
  }
  if (saved.seed != identity_.seed) differs("seed", saved.seed, identity_.seed);
  if (saved.context != identity_.context) differs("context", saved.context, identity_.context);
  if (saved.global_batch != identity_.global_batch) {
    differs("global batch (batch_size x world_size)", saved.global_batch, identity_.global_batch);
  }
  if (saved.weights != identity_.weights) {
    differs("weights", fmt::format("[{}]", fmt::join(saved.weights, ", ")),
            fmt::format("[{}]", fmt::join(identity_.weights, ", ")));
  }
  if (saved.sources.size() != identity_.sources.size()) {
    differs("a number of sources of", saved.sources.size(), identity_.sources.size());
  }
  for (std::size_t index = 0; index < saved.sources.size(); ++index) {
    const BatchStreamState::Source& was = saved.sources[index];
    const BatchStreamState::Source& now = identity_.sources[index];
    if (was.tokens != now.tokens || was.dtype != now.dtype || was.fingerprint != now.fingerprint) {
      refuse(ErrorCode::kInvalidArgument,
             fmt::format("cannot resume: source {} differs from the one the state was saved with ({} {} tokens, "
                         "fingerprint {:016x}; now {} {} tokens, fingerprint {:016x})",
                         index, was.tokens, dtype_name(was.dtype), was.fingerprint, now.tokens, dtype_name(now.dtype),
                         now.fingerprint));
    }
  }
}

BatchStream::Impl::~Impl() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (producer_.joinable()) producer_.join();
}

void BatchStream::Impl::abandon_threads() noexcept {
  // The threads stayed in the parent; joining them here would wait forever.
  (void)new std::thread(std::move(producer_));
  detail::GatherPool::abandon(std::move(pool_));
}

std::vector<Window> BatchStream::Impl::windows(std::int64_t step) const {
  if (step < 0) refuse(ErrorCode::kOutOfRange, fmt::format("step {} is negative", step));
  std::vector<Window> drawn(static_cast<std::size_t>(options_.batch_size));
  sampler_->draw(static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(options_.rank * options_.batch_size),
                 drawn);
  return drawn;
}

void BatchStream::Impl::advise(std::int64_t step) const {
  const std::uint64_t row_bytes = static_cast<std::uint64_t>(options_.context + 1) * (dtype_bits(from_) / 8);
  const std::uint64_t element = static_cast<std::uint64_t>(dtype_bits(from_) / 8);
  for (const Window& window : windows(step)) {
    const Source& source = sources_[static_cast<std::size_t>(window.source)];
    detail::advise_will_need({source.data + static_cast<std::uint64_t>(window.start) * element, row_bytes});
  }
}

Array BatchStream::Impl::gather_for(std::size_t device, std::span<const Window> windows, std::int64_t step) {
  const std::shared_ptr<detail::LiveDevice>& target = targets_[device];
  const std::int64_t length = options_.context + 1;
  std::vector<std::int64_t> shape{static_cast<std::int64_t>(windows.size()), length};
  const detail::Extent extent = detail::extent_of(to_, shape, "BatchStream");
  const std::uint64_t element = static_cast<std::uint64_t>(dtype_bits(from_) / 8);
  const std::uint64_t row_in = static_cast<std::uint64_t>(length) * element;
  std::vector<const std::byte*> rows(windows.size());
  for (std::size_t index = 0; index < windows.size(); ++index) {
    const Source& source = sources_[static_cast<std::size_t>(windows[index].source)];
    rows[index] = source.data + static_cast<std::uint64_t>(windows[index].start) * element;
  }
  const detail::RowGather gather{from_, rows.size(), length, [&](std::byte* destination, DType as) {
                                   const std::uint64_t row_out =
                                       static_cast<std::uint64_t>(length) * (dtype_bits(as) / 8);
                                   pool_->run(rows.size(), [&](std::size_t begin, std::size_t end) {
                                     const std::span<const std::byte* const> piece(rows.data() + begin, end - begin);
                                     detail::gather_rows(piece, from_, length, destination + begin * row_out, as);
                                   });
                                   if (!options_.release_pages) return;
                                   // After the whole gather, so no thread re-faults what another dropped.
                                   for (std::size_t index = 0; index < rows.size(); ++index) {
                                     const Source& source = sources_[static_cast<std::size_t>(windows[index].source)];
                                     detail::drop_pages({rows[index], row_in}, {source.data, source.array.nbytes()});
                                   }
                                 }};
  return detail::send_rows(
      *placement_, gather, target, to_, std::move(shape), extent,
      [&] {
        return fmt::format("batch stream step {}: {} windows x {} {} ({}) to {}", step, windows.size(), length,
                           dtype_name(to_), detail::describe_bytes(extent.bytes), target->selector());
      },
      detail::trace::event::kBatch);
}

std::shared_ptr<Prepared> BatchStream::Impl::prepare(std::int64_t step) {
  auto entry = std::make_shared<Prepared>();
  entry->step = step;
  try {
    const std::vector<Window> drawn = windows(step);
    const std::size_t share = drawn.size() / targets_.size();
    const Clock::time_point start = Clock::now();
    detail::trace::Span gathering(detail::trace::category::kBatchStream, detail::trace::event::kGather, 0, start);
    for (std::size_t device = 0; device < targets_.size(); ++device) {
      entry->arrays.push_back(gather_for(device, std::span(drawn).subspan(device * share, share), step));
    }
    entry->issued = Clock::now();
    if (gathering.active()) {
      // What the step hands out, as stats().bytes counts it.
      std::uint64_t bytes = 0;
      for (const Array& array : entry->arrays) bytes += array.nbytes();
      gathering.end({}, {{"stream", trace_id_}, {"step", step}, {"windows", drawn.size()}, {"bytes", bytes}},
                    entry->issued);
    } else {
      gathering.discard();
    }
    entry->transfer =
        detail::trace::Span(detail::trace::category::kBatchStream, detail::trace::event::kTransfer, 0, entry->issued);
    for (const Array& array : entry->arrays) {
      const auto& arrival = detail::ArrayAccess::state(array, "BatchStream").storage->arrival;
      if (arrival) entry->arrivals.push_back(arrival);
    }
    entry->arrived = entry->arrivals.empty();  // host targets: the gather was the transfer
    std::lock_guard lock(mutex_);
    stats_.gather_seconds += seconds(entry->issued - start);
  } catch (...) {
    entry->failure = std::current_exception();  // handed to the consumer by next()
  }
  return entry;
}

void BatchStream::Impl::record_arrival_locked(Prepared& entry, Clock::time_point now) {
  if (entry.arrived) return;
  entry.arrived = true;
  stats_.transfer_seconds += seconds(now - entry.issued);
  if (entry.transfer.active()) {
    // Copies of successive steps overlap: each on a lane free since its issue.
    const detail::trace::LaneHold lane(fmt::format("batch stream {} transfers", trace_id_), entry.issued);
    std::uint64_t bytes = 0;
    for (const Array& array : entry.arrays) bytes += array.nbytes();
    entry.transfer.end(lane.track(), {{"stream", trace_id_}, {"step", entry.step}, {"bytes", bytes}}, now);
  } else {
    entry.transfer.discard();
  }
}

void BatchStream::Impl::produce() {
  try {
    detail::name_this_thread(fmt::format("batch stream {} producer", trace_id_),
                             fmt::format("bp-stream-{}", trace_id_));
    produce_steps();
  } catch (...) {
    // Out of memory outside a step's own preparation: the consumer gets it
    // from next() (no allocation here), and nothing more is produced.
    std::lock_guard lock(mutex_);
    producer_error_ = std::current_exception();
    producer_failed_ = true;
    changed_.notify_all();
  }
}

void BatchStream::Impl::produce_steps() {
  for (std::int64_t ahead = 0; ahead < options_.prefetch; ++ahead) advise(next_to_prepare_ + ahead);
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (!producer_failed_ && queue_.size() < static_cast<std::size_t>(options_.prefetch)) {
      const std::int64_t step = next_to_prepare_++;
      lock.unlock();
      // The pages of the step `prefetch` ahead start arriving while this
      // one is gathered: cold windows are read concurrently, not one fault
      // at a time.
      advise(step + options_.prefetch);
      std::shared_ptr<Prepared> entry = prepare(step);
      lock.lock();
      producer_failed_ = entry->failure != nullptr;
      queue_.push_back(std::move(entry));
      changed_.notify_all();
      continue;
    }
    const auto pending = std::find_if(queue_.begin(), queue_.end(),
                                      [](const auto& entry) { return !entry->arrived && !entry->failure; });
    if (pending == queue_.end()) {
      changed_.wait(lock);
      continue;
    }
    const std::weak_ptr<Prepared> watched = *pending;
    const std::vector<std::shared_ptr<detail::Completion>> arrivals = (*pending)->arrivals;
    lock.unlock();
    for (const std::shared_ptr<detail::Completion>& arrival : arrivals) {
      try {
        arrival->wait();
      } catch (const Error&) {
        // The consumer gets this error from its own wait in next().
      }
    }
    const Clock::time_point now = Clock::now();
    lock.lock();
    // Gone when next() handed it out meanwhile, and timed it there.
    if (const std::shared_ptr<Prepared> entry = watched.lock()) record_arrival_locked(*entry, now);
  }
}

std::vector<Array> BatchStream::Impl::next() {
  if (inherited()) {
    refuse(ErrorCode::kUnavailable,
           "the stream was made in the parent process before fork(); its threads are not in this one; make a new "
           "stream here (from state() if it should continue)");
  }
  const Clock::time_point start = Clock::now();
  detail::trace::Span waiting(detail::trace::category::kBatchStream, detail::trace::event::kWait, 0, start);
  std::unique_lock lock(mutex_);
  if (consumer_failure_) std::rethrow_exception(consumer_failure_);
  if (!first_call_) {
    first_call_ = start;
    step_span_ = detail::trace::Span(detail::trace::category::kBatchStream, detail::trace::event::kStep, 0, start);
  }
  changed_.wait(lock, [&] { return !queue_.empty() || producer_error_; });
  if (queue_.empty()) {
    consumer_failure_ = producer_error_;
    std::rethrow_exception(consumer_failure_);
  }
  const std::shared_ptr<Prepared> entry = queue_.front();
  if (entry->failure) {
    consumer_failure_ = entry->failure;
    std::rethrow_exception(consumer_failure_);
  }
  queue_.pop_front();
  changed_.notify_all();
  lock.unlock();
  std::uint64_t bytes = 0;
  try {
    for (const Array& array : entry->arrays) {
      array.block_until_ready();
      bytes += array.nbytes();
    }
  } catch (...) {
    lock.lock();
    consumer_failure_ = std::current_exception();
    throw;
  }
  const Clock::time_point now = Clock::now();
  lock.lock();
  record_arrival_locked(*entry, now);
  next_to_hand_out_.store(entry->step + 1);
  ++stats_.steps;
  stats_.windows += static_cast<std::uint64_t>(options_.batch_size);
  stats_.bytes += bytes;
  stats_.wait_seconds += seconds(now - start);
  // On the caller's track: the step from the previous batch in hand to this
  // one, and inside it the wait for this one. The next step runs until the
  // next batch is handed out.
  if (waiting.active()) {
    step_span_.end({}, {{"stream", trace_id_}, {"step", entry->step}}, now);
    waiting.end({}, {{"stream", trace_id_}, {"step", entry->step}}, now);
  }
  step_span_ = detail::trace::Span(detail::trace::category::kBatchStream, detail::trace::event::kStep, 0, now);
  last_return_ = now;
  return entry->arrays;
}

std::int64_t BatchStream::Impl::step() const { return next_to_hand_out_.load(); }

BatchStreamState BatchStream::Impl::state() const {
  BatchStreamState state = identity_;
  state.step = step();
  return state;
}

BatchStreamStats BatchStream::Impl::stats() const {
  BatchStreamStats stats;
  {
    // In a forked child no other thread uses the stream, and the lock may
    // have been held by one that stayed in the parent.
    std::unique_lock lock(mutex_, std::defer_lock);
    if (!inherited()) lock.lock();
    stats = stats_;
    if (first_call_ && stats_.steps > 0) stats.elapsed_seconds = seconds(last_return_ - *first_call_);
  }
  if (stats.elapsed_seconds > 0) {
    stats.windows_per_second = static_cast<double>(stats.windows) / stats.elapsed_seconds;
    stats.data_stall_fraction = std::min(1.0, stats.wait_seconds / stats.elapsed_seconds);
  }
  return stats;
}

std::uint64_t BatchStream::Impl::resident_bytes() const {
  std::vector<detail::HostRange> ranges;
  for (const Source& source : sources_) {
    if (source.droppable) ranges.push_back({source.data, source.array.nbytes()});
  }
  return detail::resident_bytes(ranges);
}

BatchStream::BatchStream(Runtime& runtime, std::vector<Array> sources, BatchStreamOptions options,
                         const BatchStreamState* resume)
    : impl_(std::make_unique<Impl>(runtime, std::move(sources), std::move(options), resume)) {}

BatchStream::~BatchStream() {
  if (impl_ && impl_->inherited()) {
    // A stream inherited through fork(): its threads and any lock they held
    // stayed in the parent, so it is left as it is, never freed.
    impl_->abandon_threads();
    (void)impl_.release();
  }
}

std::vector<Array> BatchStream::next() { return impl_->next(); }
std::int64_t BatchStream::step() const { return impl_->step(); }
BatchStreamState BatchStream::state() const { return impl_->state(); }
BatchStreamStats BatchStream::stats() const { return impl_->stats(); }
std::uint64_t BatchStream::resident_bytes() const { return impl_->resident_bytes(); }
std::vector<Window> BatchStream::windows(std::int64_t step) const { return impl_->windows(step); }

}  // namespace backplane
