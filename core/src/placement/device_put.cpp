// device_put: an array's bytes to another device. The route and the copy
// are the planner's (placement/transfer.hpp); this allocates the destination
// and describes the transfer.
#include "placement/array_state.hpp"
#include "placement/transfer.hpp"
#include "util/bytes.hpp"

#include <fmt/format.h>

namespace backplane {
namespace {

using detail::ArrayAccess;
using detail::ArrayState;
using detail::Completion;
using detail::describe_bytes;
using detail::LiveDevice;
using detail::Plan;
using detail::Transfer;
using detail::TransferSource;

Array put_on(detail::Placement& placement, const Array& array, std::shared_ptr<LiveDevice> to,
             const PutOptions& options) {
  const ArrayState& state = ArrayAccess::state(array, "device_put");
  const TransferSource source{state.storage, state.offset, nullptr};
  const Plan plan = plan_transfer(source, *to, state.nbytes, state.dtype, static_cast<bool>(options.progress));
  Transfer transfer;
  transfer.source = source;
  transfer.destination = to->memory().allocate(state.nbytes);  // out of memory is thrown here
  transfer.to = to;
  transfer.size = state.nbytes;
  transfer.elements = state.elements;
  transfer.output = state.dtype;
  transfer.progress = options.progress;
  transfer.describe = [&state, &to] {
    return fmt::format("device_put of {} from {} to {}", describe_bytes(state.nbytes),
                       state.storage->device->selector(), to->selector());
  };
  std::shared_ptr<Completion> arrival = issue_transfer(placement, transfer, plan);
  return detail::make_result(placement, std::move(to), transfer.destination, std::move(arrival), state.dtype,
                             state.shape, detail::Extent{state.elements, state.nbytes});
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
