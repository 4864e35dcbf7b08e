// BatchStream: the training loop's data path. Each step hands out B windows
// of T+1 tokens, drawn from one or more 1-D token arrays, gathered on worker
// threads and moved to the target device(s) ahead of time, so that next()
// only waits for a batch that is (usually) already there.
// docs/batch-stream.md is the guide; it specifies the sampling algorithm
// exactly, so another implementation can reproduce the windows.
//
// Sampling: the windows of global step s are a pure function of (seed, s,
// the sources' lengths, the weights, T, the global batch G = B * world_size,
// and the schedules that change B, T and the weights at given steps): step s
// is computed directly, never by replaying steps 0..s-1. Without weights
// each epoch visits every window start of every source once, in a keyed
// pseudo-random order, across changes of B; with weights the samples are
// dealt to the sources by weight, each source going through its own starts
// in such an order, across changes of B and of the weights. Rank r takes
// global samples [r * B, (r + 1) * B) of each step.
//
// Resume: state() is small and rank-independent. A stream created from a
// saved state continues with bit-identical batches from the saved step, with
// any rank and any world_size that keeps each G (elastic resume); the seed,
// the sources (sizes, dtypes, fingerprints of their bytes), the documents
// and the schedule entries up to the saved step must match, or the
// constructor throws naming what differs.
//
// Steps: a stream hands out global steps up to kLastStep; the next() after
// that one throws kOutOfRange, so that no step count ever overflows.
//
// Error model: every failure is a backplane::Error. The constructor throws
// kInvalidArgument / kOutOfRange for bad options (naming the option) and
// kInvalidFile for a state that is not one. A failure while preparing a step
// (a plugin refusing a copy, out of memory) is thrown by the next() that
// hands that step out; the stream then stays failed and its state() still
// names that step, so a new stream can retry it.
//
// Thread-safety: every call may come from any thread. next() and
// next_batch() from several threads at once hand each step to exactly one
// caller (as the C and Python faces do); stats() and state() never wait for
// a step.
#ifndef BACKPLANE_BATCH_STREAM_HPP
#define BACKPLANE_BATCH_STREAM_HPP

#include <backplane/api.h>

#include <backplane/array.hpp>
#include <backplane/backplane.hpp>
#include <backplane/dtype.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

// Where documents start in the sources, for document-aligned windows: with
// a kind other than kNone every window starts at a document start, and each
// batch carries its document pieces (cu_seqlens, position_ids, max_seqlen).
// docs/batch-stream.md ("Documents") specifies it.
struct BACKPLANE_API DocumentBoundaries {
  enum class Kind {
    kNone,    // windows start anywhere
    kBos,     // a document starts at every occurrence of `token`
    kEos,     // a document starts at 0 and after every occurrence of `token`
    kStarts,  // `starts[j]`: source j's document starts, increasing token offsets
  };
  Kind kind = Kind::kNone;
  std::int64_t token = 0;
  std::vector<std::vector<std::int64_t>> starts;

  static DocumentBoundaries bos(std::int64_t token) { return {Kind::kBos, token, {}}; }
  static DocumentBoundaries eos(std::int64_t token) { return {Kind::kEos, token, {}}; }
  static DocumentBoundaries given(std::vector<std::vector<std::int64_t>> starts) {
    return {Kind::kStarts, 0, std::move(starts)};
  }
};

// From global step `step` on, each step has `batch_size` windows on each
// rank (G = batch_size * world_size) of `context` + 1 tokens.
struct ScheduleEntry {
  std::int64_t step = 0;
  std::int64_t batch_size = 0;
  std::int64_t context = 0;
  bool operator==(const ScheduleEntry&) const = default;
};

// From global step `step` on, the windows are dealt to the sources by these
// weights (one per source, >= 0, not all zero).
struct WeightsEntry {
  std::int64_t step = 0;
  std::vector<double> weights;
  bool operator==(const WeightsEntry&) const = default;
};

