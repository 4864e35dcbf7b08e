// The one placement planner and the one way a plan is issued (see
// transfer.hpp for the routes).
#include "placement/transfer.hpp"

#include "placement/gather.hpp"
#include "placement/staging.hpp"
#include "util/bytes.hpp"
#include "util/log.hpp"

#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <vector>

namespace backplane::detail {
namespace {

std::uint64_t bytes_of(std::uint64_t elements, DType dtype) {
  return elements * static_cast<std::uint64_t>(dtype_bits(dtype) / 8);
}

Plan plan_gather(const RowGather& rows, const LiveDevice& to, std::uint64_t size, DType output) {
  Plan plan;
  plan.crosses_as = output;
  if (to.host_addressable()) {
    plan.route = Route::kGatherInPlace;
    plan.here = true;
    return plan;
  }
  plan.crosses_as = staged_dtype(to, rows.from, output);
  if (plan.crosses_as != output) {
    plan.route = Route::kWidenOnDevice;  // a copy then a conversion: two calls, on a transfer thread
    return plan;
  }
  plan.route = Route::kGathered;
  plan.here = to.asynchronous() || size <= kInlineCopyLimit;
  return plan;
}

Plan plan_put(const ArrayStorage& source, const LiveDevice& to, std::uint64_t size, DType output, bool progress) {
  const LiveDevice& from = *source.device;
  Plan plan;
  plan.crosses_as = output;
  bool one_call_here = false;  // the route is one call that will not block for long
  // A backend that cannot copy byte ranges between its buffers
  // (BP_CAPABILITY_NO_DEVICE_TO_DEVICE) gets the routes through the host.
  if (source.buffer != nullptr && &from.backend() == &to.backend() &&
      !to.backend().has(BP_CAPABILITY_NO_DEVICE_TO_DEVICE)) {
    plan.route = Route::kDeviceToDevice;
    one_call_here = to.asynchronous() || size <= kInlineCopyLimit;
  } else if (source.host != nullptr && to.pinned() != nullptr) {
    plan.route = Route::kStaged;
    one_call_here = size <= kStagingChunk;  // larger: the chunked pipeline
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

// The trace's name for a route. A gathered batch is named by how it went,
// as the batch trace has always shown it.
const char* route_name(const Plan& plan, const LiveDevice& to) {
  switch (plan.route) {
    case Route::kDeviceToDevice: return "device_to_device";
    case Route::kStaged: return "staged";
    case Route::kFromHost: return "from_host";
    case Route::kToHost: return "to_host";
    case Route::kThroughHost: return "through_host";
    case Route::kGatherInPlace: return "in_place";
    case Route::kGathered: return to.asynchronous() ? "async" : "blocking";
    case Route::kWidenOnDevice: return "widen_on_device";
  }
  return "unknown";
}

// The trace's category of a route: which way the bytes cross.
std::string_view route_category(Route route) {
  switch (route) {
    case Route::kStaged:
    case Route::kFromHost:
    case Route::kGatherInPlace:
    case Route::kGathered:
    case Route::kWidenOnDevice: return trace::category::kHostToDevice;
    case Route::kToHost: return trace::category::kDeviceToHost;
    case Route::kDeviceToDevice:
    case Route::kThroughHost: return trace::category::kDeviceToDevice;
  }
  return trace::category::kDeviceToDevice;
}

// A transfer as its jobs carry it: what it reads once the rows are gathered.
struct Put {
  std::shared_ptr<const ArrayStorage> source;  // an array's bytes, kept alive until the copy ends
  std::uint64_t source_offset = 0;
  std::shared_ptr<LiveDevice> to;
  std::shared_ptr<Block> destination;
  std::uint64_t size = 0;
  std::uint64_t elements = 0;
  DType from = DType::kU8;  // the rows' dtype (gathers)
  DType output = DType::kU8;
  Plan plan;
  ProgressCallback progress;
  std::optional<StagingBuffer> staging;  // the gathered rows
  std::shared_ptr<Block> narrow;         // kWidenOnDevice: where the narrow rows land on the device

  LiveDevice& source_device() const { return *source->device; }
  const std::byte* source_host() const { return source->host + source_offset; }
};

// The one-call routes. Asynchronous where `async` and the device has async
// copies: the returned event tracks the copy and `keep` gets what it reads.
// Otherwise blocking, returning an empty event. `staging` (kStaged,
// kGathered) holds the bytes to upload.
PluginEvent issue_copy(const Put& put, bool async, const StagingBuffer* staging,
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
    case Route::kGathered:
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
      if (async && put.source_device().asynchronous()) {
        keep.push_back(put.source);
        return put.source_device().copy_to_host_async(put.source->buffer, put.source_offset, put.destination->address(),
                                                      put.size);
      }
      put.source_device().copy_to_host(put.source->buffer, put.source_offset, put.destination->address(), put.size);
      return {};
    case Route::kThroughHost:
    case Route::kGatherInPlace:
    case Route::kWidenOnDevice: break;
  }
  throw Error(ErrorCode::kInternal,
              fmt::format("placement: route {} is not one plugin call", route_name(put.plan, *put.to)));
}

// The routes through staging, as a pipeline of chunks; blocking.
void upload_staged(const Put& put) {
  LiveDevice& to = *put.to;
  LiveDevice& from = put.source_device();
  auto label = [&to](std::uint64_t, std::uint64_t offset, std::uint64_t size) {
    return fmt::format("{}: copy_to_device_async of chunk {} at offset {}", to.selector(), describe_bytes(size),
                       offset);
  };
  StagedUpload upload(to, put.size, put.progress, label, &from);
  for (std::uint64_t offset = 0; offset < put.size; offset += upload.slot_size()) {
    const std::uint64_t n = std::min(upload.slot_size(), put.size - offset);
    std::byte* slot = upload.next_slot();
    auto fill = trace::Span::nested(trace::category::kStaging, trace::event::kFill);
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

// The gathered rows, narrow, onto the device, then widened there; blocking.
// A device that turns out unable to widen (no kernel for this GPU) gets this
// batch widened on the host, and every later one planned that way.
void widen_on_device(const Put& put) {
  LiveDevice& target = *put.to;
  const std::uint64_t narrow_bytes = bytes_of(put.elements, put.from);
  target.copy_to_device(put.narrow->buffer(), 0, put.staging->data(), narrow_bytes);
  PluginEvent widened;
  auto widening = trace::Span::nested(trace::category::kWidening, trace::event::kConvertIntegers);
  if (widening.active()) {
    widening.arg({"bytes", put.destination->size()});
    widening.arg({"elements", put.elements});
    widening.arg({"device", target.selector()});
    widening.arg({"from", dtype_name(put.from)});
    widening.arg({"to", dtype_name(put.output)});
  }
  try {
    widened = target.convert_integers(put.narrow->buffer(), static_cast<BP_IntegerType>(put.from),
                                      put.destination->buffer(), static_cast<BP_IntegerType>(put.output), put.elements);
  } catch (const Error& error) {
    // The capability is the plugin's in general; this device may still lack
    // it. The batch is not lost for that.
    if (error.code() != ErrorCode::kUnsupported) throw;
    if (target.stop_converting_integers()) {
      log(LogLevel::kWarn, "{}: widening integers on the host from now on: {}", target.selector(), error.what());
    }
    std::vector<std::byte> wide(bytes_of(put.elements, put.output));
    const std::byte* const whole[] = {put.staging->data()};
    gather_rows(whole, put.from, static_cast<std::int64_t>(put.elements), wide.data(), put.output);
    target.copy_to_device(put.destination->buffer(), 0, wide.data(), wide.size());
    return;
  }
  widened.wait([&] { return fmt::format("{}: convert_integers of {} elements", target.selector(), put.elements); });
}

// The whole copy, blocking; runs on a transfer thread.
void run_put(const Put& put) {
  if (put.source) {
    try {
      wait_for(*put.source);
    } catch (const Error& error) {
      throw Error(error.code(), fmt::format("its source array is unusable: {}", error.what()));
    }
  }
  switch (put.plan.route) {
    case Route::kStaged:
    case Route::kThroughHost: upload_staged(put); return;
    case Route::kWidenOnDevice: widen_on_device(put); return;
    default: break;
  }
  if (put.size != 0) {
    std::vector<std::shared_ptr<const void>> unused;
    issue_copy(put, false, put.staging ? &*put.staging : nullptr, unused);
  }
  if (put.progress) put.progress(put.size, put.size);
}

// Issues a plan.here copy on the caller's thread: a completion tracking its
// event, or null when it already finished.
std::shared_ptr<Completion> issue_here(const Put& put, const std::function<std::string()>& describe,
                                       std::optional<TransferTrace> transfer) {
  if (put.size == 0) return nullptr;
  // Allocated outside the try below: running out of pinned memory is thrown
  // by the call like any allocation failure, not deferred to the wait.
  std::optional<StagingBuffer> staging = put.staging;
  if (put.plan.route == Route::kStaged) {
    staging.emplace(put.to->pinned(), put.size);
    std::memcpy(staging->data(), put.source_host(), put.size);
  }
  std::vector<std::shared_ptr<const void>> keep{put.destination};
  try {
    PluginEvent event = issue_copy(put, true, staging ? &*staging : nullptr, keep);
    if (!event) {  // done already (a small synchronous copy)
      if (transfer) trace_finished(std::move(*transfer));
      return nullptr;
    }
    const std::shared_ptr<LiveDevice>& issuer = put.plan.route == Route::kToHost ? put.source->device : put.to;
    auto arrival = std::make_shared<Completion>(describe(), issuer, std::move(event), std::move(keep));
    if (transfer) arrival->trace_as(std::move(*transfer));
    return arrival;
  } catch (const Error& error) {
    return Completion::failed(describe(), error);
  }
}

}  // namespace

Plan plan_transfer(const TransferSource& source, const LiveDevice& to, std::uint64_t size, DType output,
                   bool progress) {
  if (source.rows != nullptr) return plan_gather(*source.rows, to, size, output);
  return plan_put(*source.array, to, size, output, progress);
}

std::shared_ptr<Completion> issue_transfer(Placement& placement, const Transfer& transfer, const Plan& plan) {
  Put put;
  put.source = transfer.source.array;
  put.source_offset = transfer.source.offset;
  put.to = transfer.to;
  put.destination = transfer.destination;
  put.size = transfer.size;
  put.elements = transfer.elements;
  put.output = transfer.output;
  put.plan = plan;
  put.progress = transfer.progress;
  if (const RowGather* rows = transfer.source.rows) {
    put.from = rows->from;
    if (plan.route == Route::kGatherInPlace) {
      rows->gather(put.destination->address(), put.output);
      return nullptr;
    }
    put.staging.emplace(put.to->pinned(), bytes_of(put.elements, plan.crosses_as));
    rows->gather(put.staging->data(), plan.crosses_as);
    if (plan.route == Route::kWidenOnDevice) put.narrow = put.to->memory().allocate(bytes_of(put.elements, put.from));
  }

  std::optional<TransferTrace> transfer_trace;
  if (trace::enabled()) {
    const std::uint64_t bytes = put.source ? put.size : bytes_of(put.elements, plan.crosses_as);
    transfer_trace =
        TransferTrace{trace::Span(route_category(plan.route), transfer.trace_name, bytes), route_name(plan, *put.to),
                      bytes, put.source ? put.source_device().selector() : "host", put.to->selector()};
  }
  if (plan.here) return issue_here(put, transfer.describe, std::move(transfer_trace));
  return placement.run(
      transfer.describe(), [put = std::move(put)] { run_put(put); }, std::move(transfer_trace));
}

Array send_rows(Placement& placement, const RowGather& rows, std::shared_ptr<LiveDevice> to, DType output,
                std::vector<std::int64_t> shape, const Extent& extent, std::function<std::string()> describe,
                std::string_view trace_name) {
  const TransferSource gathered{nullptr, 0, &rows};
  const Plan plan = plan_transfer(gathered, *to, extent.bytes, output, false);
  Transfer transfer;
  transfer.source = gathered;
  transfer.to = to;
  transfer.destination = to->memory().allocate(extent.bytes);
  transfer.size = extent.bytes;
  transfer.elements = extent.elements;
  transfer.output = output;
  transfer.describe = std::move(describe);
  transfer.trace_name = trace_name;
  std::shared_ptr<Completion> arrival = issue_transfer(placement, transfer, plan);
  return make_result(placement, std::move(to), transfer.destination, std::move(arrival), output, std::move(shape),
                     extent);
}

}  // namespace backplane::detail
