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

}  // namespace backplane::detail
