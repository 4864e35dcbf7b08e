// The emulator's memory. Device memory is host memory in an address range
// reserved for each device, handed out without ever reusing an address: a
// copy that touches freed device memory is caught (as an illegal address)
// instead of landing in a later allocation. Capacity is per device
// (BP_FAKE_CUDA_MEMORY), so running out is real. Pinned host memory is
// ordinary host memory the emulator remembers, for pointer attributes.
#include "emulator.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <shared_mutex>

namespace emulator {
namespace {

struct Allocation {
  std::size_t size = 0;
  int device = 0;
  MemoryKind kind = MemoryKind::kDevice;
  Context* context = nullptr;
};

struct DeviceRange {
  std::uintptr_t base = 0;
  std::uintptr_t limit = 0;
  std::uintptr_t next = 0;  // bump pointer: addresses are never reused
  std::uint64_t used = 0;
};

std::shared_mutex& memory_mutex() {
  static std::shared_mutex mutex;
  return mutex;
}

// Guarded by memory_mutex().
std::map<std::uintptr_t, Allocation>& allocations() {
  static auto* table = new std::map<std::uintptr_t, Allocation>;
  return *table;
}
std::vector<DeviceRange>& ranges() {
  static auto* table = new std::vector<DeviceRange>;
  return *table;
}

std::size_t page_size() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

std::size_t round_to_pages(std::size_t size) {
  const std::size_t page = page_size();
  return (size + page - 1) / page * page;
}

// Reserves (PROT_NONE, no backing) the address range of every device once.
void reserve_ranges() {
  auto& table = ranges();
  if (!table.empty()) return;
  for (int device = 0; device < config().devices; ++device) {
    // Room for many times the capacity: addresses are not reused.
    std::size_t span = std::size_t{1} << 40;
    void* base = MAP_FAILED;
    while (base == MAP_FAILED && span >= (std::size_t{1} << 32)) {
      base = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (base == MAP_FAILED) span /= 4;
    }
    DeviceRange range;
    if (base != MAP_FAILED) {
      range.base = reinterpret_cast<std::uintptr_t>(base);
      range.limit = range.base + span;
      range.next = range.base;
    }
    table.push_back(range);
  }
}

const Allocation* find(std::uintptr_t address, std::uintptr_t* base) {
  auto& table = allocations();
  auto found = table.upper_bound(address);
  if (found == table.begin()) return nullptr;
  --found;
  if (address >= found->first + std::max<std::size_t>(found->second.size, 1)) return nullptr;
  *base = found->first;
  return &found->second;
}

// The device whose reserved range holds `address`, or -1.
int device_range_of(std::uintptr_t address) {
  const auto& table = ranges();
  for (std::size_t device = 0; device < table.size(); ++device) {
    if (address >= table[device].base && address < table[device].limit) return static_cast<int>(device);
  }
  return -1;
}

}  // namespace

Placement locate(std::uintptr_t address, std::size_t size) {
  Placement placement;
  std::uintptr_t base = 0;
  if (const Allocation* allocation = find(address, &base)) {
    placement.kind = allocation->kind;
    placement.device = allocation->device;
    placement.valid = size <= allocation->size - (address - base);
    return placement;
  }
  placement.device = device_range_of(address);
  if (placement.device >= 0) {  // device memory that is not (or no longer) allocated
    placement.kind = MemoryKind::kDevice;
    placement.valid = false;
  }
  return placement;
}

void lock_memory_shared() { memory_mutex().lock_shared(); }
void unlock_memory_shared() { memory_mutex().unlock_shared(); }

}  // namespace emulator

using namespace emulator;

