// The plan of a batch stream: every check of its options and sources, in the
// order the constructor has always made them, and the identity a saved state
// is checked against (state_fields.hpp).
#include "batches/stream_plan.hpp"

#include "batches/state_fields.hpp"
#include "batches/state_json.hpp"
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

// Refuses entries (each with a `step`) that do not start at step 0 and
// increase: "schedule entry 2 starts at step 10, not after entry 1's ...".
template <class Entry>
void check_ordered(const std::vector<Entry>& entries, const char* what) {
  for (std::size_t index = 0; index < entries.size(); ++index) {
    const std::int64_t step = entries[index].step;
    if (index == 0 && step != 0) {
      refuse(ErrorCode::kInvalidArgument,
             fmt::format("{} entry 0 starts at step {}; the first entry starts at step 0", what, step));
    }
    if (index > 0 && step <= entries[index - 1].step) {
      refuse(ErrorCode::kInvalidArgument,
             fmt::format("{} entry {} starts at step {}, not after entry {}'s step {}; the steps must increase", what,
                         index, step, index - 1, entries[index - 1].step));
    }
  }
}

// The entry of `entries` in effect at `step`: the last that starts at or
// before it (entries start at step 0).
template <class Entry>
std::size_t entry_at(const std::vector<Entry>& entries, std::int64_t step) {
  const auto after = std::upper_bound(entries.begin(), entries.end(), step,
                                      [](std::int64_t at, const Entry& entry) { return at < entry.step; });
  return static_cast<std::size_t>(after - entries.begin()) - 1;
}

}  // namespace

StreamPlan::StreamPlan(Runtime& runtime, std::vector<Array> sources, BatchStreamOptions options,
                       const BatchStreamState* resume, GatherPool& pool)
    : options_(std::move(options)), resume_(resume) {
  check_options(sources.size());
  choose_devices(runtime);
  open_sources(std::move(sources));
  if (options_.documents.kind != DocumentBoundaries::Kind::kNone) find_documents(pool);
  check_window_counts();
  to_ = options_.dtype.value_or(from_);
  if (!dtype_is_integer(to_)) {
    refuse(ErrorCode::kUnsupported, fmt::format("cannot hand out {} tokens as {}; only integer dtypes convert",
                                                dtype_name(from_), dtype_name(to_)));
  }
  if (const std::string loss = value_loss(from_, to_); !loss.empty()) refuse(ErrorCode::kInvalidArgument, loss);
  if (!options_.seed) options_.seed = resume != nullptr ? resume->seed : 0;
  identity_.seed = *options_.seed;
  identity_.global_batch = global_batches_.front();
  identity_.context = entries_.front().context;
  identity_.weights = options_.weights;
  for (std::size_t entry = 1; entry < entries_.size(); ++entry) {
    identity_.schedule.push_back({entries_[entry].step, global_batches_[entry], entries_[entry].context});
  }
  if (weight_entries_.size() > 1) identity_.weight_schedule.assign(weight_entries_.begin() + 1, weight_entries_.end());
  identity_.mixture = BatchStreamState::Mixture::kInterleaved;
  if (documents_) identity_.documents = documents_->described();
  if (resume != nullptr) check_resume(*resume);
  resume_ = nullptr;  // the caller's, valid during the constructor only
  sampler_ = std::make_unique<WindowSampler>(identity_.seed, segments(), identity_.mixture);
}

bool StreamPlan::ended_before_resume(std::size_t entry) const noexcept {
  const std::vector<ScheduleEntry>& schedule = options_.schedule;
  return resume_ != nullptr && entry + 1 < schedule.size() && schedule[entry + 1].step <= resume_->step;
}

