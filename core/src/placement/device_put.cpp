// device_put: one function plans the copy (its route, and whether it can be
// issued on the caller's thread); the rest carries the plan out.
//
// Routes, first match wins:
//   same backend, source in a buffer   -> copy_device_to_device
//   source in host memory, destination
//     with pinned staging              -> staged: through pinned memory
//   source in host memory              -> copy_to_device from the host pointer
//   destination in host memory         -> copy_to_host into the host pointer
//   otherwise                          -> through host memory, chunked
// A route that is one plugin call, asynchronous or small enough not to block
// for long, whose source is already valid, is issued on the caller's thread
// and tracked by its event; the rest runs on the runtime's transfer threads.
#include "placement/array_state.hpp"
#include "placement/staging.hpp"
#include "util/bytes.hpp"

#include <fmt/format.h>

#include <cstring>

namespace backplane {
using namespace detail;
namespace {

using detail::ArrayAccess;
using detail::ArrayState;
using detail::ArrayStorage;
using detail::LiveDevice;

// Synchronous copies (backends without async copies) up to this size run on
// the caller's thread: a thread hop would cost more than the copy.
constexpr std::uint64_t kInlineCopyLimit = std::uint64_t{1} << 20;

enum class Route { kDeviceToDevice, kStaged, kFromHost, kToHost, kThroughHost };

struct Plan {
  Route route = Route::kThroughHost;
  bool here = false;  // issued on the caller's thread
};

Plan plan_put(const ArrayStorage& source, const LiveDevice& to, std::uint64_t size, bool progress) {
  const LiveDevice& from = *source.device;
  Plan plan;
  bool one_call_here = false;  // the route is one call that will not block for long
  if (source.buffer != nullptr && &from.backend() == &to.backend()) {
    plan.route = Route::kDeviceToDevice;
    one_call_here = to.asynchronous() || size <= kInlineCopyLimit;
  } else if (source.host != nullptr && to.pinned() != nullptr) {
    plan.route = Route::kStaged;
    one_call_here = size <= detail::kStagingChunk;  // larger: the chunked pipeline
  } else if (source.host != nullptr) {
    plan.route = Route::kFromHost;
    one_call_here = to.asynchronous() || size <= kInlineCopyLimit;
  } else if (to.host_addressable()) {
    plan.route = Route::kToHost;
    one_call_here = from.asynchronous() || size <= kInlineCopyLimit;
  }
  // Progress is reported from a transfer thread; a source still arriving is
  // waited for there.
  const bool source_ready = !source.arrival || source.arrival->succeeded();
  plan.here = !progress && source_ready && (one_call_here || size == 0);
  return plan;
}

const char* route_name(Route route) {
  switch (route) {
    case Route::kDeviceToDevice: return "device_to_device";
    case Route::kStaged: return "staged";
    case Route::kFromHost: return "from_host";
    case Route::kToHost: return "to_host";
    case Route::kThroughHost: return "through_host";
  }
  return "unknown";
}

// The trace's category of a route: which way the bytes cross.
std::string_view route_category(Route route) {
  switch (route) {
    case Route::kStaged:
    case Route::kFromHost: return "host_to_device";
    case Route::kToHost: return "device_to_host";
    case Route::kDeviceToDevice:
    case Route::kThroughHost: return "device_to_device";
  }
  return "device_to_device";
}

struct Put {
  std::shared_ptr<const ArrayStorage> source;  // kept alive until the copy ends
  std::uint64_t source_offset = 0;
  std::shared_ptr<LiveDevice> to;
  std::shared_ptr<Block> destination;
  std::uint64_t size = 0;
  Plan plan;
  ProgressCallback progress;

