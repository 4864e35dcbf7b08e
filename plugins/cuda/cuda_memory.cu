// The CUDA backend's memory: device and pinned allocations, adopting memory
// another library allocated (memory_wrap, ABI 1.1), and freeing both kinds.
// See cuda_backend.hpp for the promises.
#include "cuda_backend.hpp"

#include "cuda_state.hpp"

#include <backplane/plugin_support.hpp>

#include <memory>
#include <mutex>
#include <string>

namespace backplane::cuda {
namespace {

using plugin::Failure;
using plugin::guarded;
using plugin::require_args;

// " (free 3.20 GiB of 24.00 GiB)" for the device whose context is current.
std::string memory_note(const DriverApi& driver) {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  if (driver.cuMemGetInfo(&free_bytes, &total_bytes) != CUDA_SUCCESS) return "";
  return " (free " + format_bytes(free_bytes) + " of " + format_bytes(total_bytes) + ")";
}

// Waits for the work queued on every started device. Freeing a wrapped
// buffer needs it: a peer copy reading the buffer runs on the destination
// device's stream, and the memory's owner may reuse it once the handle is gone.
void wait_for_every_device(BP_Backend& backend) {
  const DriverApi& driver = *backend.driver;
  for (const auto& device : backend.devices) {
    {
      std::lock_guard lock(device->mutex);  // start_device sets the context under it
      if (device->context == nullptr) continue;
    }
    ContextScope scope(driver, *device);
    check(driver, driver.cuStreamSynchronize(device->stream),
          "waiting for " + device->label + " before releasing a wrapped buffer");
  }
}

// What the driver knows about foreign memory at `address`: that it is device
// memory of `device` and that [address, address + size) lies in one allocation.
void check_foreign_memory(const DriverApi& driver, const Device& device, CUdeviceptr address,
                          std::uint64_t size) {
  const std::string what = "memory_wrap of " + format_bytes(size) + " on " + device.label;
  unsigned int type = 0;
  const CUresult known = driver.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address);
  if (known == CUDA_ERROR_INVALID_VALUE) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  what + ": the address is not memory the CUDA driver knows (" + describe_result(driver, known) + ")");
  }
  check(driver, known, what + ": cuPointerGetAttribute(MEMORY_TYPE)");
  if (type != CU_MEMORYTYPE_DEVICE) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  what + ": the address is host memory, not device memory (import it as host memory instead)");
  }
  int ordinal = -1;
  check(driver, driver.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address),
        what + ": cuPointerGetAttribute(DEVICE_ORDINAL)");
  if (ordinal != device.ordinal) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  what + ": the address is memory of cuda:" + std::to_string(ordinal));
  }
  CUdeviceptr start = 0;
  std::size_t extent = 0;
  check(driver, driver.cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, address),
        what + ": cuPointerGetAttribute(RANGE_START_ADDR)");
  check(driver, driver.cuPointerGetAttribute(&extent, CU_POINTER_ATTRIBUTE_RANGE_SIZE, address),
        what + ": cuPointerGetAttribute(RANGE_SIZE)");
  const std::uint64_t offset = address - start;
  if (size > extent - offset) {
    throw Failure(BP_ERROR_OUT_OF_RANGE, what + ": the range runs past the end of its " + format_bytes(extent) +
                                             " allocation (it starts " + std::to_string(offset) + " bytes in)");
  }
}

}  // namespace

// Frees a buffer this backend no longer tracks, after the work queued on its
// device. Throws on a driver failure; the handle is released either way.
void release_buffer(const DriverApi& driver, BP_Buffer* buffer) {
  std::unique_ptr<BP_Buffer> owned(buffer);
  if (owned->address == 0) return;
  Device& device = *owned->device;
  ContextScope scope(driver, device);
  check(driver, driver.cuStreamSynchronize(device.stream),
        "waiting for " + device.label + " before freeing a buffer");
  if (!owned->owned) return;  // wrapped: the memory's owner frees it, after this
  if (owned->kind == BP_MEMORY_PINNED_HOST) {
    check(driver, driver.cuMemFreeHost(reinterpret_cast<void*>(owned->address)),
          "cuMemFreeHost of " + format_bytes(owned->size));
  } else {
    check(driver, driver.cuMemFree(owned->address),
          "cuMemFree of " + format_bytes(owned->size) + " on " + device.label);
  }
}

