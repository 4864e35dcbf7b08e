// bp_batch_stream_*: the C face of backplane::BatchStream.
#include "c_api/c_api_support.hpp"

#include <backplane/batch_stream.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct bp_batch_stream {
  bp_batch_stream(std::shared_ptr<backplane::Runtime> runtime, std::unique_ptr<backplane::BatchStream> stream,
                  std::size_t devices, bool documents)
      : runtime(std::move(runtime)), stream(std::move(stream)), devices(devices), documents(documents) {}

  // Declared first, destroyed last: the stream's threads stop while the
  // runtime (and its backends) still exist.
  std::shared_ptr<backplane::Runtime> runtime;
  std::unique_ptr<backplane::BatchStream> stream;
  std::size_t devices;  // arrays per step
  bool documents;       // made with documents: its steps carry pieces
};

namespace backplane::c_api {
namespace {

static_assert(BP_BATCH_STREAM_MAX_PREFETCH == kMaxPrefetch, "backplane.h and batch_stream.hpp name one limit");
static_assert(BP_BATCH_STREAM_LAST_STEP == kLastStep, "backplane.h and batch_stream.hpp name one last step");

LiveHandles<bp_batch_stream>& live_streams = make_live_handles<bp_batch_stream>();

std::shared_ptr<bp_batch_stream> stream_of(const bp_batch_stream* handle, const char* function) {
  require_non_null(handle, function, "stream");
  std::shared_ptr<bp_batch_stream> live = live_streams.acquire(handle);
  if (live == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: stream is not a live handle (destroyed?)", function));
  }
  return live;
}

// The sizes of the struct as APIs 0.5, 0.7, 0.8 and 0.9 defined it, which
// callers built then still pass; any other size must hold the whole struct
// of today.
constexpr std::size_t kOptionsSize_0_5 = BP_STRUCT_SIZE(bp_batch_stream_options, state);
constexpr std::size_t kOptionsSize_0_7 = BP_STRUCT_SIZE(bp_batch_stream_options, seed_from_state);
static_assert(kOptionsSize_0_7 <= offsetof(bp_batch_stream_options, document_token),
              "a 0.7 struct ends before the first 0.8 field it cannot hold");
constexpr std::size_t kOptionsSize_0_8 = BP_STRUCT_SIZE(bp_batch_stream_options, max_documents);
constexpr std::size_t kOptionsSize_0_9 = BP_STRUCT_SIZE(bp_batch_stream_options, weight_step_count);
constexpr std::size_t kStatsSize_0_9 = BP_STRUCT_SIZE(bp_batch_stream_stats, data_stall_fraction);
constexpr std::size_t kStatsSize_0_10 = BP_STRUCT_SIZE(bp_batch_stream_stats, read_bytes);

// The layout of the C options (API 0.10), or nullopt without a mesh. Only
// NULL arrays and names are checked here; what they mean is BatchStream's.
std::optional<Layout> layout_of(const bp_batch_stream_options& options, const char* function) {
  if (options.mesh_axis_count == 0) {
    if (options.batch_axis_count + options.sequence_axis_count + options.mesh_rank_count > 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: options->batch_axes, sequence_axes or mesh_ranks are given without a mesh "
                              "(options->mesh_axis_count is 0)",
                              function));
    }
    return std::nullopt;
  }
  require_non_null(options.mesh, function, "options->mesh");
  Layout layout;
  for (std::size_t k = 0; k < options.mesh_axis_count; ++k) {
    if (options.mesh[k].name == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: options->mesh[{}].name is NULL", function, k));
    }
    layout.mesh.push_back({options.mesh[k].name, options.mesh[k].size});
  }
  const auto names = [&](const char* const* list, std::size_t count, const char* field) {
    std::vector<std::string> out;
    if (count > 0) require_non_null(list, function, field);
    for (std::size_t k = 0; k < count; ++k) {
      if (list[k] == nullptr) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}[{}] is NULL", function, field, k));
      }
      out.emplace_back(list[k]);
    }
    return out;
  };
  layout.batch = names(options.batch_axes, options.batch_axis_count, "options->batch_axes");
  layout.sequence = names(options.sequence_axes, options.sequence_axis_count, "options->sequence_axes");
  switch (options.sequence_order) {
    case BP_SEQUENCE_CONTIGUOUS: layout.sequence_order = Layout::SequenceOrder::kContiguous; break;
    case BP_SEQUENCE_HEAD_TAIL: layout.sequence_order = Layout::SequenceOrder::kHeadTail; break;
    default:
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: options->sequence_order {} is not a bp_sequence_order (BP_SEQUENCE_CONTIGUOUS 0, "
                              "BP_SEQUENCE_HEAD_TAIL 1)",
                              function, options.sequence_order));
  }
  if (options.mesh_rank_count > 0) require_non_null(options.mesh_ranks, function, "options->mesh_ranks");
  layout.ranks.assign(options.mesh_ranks, options.mesh_ranks + options.mesh_rank_count);
  return layout;
}