void StreamPlan::check_resume(const BatchStreamState& saved) {
  // A weighted stream goes on drawing by the rule its state was drawn by.
  if (!identity_.weights.empty()) identity_.mixture = saved.mixture;
  // Elastic resume: said before the field checks, which would only see two
  // global batches differ.
  // An entry that ended before the saved step need not split: its windows
  // are drawn no more, and batch_size 0 takes its global batch from the state.
  const auto splits = [&](std::size_t entry, std::int64_t step, std::int64_t global_batch, bool ended) {
    if (global_batch % layout_->row_split() == 0) return;
    if (ended && entry < entries_.size() && entries_[entry].step == step && entries_[entry].batch_size == 0) return;
    const std::string where = entries_.size() > 1 || !saved.schedule.empty()
                                  ? fmt::format("schedule entry {} (step {}) of the state", entry, step)
                                  : std::string("the state");
    const std::string hint = ended ? fmt::format(
                                         "; it ended before the resume step {}: give its batch_size as 0 "
                                         "to take the state's global batch",
                                         saved.step)
                                   : std::string();
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("cannot resume: {} has a global batch of {}, which {} cannot split{}", where, global_batch,
                       layout_->row_split_label(), hint));
  };
  const auto stages = saved.schedule.size();
  splits(0, 0, saved.global_batch, stages > 0 && saved.schedule[0].step <= saved.step);
  for (std::size_t stage = 0; stage < stages; ++stage) {
    if (saved.schedule[stage].step <= saved.step) {
      const bool ended = stage + 1 < stages && saved.schedule[stage + 1].step <= saved.step;
      splits(stage + 1, saved.schedule[stage].step, saved.schedule[stage].global_batch, ended);
    }
  }
  check_resumable(saved, identity_);
  if (identity_.mixture == BatchStreamState::Mixture::kPerSample &&
      (entries_.size() > 1 || weight_entries_.size() > 1)) {
    refuse(ErrorCode::kInvalidArgument,
           "cannot resume: the state's weighted windows were drawn by the rule of states version 1 and 2 (each "
           "sample picks its source at random), which keeps no place per source to carry across a schedule or a "
           "weight schedule; resume it without them");
  }
  first_step_ = saved.step;
}

std::string StreamPlan::entry_label(std::size_t entry) const {
  if (options_.schedule.empty()) return {};
  return fmt::format("schedule entry {} (step {}): ", entry, entries_[entry].step);
}

std::string StreamPlan::segment_label(const Segment& segment) const {
  std::string label = entry_label(entry_at(entries_, segment.first_step));
  if (options_.weight_schedule.empty()) return label;
  const std::size_t weights = entry_at(weight_entries_, segment.first_step);
  return label + fmt::format("weights entry {} (step {}): ", weights, weight_entries_[weights].step);
}

void StreamPlan::check_schedule() {
  const std::vector<ScheduleEntry>& schedule = options_.schedule;
  if (schedule.empty()) {
    if (options_.batch_size < 1) {
      refuse(ErrorCode::kInvalidArgument, fmt::format("batch_size must be at least 1, got {}", options_.batch_size));
    }
    if (options_.context < 1) {
      refuse(ErrorCode::kInvalidArgument, fmt::format("context must be at least 1, got {}", options_.context));
    }
    entries_.push_back({0, options_.batch_size, options_.context});
  } else {
    check_ordered(schedule, "schedule");
    for (std::size_t index = 0; index < schedule.size(); ++index) {
      const ScheduleEntry& entry = schedule[index];
      if (entry.batch_size < 1 && !(entry.batch_size == 0 && ended_before_resume(index))) {
        refuse(ErrorCode::kInvalidArgument, fmt::format("schedule entry {} (step {}): batch_size must be at least "
                                                        "1, got {}",
                                                        index, entry.step, entry.batch_size));
      }
      if (entry.context < 1) {
        refuse(ErrorCode::kInvalidArgument,
               fmt::format("schedule entry {} (step {}): context must be at least 1, got {}", index, entry.step,
                           entry.context));
      }
    }
    const ScheduleEntry& first = schedule.front();
    if ((options_.batch_size != 0 && options_.batch_size != first.batch_size) ||
        (options_.context != 0 && options_.context != first.context)) {
      refuse(ErrorCode::kInvalidArgument,
             fmt::format("batch_size {} and context {} differ from the schedule's first entry (batch_size {}, "
                         "context {}); leave them 0 (Python: out) or give the same",
                         options_.batch_size, options_.context, first.batch_size, first.context));
    }
    options_.batch_size = first.batch_size;
    options_.context = first.context;
    entries_ = schedule;
  }
  for (std::size_t index = 0; index < entries_.size(); ++index) {
    const ScheduleEntry& entry = entries_[index];
    if (entry.context == INT64_MAX) {
      refuse(ErrorCode::kInvalidArgument,
             fmt::format("{}context must be below 2^63 - 1 (a window is context + 1 tokens), got {}",
                         entry_label(index), entry.context));
    }
  }
}

