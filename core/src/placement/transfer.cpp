// device_put: choosing the route of a copy and issuing it without blocking.
//
// Routes, first match wins:
//   same backend, source in a buffer  -> copy_device_to_device
//   source in host memory             -> copy_to_device from the host pointer,
//                                        through pinned staging when the
//                                        destination offers it
//   destination in host memory        -> copy_to_host into the host pointer
//   otherwise                         -> through host memory, chunked
// A route that is one asynchronous plugin call, whose source is already
// valid, is issued on the caller's thread and tracked by its event; the rest
// runs on the runtime's transfer threads.
#include "placement/bytes.hpp"
#include "placement/transfer.hpp"

#include <fmt/format.h>

#include <cstring>

namespace backplane {
namespace {

using detail::ArrayAccess;
using detail::ArrayState;
using detail::ArrayStorage;

enum class Route { kDeviceToDevice, kFromHost, kToHost, kThroughHost };

struct Put {
  std::shared_ptr<const ArrayStorage> source;  // kept alive until the copy ends
  std::uint64_t source_offset = 0;
  std::shared_ptr<DeviceContext> to;
  std::shared_ptr<Block> destination;
  std::uint64_t size = 0;
  Route route = Route::kThroughHost;
  ProgressCallback progress;

  DeviceContext& from() const { return *source->context; }
  const std::byte* source_host() const { return source->host + source_offset; }
};

Route choose_route(const ArrayStorage& source, const DeviceContext& to) {
  if (source.buffer != nullptr && source.context->backend == to.backend) return Route::kDeviceToDevice;
  if (source.host != nullptr) return Route::kFromHost;
  if (to.host_addressable) return Route::kToHost;
  return Route::kThroughHost;
}

// The whole copy, blocking; runs on a transfer thread.
void run_put(const Put& put) {
  try {
    detail::wait_for(*put.source);
  } catch (const Error& error) {
    throw Error(error.code(), fmt::format("its source array is unusable: {}", error.what()));
  }
  DeviceContext& to = *put.to;
  switch (put.route) {
    case Route::kDeviceToDevice:
      if (put.size != 0) {
        to.backend->copy_device_to_device(to.ordinal, put.source->buffer, put.source_offset,
                                          put.destination->buffer(), 0, put.size);
      }
      break;
    case Route::kFromHost:
      if (to.pinned) {
        const std::byte* host = put.source_host();
        detail::copy_in_chunks(
            to, to.pinned.get(), put.destination->buffer(), put.size,
            [host](std::byte* slot, std::uint64_t offset, std::uint64_t n) { std::memcpy(slot, host + offset, n); },
            put.progress);
        return;
      }
      if (put.size != 0) to.backend->copy_to_device(to.ordinal, put.destination->buffer(), 0, put.source_host(), put.size);
      break;
    case Route::kToHost:
      if (put.size != 0) {
        put.from().backend->copy_to_host(put.from().ordinal, put.source->buffer, put.source_offset,
                                         put.destination->address(), put.size);
      }
      break;
    case Route::kThroughHost: {
      DeviceContext& from = put.from();
      CachingAllocator* pinned = to.pinned ? to.pinned.get() : from.pinned.get();
      detail::copy_in_chunks(
          to, pinned, put.destination->buffer(), put.size,
          [&](std::byte* slot, std::uint64_t offset, std::uint64_t n) {
            from.backend->copy_to_host(from.ordinal, put.source->buffer, put.source_offset + offset, slot, n);
          },
          put.progress);
      return;
    }
  }
  if (put.progress) put.progress(put.size, put.size);
}

struct Issued {
  bool handled = false;                  // false: hand the copy to a transfer thread
  std::shared_ptr<Completion> arrival;   // null with handled: already complete
};

// Issues `put` on the caller's thread when that cannot block for long.
Issued try_issue_here(const Put& put, const std::string& description) {
  if (put.progress) return {};  // progress is reported from a transfer thread
  if (put.source->arrival && !put.source->arrival->succeeded()) return {};
  DeviceContext& to = *put.to;
  DeviceContext& from = put.from();
  std::vector<std::shared_ptr<const void>> keep{put.destination};
  auto tracked = [&](const std::shared_ptr<Backend>& backend, int ordinal, BP_Event* event) {
    try {
      return Issued{true, std::make_shared<Completion>(description, backend, ordinal, event, std::move(keep))};
    } catch (...) {
      backend->destroy_event(event);
      throw;
    }
  };
  if (put.size == 0) return {true, nullptr};
  // Allocated outside the try below: running out of pinned memory is thrown
  // by device_put like any allocation failure, not deferred to the wait.
  std::shared_ptr<Block> staging;
  if (put.route == Route::kFromHost && to.pinned && put.size <= detail::kStagingChunk) {
    staging = to.pinned->allocate(put.size);
  }
  try {
    switch (put.route) {
      case Route::kDeviceToDevice:
        if (to.asynchronous) {
          keep.push_back(put.source);
          return tracked(to.backend, to.ordinal,
                         to.backend->copy_device_to_device_async(to.ordinal, put.source->buffer,
                                                                 put.source_offset, put.destination->buffer(), 0,
                                                                 put.size));
        }
        if (put.size > detail::kInlineCopyLimit) return {};
        to.backend->copy_device_to_device(to.ordinal, put.source->buffer, put.source_offset,
                                          put.destination->buffer(), 0, put.size);
        return {true, nullptr};
      case Route::kFromHost:
        if (to.pinned) {
          if (put.size > detail::kStagingChunk) return {};  // the chunked pipeline
          // Pinned staging makes the device copy truly asynchronous.
          std::memcpy(staging->address(), put.source_host(), put.size);
          if (!to.asynchronous) {
            to.backend->copy_to_device(to.ordinal, put.destination->buffer(), 0, staging->address(), put.size);
            return {true, nullptr};
          }
          BP_Event* event =
              to.backend->copy_to_device_async(to.ordinal, put.destination->buffer(), 0, staging->address(), put.size);
          keep.push_back(std::move(staging));
          return tracked(to.backend, to.ordinal, event);
        }
        if (to.asynchronous) {
          keep.push_back(put.source);
          return tracked(to.backend, to.ordinal,
                         to.backend->copy_to_device_async(to.ordinal, put.destination->buffer(), 0,
                                                          put.source_host(), put.size));
        }
        if (put.size > detail::kInlineCopyLimit) return {};
        to.backend->copy_to_device(to.ordinal, put.destination->buffer(), 0, put.source_host(), put.size);
        return {true, nullptr};
      case Route::kToHost:
        if (from.asynchronous) {
          keep.push_back(put.source);
          return tracked(from.backend, from.ordinal,
                         from.backend->copy_to_host_async(from.ordinal, put.source->buffer,
                                                          put.source_offset, put.destination->address(), put.size));
        }
        if (put.size > detail::kInlineCopyLimit) return {};
        from.backend->copy_to_host(from.ordinal, put.source->buffer, put.source_offset,
                                   put.destination->address(), put.size);
        return {true, nullptr};
      case Route::kThroughHost:
        return {};
    }
  } catch (const Error& error) {
    return {true, detail::failed(description, error)};
  }
  return {};
}

Array put_on(PlacementState& placement, const Array& array, std::shared_ptr<DeviceContext> to,
             const PutOptions& options) {
  const ArrayState& state = ArrayAccess::state(array, "device_put");
  Put put;
  put.source = state.storage;
  put.source_offset = state.offset;
  put.size = state.nbytes;
  put.route = choose_route(*state.storage, *to);
  put.progress = options.progress;
  put.destination = to->memory->allocate(state.nbytes);  // out of memory is thrown here
  put.to = to;
  std::string description = fmt::format("device_put of {} from {} to {}", describe_bytes(state.nbytes),
                                        state.storage->context->selector, to->selector);

  Issued issued = try_issue_here(put, description);
  std::shared_ptr<Completion> arrival =
      issued.handled ? std::move(issued.arrival)
                     : detail::run_on_executor(placement, std::move(description),
                                               [put]() { run_put(put); });
  return detail::make_result(std::move(to), put.destination, std::move(arrival), state.dtype, state.shape,
                             detail::Extent{state.elements, state.nbytes});
}

}  // namespace

Array device_put(Runtime& runtime, const Array& array, const Device& device, const PutOptions& options) {
  const ArrayState& state = ArrayAccess::state(array, "device_put");
  if (state.storage->context->device == device) return array;
  const auto placement = placement_of(runtime);
  return put_on(*placement, array, placement->context(device), options);
}

Array device_put(const Array& array, const Device& device, const PutOptions& options) {
  const ArrayState& state = ArrayAccess::state(array, "device_put");
  if (state.storage->context->device == device) return array;
  const auto placement = state.storage->context->placement.lock();
  if (!placement) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("device_put to {}: the Runtime that made this array no longer exists; pass a Runtime",
                            device.selector()));
  }
  return put_on(*placement, array, placement->context(device), options);
}

}  // namespace backplane
