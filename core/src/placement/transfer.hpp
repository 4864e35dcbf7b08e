// Pieces shared by device_put (transfer.cpp) and take_windows.
#pragma once

#include "placement/array_state.hpp"
#include "placement/completion.hpp"
#include "placement/context.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace backplane::detail {

// Copies at most this many bytes per chunk through pinned staging, with a
// ring of kRingDepth staging buffers per transfer. 8 MiB keeps a PCIe link
// busy while a few chunks cost only tens of MiB of pinned memory.
inline constexpr std::uint64_t kStagingChunk = std::uint64_t{8} << 20;
inline constexpr std::uint64_t kRingDepth = 3;
// Synchronous copies (backends without async copies) up to this size run on
// the caller's thread: a thread hop would cost more than the copy.
inline constexpr std::uint64_t kInlineCopyLimit = std::uint64_t{1} << 20;

// Runs `work` on the transfer threads. The completion finishes when `work`
// returns, or with the Error it throws (other exceptions become kInternal).
// `work` is destroyed before the completion finishes, so what it holds is
// released by then.
std::shared_ptr<Completion> run_on_executor(PlacementState& placement, std::string description,
                                            std::function<void()> work);

// An already finished completion carrying `error`.
std::shared_ptr<Completion> failed(std::string description, const Error& error);

// The array that a completed or pending copy fills: `block` on `context`.
Array make_result(std::shared_ptr<DeviceContext> context, std::shared_ptr<Block> block,
                  std::shared_ptr<Completion> arrival, DType dtype, std::vector<std::int64_t> shape,
                  const Extent& extent);

// Copies `size` bytes into `destination` at offset 0 through a ring of staging
// buffers: fill(slot, offset, n) writes source bytes [offset, offset + n) into
// the slot, then an asynchronous copy moves it to the device while the next
// slot is filled. Staging comes from `pinned` (null: plain host memory).
// Blocks until every chunk arrived; throws the first failure after draining
// the chunks still in flight.
void copy_in_chunks(DeviceContext& to, CachingAllocator* pinned, BP_Buffer* destination, std::uint64_t size,
                    const std::function<void(std::byte* slot, std::uint64_t offset, std::uint64_t n)>& fill,
                    const ProgressCallback& progress);

}  // namespace backplane::detail