CUresult cuMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  if (CUresult entered = enter("cuMemGetInfo"); entered != CUDA_SUCCESS) return entered;
  Context* context = current_context();
  if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult sticky = sticky_of(context); sticky != CUDA_SUCCESS) return sticky;
  std::shared_lock lock(memory_mutex());
  const std::uint64_t total = capacity(context->device);
  const auto& table = ranges();
  const std::uint64_t used = static_cast<std::size_t>(context->device) < table.size()
                                 ? table[static_cast<std::size_t>(context->device)].used
                                 : 0;
  *free_bytes = total - std::min(used, total);
  *total_bytes = total;
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr* address, std::size_t size) {
  if (CUresult entered = enter("cuMemAlloc"); entered != CUDA_SUCCESS) return entered;
  Context* context = current_context();
  if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult sticky = sticky_of(context); sticky != CUDA_SUCCESS) return sticky;
  if (address == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  std::unique_lock lock(memory_mutex());
  reserve_ranges();
  DeviceRange& range = ranges()[static_cast<std::size_t>(context->device)];
  const std::uint64_t total = capacity(context->device);
  if (size > total - std::min(range.used, total)) return CUDA_ERROR_OUT_OF_MEMORY;
  // One unmapped page after each allocation: an overrun faults.
  const std::size_t mapped = round_to_pages(size);
  if (range.base == 0 || mapped + page_size() > range.limit - range.next) return CUDA_ERROR_OUT_OF_MEMORY;
  void* memory = mmap(reinterpret_cast<void*>(range.next), mapped, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (memory == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  allocations()[range.next] = Allocation{size, context->device, MemoryKind::kDevice, context};
  *address = static_cast<CUdeviceptr>(range.next);
  range.next += mapped + page_size();
  range.used += size;
  return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr address) {
  if (CUresult entered = enter("cuMemFree"); entered != CUDA_SUCCESS) return entered;
  std::unique_lock lock(memory_mutex());
  auto& table = allocations();
  const auto found = table.find(static_cast<std::uintptr_t>(address));
  if (found == table.end() || found->second.kind != MemoryKind::kDevice) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult sticky = sticky_of(found->second.context); sticky != CUDA_SUCCESS) return sticky;
  // Back to reserved, unbacked address space: later touches are caught.
  mmap(reinterpret_cast<void*>(found->first), round_to_pages(found->second.size), PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  ranges()[static_cast<std::size_t>(found->second.device)].used -= found->second.size;
  table.erase(found);
  return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void** address, std::size_t size, unsigned int flags) {
  if (CUresult entered = enter("cuMemHostAlloc"); entered != CUDA_SUCCESS) return entered;
  Context* context = current_context();
  if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult sticky = sticky_of(context); sticky != CUDA_SUCCESS) return sticky;
  if (address == nullptr || size == 0 ||
      (flags & ~static_cast<unsigned>(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                      CU_MEMHOSTALLOC_WRITECOMBINED)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  void* memory = mmap(nullptr, round_to_pages(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  std::unique_lock lock(memory_mutex());
  allocations()[reinterpret_cast<std::uintptr_t>(memory)] =
      Allocation{size, context->device, MemoryKind::kPinnedHost, context};
  *address = memory;
  return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void* address) {
  if (CUresult entered = enter("cuMemFreeHost"); entered != CUDA_SUCCESS) return entered;
  std::unique_lock lock(memory_mutex());
  auto& table = allocations();
  const auto found = table.find(reinterpret_cast<std::uintptr_t>(address));
  if (found == table.end() || found->second.kind != MemoryKind::kPinnedHost) return CUDA_ERROR_INVALID_VALUE;
  munmap(address, round_to_pages(found->second.size));
  table.erase(found);
  return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr pointer) {
  if (CUresult entered = enter("cuPointerGetAttribute"); entered != CUDA_SUCCESS) return entered;
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_lock lock(memory_mutex());
  std::uintptr_t base = 0;
  const Allocation* allocation = find(static_cast<std::uintptr_t>(pointer), &base);
  // Ordinary host memory is unknown to the driver, as on a real one.
  if (allocation == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = reinterpret_cast<CUcontext>(allocation->context);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) =
          allocation->kind == MemoryKind::kDevice ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = pointer;  // unified addressing
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = allocation->device; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = static_cast<CUdeviceptr>(base);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<std::size_t*>(data) = allocation->size; return CUDA_SUCCESS;
    default: return CUDA_ERROR_NOT_SUPPORTED;
  }
}
