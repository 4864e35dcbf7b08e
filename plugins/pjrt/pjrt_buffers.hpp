// Buffers and copies over PJRT, in two data paths (docs/pjrt.md):
//
// Host path (the cpu platform by default): a buffer is a PJRT buffer whose
// memory is host memory (PJRT_Buffer_UnsafePointer); its address is that
// pointer, the core gathers straight into it, and copies are memcpy.
//
// Copy path (every other platform, and the cpu platform with
// data_path=copy): bytes move only through PJRT calls. PJRT 0.81 has no call
// that writes host bytes into an existing buffer (CopyRawFromHost is 0.105),
// so a write makes a new PJRT buffer: a write of the whole buffer with
// BufferFromHostBuffer, a write of part of it into a buffer made by the
// async host-to-device transfer manager ("a refill"), at the write's
// offset; more writes at other
// offsets go into the same refill, and the write that covers its last byte
// (is_last_transfer) makes it the buffer's current PJRT buffer. Anything that
// reads the buffer first completes an unfinished refill, filling the bytes
// nobody wrote from the current PJRT buffer (CopyRawToHost, then
// TransferData), and so does a write over bytes the refill already has.
// Reads are PJRT_Buffer_CopyRawToHost at the offset. Since the PJRT buffer
// behind a handle changes with each refill, copy-path device memory has no
// address. Pinned host memory is host memory on either path.
#ifndef BACKPLANE_PLUGINS_PJRT_PJRT_BUFFERS_HPP
#define BACKPLANE_PLUGINS_PJRT_PJRT_BUFFERS_HPP

#include "pjrt_events.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace backplane::pjrt {

// The byte ranges a refill has received, sorted and merged.
class Ranges {
 public:
  bool overlaps(std::uint64_t offset, std::uint64_t size) const;
  void add(std::uint64_t offset, std::uint64_t size);
  std::uint64_t covered() const { return covered_; }
  // The ranges of [0, size) not yet received, in order.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> gaps(std::uint64_t size) const;

 private:
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges_;  // [begin, end)
  std::uint64_t covered_ = 0;
};

struct Buffer : sdk::BufferBase {
  const Client* client = nullptr;
  Device* device = nullptr;
  PJRT_Memory* memory = nullptr;
  // Host memory the adapter reads and writes itself: `address`.
  bool direct = false;

  std::mutex mutex;                     // guards the two below (copy path)
  std::shared_ptr<PjrtBuffer> current;  // the bytes; on the host path, what `address` points into
  struct Refill {
    std::shared_ptr<TransferManager> manager;
    std::shared_ptr<PjrtBuffer> buffer;
    Ranges received;
  };
  std::optional<Refill> refill;  // copy path: a refill still missing bytes
};

// CreateUninitializedBuffer of U8[size] in the device's memory of `kind`
// (BP_MEMORY_DEVICE: "device", else the default memory; PINNED_HOST:
// "pinned_host"). `copy_path`: device memory moves through PJRT calls only.
// More than `limit` bytes (the device's memory_total) fails OUT_OF_MEMORY
// naming the size and the device, as does PJRT's RESOURCE_EXHAUSTED.
std::unique_ptr<Buffer> allocate_buffer(const Client& client, Device& device, BP_MemoryKind kind, std::uint64_t size,
                                        bool copy_path, std::uint64_t limit);

// The host path's memory_wrap: a handle over host memory the caller owns. A
// PJRT view of it (CreateViewOfDeviceBuffer, with a no-op
// on_delete_callback: a NULL one aborts the process when the view is
// destroyed) where the plugin makes one in place; host memory the plugin
// would not view in place (the CPU plugins refuse an address not aligned to
// 64 bytes) is still host memory the adapter addresses itself.
std::unique_ptr<Buffer> wrap_buffer(const Client& client, Device& device, void* address, std::uint64_t size);

// The copies; each returns the event of work in flight, or nullptr when it
// has completed. Ranges are checked by the SDK.
std::unique_ptr<Event> write(Buffer& destination, std::uint64_t offset, const void* source, std::uint64_t size);
std::unique_ptr<Event> read(Buffer& source, std::uint64_t offset, void* destination, std::uint64_t size);
std::unique_ptr<Event> copy_between(Buffer& source, std::uint64_t source_offset, Buffer& destination,
                                    std::uint64_t destination_offset, std::uint64_t size);

}  // namespace backplane::pjrt

#endif  // BACKPLANE_PLUGINS_PJRT_PJRT_BUFFERS_HPP