void StreamPlan::check_weights(std::size_t source_count) {
  const bool scheduled = !options_.weight_schedule.empty();
  if (scheduled) {
    check_ordered(options_.weight_schedule, "weights");
    weight_entries_ = options_.weight_schedule;
  } else if (!options_.weights.empty()) {
    weight_entries_.push_back({0, options_.weights});
  }
  for (std::size_t entry = 0; entry < weight_entries_.size(); ++entry) {
    const std::vector<double>& weights = weight_entries_[entry].weights;
    const std::string label =
        scheduled ? fmt::format("weights entry {} (step {}): ", entry, weight_entries_[entry].step) : std::string();
    if (weights.size() != source_count) {
      refuse(ErrorCode::kInvalidArgument,
             fmt::format("{}{} weights for {} sources", label, weights.size(), source_count));
    }
    double sum = 0;
    for (std::size_t index = 0; index < weights.size(); ++index) {
      const double weight = weights[index];
      if (!std::isfinite(weight) || weight < 0) {
        refuse(ErrorCode::kInvalidArgument,
               fmt::format("{}weight {} (of source {}) is not a finite number >= 0", label, weight, index));
      }
      sum += weight;
    }
    if (!(sum > 0) || !std::isfinite(sum)) {
      refuse(ErrorCode::kInvalidArgument, fmt::format("{}the weights are all zero (or sum to infinity)", label));
    }
  }
  if (scheduled && !options_.weights.empty() && options_.weights != weight_entries_.front().weights) {
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("weights {} differ from the weight schedule's first entry, {}; leave them empty or give the "
                       "same",
                       listed(options_.weights), listed(weight_entries_.front().weights)));
  }
  if (!weight_entries_.empty()) options_.weights = weight_entries_.front().weights;
}

void StreamPlan::check_options(std::size_t source_count) {
  if (source_count == 0) refuse(ErrorCode::kInvalidArgument, "no token sources given");
  check_schedule();
  if (options_.world_size < 1) {
    refuse(ErrorCode::kInvalidArgument, fmt::format("world_size must be at least 1, got {}", options_.world_size));
  }
  // With a layout, stream_layout refuses any rank and world_size but 0 and 1.
  if (!options_.layout && (options_.rank < 0 || options_.rank >= options_.world_size)) {
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("rank {} is not in [0, world_size = {})", options_.rank, options_.world_size));
  }
  if (options_.prefetch < 1 || options_.prefetch > kMaxPrefetch) {
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("prefetch must be in [1, {}], got {}", kMaxPrefetch, options_.prefetch));
  }
  check_weights(source_count);
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
  // With a layout, several pieces may go to one device (JAX's CPU devices
  // all read host memory), and no list means the default device for each.
  const bool layout = options_.layout.has_value();
  if (devices.empty()) {
    const std::size_t pieces = layout ? std::max<std::size_t>(options_.layout->ranks.size(), 1) : 1;
    devices.assign(pieces, runtime.default_device().device);
  }
  for (std::size_t index = 0; index < devices.size(); ++index) {
    for (std::size_t earlier = 0; earlier < index && !layout; ++earlier) {
      if (devices[earlier] == devices[index]) {
        refuse(ErrorCode::kInvalidArgument, fmt::format("device {} is listed twice", devices[index].selector()));
      }
    }
    targets_.push_back(placement_->device(devices[index]));
  }
  layout_.emplace(options_, targets_.size());
  for (std::size_t index = 0; index < entries_.size(); ++index) {
    const ScheduleEntry& entry = entries_[index];
    std::int64_t global_batch = 0;
    if (entry.batch_size == 0) {  // an entry that ended before the resume step: the state's global batch
      global_batches_.push_back(saved_global_batch(index));
      continue;
    }
    if (__builtin_mul_overflow(entry.batch_size, layout_->row_split(), &global_batch)) {
      refuse(ErrorCode::kInvalidArgument, fmt::format("{}batch_size {} x {} overflows", entry_label(index),
                                                      entry.batch_size, layout_->row_split_label()));
    }
    if (!layout && entry.batch_size % static_cast<std::int64_t>(targets_.size()) != 0) {
      refuse(ErrorCode::kInvalidArgument, fmt::format("{}batch_size {} does not split evenly over {} devices",
                                                      entry_label(index), entry.batch_size, targets_.size()));
    }
    if (const std::string why = layout_->refusal(entry.context); !why.empty()) {
      refuse(ErrorCode::kInvalidArgument, entry_label(index) + why);
    }
    global_batches_.push_back(global_batch);
  }
}