// The documents of the C options (API 0.8) as the C++ ones. Only what C alone
// can get wrong is checked here (a kind that is none, NULL arrays); what the
// values mean is BatchStream's to check.
DocumentBoundaries documents_of(const bp_batch_stream_options& options, std::size_t source_count,
                                const char* function) {
  switch (options.documents) {
    case BP_DOCUMENTS_NONE: return {};
    case BP_DOCUMENTS_BOS: return DocumentBoundaries::bos(options.document_token);
    case BP_DOCUMENTS_EOS: return DocumentBoundaries::eos(options.document_token);
    case BP_DOCUMENTS_STARTS: {
      if (source_count > 0) {
        require_non_null(options.document_starts, function, "options->document_starts");
        require_non_null(options.document_start_counts, function, "options->document_start_counts");
      }
      std::vector<std::vector<std::int64_t>> starts(source_count);
      for (std::size_t j = 0; j < source_count; ++j) {
        const std::size_t count = options.document_start_counts[j];
        const std::int64_t* source_starts = options.document_starts[j];
        if (count > 0 && source_starts == nullptr) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: options->document_starts[{}] is NULL and its count is {}", function, j, count));
        }
        starts[j].assign(source_starts, source_starts + count);
      }
      return DocumentBoundaries::given(std::move(starts));
    }
    default:
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: options->documents {} is not a bp_documents_kind (BP_DOCUMENTS_NONE 0, BOS 1, "
                              "EOS 2, STARTS 3)",
                              function, options.documents));
  }
}

// The schedules of the C options (API 0.9) into `cxx`. Only the arrays'
// shapes are checked here; what the entries mean is BatchStream's to check.
void schedules_of(const bp_batch_stream_options& options, std::size_t source_count, const char* function,
                  BatchStreamOptions& cxx) {
  if (options.schedule_count > 0) require_non_null(options.schedule, function, "options->schedule");
  for (std::size_t k = 0; k < options.schedule_count; ++k) {
    const bp_schedule_entry& entry = options.schedule[k];
    cxx.schedule.push_back({entry.step, entry.batch_size, entry.context});
  }
  if (options.weight_step_count == 0) return;
  require_non_null(options.weight_steps, function, "options->weight_steps");
  std::size_t expected = 0;
  if (__builtin_mul_overflow(options.weight_step_count, source_count, &expected) || options.weight_count != expected) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: options->weight_count {} is not weight_step_count {} x {} sources", function,
                            options.weight_count, options.weight_step_count, source_count));
  }
  for (std::size_t k = 0; k < options.weight_step_count; ++k) {
    const double* first = options.weights + k * source_count;
    cxx.weight_schedule.push_back({options.weight_steps[k], std::vector<double>(first, first + source_count)});
  }
  cxx.weights.clear();
}

