// What a batch stream is, settled once when it is made: the checked options,
// the target devices, the sources and their identity (what a saved state must
// match), the sampler, and the step it starts at. A plan starts no thread of
// its own (it scans for documents on the stream's gather pool) and never
// changes, so the gather and the stream read it from any thread.
#pragma once

#include "batches/document_index.hpp"
#include "batches/gather_pool.hpp"
#include "batches/sampler.hpp"
#include "batches/stream_layout.hpp"
#include "batches/stream_source.hpp"
#include "placement/placement.hpp"
#include "util/page_advice.hpp"

#include <backplane/array.hpp>
#include <backplane/batch_stream.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace backplane::detail {

class StreamPlan {
 public:
  // Throws what BatchStream's constructor documents for bad options, sources
  // that cannot be streamed, and a state this stream cannot resume. With
  // BOS or EOS documents, the sources are scanned on `pool` (the stream's
  // gather pool, made with gather_thread_count(options.threads)), which is
  // started then, once the options are checked.
  StreamPlan(Runtime& runtime, std::vector<Array> sources, BatchStreamOptions options, const BatchStreamState* resume,
             GatherPool& pool);

  // One step's share on this rank: B windows of T + 1 tokens.
  struct Shape {
    std::int64_t batch_size = 0;
    std::int64_t context = 0;
  };

  const BatchStreamOptions& options() const noexcept { return options_; }
  Placement& placement() const noexcept { return *placement_; }
  const std::vector<std::shared_ptr<LiveDevice>>& targets() const noexcept { return targets_; }
  const std::vector<StreamSource>& sources() const noexcept { return sources_; }
  DType from() const noexcept { return from_; }  // the sources' dtype
  DType to() const noexcept { return to_; }      // what the batches hold
  std::int64_t first_step() const noexcept { return first_step_; }
  // The B and T of global `step` (>= 0), as the schedule has them.
  Shape shape_at(std::int64_t step) const noexcept;
  // The most windows this process draws of a step, over the whole schedule.
  std::int64_t largest_batch() const noexcept;
  // Where each target's piece lies in a step's global batch.
  const StreamLayout& layout() const noexcept { return *layout_; }
  // The global batch G of `step`.
  std::int64_t global_batch_at(std::int64_t step) const noexcept;
  // The rows of `step` this process draws: from its first piece's first row
  // to its last piece's last.
  RowRange drawn_rows(std::int64_t step) const noexcept;
  // The sources' documents; null without documents.
  const DocumentIndex* documents() const noexcept { return documents_ ? &*documents_ : nullptr; }
  // Bytes of a window of context + 1 tokens in the sources.
  std::uint64_t window_bytes(std::int64_t context) const noexcept;

  // This process's windows of global `step` (>= 0), drawn_rows(step), in
  // batch order, into `out`, which holds that many.
  void draw(std::int64_t step, std::span<Window> out) const;
  // As draw(), refusing a negative step (kOutOfRange).
  std::vector<Window> windows(std::int64_t step) const;
  // The sampler's epoch at global `step` (>= 0): WindowSampler::epoch.
  std::uint64_t epoch(std::int64_t step) const { return sampler_->epoch(static_cast<std::uint64_t>(step)); }
  // Where a window's tokens are in host memory.
  const std::byte* first_token(const Window& window) const noexcept;

  BatchStreamState state_at(std::int64_t step) const;
  // The sources that are file mappings, for their resident size.
  std::vector<HostRange> file_mappings() const;

 private:
  void check_options(std::size_t source_count);
  void check_schedule();
  void check_weights(std::size_t source_count);
  void choose_devices(Runtime& runtime);
  void open_sources(std::vector<Array> sources);
  void find_documents(GatherPool& pool);
  void check_window_counts() const;
  void check_resume(const BatchStreamState& saved);
  // Whether schedule entry `entry` ends at or before the resumed state's step
  // (during the constructor; false without a state).
  bool ended_before_resume(std::size_t entry) const noexcept;
  // The resumed state's global batch of the entry starting where `entry` does.
  std::int64_t saved_global_batch(std::size_t entry) const;
  // The runs of steps with one B, T and mixture, each with its sources'
  // window starts.
  std::vector<Segment> segments() const;
  // Source j's window starts with context T: N_j.
  std::uint64_t starts_of(std::size_t source, std::int64_t context) const noexcept;
  // "schedule entry 1 (step 1000): ", or "" for the plain options.
  std::string entry_label(std::size_t entry) const;
  // The entries a segment runs under, as entry_label has them, with its
  // weights entry when the weights have a schedule.
  std::string segment_label(const Segment& segment) const;

  BatchStreamOptions options_;
  // The schedule and the weight schedule, the plain options as one entry
  // each (no weights entry: unweighted).
  std::vector<ScheduleEntry> entries_;
  std::vector<WeightsEntry> weight_entries_;
  std::optional<StreamLayout> layout_;
  // G of each schedule entry: batch_size x the layout's row split, or, for an
  // entry given batch_size 0 (it ended before the resume step), the state's.
  std::vector<std::int64_t> global_batches_;
  const BatchStreamState* resume_ = nullptr;  // during the constructor only
  std::shared_ptr<Placement> placement_;
  std::vector<std::shared_ptr<LiveDevice>> targets_;
  std::vector<StreamSource> sources_;
  DType from_ = DType::kU8;
  DType to_ = DType::kU8;
  std::int64_t first_step_ = 0;
  BatchStreamState identity_;  // the state of this stream but for its step
  std::optional<DocumentIndex> documents_;
  std::unique_ptr<WindowSampler> sampler_;
};

}  // namespace backplane::detail
