// The streamed path of load(): file -> staging ring -> device.
//
// Why not device_put over the mapping: it would copy each tensor on its own
// (a pipeline per tensor, so a model of many small tensors gets no overlap),
// and filling staging from a mapping takes a page fault per 4 KiB where pread
// gets the kernel's read-ahead. Why not copy_in_chunks: it fills one
// destination, while a chunk here packs the tail of one tensor and the heads
// of the next ones. What is shared with device_put: the device's pinned
// caching allocator (so the same staging buffers serve both), the chunk size
// and ring depth, and the backend's asynchronous copies and events.
#include "safetensors/loader.hpp"

#include "placement/bytes.hpp"
#include "placement/transfer.hpp"
#include "safetensors/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>

namespace backplane::safetensors::detail {
namespace {

using ::backplane::detail::kRingDepth;
using ::backplane::detail::kStagingChunk;

// A device copy in flight: which tensor it fills, for the error message.
struct PendingCopy {
  BP_Event* event;
  std::size_t tensor;
  std::uint64_t size;
};

struct Slot {
  std::byte* memory = nullptr;
  std::vector<PendingCopy> copies;
  std::uint64_t bytes = 0;  // staged bytes whose copies are in flight
  bool busy() const { return !copies.empty() || bytes != 0; }
};

// A piece of one tensor staged in a slot.
struct Piece {
  std::size_t tensor;
  std::uint64_t within;  // offset in the tensor
  std::uint64_t size;
  std::uint64_t staged;  // offset in the slot
};

class Stream {
 public:
  Stream(const MappedFile& file, DeviceContext& device, const std::vector<const TensorEntry*>& tensors,
         const std::vector<std::shared_ptr<Block>>& destinations, std::uint64_t total,
         const ProgressCallback& progress)
      : file_(file), device_(device), tensors_(tensors), destinations_(destinations), total_(total),
        progress_(progress) {}

  void run() {
    const std::uint64_t chunk = std::min(kStagingChunk, total_);
    const std::uint64_t depth = std::min(kRingDepth, (total_ + chunk - 1) / chunk);
    // Pinned blocks come from the device's cache: the same staging buffers
    // serve later loads and device_puts.
    std::vector<std::shared_ptr<Block>> pinned;
    std::vector<std::unique_ptr<std::byte[]>> pageable;
    std::array<Slot, kRingDepth> slots;
    for (std::uint64_t index = 0; index < depth; ++index) {
      if (device_.pinned) {
        pinned.push_back(device_.pinned->allocate(chunk));
        slots[index].memory = pinned.back()->address();
      } else {
        pageable.push_back(std::make_unique_for_overwrite<std::byte[]>(chunk));
        slots[index].memory = pageable.back().get();
      }
    }
    try {
      std::uint64_t index = 0;
      while (tensor_ < tensors_.size()) {
        Slot& slot = slots[index % depth];
        if (slot.busy()) retire(slot);
        fill(slot, chunk);  // the read overlaps the copies of the other slots
        ++index;
      }
      for (std::uint64_t left = 0; left < depth; ++left, ++index) {
        Slot& slot = slots[index % depth];
        if (slot.busy()) retire(slot);
      }
    } catch (...) {
      // No copy may still read a slot when it goes back to the cache.
      for (Slot& slot : slots) drain(slot);
      throw;
    }
  }