// How one step's global batch [G, T] is laid out over a mesh of devices or
// ranks: the mesh's named axes with their sizes, numbered row-major in the
// order given (a position's rank is its row-major index, as torch's
// init_device_mesh and JAX's Mesh number them); the axes that split the
// rows (batch), those that split the columns (sequence), and the rest,
// which replicate. docs/batch-stream.md ("Many devices, many processes")
// specifies it.
struct BACKPLANE_API Layout {
  struct Axis {
    std::string name;
    std::int64_t size = 0;  // >= 1
    bool operator==(const Axis&) const = default;
  };
  enum class SequenceOrder {
    kContiguous,  // sequence coordinate c of cp takes the c-th of cp equal chunks
    kHeadTail,    // of 2 cp equal chunks, coordinate c takes chunks c and 2 cp - 1 - c
  };
  std::vector<Axis> mesh;
  // Axis names, each of the mesh and in at most one of the two lists; a
  // coordinate over several axes is row-major in the order listed here.
  std::vector<std::string> batch;
  std::vector<std::string> sequence;
  SequenceOrder sequence_order = SequenceOrder::kContiguous;
  // The mesh positions (ranks) this process serves, one per piece it hands
  // out: one per entry of BatchStreamOptions::devices, or one for the
  // default device. Two positions may share a device.
  std::vector<std::int64_t> ranks;
};

struct BACKPLANE_API BatchStreamOptions {
  std::int64_t batch_size = 0;  // B: windows per step on this rank (>= 1)
  std::int64_t context = 0;     // T: each window is T + 1 tokens (>= 1)
  // The targets; empty: the runtime's default device on the creating thread.
  // Several: the B windows split evenly across them, in order.
  std::vector<Device> devices;
  // The element type handed out; nullopt: the sources' dtype (which must then
  // be the same for every source). Integers only when it differs.
  std::optional<DType> dtype;
  // The sampling key; nullopt: the resumed state's seed, else 0.
  std::optional<std::uint64_t> seed;
  std::int64_t rank = 0;        // in [0, world_size)
  std::int64_t world_size = 1;  // ranks sharing each global step
  // Steps prepared ahead of the one handed out, in [1, kMaxPrefetch]. The
  // stream holds at most `prefetch` batches; with the caller's current one
  // (and, in a `for` loop, the previous one still alive during next()), a
  // steady loop keeps prefetch + 2 batches' memory at most, and reuses it.
  std::int64_t prefetch = 2;
  // One weight per source (>= 0, not all zero), the share of windows drawn
  // from it; empty: in proportion to each source's window starts.
  std::vector<double> weights;
  // Gather threads; 0: chosen from the machine (at least 4: cold pages are
  // read concurrently, one fault per thread at a time).
  unsigned threads = 0;
  // Give back the pages of windows once they are gathered, so the process's
  // resident memory does not grow to the size of token files larger than
  // RAM (the page cache still holds what the kernel keeps).
  bool release_pages = false;
  // Document-aligned windows; kNone: windows start at any token.
  DocumentBoundaries documents;
  // With documents: C, the fixed number of pieces each device's batch
  // describes (cu_seqlens holds C + 1 offsets); 0: rows * T, which no batch
  // can exceed, and more than that is refused (kInvalidArgument, naming the
  // bound; the largest entry's with a schedule). A step with more pieces than C fails (kOutOfRange, naming
  // the step and the count), never a wrong cu_seqlens.
  std::int64_t max_documents = 0;
  // Batch size and context that change at given steps: entries in strictly
  // increasing step, the first at step 0; batch_size and context are then
  // the first entry's (leave them 0, or give the same values). Empty:
  // batch_size and context for every step.
  std::vector<ScheduleEntry> schedule;
  // A mixture that changes at given steps, as `schedule`; `weights` is then
  // the first entry's (leave it empty, or give the same). Empty: `weights`
  // for every step.
  std::vector<WeightsEntry> weight_schedule;
  // Pieces of a global batch laid out over a mesh; then batch_size is per
  // coordinate of the batch axes (G = batch_size x their sizes' product),
  // rank and world_size stay 0 and 1, and each device gets the piece of its
  // rank in layout.ranks: rows [b B, (b + 1) B) for batch coordinate b and
  // the columns of its sequence coordinate (x's T / cp of them, y's the
  // same shifted by one). Nullopt: rank and world_size split the rows and
  // `devices` split them again.
  std::optional<Layout> layout;
};

