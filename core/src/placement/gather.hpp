// Gathering a batch of token windows, shared by take_windows (the caller's
// thread) and the batch stream (its worker threads): rows of host memory into
// one buffer, converting integers on the way, and what dtype a batch crosses
// the link in. Sending the batch is the planner's (placement/transfer.hpp).
#pragma once

#include "placement/array_state.hpp"

#include <backplane/array.hpp>
#include <backplane/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace backplane::detail {

// Why handing out tokens of integer dtype `from` as `to` could change a
// value ("dtype U16 cannot hold every U32 token ..., ask for ..."), or ""
// when `to` holds every value of `from`: the same signedness and at least
// as wide, or unsigned into a wider signed type. take_windows and the batch
// stream refuse the conversion when this is not empty, at the call: a
// narrowing dtype would wrap tokens silently, and checking every token of
// every batch would cost the gather a pass it does not need.
std::string value_loss(DType from, DType to);

// Rows `rows[i]` (each `length` elements of `from`, possibly unaligned) one
// after another into `destination`, converted to `to` when the dtypes differ
// (integers only; the callers have refused any `to` that value_loss
// describes, so no value changes).
void gather_rows(std::span<const std::byte* const> rows, DType from, std::int64_t length, std::byte* destination,
                 DType to);

// True when the backend's convert_integers widens `from` to `to`, so a batch
// can cross the link in its narrow type.
bool device_can_widen(DType from, DType to);

// What a batch crosses the link as: `from` when `target` widens it on
// arrival, else `to`.
DType staged_dtype(const LiveDevice& target, DType from, DType to);

}  // namespace backplane::detail