// The C options as the C++ ones: the zeros that mean a default here
// (world_size, prefetch) become it; every other check is BatchStream's own,
// so that a bad option reads the same on every face.
BatchStreamOptions options_of(Runtime& runtime, const bp_batch_stream_options& options, std::size_t source_count,
                              const char* function) {
  BatchStreamOptions cxx;
  cxx.batch_size = options.batch_size;
  cxx.context = options.context;
  if (options.device_count > 0) require_non_null(options.devices, function, "options->devices");
  for (std::size_t i = 0; i < options.device_count; ++i) {
    cxx.devices.push_back(runtime.resolve(to_device(options.devices[i]).selector()));
  }
  if (options.dtype != 0) cxx.dtype = dtype_of(options.dtype, function);
  const bool seed_from_state = options.struct_size != kOptionsSize_0_5 && options.seed_from_state != 0;
  if (!seed_from_state) {
    cxx.seed = options.seed;
  } else if (options.seed != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: options->seed is {} and options->seed_from_state asks for the state's seed", function,
                            options.seed));
  }
  cxx.rank = options.rank;
  cxx.world_size = options.world_size == 0 ? 1 : options.world_size;
  cxx.prefetch = options.prefetch == 0 ? 2 : options.prefetch;
  if (options.weight_count > 0) require_non_null(options.weights, function, "options->weights");
  cxx.weights.assign(options.weights, options.weights + options.weight_count);
  cxx.threads = options.threads;
  cxx.release_pages = options.release_pages != 0;
  if (options.struct_size >= kOptionsSize_0_8) {
    cxx.documents = documents_of(options, source_count, function);
    cxx.max_documents = options.max_documents;
  }
  if (options.struct_size >= kOptionsSize_0_9) schedules_of(options, source_count, function, cxx);
  if (options.struct_size >= sizeof(bp_batch_stream_options)) cxx.layout = layout_of(options, function);
  return cxx;
}

// Throws kOutOfRange unless `capacity` holds `needed` items, after setting
// *count so that the caller can size its buffer.
void require_capacity(std::size_t needed, std::size_t capacity, size_t* count, const char* function, const char* what) {
  *count = needed;
  if (capacity < needed) {
    throw Error(ErrorCode::kOutOfRange,
                fmt::format("{}: capacity {} is too small: {} {} needed", function, capacity, needed, what));
  }
}

}  // namespace
}  // namespace backplane::c_api

// The C functions below have C linkage and global scope; they call the
// C++ API and the C API's helpers by their short names.
using namespace ::backplane;
using namespace ::backplane::c_api;