// The document pieces of one device's batch of `rows` windows: the runs of
// x's rows * T tokens (flattened) that lie in one document. Every row starts
// a piece. All on the batch's device.
struct BACKPLANE_API DocumentPieces {
  Array cu_seqlens;             // int32 [max_documents + 1]: 0, the piece ends, then rows * T repeated
  Array position_ids;           // int32 [rows, T]: 0 at each piece's first token, counting up
  std::int64_t max_seqlen = 0;  // the longest piece, in tokens
  std::int64_t pieces = 0;      // pieces in use: cu_seqlens[pieces] == rows * T
};

// One step as handed out: per device, its windows and (with documents) the
// pieces of its x.
struct BACKPLANE_API StreamBatch {
  // Per device, in order: [rows, L + 1], x = [:, :L] and y = [:, 1:] (L = T,
  // or T / cp with a sequence axis); with sequence_order kHeadTail and cp >
  // 1, [rows, 2, L / 2 + 1]: x is [:, :, :-1] and y [:, :, 1:], each row's
  // two chunks one after the other.
  std::vector<Array> tokens;
  std::vector<DocumentPieces> documents;  // one per device with documents, else empty
};

inline constexpr std::int64_t kMaxPrefetch = 64;
// The last global step a stream hands out, and the last a state may resume
// at: 2^63 - 129, which leaves room for the steps prepared ahead of it.
inline constexpr std::int64_t kLastStep = INT64_MAX - 2 * kMaxPrefetch;

// Where a stream stands, enough to continue it exactly. to_json() gives a
// small JSON object (docs/batch-stream.md lists its fields); any rank's state
// resumes any rank.
struct BACKPLANE_API BatchStreamState {
  struct Source {
    std::uint64_t tokens = 0;  // elements
    DType dtype = DType::kU8;
    std::uint64_t fingerprint = 0;  // FNV-1a 64 of its first and last 4 KiB
  };
  // How the windows align to documents (version 2; kNone in a version 1
  // state, which drew windows at any token).
  struct Documents {
    DocumentBoundaries::Kind kind = DocumentBoundaries::Kind::kNone;
    std::int64_t token = 0;         // kBos, kEos: the marker
    std::uint64_t fingerprint = 0;  // kStarts: FNV-1a 64 of every source's starts
    bool operator==(const Documents&) const = default;
  };
  // A schedule entry as the state keeps it: the global batch, not a rank's.
  struct Stage {
    std::int64_t step = 0;
    std::int64_t global_batch = 0;
    std::int64_t context = 0;
    bool operator==(const Stage&) const = default;
  };
  // How weighted windows are drawn (version 3). kPerSample, the rule of
  // versions 1 and 2, is what an older state means; streams made by this
  // version deal samples (kInterleaved).
  enum class Mixture { kPerSample, kInterleaved };
  static constexpr std::int64_t kVersion = 3;
  std::uint64_t seed = 0;
  std::int64_t step = 0;          // the next global step to hand out
  std::int64_t global_batch = 0;  // of the first schedule entry
  std::int64_t context = 0;       // of the first schedule entry
  std::vector<double> weights;    // of the first weights entry; empty: unweighted
  std::vector<Source> sources;
  Documents documents;
  std::vector<Stage> schedule;                // entries after the first (version 3)
  std::vector<WeightsEntry> weight_schedule;  // entries after the first (version 3)
  Mixture mixture = Mixture::kPerSample;

