// The one placement planner. Whatever moves bytes onto a device (device_put,
// take_windows, the batch stream's steps) describes what it sends, asks
// plan_transfer for the route and issues the plan with issue_transfer: the
// route switch and the failure handling exist once, here.
//
// Routes, first match wins. An array's bytes (device_put):
//   same backend, source in a buffer   -> copy_device_to_device (unless the
//                                         backend declares
//                                         BP_CAPABILITY_NO_DEVICE_TO_DEVICE)
//   source in host memory, destination
//     with pinned staging              -> staged: through pinned memory
//   source in host memory              -> copy_to_device from the host pointer
//   destination in host memory         -> copy_to_host into the host pointer
//   otherwise                          -> through host memory, chunked
// A gather of host rows (take_windows, batch stream steps):
//   destination in host memory         -> gathered straight into it
//   the device widens the rows' dtype  -> gathered narrow into staging, one
//                                         copy, convert_integers on the device
//   otherwise                          -> gathered into staging, one copy
// A route that is one plugin call, asynchronous or small enough not to block
// for long (kInlineCopyLimit), whose source is already valid, is issued on
// the caller's thread and tracked by its event; the rest runs on the
// runtime's transfer threads.
#pragma once

#include "placement/array_state.hpp"
#include "trace/events.hpp"

#include <backplane/array.hpp>
#include <backplane/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::detail {

// Synchronous copies (backends without async copies) up to this size run on
// the caller's thread: a thread hop would cost more than the copy.
inline constexpr std::uint64_t kInlineCopyLimit = std::uint64_t{1} << 20;

// Rows of host memory sent as one batch: `rows` rows of `length` elements
// of `from` each.
struct RowGather {
  DType from = DType::kU8;
  std::uint64_t rows = 0;
  std::int64_t length = 0;
  // Writes the rows one after another into `destination` as `as` (the
  // dtype the plan gathers in), on the caller's thread.
  std::function<void(std::byte* destination, DType as)> gather;
};

// What a transfer reads: an array's bytes from `offset` (`array` set), or a
// gather of host rows (`rows` set).
struct TransferSource {
  std::shared_ptr<const ArrayStorage> array;
  std::uint64_t offset = 0;
  const RowGather* rows = nullptr;
};

enum class Route {
  kDeviceToDevice,
  kStaged,
  kFromHost,
  kToHost,
  kThroughHost,
  kGatherInPlace,  // rows gathered into the host-addressable destination: the gather is the transfer
  kGathered,       // rows gathered into one staging buffer, then one copy
  kWidenOnDevice,  // rows gathered narrow into staging, one copy, widened by the device
};

struct Plan {
  Route route = Route::kThroughHost;
  bool here = false;  // issued on the caller's thread
  // The dtype the bytes cross the link in: the output's, or for
  // kWidenOnDevice the rows' own.
  DType crosses_as = DType::kU8;
};

// Plans sending `size` bytes of `output` from `source` to `to`. `progress`:
// the caller wants progress reports, which come from a transfer thread.
Plan plan_transfer(const TransferSource& source, const LiveDevice& to, std::uint64_t size, DType output, bool progress);

struct Transfer {
  TransferSource source;
  std::shared_ptr<LiveDevice> to;
  std::shared_ptr<Block> destination;  // allocated by the caller: out of memory is its error
  std::uint64_t size = 0;              // bytes of the destination
  std::uint64_t elements = 0;          // elements of the destination (what a device widens)
  DType output = DType::kU8;
  ProgressCallback progress;
  // Names the transfer in errors ("device_put of 64.0 MiB (67108864 bytes)
  // from cpu:0 to cuda:0"); asked only when something can fail after the issue.
  std::function<std::string()> describe;
  std::string_view trace_name = trace::event::kDevicePut;  // or kTakeWindows, kBatch (trace/events.hpp)
};

// Carries `plan` out: gathers the rows (on the caller's thread), then issues
// the copy here or on the transfer threads. Returns the destination's arrival,
// or null when the data is there already. Staging and device memory are
// allocated before anything is issued, so running out is thrown here; an error
// once the copy is issued is carried by the returned completion.
std::shared_ptr<Completion> issue_transfer(Placement& placement, const Transfer& transfer, const Plan& plan);

// A gather of host rows sent as one batch (take_windows, a batch stream
// step): plans it, allocates the destination, issues it and returns the
// batch, `shape` of `output`. `describe` and `trace_name` as in Transfer.
Array send_rows(Placement& placement, const RowGather& rows, std::shared_ptr<LiveDevice> to, DType output,
                std::vector<std::int64_t> shape, const Extent& extent, std::function<std::string()> describe,
                std::string_view trace_name);

}  // namespace backplane::detail
