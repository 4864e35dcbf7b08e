// Buffers and copies over PJRT (pjrt_buffers.hpp).
#include "pjrt_buffers.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

namespace backplane::pjrt {
namespace {

using sdk::Failure;
using sdk::format_bytes;

// Bytes of host staging per step when a refill's gaps are filled.
constexpr std::uint64_t kGapChunk = std::uint64_t{8} << 20;

void no_op_on_delete(void* /*device_buffer_ptr*/, void* /*user_arg*/) {}

std::string sized(std::uint64_t size) { return format_bytes(size) + " (" + std::to_string(size) + " bytes)"; }

// The address of a PJRT buffer's memory (PJRT_Buffer_UnsafePointer).
void* unsafe_pointer(const Client& client, PJRT_Buffer* buffer, const Device& device) {
  PJRT_Buffer_UnsafePointer_Args args{};
  args.struct_size = PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE;
  args.buffer = buffer;
  client.library().check(client.library().api().PJRT_Buffer_UnsafePointer(&args),
                         [&] { return "PJRT_Buffer_UnsafePointer on " + device.label; });
  return reinterpret_cast<void*>(args.buffer_pointer);
}

std::shared_ptr<PjrtBuffer> uninitialized(const Client& client, Device& device, PJRT_Memory* memory,
                                          std::uint64_t size) {
  const auto dims = static_cast<std::int64_t>(size);
  PJRT_Client_CreateUninitializedBuffer_Args args{};
  args.struct_size = PJRT_Client_CreateUninitializedBuffer_Args_STRUCT_SIZE;
  args.client = client.get();
  args.shape_dims = &dims;
  args.shape_num_dims = 1;
  args.shape_element_type = PJRT_Buffer_Type_U8;
  args.device = device.device;
  args.memory = memory;
  client.library().check(client.library().api().PJRT_Client_CreateUninitializedBuffer(&args), [&] {
    return "memory_allocate of " + sized(size) + " on " + device.label + " (" + device.name +
           ") failed: PJRT_Client_CreateUninitializedBuffer";
  });
  return std::make_shared<PjrtBuffer>(client, args.buffer);
}

void await(const Client& client, PJRT_Event* event, const Operation& operation) {
  if (const auto tracked = track(client, event, operation, {})) wait(*tracked);
}

// A new refill of the whole buffer: a transfer manager and its one buffer.
Buffer::Refill start_refill(const Buffer& buffer) {
  const Client& client = *buffer.client;
  const PJRT_Api& api = client.library().api();
  auto dims = static_cast<std::int64_t>(buffer.size);
  PJRT_ShapeSpec shape{};
  shape.struct_size = PJRT_ShapeSpec_STRUCT_SIZE;
  shape.dims = &dims;
  shape.num_dims = 1;
  shape.element_type = PJRT_Buffer_Type_U8;
  PJRT_Client_CreateBuffersForAsyncHostToDevice_Args create{};
  create.struct_size = PJRT_Client_CreateBuffersForAsyncHostToDevice_Args_STRUCT_SIZE;
  create.client = client.get();
  create.shape_specs = &shape;
  create.num_shape_specs = 1;
  create.memory = buffer.memory;
  client.library().check(api.PJRT_Client_CreateBuffersForAsyncHostToDevice(&create), [&] {
    return "PJRT_Client_CreateBuffersForAsyncHostToDevice of " + sized(buffer.size) + " on " + buffer.device->label;
  });
  Buffer::Refill refill;
  refill.manager = std::make_shared<TransferManager>(client, create.transfer_manager);
  PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args retrieve{};
  retrieve.struct_size = PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args_STRUCT_SIZE;
  retrieve.transfer_manager = create.transfer_manager;
  retrieve.buffer_index = 0;
  client.library().check(api.PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer(&retrieve), [&] {
    return "PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer on " + buffer.device->label;
  });
  refill.buffer = std::make_shared<PjrtBuffer>(client, retrieve.buffer_out);
  return refill;
}

// TransferData of `size` bytes at `offset` into the refill; its
// done_with_h2d_transfer event (the source may be reused once it fires).
PJRT_Event* transfer(const Buffer& buffer, const Buffer::Refill& refill, std::uint64_t offset, const void* source,
                     std::uint64_t size, bool last) {
  const Client& client = *buffer.client;
  PJRT_AsyncHostToDeviceTransferManager_TransferData_Args args{};
  args.struct_size = PJRT_AsyncHostToDeviceTransferManager_TransferData_Args_STRUCT_SIZE;
  args.transfer_manager = refill.manager->get();
  args.buffer_index = 0;
  args.data = source;
  args.offset = static_cast<std::int64_t>(offset);
  args.transfer_size = static_cast<std::int64_t>(size);
  args.is_last_transfer = last;
  client.library().check(client.library().api().PJRT_AsyncHostToDeviceTransferManager_TransferData(&args), [&] {
    return "PJRT_AsyncHostToDeviceTransferManager_TransferData of " + format_bytes(size) + " at offset " +
           std::to_string(offset) + " to " + buffer.device->label;
  });
  return args.done_with_h2d_transfer;
}

PJRT_Event* copy_raw_to_host(const Buffer& buffer, PJRT_Buffer* source, std::uint64_t offset, void* destination,
                             std::uint64_t size) {
  const Client& client = *buffer.client;
  PJRT_Buffer_CopyRawToHost_Args args{};
  args.struct_size = PJRT_Buffer_CopyRawToHost_Args_STRUCT_SIZE;
  args.buffer = source;
  args.dst = destination;
  args.offset = static_cast<std::int64_t>(offset);
  args.transfer_size = static_cast<std::int64_t>(size);
  client.library().check(client.library().api().PJRT_Buffer_CopyRawToHost(&args), [&] {
    return "PJRT_Buffer_CopyRawToHost of " + format_bytes(size) + " at offset " + std::to_string(offset) + " from " +
           buffer.device->label;
  });
  return args.event;
}

// Completes the buffer's refill: the bytes it has not received come from the
// current PJRT buffer, through host staging, a chunk at a time. Blocks.
// Called with buffer.mutex held.
void finish_refill(Buffer& buffer) {
  Buffer::Refill& refill = *buffer.refill;
  const auto gaps = refill.received.gaps(buffer.size);
  std::vector<std::byte> staging(static_cast<std::size_t>(std::min(kGapChunk, buffer.size)));
  for (std::size_t index = 0; index < gaps.size(); ++index) {
    for (std::uint64_t offset = gaps[index].first; offset < gaps[index].second;) {
      const std::uint64_t size = std::min(kGapChunk, gaps[index].second - offset);
      const bool last = index + 1 == gaps.size() && offset + size == gaps[index].second;
      await(*buffer.client, copy_raw_to_host(buffer, buffer.current->get(), offset, staging.data(), size),
            {"PJRT_Buffer_CopyRawToHost", size, "from", buffer.device});
      await(*buffer.client, transfer(buffer, refill, offset, staging.data(), size, last),
            {"PJRT_AsyncHostToDeviceTransferManager_TransferData", size, "to", buffer.device});
      offset += size;
    }
  }
  buffer.current = refill.buffer;
  buffer.refill.reset();
}

// The PJRT buffer holding the bytes, the refill completed first.
std::shared_ptr<PjrtBuffer> settled(Buffer& buffer) {
  const std::lock_guard lock(buffer.mutex);
  if (buffer.refill) finish_refill(buffer);
  return buffer.current;
}

// A write of every byte: a new PJRT buffer from the host bytes
// (BufferFromHostBuffer, which copies and does so asynchronously; never
// kImmutableZeroCopy, whose done event waits for the buffer's destruction
// and which silently copies an unaligned source). Called with
// buffer.mutex held.
std::unique_ptr<Event> replace(Buffer& buffer, const void* source) {
  const Client& client = *buffer.client;
  const auto dims = static_cast<std::int64_t>(buffer.size);
  PJRT_Client_BufferFromHostBuffer_Args args{};
  args.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
  args.client = client.get();
  args.data = source;
  args.type = PJRT_Buffer_Type_U8;
  args.dims = &dims;
  args.num_dims = 1;
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  args.device = buffer.device->device;
  args.memory = buffer.memory;
  client.library().check(client.library().api().PJRT_Client_BufferFromHostBuffer(&args), [&] {
    return "PJRT_Client_BufferFromHostBuffer of " + format_bytes(buffer.size) + " to " + buffer.device->label;
  });
  auto bytes = std::make_shared<PjrtBuffer>(client, args.buffer);
  buffer.refill.reset();  // every byte is replaced
  buffer.current = bytes;
  return track(client, args.done_with_host_buffer,
               {"PJRT_Client_BufferFromHostBuffer", buffer.size, "to", buffer.device}, {std::move(bytes)});
}

std::unique_ptr<Buffer> make_buffer(const Client& client, Device& device, PJRT_Memory* memory, BP_MemoryKind kind,
                                    std::uint64_t size) {
  auto buffer = std::make_unique<Buffer>();
  buffer->ordinal = device.ordinal;
  buffer->kind = kind;
  buffer->size = size;
  buffer->client = &client;
  buffer->device = &device;
  buffer->memory = memory;
  return buffer;
}

}  // namespace

bool Ranges::overlaps(std::uint64_t offset, std::uint64_t size) const {
  const std::uint64_t end = offset + size;
  for (const auto& [begin, stop] : ranges_) {
    if (begin < end && offset < stop) return true;
  }
  return false;
}

void Ranges::add(std::uint64_t offset, std::uint64_t size) {
  if (size == 0) return;
  ranges_.emplace_back(offset, offset + size);
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> merged;
  for (const auto& range : ranges_) {
    if (!merged.empty() && range.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, range.second);
    } else {
      merged.push_back(range);
    }
  }
  ranges_ = std::move(merged);
  covered_ = 0;
  for (const auto& [begin, stop] : ranges_) covered_ += stop - begin;
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> Ranges::gaps(std::uint64_t size) const {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> missing;
  std::uint64_t at = 0;
  for (const auto& [begin, stop] : ranges_) {
    if (begin > at) missing.emplace_back(at, begin);
    at = std::max(at, stop);
  }
  if (at < size) missing.emplace_back(at, size);
  return missing;
}

std::unique_ptr<Buffer> allocate_buffer(const Client& client, Device& device, BP_MemoryKind kind, std::uint64_t size,
                                        bool copy_path, std::uint64_t limit) {
  const bool pinned = kind == BP_MEMORY_PINNED_HOST;
  if (size > limit || size > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    throw Failure(BP_ERROR_OUT_OF_MEMORY, "memory_allocate of " + sized(size) + " on " + device.label + " (" +
                                              device.name + ") failed: larger than the device's " +
                                              format_bytes(limit) + " of memory");
  }
  PJRT_Memory* memory = pinned ? device.pinned_memory : device.device_memory;
  auto buffer = make_buffer(client, device, memory, kind, size);
  buffer->current = uninitialized(client, device, memory, size);
  // Pinned host memory is host memory on every platform; so is the cpu
  // platform's device memory on the host path.
  buffer->direct = pinned || !copy_path;
  if (buffer->direct) {
    buffer->address = unsafe_pointer(client, buffer->current->get(), device);
    if (buffer->address == nullptr) {
      throw Failure(BP_ERROR_DEVICE, "memory_allocate of " + sized(size) + " on " + device.label +
                                         ": PJRT_Buffer_UnsafePointer gave host memory no address");
    }
  }
  return buffer;
}

std::unique_ptr<Buffer> wrap_buffer(const Client& client, Device& device, void* address, std::uint64_t size) {
  auto buffer = make_buffer(client, device, device.device_memory, BP_MEMORY_DEVICE, size);
  buffer->direct = true;
  buffer->address = address;
  if (size == 0) return buffer;
  const auto dims = static_cast<std::int64_t>(size);
  PJRT_Client_CreateViewOfDeviceBuffer_Args args{};
  args.struct_size = PJRT_Client_CreateViewOfDeviceBuffer_Args_STRUCT_SIZE;
  args.client = client.get();
  args.device_buffer_ptr = address;
  args.dims = &dims;
  args.num_dims = 1;
  args.element_type = PJRT_Buffer_Type_U8;
  args.device = device.device;
  args.memory = device.device_memory;
  args.on_delete_callback = no_op_on_delete;  // never NULL: see the header
  if (client.library().take(client.library().api().PJRT_Client_CreateViewOfDeviceBuffer(&args))) {
    return buffer;  // no view (an unaligned address): the adapter addresses the memory itself
  }
  buffer->current = std::make_shared<PjrtBuffer>(client, args.buffer);
  // A view that is not in place would be a copy the caller's writes never reach.
  if (unsafe_pointer(client, args.buffer, device) != address) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT, "memory_wrap of " + sized(size) + " on " + device.label +
                                                 ": PJRT_Client_CreateViewOfDeviceBuffer copied the memory instead "
                                                 "of viewing it in place");
  }
  return buffer;
}