 private:
  // Packs the next `chunk` bytes of the selected tensors into the slot with
  // one pread per run of adjacent tensors, then queues their device copies.
  void fill(Slot& slot, std::uint64_t chunk) {
    pieces_.clear();
    std::uint64_t used = 0;
    while (used < chunk && tensor_ < tensors_.size()) {
      const std::uint64_t size = tensors_[tensor_]->byte_size();
      const std::uint64_t n = std::min(chunk - used, size - within_);
      if (n != 0) pieces_.push_back(Piece{tensor_, within_, n, used});
      used += n;
      within_ += n;
      if (within_ == size) {
        ++tensor_;
        within_ = 0;
      }
    }
    const std::uint64_t data_offset = file_.header().data_offset;
    for (std::size_t first = 0; first < pieces_.size();) {
      std::size_t last = first;
      auto file_end = [&](std::size_t index) {
        return data_offset + tensors_[pieces_[index].tensor]->begin + pieces_[index].within + pieces_[index].size;
      };
      while (last + 1 < pieces_.size() &&
             file_end(last) == data_offset + tensors_[pieces_[last + 1].tensor]->begin + pieces_[last + 1].within) {
        ++last;
      }
      const Piece& start = pieces_[first];
      const std::uint64_t offset = data_offset + tensors_[start.tensor]->begin + start.within;
      file_.read(offset, slot.memory + start.staged, file_end(last) - offset);
      first = last + 1;
    }
    slot.bytes = used;
    for (const Piece& piece : pieces_) {
      try {
        BP_Event* event = device_.backend->copy_to_device_async(device_.ordinal, destinations_[piece.tensor]->buffer(),
                                                                piece.within, slot.memory + piece.staged, piece.size);
        slot.copies.push_back(PendingCopy{event, piece.tensor, piece.size});
      } catch (const Error& error) {
        throw Error(error.code(), fmt::format("{}: loading tensor {} onto {}: {}", file_.name(),
                                              quote(tensors_[piece.tensor]->name), device_.selector, error.what()));
      }
    }
  }

  // Waits for every copy out of the slot; reports progress; throws the first
  // failure once all of them are done.
  void retire(Slot& slot) {
    std::optional<Error> failure;
    for (const PendingCopy& copy : slot.copies) {
      std::optional<PluginFailure> copy_failure = device_.backend->wait_event(copy.event);
      device_.backend->destroy_event(copy.event);
      if (copy_failure && !failure) {
        failure.emplace(copy_failure->code,
                        fmt::format("{}: loading tensor {} onto {}: copy of {} failed: {}", file_.name(),
                                    quote(tensors_[copy.tensor]->name), device_.selector, describe_bytes(copy.size),
                                    copy_failure->message));
      }
    }
    slot.copies.clear();
    if (failure) throw *failure;
    done_ += slot.bytes;
    slot.bytes = 0;
    if (progress_) progress_(done_, total_);
  }

  void drain(Slot& slot) noexcept {
    for (const PendingCopy& copy : slot.copies) {
      (void)device_.backend->wait_event(copy.event);
      device_.backend->destroy_event(copy.event);
    }
    slot.copies.clear();
    slot.bytes = 0;
  }

  const MappedFile& file_;
  DeviceContext& device_;
  const std::vector<const TensorEntry*>& tensors_;
  const std::vector<std::shared_ptr<Block>>& destinations_;
  const std::uint64_t total_;
  const ProgressCallback& progress_;
  std::vector<Piece> pieces_;
  std::size_t tensor_ = 0;     // the next byte to stage: tensors_[tensor_] at within_
  std::uint64_t within_ = 0;
  std::uint64_t done_ = 0;     // bytes arrived on the device
};

}  // namespace

std::vector<Array> stream_tensors(const MappedFile& file, const std::shared_ptr<DeviceContext>& device,
                                  const std::vector<const TensorEntry*>& tensors, const ProgressCallback& progress) {
  // Every destination before the first read: out of memory is thrown before
  // any data moves (and what was allocated goes back to the cache).
  std::vector<std::shared_ptr<Block>> destinations;
  destinations.reserve(tensors.size());
  std::uint64_t total = 0;
  for (const TensorEntry* tensor : tensors) {
    destinations.push_back(device->memory->allocate(tensor->byte_size()));
    total += tensor->byte_size();
  }
  if (total == 0) {
    if (progress) progress(0, 0);
  } else {
    const std::uint64_t first = file.header().data_offset + tensors.front()->begin;
    file.advise_sequential(first, file.header().data_offset + tensors.back()->end - first);
    Stream(file, *device, tensors, destinations, total, progress).run();
  }

  std::vector<Array> arrays;
  arrays.reserve(tensors.size());
  for (std::size_t index = 0; index < tensors.size(); ++index) {
    const TensorEntry& tensor = *tensors[index];
    const DType dtype = dtype_of(tensor);
    std::vector<std::int64_t> shape = array_shape(tensor, file.name());
    const auto extent = ::backplane::detail::extent_of(dtype, shape, "safetensors::load");
    arrays.push_back(::backplane::detail::make_result(device, destinations[index], nullptr, dtype, std::move(shape),
                                                      extent));
  }
  return arrays;
}

}  // namespace backplane::safetensors::detail
