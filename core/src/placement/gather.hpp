// The two halves of moving a batch of token windows to a device, shared by
// take_windows (the caller's thread) and the batch stream (its worker
// threads): gathering rows of host memory into one buffer, converting
// integers on the way, and sending a gathered staging buffer to the device.
#pragma once

#include "placement/array_state.hpp"
#include "placement/staging.hpp"

#include <backplane/array.hpp>
#include <backplane/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace backplane::detail {

// Rows `rows[i]` (each `length` elements of `from`, possibly unaligned) one
// after another into `destination`, converted to `to` when the dtypes differ
// (integers only; values wrap like a C++ cast when narrowing).
void gather_rows(std::span<const std::byte* const> rows, DType from, std::int64_t length, std::byte* destination,
                 DType to);

// True when the backend's convert_integers widens `from` to `to`, so a batch
// can cross the link in its narrow type.
bool device_can_widen(DType from, DType to);

// What a batch crosses the link as: `from` when `target` widens it on
// arrival, else `to`.
DType staged_dtype(const LiveDevice& target, DType from, DType to);

// Sends `staging` (the batch gathered as `staged`, the staged_dtype(target,
// from, to) its caller sized the staging for) into `block` on `target` (not
// host-addressable) and returns the array it fills, [shape] of `to`, whose
// data is still arriving. Widens on the device when `staged` is `from`,
// falling back to the host for good if the device turns out unable to.
// `staged` is passed, never asked again: another batch's transfer may stop
// the device's widening in between, and the staging holds what was gathered.
// `description` names the batch in errors; `trace_name` names its transfer
// on the trace ("take_windows").
Array send_batch(Placement& placement, const std::shared_ptr<LiveDevice>& target, std::shared_ptr<Block> block,
                 const StagingBuffer& staging, DType from, DType staged, DType to, std::vector<std::int64_t> shape,
                 const Extent& extent, std::string description, std::string_view trace_name = "batch");

}  // namespace backplane::detail
