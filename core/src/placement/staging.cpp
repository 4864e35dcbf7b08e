// The chunked staging pipeline and the transfer-job plumbing shared by
// device_put and take_windows.
#include "placement/bytes.hpp"
#include "placement/transfer.hpp"

#include <fmt/format.h>

#include <array>
#include <new>
#include <optional>
#include <vector>

namespace backplane::detail {

std::shared_ptr<Completion> run_on_executor(PlacementState& placement, std::string description,
                                            std::function<void()> work) {
  auto arrival = std::make_shared<Completion>(std::move(description));
  auto shared_work = std::make_shared<std::function<void()>>(std::move(work));
  placement.executor.submit([arrival, shared_work]() mutable {
    ErrorCode code = ErrorCode::kOk;
    std::string message;
    try {
      (*shared_work)();
    } catch (const Error& error) {
      code = error.code();
      message = error.what();
    } catch (const std::bad_alloc&) {
      code = ErrorCode::kOutOfMemory;
      message = "out of host memory";
    } catch (const std::exception& error) {
      code = ErrorCode::kInternal;
      message = error.what();
    } catch (...) {
      code = ErrorCode::kInternal;
      message = "unknown exception";
    }
    shared_work.reset();  // buffers go back to their caches before anyone sees "done"
    if (code == ErrorCode::kOk) {
      arrival->finish_ok();
    } else {
      arrival->finish_error(code, message);
    }
  });
  return arrival;
}

std::shared_ptr<Completion> failed(std::string description, const Error& error) {
  auto arrival = std::make_shared<Completion>(std::move(description));
  arrival->finish_error(error.code(), error.what());
  return arrival;
}

Array make_result(std::shared_ptr<DeviceContext> context, std::shared_ptr<Block> block,
                  std::shared_ptr<Completion> arrival, DType dtype, std::vector<std::int64_t> shape,
                  const Extent& extent) {
  auto storage = std::make_shared<ArrayStorage>();
  storage->native = block->address();
  if (context->host_addressable) storage->host = block->address();
  storage->buffer = block->buffer();
  storage->block = std::move(block);
  storage->arrival = std::move(arrival);
  storage->context = std::move(context);
  return make_array(std::move(storage), dtype, std::move(shape), extent);
}

void copy_in_chunks(DeviceContext& to, CachingAllocator* pinned, BP_Buffer* destination, std::uint64_t size,
                    const std::function<void(std::byte* slot, std::uint64_t offset, std::uint64_t n)>& fill,
                    const ProgressCallback& progress) {
  if (size == 0) {
    if (progress) progress(0, 0);
    return;
  }
  const std::uint64_t chunk = std::min(kStagingChunk, size);
  const std::uint64_t depth = std::min(kRingDepth, (size + chunk - 1) / chunk);

  // The ring. Pinned blocks come from the device's cache, so a device keeps
  // reusing the same few staging buffers across transfers.
  std::vector<std::shared_ptr<Block>> pinned_slots;
  std::vector<std::unique_ptr<std::byte[]>> host_slots;
  std::array<std::byte*, kRingDepth> slots{};
  for (std::uint64_t index = 0; index < depth; ++index) {
    if (pinned != nullptr) {
      pinned_slots.push_back(pinned->allocate(chunk));
      slots[index] = pinned_slots.back()->address();
    } else {
      host_slots.push_back(std::make_unique_for_overwrite<std::byte[]>(chunk));
      slots[index] = host_slots.back().get();
    }
  }

  struct InFlight {
    BP_Event* event;
    std::uint64_t offset;
    std::uint64_t size;
  };
  std::array<std::optional<InFlight>, kRingDepth> in_flight;
  std::uint64_t done = 0;
  Backend& backend = *to.backend;

  auto retire = [&](std::uint64_t slot) {
    const InFlight chunk_copy = *in_flight[slot];
    in_flight[slot].reset();
    std::optional<PluginFailure> failure = backend.wait_event(chunk_copy.event);
    backend.destroy_event(chunk_copy.event);
    if (failure) {
      throw Error(failure->code, fmt::format("{}: copy_to_device_async of chunk {} at offset {}: {}", to.selector,
                                             describe_bytes(chunk_copy.size), chunk_copy.offset, failure->message));
    }
    done += chunk_copy.size;
    if (progress) progress(done, size);
  };

  std::uint64_t next_retire = 0;  // chunks complete in order, so retire in order
  try {
    std::uint64_t index = 0;
    for (std::uint64_t offset = 0; offset < size; offset += chunk, ++index) {
      const std::uint64_t slot = index % depth;
      if (in_flight[slot]) {
        retire(slot);
        ++next_retire;
      }
      const std::uint64_t n = std::min(chunk, size - offset);
      fill(slots[slot], offset, n);  // overlaps the copies of the other slots
      in_flight[slot] = InFlight{backend.copy_to_device_async(to.ordinal, destination, offset, slots[slot], n),
                                 offset, n};
    }
    for (std::uint64_t left = 0; left < depth; ++left, ++next_retire) {
      const std::uint64_t slot = next_retire % depth;
      if (in_flight[slot]) retire(slot);
    }
  } catch (...) {
    // Nothing may still read a slot when it goes back to the cache.
    for (auto& copy : in_flight) {
      if (!copy) continue;
      (void)backend.wait_event(copy->event);
      backend.destroy_event(copy->event);
      copy.reset();
    }
    throw;
  }
}

}  // namespace backplane::detail