std::unique_ptr<Event> write(Buffer& destination, std::uint64_t offset, const void* source, std::uint64_t size) {
  if (size == 0) return nullptr;
  if (destination.direct) {
    std::memcpy(static_cast<std::byte*>(destination.address) + offset, source, size);
    return nullptr;
  }
  const std::lock_guard lock(destination.mutex);
  if (offset == 0 && size == destination.size) return replace(destination, source);
  if (destination.refill && destination.refill->received.overlaps(offset, size)) finish_refill(destination);
  if (!destination.refill) destination.refill = start_refill(destination);
  Buffer::Refill& refill = *destination.refill;
  const bool last = refill.received.covered() + size == destination.size;
  PJRT_Event* done = transfer(destination, refill, offset, source, size, last);
  refill.received.add(offset, size);
  std::vector<std::shared_ptr<const void>> keep{refill.manager, refill.buffer};
  if (last) {
    destination.current = refill.buffer;
    destination.refill.reset();
  }
  return track(*destination.client, done,
               {"PJRT_AsyncHostToDeviceTransferManager_TransferData", size, "to", destination.device}, std::move(keep));
}

std::unique_ptr<Event> read(Buffer& source, std::uint64_t offset, void* destination, std::uint64_t size) {
  if (size == 0) return nullptr;
  if (source.direct) {
    std::memcpy(destination, static_cast<const std::byte*>(source.address) + offset, size);
    return nullptr;
  }
  std::shared_ptr<PjrtBuffer> bytes = settled(source);
  PJRT_Event* done = copy_raw_to_host(source, bytes->get(), offset, destination, size);
  return track(*source.client, done, {"PJRT_Buffer_CopyRawToHost", size, "from", source.device}, {std::move(bytes)});
}