std::int64_t StreamPlan::saved_global_batch(std::size_t entry) const {
  const std::int64_t step = entries_[entry].step;
  if (step == 0) return resume_->global_batch;
  for (const BatchStreamState::Stage& stage : resume_->schedule) {
    if (stage.step == step) return stage.global_batch;
  }
  refuse(ErrorCode::kInvalidArgument,
         fmt::format("{}batch_size 0 takes the state's global batch at step {}, but the state has no schedule entry "
                     "there",
                     entry_label(entry), step));
}

void StreamPlan::open_sources(std::vector<Array> sources) {
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
  for (std::size_t entry = 0; entry < entries_.size(); ++entry) {
    const std::int64_t window = entries_[entry].context + 1;
    if (longest->tokens < static_cast<std::uint64_t>(window)) {
      refuse(ErrorCode::kOutOfRange,
             fmt::format("{}a window of context + 1 = {} tokens is longer than every source (the longest has {})",
                         entry_label(entry), window, longest->tokens));
    }
  }
}

void StreamPlan::find_documents(GatherPool& pool) {
  // Every piece has as many rows (G / row_blocks) and columns (T, or T / cp
  // with a sequence axis).
  const auto rows_of = [&](std::size_t entry) { return layout_->rows(0, global_batches_[entry]).count; };
  const auto columns_of = [&](std::size_t entry) { return layout_->piece_columns(entries_[entry].context); };
  const auto context_of = [&](std::size_t entry) {
    const std::int64_t context = entries_[entry].context;
    const std::int64_t columns = columns_of(entry);
    return columns == context ? fmt::format("context {}", context)
                              : fmt::format("context {} (of {}, cut by the sequence axes)", columns, context);
  };
  std::int64_t largest = 0;
  std::size_t largest_entry = 0;
  for (std::size_t entry = 0; entry < entries_.size(); ++entry) {
    if (entries_[entry].batch_size == 0) continue;  // ended before the resume step: never gathered
    const std::int64_t rows = rows_of(entry);
    std::int64_t tokens = 0;
    if (__builtin_mul_overflow(rows, columns_of(entry), &tokens) || tokens > INT32_MAX) {
      refuse(ErrorCode::kInvalidArgument,
             fmt::format("{}documents: a device's batch of {} rows x {} is more than the 2^31 - 1 tokens that int32 "
                         "cu_seqlens can count",
                         entry_label(entry), rows, context_of(entry)));
    }
    if (tokens > largest) {
      largest = tokens;
      largest_entry = entry;
    }
  }
  // A piece is at least one token of a row's context, so a device's step
  // cuts into at most rows x context pieces; cu_seqlens (max_documents + 1
  // int32, on the host and on each device) sized past that holds only
  // padding, and from 2^31 it is gigabytes a step or more than a vector holds.
  if (options_.max_documents > largest) {
    const std::int64_t rows = rows_of(largest_entry);
    const std::string which = options_.schedule.empty() ? ""
                                                        : fmt::format(" (schedule entry {}, step {}, the largest)",
                                                                      largest_entry, entries_[largest_entry].step);
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("max_documents = {} is more than a step can hold: a device's batch of {} rows x {}{} cuts "
                       "into at most {} document pieces, each at least one token; pass at most {}, or 0 for that "
                       "bound",
                       options_.max_documents, rows, context_of(largest_entry), which, largest, largest));
  }
  if (options_.max_documents == 0) options_.max_documents = largest;
  documents_.emplace(options_.documents, sources_, from_, pool);
  for (const Segment& segment : segments()) {
    for (std::size_t index = 0; index < sources_.size(); ++index) {
      const bool drawn = segment.weights.empty() || segment.weights[index] > 0;
      if (!drawn || segment.starts[index] != 0) continue;
      const std::span<const std::int64_t> starts = documents_->starts(index);
      refuse(ErrorCode::kOutOfRange,
             fmt::format("{}documents: no document of source {} starts a window of context + 1 = {} tokens that "
                         "fits (it has {} tokens and {} document starts{})",
                         segment_label(segment), index, segment.context + 1, sources_[index].tokens, starts.size(),
                         starts.empty() ? "" : fmt::format(", the first at {}", starts.front())));
    }
  }
}

std::uint64_t StreamPlan::starts_of(std::size_t source, std::int64_t context) const noexcept {
  if (documents_) return documents_->eligible(source, context);
  const std::uint64_t tokens = sources_[source].tokens;
  return tokens > static_cast<std::uint64_t>(context) ? tokens - static_cast<std::uint64_t>(context) : 0;
}