extern "C" {

bp_status bp_batch_stream_create(bp_runtime* runtime, const bp_array* const* sources, size_t source_count,
                                 const bp_batch_stream_options* options, bp_batch_stream** out) {
  return guarded([&] {
    constexpr const char* kFunction = "bp_batch_stream_create";
    std::shared_ptr<Runtime> cxx = runtime_of(runtime, kFunction);
    require_non_null(options, kFunction, "options");
    require_non_null(out, kFunction, "out");
    if (options->struct_size != kOptionsSize_0_5 && options->struct_size != kOptionsSize_0_7 &&
        options->struct_size != kOptionsSize_0_8 && options->struct_size != kOptionsSize_0_9) {
      require_struct_size(options->struct_size, sizeof(bp_batch_stream_options), kFunction, "options");
    }
    if (source_count > 0) require_non_null(sources, kFunction, "sources");
    std::vector<Array> arrays;
    arrays.reserve(source_count);
    for (std::size_t i = 0; i < source_count; ++i) {
      arrays.push_back(*array_of(sources[i], kFunction));
    }
    BatchStreamOptions cxx_options = options_of(*cxx, *options, source_count, kFunction);
    const std::size_t pieces = cxx_options.layout ? cxx_options.layout->ranks.size() : 1;
    const std::size_t devices = cxx_options.devices.empty() ? pieces : cxx_options.devices.size();
    const bool documents = cxx_options.documents.kind != DocumentBoundaries::Kind::kNone;
    std::optional<BatchStreamState> resume;
    if (options->state != nullptr) resume = BatchStreamState::from_json(options->state);
    auto stream =
        std::make_unique<BatchStream>(*cxx, std::move(arrays), std::move(cxx_options), resume ? &*resume : nullptr);
    *out = live_streams.add(std::make_shared<bp_batch_stream>(std::move(cxx), std::move(stream), devices, documents));
  });
}

void bp_batch_stream_destroy(bp_batch_stream* stream) {
  // The last reference (here, or in a call still in flight) stops the
  // stream's threads: remove() hands it back to be dropped outside the lock.
  live_streams.remove(stream);
}

bp_status bp_batch_stream_next(bp_batch_stream* stream, bp_array** out, size_t capacity, size_t* count) {
  return guarded([&] {
    constexpr const char* kFunction = "bp_batch_stream_next";
    std::shared_ptr<bp_batch_stream> live = stream_of(stream, kFunction);
    require_non_null(count, kFunction, "count");
    require_capacity(live->devices, capacity, count, kFunction, "array handles (one per device)");
    require_non_null(out, kFunction, "out");
    std::vector<Array> batch;
    batch = live->stream->next();  // any thread: each step goes to one caller
    if (batch.size() != live->devices) {
      throw Error(ErrorCode::kInternal, fmt::format("{}: the stream handed out {} arrays for {} devices", kFunction,
                                                    batch.size(), live->devices));
    }
    std::size_t made = 0;
    try {
      for (; made < batch.size(); ++made) out[made] = new_array_handle(std::move(batch[made]));
    } catch (...) {  // out of host memory: hand out all of the step or nothing
      for (std::size_t i = 0; i < made; ++i) bp_array_destroy(out[i]);
      throw;
    }
  });
}

bp_status bp_batch_stream_next_documents(bp_batch_stream* stream, bp_array** out, bp_batch_pieces* pieces,
                                         size_t capacity, size_t* count) {
  return guarded([&] {
    constexpr const char* kFunction = "bp_batch_stream_next_documents";
    std::shared_ptr<bp_batch_stream> live = stream_of(stream, kFunction);
    require_non_null(count, kFunction, "count");
    if (!live->documents) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: the stream was made without documents (options->documents BP_DOCUMENTS_NONE), so "
                              "its batches have no pieces: call bp_batch_stream_next",
                              kFunction));
    }
    require_capacity(live->devices, capacity, count, kFunction, "array handles and pieces (one per device)");
    require_non_null(out, kFunction, "out");
    require_non_null(pieces, kFunction, "pieces");
    StreamBatch batch = live->stream->next_batch();
    if (batch.tokens.size() != live->devices || batch.documents.size() != live->devices) {
      throw Error(ErrorCode::kInternal,
                  fmt::format("{}: the stream handed out {} arrays and {} pieces for {} devices", kFunction,
                              batch.tokens.size(), batch.documents.size(), live->devices));
    }
    // Out of host memory midway: hand out all of the step or nothing.
    std::vector<bp_array*> made;
    made.reserve(3 * live->devices);
    try {
      for (std::size_t device = 0; device < live->devices; ++device) {
        DocumentPieces& documents = batch.documents[device];
        made.push_back(new_array_handle(std::move(batch.tokens[device])));
        made.push_back(new_array_handle(std::move(documents.cu_seqlens)));
        made.push_back(new_array_handle(std::move(documents.position_ids)));
      }
    } catch (...) {
      for (bp_array* handle : made) bp_array_destroy(handle);
      throw;
    }
    for (std::size_t device = 0; device < live->devices; ++device) {
      out[device] = made[3 * device];
      pieces[device].cu_seqlens = made[3 * device + 1];
      pieces[device].position_ids = made[3 * device + 2];
      pieces[device].max_seqlen = batch.documents[device].max_seqlen;
      pieces[device].pieces = batch.documents[device].pieces;
    }
  });
}