std::unique_ptr<Event> copy_between(Buffer& source, std::uint64_t source_offset, Buffer& destination,
                                    std::uint64_t destination_offset, std::uint64_t size) {
  if (size == 0) return nullptr;
  if (source.direct && destination.direct) {  // memmove: the ranges may overlap in one buffer
    std::memmove(static_cast<std::byte*>(destination.address) + destination_offset,
                 static_cast<const std::byte*>(source.address) + source_offset, size);
    return nullptr;
  }
  if (destination.direct) {
    return read(source, source_offset, static_cast<std::byte*>(destination.address) + destination_offset, size);
  }
  if (source.direct) {
    return write(destination, destination_offset, static_cast<const std::byte*>(source.address) + source_offset, size);
  }
  const Client& client = *source.client;
  const bool whole = source_offset == 0 && destination_offset == 0 && size == source.size && size == destination.size;
  if (whole && source.memory != destination.memory) {
    // Whole buffers between two memories (two devices): PJRT copies on the
    // device side, and the copy becomes the destination's bytes.
    std::shared_ptr<PjrtBuffer> bytes = settled(source);
    PJRT_Buffer_CopyToMemory_Args copy{};
    copy.struct_size = PJRT_Buffer_CopyToMemory_Args_STRUCT_SIZE;
    copy.buffer = bytes->get();
    copy.dst_memory = destination.memory;
    client.library().check(client.library().api().PJRT_Buffer_CopyToMemory(&copy), [&] {
      return "PJRT_Buffer_CopyToMemory of " + format_bytes(size) + " from " + source.device->label + " to " +
             destination.device->label;
    });
    auto copied = std::make_shared<PjrtBuffer>(client, copy.dst_buffer);
    PJRT_Buffer_ReadyEvent_Args ready_event{};
    ready_event.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE;
    ready_event.buffer = copied->get();
    client.library().check(client.library().api().PJRT_Buffer_ReadyEvent(&ready_event),
                           [&] { return "PJRT_Buffer_ReadyEvent on " + destination.device->label; });
    {
      const std::lock_guard lock(destination.mutex);
      destination.refill.reset();  // every byte is replaced
      destination.current = copied;
    }
    return track(client, ready_event.event, {"PJRT_Buffer_CopyToMemory", size, "to", destination.device},
                 {std::move(bytes), std::move(copied)});
  }
  // A byte range: through host memory (core PJRT has no such device copy).
  auto staging = std::make_shared<std::vector<std::byte>>(static_cast<std::size_t>(size));
  if (const auto reading = read(source, source_offset, staging->data(), size)) wait(*reading);
  std::unique_ptr<Event> writing = write(destination, destination_offset, staging->data(), size);
  if (writing != nullptr) writing->keep.push_back(std::move(staging));
  return writing;
}

}  // namespace backplane::pjrt