  std::string to_json() const;
  // Throws kInvalidFile naming the field for malformed JSON, JSON nested
  // deeper than kMaxJsonDepth, a missing or mistyped field, or another format
  // version. Messages quote at most a short prefix of a bad value.
  static BatchStreamState from_json(std::string_view json);
  // The deepest nesting from_json reads (the state itself nests 4 deep).
  static constexpr int kMaxJsonDepth = 16;
};

// What the stream did so far. Seconds are wall time on a steady clock.
// Counters only: reading them costs about a microsecond (the resident size
// of the sources is BatchStream::resident_bytes(), a separate, slower call).
struct BACKPLANE_API BatchStreamStats {
  std::int64_t steps = 0;          // batches handed out
  std::uint64_t windows = 0;       // windows handed out
  std::uint64_t bytes = 0;         // bytes of those batches, as handed out
  double wait_seconds = 0;         // inside next(), waiting for data
  double gather_seconds = 0;       // gathering windows (summed over steps, not threads)
  double transfer_seconds = 0;     // from a batch's copy issue to its arrival
  double elapsed_seconds = 0;      // from the first next() call to the last return
  double windows_per_second = 0;   // windows / elapsed_seconds
  double data_stall_fraction = 0;  // wait_seconds / elapsed_seconds
  // Bytes gathered from the sources, steps prepared ahead included: each
  // piece's own rows and columns (a context-parallel rank reads its share).
  std::uint64_t read_bytes = 0;
  // The global step of the batch handed out last: step() - 1, so -1 before
  // a new stream's first next() and k - 1 before a stream resumed at k
  // hands out its first.
  std::int64_t step = -1;
  // The epoch that step draws in (0 while step is -1): 0 in the first pass
  // over the window starts, 1 in the second, ... An epoch is one random
  // order of every window start of every source, and ends when each has
  // been taken once or when the context changes. With weights each source
  // of positive weight passes through its own starts at its own pace, and
  // this is the least of their epochs: the passes over all of the data.
  std::uint64_t epoch = 0;
};

// One window of a step: the source it comes from and its first token.
struct BACKPLANE_API Window {
  std::int32_t source = 0;
  std::int64_t start = 0;
};

class BACKPLANE_API BatchStream {
 public:
  // `sources`: 1-D arrays of integer tokens on host-addressable devices. A
  // window never straddles two. With `resume`, the stream starts at its step.
  BatchStream(Runtime& runtime, std::vector<Array> sources, BatchStreamOptions options,
              const BatchStreamState* resume = nullptr);
  ~BatchStream();
  BatchStream(const BatchStream&) = delete;
  BatchStream& operator=(const BatchStream&) = delete;

  // The next step's batch: one [B / devices, T + 1] array per device (the B
  // and T of that step), ready to read. Blocks only while that step is still
  // being prepared.
  std::vector<Array> next();
  // The next step with its document pieces (empty without documents).
  StreamBatch next_batch();

  // The global step next() hands out next.
  std::int64_t step() const;
  BatchStreamState state() const;
  BatchStreamStats stats() const;
  // Resident bytes, in this process, of the shared file mappings holding the
  // sources (what release_pages keeps bounded); 0 for other memory. Reads
  // /proc/self/smaps, which costs milliseconds with large mappings: call it
  // when you want the figure, not every step.
  std::uint64_t resident_bytes() const;
  // This rank's windows at global step `step` (any step, without preparing
  // it), in batch order; with a layout, the rows from its first piece's first
  // to its last piece's last.
  std::vector<Window> windows(std::int64_t step) const;

 private:
  // Defined in core/src with hidden visibility: a nested class of an
  // exported class would otherwise be exported with it.
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace backplane

#endif  // BACKPLANE_BATCH_STREAM_HPP