BP_Error* memory_allocate(BP_MemoryAllocateArgs* args) {
  return guarded([&]() -> BP_Error* {
    require_args(args, "memory_allocate");
    BP_Backend& backend = usable_backend(args->backend, "memory_allocate");
    if (args->kind != BP_MEMORY_DEVICE && args->kind != BP_MEMORY_PINNED_HOST) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    "memory_allocate: unknown memory kind " + std::to_string(args->kind));
    }
    Device& device = start_device(backend, args->ordinal, "memory_allocate");
    const DriverApi& driver = *backend.driver;
    auto buffer = std::make_unique<BP_Buffer>();
    buffer->device = &device;
    buffer->kind = args->kind;
    buffer->size = args->size;
    if (args->size != 0) {
      ContextScope scope(driver, device);
      if (args->kind == BP_MEMORY_DEVICE) {
        const CUresult result = driver.cuMemAlloc(&buffer->address, args->size);
        if (result != CUDA_SUCCESS) {
          check(driver, result, "cuMemAlloc of " + format_bytes(args->size) + " on " + device.label,
                memory_note(driver));
        }
      } else {
        // Portable: pinned for every context; device-mapped: under unified
        // addressing the host pointer is also the device pointer.
        void* host = nullptr;
        check(driver,
              driver.cuMemHostAlloc(&host, args->size,
                                    CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
              "cuMemHostAlloc of " + format_bytes(args->size) + " of pinned host memory");
        buffer->address = reinterpret_cast<CUdeviceptr>(host);
      }
    }
    try {
      std::lock_guard lock(backend.mutex);
      backend.buffers.insert(buffer.get());
    } catch (...) {
      release_buffer(driver, buffer.release());
      throw;
    }
    args->address = reinterpret_cast<void*>(buffer->address);
    args->buffer = buffer.release();
    return nullptr;
  });
}

BP_Error* memory_wrap(BP_MemoryWrapArgs* args) {
  return guarded([&]() -> BP_Error* {
    require_args(args, "memory_wrap");
    BP_Backend& backend = usable_backend(args->backend, "memory_wrap");
    if (args->address == nullptr && args->size != 0) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT, "memory_wrap: address is NULL for " + format_bytes(args->size));
    }
    Device& device = start_device(backend, args->ordinal, "memory_wrap");
    const DriverApi& driver = *backend.driver;
    auto buffer = std::make_unique<BP_Buffer>();
    buffer->device = &device;
    buffer->kind = BP_MEMORY_DEVICE;
    buffer->address = reinterpret_cast<CUdeviceptr>(args->address);
    buffer->size = args->size;
    buffer->owned = false;
    if (args->size != 0) {
      ContextScope scope(driver, device);
      check_foreign_memory(driver, device, buffer->address, args->size);
      // DLPack's stream-1 convention: the producer ordered its writes before
      // the legacy default stream; our stream is non-blocking, so order it
      // after that stream explicitly.
      CUevent produced = nullptr;
      check(driver, driver.cuEventCreate(&produced, CU_EVENT_DISABLE_TIMING), "cuEventCreate on " + device.label);
      CUresult result = driver.cuEventRecord(produced, CU_STREAM_LEGACY);
      if (result == CUDA_SUCCESS) result = driver.cuStreamWaitEvent(device.stream, produced, 0);
      driver.cuEventDestroy(produced);
      check(driver, result, "ordering " + device.label + " after the legacy default stream");
    }
    {
      std::lock_guard lock(backend.mutex);
      backend.buffers.insert(buffer.get());
    }
    args->buffer = buffer.release();
    return nullptr;
  });
}

BP_Error* memory_free(BP_MemoryFreeArgs* args) {
  return guarded([&]() -> BP_Error* {
    require_args(args, "memory_free");
    BP_Backend& backend = backend_of(args->backend, "memory_free");
    require_driver_process("memory_free");
    if (args->buffer == nullptr) return nullptr;
    {
      std::lock_guard lock(backend.mutex);
      if (backend.buffers.erase(args->buffer) == 0) {
        throw Failure(BP_ERROR_INVALID_ARGUMENT,
                      "memory_free: buffer is not a live buffer of this backend");
      }
    }
    if (!args->buffer->owned) wait_for_every_device(backend);
    release_buffer(*backend.driver, args->buffer);
    return nullptr;
  });
}

}  // namespace backplane::cuda
