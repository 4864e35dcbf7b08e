// The plan of a batch stream: every check of its options and sources, in the
// order the constructor has always made them, and the identity a saved state
// is checked against (state_fields.hpp).
#include "batches/stream_plan.hpp"

#include "batches/state_fields.hpp"
#include "placement/array_state.hpp"
#include "placement/gather.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace backplane::detail {
namespace {

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

}  // namespace

StreamPlan::StreamPlan(Runtime& runtime, std::vector<Array> sources, BatchStreamOptions options,
                       const BatchStreamState* resume)
    : options_(std::move(options)) {
  check_options(sources.size());
  choose_devices(runtime);
  open_sources(std::move(sources));
  if (options_.documents.kind != DocumentBoundaries::Kind::kNone) find_documents();
  check_window_counts();
  to_ = options_.dtype.value_or(from_);
  if (!dtype_is_integer(to_)) {
    refuse(ErrorCode::kUnsupported, fmt::format("cannot hand out {} tokens as {}; only integer dtypes convert",
                                                dtype_name(from_), dtype_name(to_)));
  }
  if (const std::string loss = value_loss(from_, to_); !loss.empty()) refuse(ErrorCode::kInvalidArgument, loss);
  if (!options_.seed) options_.seed = resume != nullptr ? resume->seed : 0;
  identity_.seed = *options_.seed;
  identity_.global_batch = global_batch_;
  identity_.context = options_.context;
  identity_.weights = options_.weights;
  if (documents_) identity_.documents = documents_->described();
  if (resume != nullptr) {
    check_resumable(*resume, identity_);
    first_step_ = resume->step;
  }
  std::vector<std::uint64_t> starts;
  for (const StreamSource& source : sources_) starts.push_back(source.starts);
  sampler_ = std::make_unique<WindowSampler>(identity_.seed, std::move(starts), options_.weights,
                                             static_cast<std::uint64_t>(global_batch_));
}

void StreamPlan::check_options(std::size_t source_count) {
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
  if (options_.world_size < 1) {
    refuse(ErrorCode::kInvalidArgument, fmt::format("world_size must be at least 1, got {}", options_.world_size));
  }
  if (options_.rank < 0 || options_.rank >= options_.world_size) {
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
  if (options_.max_documents < 0) {
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("max_documents must be at least 0 (0: rows x context), got {}", options_.max_documents));
  }
  if (options_.max_documents > 0 && options_.documents.kind == DocumentBoundaries::Kind::kNone) {
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("max_documents = {} without documents: pass documents too, or leave max_documents 0",
                       options_.max_documents));
  }
  if (options_.threads > 256) {
    refuse(ErrorCode::kInvalidArgument, fmt::format("threads must be at most 256, got {}", options_.threads));
  }
}

void StreamPlan::choose_devices(Runtime& runtime) {
  placement_ = placement_of(runtime);
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
}

void StreamPlan::open_sources(std::vector<Array> sources) {
  const std::int64_t window = window_tokens();
  const MemoryMappings mappings = MemoryMappings::of_this_process();
  for (std::size_t index = 0; index < sources.size(); ++index) {
    const ArrayState& state = ArrayAccess::state(sources[index], "BatchStream");
    const ArrayStorage& storage = *state.storage;
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
    wait_for(storage);  // a source may still be arriving from another device
    StreamSource source;
    source.array = sources[index];
    source.data = storage.host + state.offset;
    source.tokens = state.elements;
    source.starts = static_cast<std::int64_t>(source.tokens) >= window ? source.tokens - options_.context : 0;
    const HostRange range{source.data, state.nbytes};
    source.droppable = mappings.pages_are_releasable(range);
    if (options_.release_pages && !source.droppable) {
      refuse(ErrorCode::kInvalidArgument,
             fmt::format("release_pages: source {} is not in a shared mapping (as /proc/self/maps shows it), and "
                         "giving back the pages of private or heap memory could lose its data; load it with "
                         "load_tokens",
                         index));
    }
    advise_random(range);
    identity_.sources.push_back({source.tokens, state.dtype, fingerprint(source.data, state.nbytes)});
    sources_.push_back(std::move(source));
  }
  const auto longest = std::max_element(sources_.begin(), sources_.end(),
                                        [](const auto& a, const auto& b) { return a.tokens < b.tokens; });
  if (longest->starts == 0) {
    refuse(ErrorCode::kOutOfRange,
           fmt::format("a window of context + 1 = {} tokens is longer than every source (the longest has {})", window,
                       longest->tokens));
  }
}

