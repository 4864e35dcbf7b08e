// The CUDA backend's memory: device and pinned allocations, adopting memory
// another library allocated (memory_wrap), and freeing both kinds.
#include "cuda_backend.hpp"

#include "cuda_state.hpp"

#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace backplane::cuda {
namespace {

using sdk::Failure;
using sdk::format_bytes;

// " (free 3.20 GiB of 24.00 GiB)" for the device whose context is current.
std::string memory_note(const DriverApi& driver) {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  if (driver.cuMemGetInfo(&free_bytes, &total_bytes) != CUDA_SUCCESS) return "";
  return " (free " + format_bytes(free_bytes) + " of " + format_bytes(total_bytes) + ")";
}

// What the driver knows about foreign memory at `address`: that it is device
// memory of `device` and that [address, address + size) lies in one allocation.
void check_foreign_memory(const DriverApi& driver, const Device& device, CUdeviceptr address, std::uint64_t size) {
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
    throw Failure(BP_ERROR_INVALID_ARGUMENT, what + ": the address is memory of cuda:" + std::to_string(ordinal));
  }
  CUdeviceptr start = 0;
  std::size_t extent = 0;
  check(driver, driver.cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, address),
        what + ": cuPointerGetAttribute(RANGE_START_ADDR)");
  check(driver, driver.cuPointerGetAttribute(&extent, CU_POINTER_ATTRIBUTE_RANGE_SIZE, address),
        what + ": cuPointerGetAttribute(RANGE_SIZE)");
  sdk::check_inside_allocation(what, address - start, size, extent);
}

}  // namespace

std::unique_ptr<CudaBackend::Buffer> CudaBackend::allocate(std::int32_t ordinal, BP_MemoryKind kind,
                                                           std::uint64_t size) {
  Device& device = start_device(ordinal);
  const DriverApi& driver = *driver_;
  std::unique_ptr<Buffer> buffer(new Buffer{{ordinal, kind, size, nullptr}, this, &device, true});
  if (size == 0) return buffer;
  ContextScope scope(driver, device);
  if (kind == BP_MEMORY_DEVICE) {
    CUdeviceptr address = 0;
    const CUresult result = driver.cuMemAlloc(&address, size);
    if (result != CUDA_SUCCESS) {
      check(driver, result, "cuMemAlloc of " + format_bytes(size) + " on " + device.label, memory_note(driver));
    }
    buffer->address = reinterpret_cast<void*>(address);
  } else {
    // Portable: pinned for every context; device-mapped: under unified
    // addressing the host pointer is also the device pointer.
    void* host = nullptr;
    check(driver, driver.cuMemHostAlloc(&host, size, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
          [&] { return "cuMemHostAlloc of " + format_bytes(size) + " of pinned host memory"; });
    buffer->address = host;
  }
  return buffer;
}

std::unique_ptr<CudaBackend::Buffer> CudaBackend::wrap(std::int32_t ordinal, void* address, std::uint64_t size) {
  Device& device = start_device(ordinal);
  const DriverApi& driver = *driver_;
  if (size != 0) {
    ContextScope scope(driver, device);
    check_foreign_memory(driver, device, reinterpret_cast<CUdeviceptr>(address), size);
    // DLPack's stream-1 convention: the producer ordered its writes before
    // the legacy default stream; our stream is non-blocking, so order it
    // after that stream explicitly.
    order_after(driver, device, CU_STREAM_LEGACY, device.label, "the legacy default stream");
  }
  return std::unique_ptr<Buffer>(new Buffer{{ordinal, BP_MEMORY_DEVICE, size, address}, this, &device, false});
}

// Frees after the work queued on the buffer's device. A wrapped buffer's
// memory goes back to its owner once the handle is gone, and a peer copy
// reading it runs on the destination device's stream: that waits for every
// device. Throws on a driver failure; the memory is not retried.
void CudaBackend::release(Buffer& buffer) {
  if (!buffer.owned) wait_for_every_device();
  void* const address = std::exchange(buffer.address, nullptr);
  if (address == nullptr) return;
  const DriverApi& driver = *driver_;
  Device& device = *buffer.device;
  ContextScope scope(driver, device);
  check(driver, driver.cuStreamSynchronize(device.stream),
        [&] { return "waiting for " + device.label + " before freeing a buffer"; });
  if (!buffer.owned) return;
  if (buffer.kind == BP_MEMORY_PINNED_HOST) {
    check(driver, driver.cuMemFreeHost(address), [&] { return "cuMemFreeHost of " + format_bytes(buffer.size); });
  } else {
    check(driver, driver.cuMemFree(reinterpret_cast<CUdeviceptr>(address)),
          [&] { return "cuMemFree of " + format_bytes(buffer.size) + " on " + device.label; });
  }
}

// backend_destroy, or memory_free after a failed release: nowhere to report.
CudaBackend::Buffer::~Buffer() {
  if (address == nullptr || driver_forked()) return;  // in a child the memory is the parent's
  try {
    backend->release(*this);
  } catch (...) {  // the memory goes with the context
  }
}

void CudaBackend::wait_for_every_device() {
  const DriverApi& driver = *driver_;
  for (Device& device : devices_) {
    if (!device.started()) continue;
    ContextScope scope(driver, device);
    check(driver, driver.cuStreamSynchronize(device.stream),
          [&] { return "waiting for " + device.label + " before releasing a wrapped buffer"; });
  }
}

}  // namespace backplane::cuda