  LiveDevice& from() const { return *source->device; }
  const std::byte* source_host() const { return source->host + source_offset; }
};

// The one-call routes. Asynchronous where `async` and the device has async
// copies: the returned event tracks the copy and `keep` gets what it reads.
// Otherwise blocking, returning an empty event. `staging` (kStaged only)
// holds the bytes to upload.
PluginEvent issue_copy(const Put& put, bool async, const detail::StagingBuffer* staging,
                       std::vector<std::shared_ptr<const void>>& keep) {
  LiveDevice& to = *put.to;
  BP_Buffer* destination = put.destination->buffer();
  switch (put.plan.route) {
    case Route::kDeviceToDevice:
      if (async && to.asynchronous()) {
        keep.push_back(put.source);
        return to.copy_device_to_device_async(put.source->buffer, put.source_offset, destination, put.size);
      }
      to.copy_device_to_device(put.source->buffer, put.source_offset, destination, put.size);
      return {};
    case Route::kStaged:
      if (async && to.asynchronous()) {
        keep.push_back(staging->owner());
        return to.copy_to_device_async(destination, 0, staging->data(), put.size);
      }
      to.copy_to_device(destination, 0, staging->data(), put.size);
      return {};
    case Route::kFromHost:
      if (async && to.asynchronous()) {
        keep.push_back(put.source);
        return to.copy_to_device_async(destination, 0, put.source_host(), put.size);
      }
      to.copy_to_device(destination, 0, put.source_host(), put.size);
      return {};
    case Route::kToHost:
      if (async && put.from().asynchronous()) {
        keep.push_back(put.source);
        return put.from().copy_to_host_async(put.source->buffer, put.source_offset, put.destination->address(),
                                             put.size);
      }
      put.from().copy_to_host(put.source->buffer, put.source_offset, put.destination->address(), put.size);
      return {};
    case Route::kThroughHost: break;
  }
  throw Error(ErrorCode::kInternal, "device_put: a route through host memory is not one plugin call");
}

// The routes through staging, as a pipeline of chunks; blocking.
void upload_staged(const Put& put) {
  LiveDevice& to = *put.to;
  LiveDevice& from = put.from();
  auto label = [&to](std::uint64_t, std::uint64_t offset, std::uint64_t size) {
    return fmt::format("{}: copy_to_device_async of chunk {} at offset {}", to.selector(), describe_bytes(size),
                       offset);
  };
  detail::StagedUpload upload(to, put.size, put.progress, label, &from);
  for (std::uint64_t offset = 0; offset < put.size; offset += upload.slot_size()) {
    const std::uint64_t n = std::min(upload.slot_size(), put.size - offset);
    std::byte* slot = upload.next_slot();
    trace::Scope fill("staging", "fill");
    if (fill.active()) fill.arg({"bytes", n});
    if (put.plan.route == Route::kStaged) {
      std::memcpy(slot, put.source_host() + offset, n);
    } else {
      from.copy_to_host(put.source->buffer, put.source_offset + offset, slot, n);
    }
    upload.send(put.destination->buffer(), offset, 0, n);  // overlaps the filling of the next slot
  }
  upload.finish();
}

// The whole copy, blocking; runs on a transfer thread.
void run_put(const Put& put) {
  try {
    detail::wait_for(*put.source);
  } catch (const Error& error) {
    throw Error(error.code(), fmt::format("its source array is unusable: {}", error.what()));
  }
  if (put.plan.route == Route::kStaged || put.plan.route == Route::kThroughHost) {
    upload_staged(put);
    return;
  }
  if (put.size != 0) {
    std::vector<std::shared_ptr<const void>> unused;
    issue_copy(put, false, nullptr, unused);
  }
  if (put.progress) put.progress(put.size, put.size);
}

// Issues a plan.here copy on the caller's thread: a completion tracking its
// event, or null when it already finished.
std::shared_ptr<Completion> issue_here(const Put& put, const std::string& description,
                                       std::optional<TransferTrace> transfer) {
  if (put.size == 0) return nullptr;
  // Allocated outside the try below: running out of pinned memory is thrown
  // by device_put like any allocation failure, not deferred to the wait.
  std::optional<detail::StagingBuffer> staging;
  if (put.plan.route == Route::kStaged) {
    staging.emplace(put.to->pinned(), put.size);
    std::memcpy(staging->data(), put.source_host(), put.size);
  }
  std::vector<std::shared_ptr<const void>> keep{put.destination};
  try {
    PluginEvent event = issue_copy(put, true, staging ? &*staging : nullptr, keep);
    const std::shared_ptr<LiveDevice>& issuer = put.plan.route == Route::kToHost ? put.source->device : put.to;
    if (!event) {  // done already (a small synchronous copy)
      if (transfer) trace_finished(std::move(*transfer));
      return nullptr;
    }
    auto arrival = std::make_shared<Completion>(description, issuer, std::move(event), std::move(keep));
    if (transfer) arrival->trace_as(std::move(*transfer));
    return arrival;
  } catch (const Error& error) {
    return Completion::failed(description, error);
  }
}

Array put_on(detail::Placement& placement, const Array& array, std::shared_ptr<LiveDevice> to,
             const PutOptions& options) {
  const ArrayState& state = ArrayAccess::state(array, "device_put");
  Put put;
  put.source = state.storage;
  put.source_offset = state.offset;
  put.size = state.nbytes;
  put.plan = plan_put(*state.storage, *to, state.nbytes, static_cast<bool>(options.progress));
  put.progress = options.progress;
  put.destination = to->memory().allocate(state.nbytes);  // out of memory is thrown here
  put.to = to;
  std::string description = fmt::format("device_put of {} from {} to {}", describe_bytes(state.nbytes),
                                        state.storage->device->selector(), to->selector());

  std::optional<TransferTrace> transfer;
  if (trace::enabled()) {
    transfer = TransferTrace{route_category(put.plan.route),    "device_put",   route_name(put.plan.route), put.size,
                             state.storage->device->selector(), to->selector(), trace::Clock::now()};
    transfer->nvtx = trace::Range("device_put", put.size);
  }
  std::shared_ptr<Completion> arrival = put.plan.here
                                            ? issue_here(put, description, std::move(transfer))
                                            : placement.run(
                                                  std::move(description), [put] { run_put(put); }, std::move(transfer));
  return detail::make_result(placement, std::move(to), put.destination, std::move(arrival), state.dtype, state.shape,
                             detail::Extent{state.elements, state.nbytes});
}

}  // namespace

Array device_put(Runtime& runtime, const Array& array, const Device& device, const PutOptions& options) {
  const ArrayState& state = ArrayAccess::state(array, "device_put");
  if (state.storage->device->device() == device) return array;
  const auto placement = detail::placement_of(runtime);
  return put_on(*placement, array, placement->device(device), options);
}

Array device_put(const Array& array, const Device& device, const PutOptions& options) {
  const ArrayState& state = ArrayAccess::state(array, "device_put");
  if (state.storage->device->device() == device) return array;
  const auto placement = state.storage->placement.lock();
  if (!placement) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("device_put to {}: the Runtime that made this array no longer exists; pass a Runtime",
                            device.selector()));
  }
  return put_on(*placement, array, placement->device(device), options);
}

}  // namespace backplane