void StreamPlan::find_documents() {
  const std::int64_t rows = options_.batch_size / static_cast<std::int64_t>(targets_.size());
  std::int64_t tokens = 0;
  if (__builtin_mul_overflow(rows, options_.context, &tokens) || tokens > INT32_MAX) {
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("documents: a device's batch of {} rows x context {} is more than the 2^31 - 1 tokens that "
                       "int32 cu_seqlens can count",
                       rows, options_.context));
  }
  if (options_.max_documents == 0) options_.max_documents = tokens;
  GatherPool pool(gather_thread_count(options_.threads));
  documents_.emplace(options_.documents, sources_, from_, options_.context, pool);
  for (std::size_t index = 0; index < sources_.size(); ++index) {
    sources_[index].starts = documents_->eligible(index);
    const bool drawn = options_.weights.empty() || options_.weights[index] > 0;
    if (drawn && sources_[index].starts == 0) {
      const std::span<const std::int64_t> starts = documents_->starts(index);
      refuse(ErrorCode::kOutOfRange,
             fmt::format("documents: no document of source {} starts a window of context + 1 = {} tokens that fits "
                         "(it has {} tokens and {} document starts{})",
                         index, window_tokens(), sources_[index].tokens, starts.size(),
                         starts.empty() ? "" : fmt::format(", the first at {}", starts.front())));
    }
  }
}

void StreamPlan::check_window_counts() const {
  const char* what = documents_ ? "document starts whose window fits" : "window starts";
  std::uint64_t total_starts = 0;
  for (const StreamSource& source : sources_) total_starts += source.starts;
  if (options_.weights.empty()) {
    if (static_cast<std::uint64_t>(global_batch_) > total_starts) {
      refuse(
          ErrorCode::kOutOfRange,
          fmt::format("{} distinct windows per global step (batch_size {} x world_size {}) do not fit in the {} {} of "
                      "the sources",
                      global_batch_, options_.batch_size, options_.world_size, total_starts, what));
    }
    return;
  }
  for (std::size_t index = 0; index < sources_.size(); ++index) {
    if (options_.weights[index] > 0 && sources_[index].starts < static_cast<std::uint64_t>(global_batch_)) {
      refuse(ErrorCode::kOutOfRange,
             fmt::format("source {} has {} {}, fewer than the {} windows of a global step; with weights every "
                         "source of positive weight needs at least that many",
                         index, sources_[index].starts, what, global_batch_));
    }
  }
}

std::uint64_t StreamPlan::window_bytes() const noexcept {
  return static_cast<std::uint64_t>(window_tokens()) * (dtype_bits(from_) / 8);
}

void StreamPlan::draw(std::int64_t step, std::span<Window> out) const {
  sampler_->draw(static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(options_.rank * options_.batch_size),
                 out);
  // The sampler draws a document's place in its source's list of starts.
  if (!documents_) return;
  for (Window& window : out) {
    const auto source = static_cast<std::size_t>(window.source);
    window.start = documents_->starts(source)[static_cast<std::size_t>(window.start)];
  }
}

std::vector<Window> StreamPlan::windows(std::int64_t step) const {
  if (step < 0) refuse(ErrorCode::kOutOfRange, fmt::format("step {} is negative", step));
  std::vector<Window> drawn(static_cast<std::size_t>(options_.batch_size));
  draw(step, drawn);
  return drawn;
}

const std::byte* StreamPlan::first_token(const Window& window) const noexcept {
  const StreamSource& source = sources_[static_cast<std::size_t>(window.source)];
  return source.data + static_cast<std::uint64_t>(window.start) * (dtype_bits(from_) / 8);
}

BatchStreamState StreamPlan::state_at(std::int64_t step) const {
  BatchStreamState state = identity_;
  state.step = step;
  return state;
}

std::vector<HostRange> StreamPlan::file_mappings() const {
  std::vector<HostRange> ranges;
  for (const StreamSource& source : sources_) {
    if (source.droppable) ranges.push_back({source.data, source.array.nbytes()});
  }
  return ranges;
}

}  // namespace backplane::detail
