// Staging: the host memory an upload passes through, and the one pipeline
// that moves staged bytes to a device. device_put (placement/device_put.cpp),
// take_windows (placement/take_windows.cpp) and the streamed safetensors load
// (safetensors/stream_loader.cpp) all upload through here, so they share the
// device's pinned staging cache, the chunk size and the ring depth.
#pragma once

#include "registry/device.hpp"
#include "trace/trace.hpp"

#include <backplane/array.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace backplane::detail {

// Copies at most this many bytes per chunk through pinned staging, with a
// ring of kRingDepth staging buffers per transfer. 8 MiB keeps a PCIe link
// busy while a few chunks cost only tens of MiB of pinned memory.
inline constexpr std::uint64_t kStagingChunk = std::uint64_t{8} << 20;
inline constexpr std::uint64_t kRingDepth = 3;

// Host memory to stage `size` bytes in on their way to a device: a pinned
// block from `pinned` (a device's staging cache) where there is one, so the
// copy out of it is truly asynchronous, plain heap memory otherwise.
class StagingBuffer {
 public:
  StagingBuffer(CachingAllocator* pinned, std::uint64_t size);
  std::byte* data() const { return data_; }
  // Keeps the memory alive, e.g. for a Completion tracking a copy out of it.
  const std::shared_ptr<const void>& owner() const { return owner_; }

 private:
  std::shared_ptr<const void> owner_;
  std::byte* data_ = nullptr;
};

// The staged-upload pipeline: the caller fills a slot of a ring of staging
// buffers and sends pieces of it to device buffers with asynchronous copies;
// while those run, it fills the next slot. A slot is reused once its copies
// arrived. Progress counts bytes arrived on the device.
//
// On the trace each copy is a "staging" event on its slot's lane, from send
// to the moment it was found done (when the slot was needed again, or at
// finish()).
//
//   StagedUpload upload(device, total, progress);
//   while (...) { std::byte* slot = upload.next_slot(); fill it; upload.send(...); }
//   upload.finish();
//
// No copy can still read a slot when the upload is destroyed: the destructor
// waits for what is in flight (after a failure, say).
class StagedUpload {
 public:
  // What a copy that failed was, for its error: "sim:0: copy of chunk ...".
  using Label = std::function<std::string(std::uint64_t tag, std::uint64_t offset, std::uint64_t size)>;

  // Slots of min(kStagingChunk, total) bytes (none for total 0), pinned
  // from `to`'s staging cache, else from `fallback`'s (the source device's,
  // for a copy through host memory), else plain heap memory.
  StagedUpload(LiveDevice& to, std::uint64_t total, ProgressCallback progress, Label label,
               const LiveDevice* fallback = nullptr);
  ~StagedUpload();
  StagedUpload(const StagedUpload&) = delete;
  StagedUpload& operator=(const StagedUpload&) = delete;

  std::uint64_t slot_size() const { return slot_size_; }
  // The next slot to fill, once the copies out of it arrived. Throws the
  // first failure among them (named by the Label).
  std::byte* next_slot();
  // Sends bytes [staged, staged + size) of the current slot to `destination`
  // at `offset`. `tag` is handed to the Label if the copy fails.
  void send(BP_Buffer* destination, std::uint64_t offset, std::uint64_t staged, std::uint64_t size,
            std::uint64_t tag = 0);
  // Waits for every copy; throws the first failure.
  void finish();

 private:
  struct Copy {
    PluginEvent event;
    std::uint64_t tag;
    std::uint64_t offset;
    std::uint64_t size;
    trace::Span span;  // from the issue to the moment it is found done
  };
  struct Slot {
    std::byte* memory = nullptr;
    std::vector<Copy> copies;
    // While tracing: the slot's own track, "sim:0 staging #k", so the copies
    // out of one slot (which never overlap) share a row.
    trace::LaneHold lane;
  };
  // Waits for the slot's copies; reports progress; throws the first failure
  // once all of them are done.
  void retire(Slot& slot);

  LiveDevice& to_;
  const std::uint64_t total_;
  const ProgressCallback progress_;
  const Label label_;
  std::uint64_t slot_size_ = 0;
  std::vector<StagingBuffer> buffers_;
  std::array<Slot, kRingDepth> slots_;
  std::uint64_t depth_ = 0;
  std::uint64_t filled_ = 0;  // slots handed out so far
  std::uint64_t done_ = 0;    // bytes arrived on the device
};

}  // namespace backplane::detail