bp_status bp_batch_stream_step(bp_batch_stream* stream, int64_t* out) {
  return guarded([&] {
    constexpr const char* kFunction = "bp_batch_stream_step";
    std::shared_ptr<bp_batch_stream> live = stream_of(stream, kFunction);
    require_non_null(out, kFunction, "out");
    *out = live->stream->step();
  });
}

bp_status bp_batch_stream_state(bp_batch_stream* stream, char* buffer, size_t capacity, size_t* length) {
  return guarded([&] {
    constexpr const char* kFunction = "bp_batch_stream_state";
    std::shared_ptr<bp_batch_stream> live = stream_of(stream, kFunction);
    require_non_null(length, kFunction, "length");
    const std::string json = live->stream->state().to_json();
    *length = json.size();
    if (capacity < json.size() + 1) {
      throw Error(ErrorCode::kOutOfRange,
                  fmt::format("{}: capacity {} is too small: the state needs {} bytes (its JSON and a NUL)", kFunction,
                              capacity, json.size() + 1));
    }
    require_non_null(buffer, kFunction, "buffer");
    json.copy(buffer, json.size());
    buffer[json.size()] = '\0';
  });
}

bp_status bp_batch_stream_stats_get(bp_batch_stream* stream, bp_batch_stream_stats* out) {
  return guarded([&] {
    constexpr const char* kFunction = "bp_batch_stream_stats_get";
    std::shared_ptr<bp_batch_stream> live = stream_of(stream, kFunction);
    require_non_null(out, kFunction, "out");
    if (out->struct_size != kStatsSize_0_9 && out->struct_size != kStatsSize_0_10) {
      require_struct_size(out->struct_size, sizeof(bp_batch_stream_stats), kFunction, "out");
    }
    const BatchStreamStats stats = live->stream->stats();
    out->steps = stats.steps;
    out->windows = stats.windows;
    out->bytes = stats.bytes;
    out->wait_seconds = stats.wait_seconds;
    out->gather_seconds = stats.gather_seconds;
    out->transfer_seconds = stats.transfer_seconds;
    out->elapsed_seconds = stats.elapsed_seconds;
    out->windows_per_second = stats.windows_per_second;
    out->data_stall_fraction = stats.data_stall_fraction;
    if (out->struct_size >= kStatsSize_0_10) out->read_bytes = stats.read_bytes;
    if (out->struct_size >= sizeof(bp_batch_stream_stats)) {
      out->step = stats.step;
      out->epoch = stats.epoch;
    }
  });
}

bp_status bp_batch_stream_resident_bytes(bp_batch_stream* stream, uint64_t* out) {
  return guarded([&] {
    constexpr const char* kFunction = "bp_batch_stream_resident_bytes";
    std::shared_ptr<bp_batch_stream> live = stream_of(stream, kFunction);
    require_non_null(out, kFunction, "out");
    *out = live->stream->resident_bytes();
  });
}

bp_status bp_batch_stream_windows(bp_batch_stream* stream, int64_t step, int32_t* sources, int64_t* starts,
                                  size_t capacity, size_t* count) {
  return guarded([&] {
    constexpr const char* kFunction = "bp_batch_stream_windows";
    std::shared_ptr<bp_batch_stream> live = stream_of(stream, kFunction);
    require_non_null(count, kFunction, "count");
    if (step < 0) throw Error(ErrorCode::kOutOfRange, fmt::format("{}: step {} is negative", kFunction, step));
    const std::vector<Window> windows = live->stream->windows(step);
    require_capacity(windows.size(), capacity, count, kFunction, "windows");
    for (std::size_t i = 0; i < windows.size(); ++i) {
      if (sources != nullptr) sources[i] = windows[i].source;
      if (starts != nullptr) starts[i] = windows[i].start;
    }
  });
}

}  // extern "C"