std::vector<Segment> StreamPlan::segments() const {
  // A segment starts wherever either schedule starts an entry.
  std::vector<std::int64_t> firsts;
  for (const ScheduleEntry& entry : entries_) firsts.push_back(entry.step);
  for (const WeightsEntry& entry : weight_entries_) firsts.push_back(entry.step);
  std::sort(firsts.begin(), firsts.end());
  firsts.erase(std::unique(firsts.begin(), firsts.end()), firsts.end());
  std::vector<Segment> segments;
  for (const std::int64_t first : firsts) {
    const ScheduleEntry& shape = entries_[entry_at(entries_, first)];
    Segment segment;
    segment.first_step = first;
    segment.global_batch = static_cast<std::uint64_t>(global_batches_[entry_at(entries_, first)]);
    segment.context = shape.context;
    if (!weight_entries_.empty()) segment.weights = weight_entries_[entry_at(weight_entries_, first)].weights;
    for (std::size_t source = 0; source < sources_.size(); ++source) {
      segment.starts.push_back(starts_of(source, shape.context));
    }
    segments.push_back(std::move(segment));
  }
  return segments;
}

void StreamPlan::check_window_counts() const {
  const char* what = documents_ ? "document starts whose window fits" : "window starts";
  for (const Segment& segment : segments()) {
    const std::size_t entry = entry_at(entries_, segment.first_step);
    const std::string label = segment_label(segment);
    if (segment.weights.empty()) {
      std::uint64_t total_starts = 0;
      for (const std::uint64_t count : segment.starts) total_starts += count;
      if (segment.global_batch > total_starts) {
        refuse(ErrorCode::kOutOfRange,
               fmt::format("{}{} distinct windows per global step (batch_size {} x {}) do not fit in the {} {} of "
                           "the sources",
                           label, segment.global_batch, entries_[entry].batch_size, layout_->row_split_label(),
                           total_starts, what));
      }
      continue;
    }
    for (std::size_t index = 0; index < sources_.size(); ++index) {
      if (segment.weights[index] > 0 && segment.starts[index] < segment.global_batch) {
        refuse(ErrorCode::kOutOfRange,
               fmt::format("{}source {} has {} {}, fewer than the {} windows of a global step; with weights every "
                           "source of positive weight needs at least that many",
                           label, index, segment.starts[index], what, segment.global_batch));
      }
    }
  }
}

StreamPlan::Shape StreamPlan::shape_at(std::int64_t step) const noexcept {
  const ScheduleEntry& entry = entries_[entry_at(entries_, step)];
  return {entry.batch_size, entry.context};
}

std::int64_t StreamPlan::largest_batch() const noexcept {
  std::int64_t largest = 0;
  for (std::size_t entry = 0; entry < entries_.size(); ++entry) {
    if (entries_[entry].batch_size == 0) continue;  // ended before the first step drawn
    largest = std::max(largest, layout_->hull(global_batches_[entry]).count);
  }
  return largest;
}

std::int64_t StreamPlan::global_batch_at(std::int64_t step) const noexcept {
  return global_batches_[entry_at(entries_, step)];
}

RowRange StreamPlan::drawn_rows(std::int64_t step) const noexcept { return layout_->hull(global_batch_at(step)); }

std::uint64_t StreamPlan::window_bytes(std::int64_t context) const noexcept {
  return static_cast<std::uint64_t>(context + 1) * (dtype_bits(from_) / 8);
}

void StreamPlan::draw(std::int64_t step, std::span<Window> out) const {
  sampler_->draw(static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(drawn_rows(step).first), out);
  // The sampler draws a document's place in its source's list of starts.
  if (!documents_) return;
  for (Window& window : out) {
    const auto source = static_cast<std::size_t>(window.source);
    window.start = documents_->starts(source)[static_cast<std::size_t>(window.start)];
  }
}

std::vector<Window> StreamPlan::windows(std::int64_t step) const {
  if (step < 0) refuse(ErrorCode::kOutOfRange, fmt::format("step {} is negative", step));
  const std::size_t entry = entry_at(entries_, step);
  if (entries_[entry].batch_size == 0 && global_batches_[entry] % layout_->row_split() != 0) {
    refuse(ErrorCode::kOutOfRange,
           fmt::format("step {} is in schedule entry {}, which ended before this stream's first step and whose global "
                       "batch of {} {} cannot split",
                       step, entry, global_batches_[entry], layout_->row_split_label()));
  }
  std::vector<Window> drawn(static_cast<std::size_t>(drawn_rows(step).count));
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
