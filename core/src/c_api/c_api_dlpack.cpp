// bp_array_to_dlpack, bp_array_from_dlpack: zero-copy exchange with DLPack
// (NumPy, PyTorch, JAX). Which backend a DLPack device type belongs to is
// what the plugins declare (backend ABI 1.2 dlpack_device_type); the core
// names none. Host memory is wrapped directly; device memory through the
// declaring plugin's memory_wrap (ABI 1.1). Built against Debian's dlpack.h
// 0.6, which has only the unversioned DLManagedTensor.
#include "c_api/c_api_support.hpp"
#include "registry/runtime_impl.hpp"
#include "util/dlpack_device.hpp"

#include <dlpack/dlpack.h>
#include <fmt/format.h>

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::c_api {
namespace {

// kDLBool arrived in DLPack 0.8; producers newer than our header use it.
constexpr std::uint8_t kDLBoolCode = 6;

// What an exported tensor owns: the DLManagedTensor itself, the shape it
// points at, and a reference to the array keeping the buffer alive.
struct ExportedTensor {
  DLManagedTensor tensor{};
  std::vector<std::int64_t> shape;
  Array array;
};

void delete_exported(DLManagedTensor* tensor) noexcept {
  delete static_cast<ExportedTensor*>(tensor->manager_ctx);  // destroying an Array never throws
}

std::optional<DLDataType> dlpack_dtype(DType dtype) {
  const auto bits = static_cast<std::uint8_t>(dtype_bits(dtype));
  switch (dtype) {
    case DType::kU8:
    case DType::kU16:
    case DType::kU32:
    case DType::kU64: return DLDataType{kDLUInt, bits, 1};
    case DType::kI8:
    case DType::kI16:
    case DType::kI32:
    case DType::kI64: return DLDataType{kDLInt, bits, 1};
    case DType::kF16:
    case DType::kF32:
    case DType::kF64: return DLDataType{kDLFloat, bits, 1};
    case DType::kBF16: return DLDataType{kDLBfloat, 16, 1};
    case DType::kC64: return DLDataType{kDLComplex, 64, 1};
    case DType::kBool: return DLDataType{kDLBoolCode, 8, 1};
    default: return std::nullopt;  // F8, F6, F4: DLPack 0.6 has no codes for them
  }
}

std::optional<DType> backplane_dtype(const DLDataType& type) {
  switch (type.code) {
    case kDLUInt:
      switch (type.bits) {
        case 8: return DType::kU8;
        case 16: return DType::kU16;
        case 32: return DType::kU32;
        case 64: return DType::kU64;
        default: return std::nullopt;
      }
    case kDLInt:
      switch (type.bits) {
        case 8: return DType::kI8;
        case 16: return DType::kI16;
        case 32: return DType::kI32;
        case 64: return DType::kI64;
        default: return std::nullopt;
      }
    case kDLFloat:
      switch (type.bits) {
        case 16: return DType::kF16;
        case 32: return DType::kF32;
        case 64: return DType::kF64;
        default: return std::nullopt;
      }
    case kDLBfloat: return type.bits == 16 ? std::optional(DType::kBF16) : std::nullopt;
    case kDLComplex: return type.bits == 64 ? std::optional(DType::kC64) : std::nullopt;
    case kDLBoolCode: return type.bits == 8 ? std::optional(DType::kBool) : std::nullopt;
    default: return std::nullopt;
  }
}

// The device type as the producer wrote it. A foreign producer may write a
// number DLDeviceType does not list: read it as the integer it is, since
// loading an enum from an unlisted value is undefined behaviour.
std::int32_t raw_device_type(const DLDevice& device) {
  static_assert(sizeof(device.device_type) == sizeof(std::int32_t));
  std::int32_t type = 0;
  std::memcpy(&type, &device.device_type, sizeof(type));
  return type;
}

// The DLPack device an array exports as: the type its backend declares with
// the ordinal as device_id (host memory has one address space: kDLCPU is
// always device 0); kDLCPU for undeclared host memory. Throws kUnsupported
// naming the backend otherwise.
DLDevice dlpack_device(const Array& array, const char* call) {
  const std::int32_t declared = array.dlpack_device_type();
  if (declared == kDLCPU) return DLDevice{kDLCPU, 0};
  if (declared != 0) return DLDevice{static_cast<DLDeviceType>(declared), array.device().ordinal};
  if (array.host_data() != nullptr) return DLDevice{kDLCPU, 0};
  throw Error(ErrorCode::kUnsupported,
              fmt::format("{}: {} cannot be exported: backend '{}' declares no DLPack device type (the plugin's "
                          "dlpack_device_type, backend ABI 1.2) and its memory is not host memory; copy the array "
                          "to a host device first",
                          call, array.device().selector(), array.device().backend));
}

// Row-major contiguity; extents of 1 may carry any stride (NumPy and PyTorch
// both produce such strides for views), and a tensor with an extent of 0 has
// no element whose place a stride could get wrong (NumPy 2 and PyTorch give
// empty tensors strides of their own).
bool is_compact(const DLTensor& tensor) {
  if (tensor.strides == nullptr) return true;
  for (int axis = 0; axis < tensor.ndim; ++axis) {
    if (tensor.shape[axis] == 0) return true;
  }
  std::int64_t expected = 1;
  for (int axis = tensor.ndim - 1; axis >= 0; --axis) {
    if (tensor.shape[axis] != 1 && tensor.strides[axis] != expected) return false;
    expected *= tensor.shape[axis];
  }
  return true;
}

// Owner of an imported tensor: runs the producer's deleter when the last
// array, view or transfer using the memory is gone, on whichever thread that is.
struct ForeignTensor {
  explicit ForeignTensor(DLManagedTensor* tensor) : tensor(tensor) {}
  ForeignTensor(const ForeignTensor&) = delete;
  ForeignTensor& operator=(const ForeignTensor&) = delete;
  ~ForeignTensor() {
    if (armed && tensor->deleter != nullptr) tensor->deleter(tensor);
  }
  DLManagedTensor* tensor;
  bool armed = false;
};

// Where an imported tensor's memory lives for backplane.
struct ImportPlace {
  Device device;
  bool host;  // host memory (wrap_host) rather than a backend's device memory
};

bool host_addressable(const detail::DiscoveredBackend& entry) {
  return entry.live != nullptr && entry.live->has(BP_CAPABILITY_HOST_ADDRESSABLE);
}

// Host memory lands on the calling thread's default device when the CPU can
// address it, else on device 0 of the first available host-addressable
// backend in the order the automatic default considers them.
Device host_import_device(Runtime& runtime, std::int32_t type) {
  detail::Registry& registry = detail::RuntimeAccess::registry(runtime);
  const Device current = runtime.default_device().device;
  if (const detail::DiscoveredBackend* entry = registry.find(current.backend);
      entry != nullptr && host_addressable(*entry)) {
    return current;
  }
  for (const detail::DiscoveredBackend* entry : registry.preference_order()) {
    if (host_addressable(*entry) && entry->live->device_count() > 0) return Device{entry->info.name, 0};
  }
  throw Error(ErrorCode::kUnavailable,
              fmt::format("bp_array_from_dlpack: DLPack device type {} is host memory, which only a host-addressable "
                          "device can hold; the default device {} is not one and no other is available ({})",
                          detail::dlpack_device_type_name(type), current.selector(), registry.describe_backends()));
}

// Device memory lands on device `device_id` of the first available backend,
// in the same order, that declares the tensor's DLPack device type.
Device device_import_device(Runtime& runtime, const DLDevice& device) {
  const std::int32_t type = raw_device_type(device);
  if (device.device_id < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("bp_array_from_dlpack: device_id is {} for DLPack device type {}", device.device_id,
                            detail::dlpack_device_type_name(type)));
  }
  detail::Registry& registry = detail::RuntimeAccess::registry(runtime);
  std::vector<std::string> unavailable;  // backends that declare the type but cannot be used
  std::vector<std::string> declared;     // every backend's declaration, for the message
  for (const detail::DiscoveredBackend* entry : registry.preference_order()) {
    if (entry->info.dlpack_device_type == 0) continue;
    declared.push_back(
        fmt::format("{} {}", entry->info.name, detail::dlpack_device_type_name(entry->info.dlpack_device_type)));
    if (entry->info.dlpack_device_type != type) continue;
    if (entry->live == nullptr) {
      unavailable.push_back(
          fmt::format("{} ({}: {})", entry->info.name, to_string(entry->info.status), entry->info.reason));
      continue;
    }
    const int count = entry->live->device_count();
    if (device.device_id >= count) {
      throw Error(ErrorCode::kOutOfRange,
                  fmt::format("bp_array_from_dlpack: DLPack device type {} device_id {} is out of range: backend "
                              "'{}', which declares that type, has {} device(s)",
                              detail::dlpack_device_type_name(type), device.device_id, entry->info.name, count));
    }
    return Device{entry->info.name, device.device_id};
  }
  if (!unavailable.empty()) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("bp_array_from_dlpack: DLPack device type {} is the memory of {}, not available here",
                            detail::dlpack_device_type_name(type), fmt::join(unavailable, ", ")));
  }
  const std::string declarations = declared.empty() ? "none" : fmt::format("{}", fmt::join(declared, ", "));
  throw Error(ErrorCode::kUnsupported,
              fmt::format("bp_array_from_dlpack: DLPack device type {} cannot be imported: no backend declares it "
                          "(declared: {}; host memory goes to a host-addressable device)",
                          detail::dlpack_device_type_name(type), declarations));
}

ImportPlace import_place(Runtime& runtime, const DLDevice& device) {
  const std::int32_t type = raw_device_type(device);
  if (detail::is_dlpack_host_type(type)) return {host_import_device(runtime, type), true};
  return {device_import_device(runtime, device), false};
}

std::string describe_type(const DLDataType& type) {
  return fmt::format("code {} with {} bits and {} lanes", type.code, type.bits, type.lanes);
}

}  // namespace
}  // namespace backplane::c_api

// The C functions below have C linkage and global scope; they call the
// C++ API and the C API's helpers by their short names.
using namespace ::backplane;
using namespace ::backplane::c_api;

extern "C" {

bp_status bp_array_to_dlpack(const bp_array* array, DLManagedTensor** out) {
  return guarded([&] {
    const auto array_lease = array_of(array, "bp_array_to_dlpack");
    const Array& cxx = *array_lease;
    require_non_null(out, "bp_array_to_dlpack", "out");
    const auto type = dlpack_dtype(cxx.dtype());
    if (!type) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("bp_array_to_dlpack: DLPack has no type code for {}", dtype_name(cxx.dtype())));
    }
    const DLDevice device = dlpack_device(cxx, "bp_array_to_dlpack");
    // Wrapped host memory may have no plugin address; host data is what kDLCPU means.
    void* data = cxx.host_data() != nullptr ? const_cast<void*>(cxx.host_data()) : cxx.native_address();
    if (data == nullptr && cxx.nbytes() != 0) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("bp_array_to_dlpack: {} cannot be exported: backend '{}' gives its memory no address "
                              "(a device-memory handle such as OpenCL's cl_mem cannot cross the backend ABI), so a "
                              "DLPack tensor would carry a NULL data pointer; copy the array to a host device first",
                              cxx.device().selector(), cxx.device().backend));
    }
    // Consumers read at once and DLPack has no readiness signal for host memory.
    cxx.block_until_ready();
    auto exported = std::make_unique<ExportedTensor>();
    exported->array = cxx;
    exported->shape = cxx.shape();
    DLTensor& tensor = exported->tensor.dl_tensor;
    tensor.data = data;
    tensor.device = device;
    tensor.ndim = static_cast<int>(exported->shape.size());
    tensor.dtype = *type;
    tensor.shape = exported->shape.data();
    tensor.strides = nullptr;  // row-major and contiguous
    tensor.byte_offset = 0;    // native_address() already points at the first byte
    exported->tensor.manager_ctx = exported.get();
    exported->tensor.deleter = delete_exported;
    *out = &exported.release()->tensor;
  });
}

bp_status bp_array_dlpack_device(const bp_array* array, int32_t* device_type, int32_t* device_id) {
  return guarded([&] {
    const auto array_lease = array_of(array, "bp_array_dlpack_device");
    require_non_null(device_type, "bp_array_dlpack_device", "device_type");
    require_non_null(device_id, "bp_array_dlpack_device", "device_id");
    const DLDevice device = dlpack_device(*array_lease, "bp_array_dlpack_device");
    *device_type = static_cast<int32_t>(device.device_type);
    *device_id = device.device_id;
  });
}

bp_status bp_array_from_dlpack(bp_runtime* runtime, DLManagedTensor* managed, bp_array** out) {
  return guarded([&] {
    const auto runtime_lease = runtime_of(runtime, "bp_array_from_dlpack");
    Runtime& cxx = *runtime_lease;
    require_non_null(managed, "bp_array_from_dlpack", "tensor");
    require_non_null(out, "bp_array_from_dlpack", "out");
    const DLTensor& tensor = managed->dl_tensor;
    const auto place = import_place(cxx, tensor.device);
    if (tensor.dtype.lanes != 1) {
      throw Error(ErrorCode::kUnsupported, fmt::format("bp_array_from_dlpack: vector types are not supported ({})",
                                                       describe_type(tensor.dtype)));
    }
    const auto dtype = backplane_dtype(tensor.dtype);
    if (!dtype) {
      throw Error(ErrorCode::kUnsupported, fmt::format("bp_array_from_dlpack: DLPack dtype {} has no backplane dtype",
                                                       describe_type(tensor.dtype)));
    }
    if (tensor.ndim < 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("bp_array_from_dlpack: ndim is {}", tensor.ndim));
    }
    if (tensor.ndim > 0) require_non_null(tensor.shape, "bp_array_from_dlpack", "tensor->dl_tensor.shape");
    std::vector<std::int64_t> shape(tensor.shape, tensor.shape + tensor.ndim);
    bool empty = false;
    for (std::size_t axis = 0; axis < shape.size(); ++axis) {
      if (shape[axis] < 0) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("bp_array_from_dlpack: shape [{}] has a negative extent on axis {}",
                                fmt::join(shape, ", "), axis));
      }
      empty = empty || shape[axis] == 0;
    }
    if (!is_compact(tensor)) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("bp_array_from_dlpack: strides [{}] of shape [{}] are not row-major contiguous "
                              "(make a contiguous copy first)",
                              fmt::join(std::vector<std::int64_t>(tensor.strides, tensor.strides + tensor.ndim), ", "),
                              fmt::join(shape, ", ")));
    }
    if (tensor.data == nullptr && !empty) {
      throw Error(ErrorCode::kInvalidArgument, "bp_array_from_dlpack: data is NULL for a non-empty tensor");
    }
    auto* data = static_cast<std::byte*>(tensor.data) + (tensor.data ? tensor.byte_offset : 0);
    auto owner = std::make_shared<ForeignTensor>(managed);
    Array array = place.host ? Array::wrap_host(cxx, place.device, *dtype, std::move(shape), data, owner)
                             : Array::wrap_device(cxx, place.device, *dtype, std::move(shape), data, owner);
    bp_array* handle = new_array_handle(std::move(array));
    owner->armed = true;  // only now: on any failure above the caller keeps the tensor
    *out = handle;
  });
}

void bp_dlpack_tensor_delete(DLManagedTensor* tensor) {
  if (tensor != nullptr && tensor->deleter != nullptr) tensor->deleter(tensor);
}

void bp_dlpack_capsule_destructor(void* capsule) {
  // CPython's capsule API, found in the running interpreter: the library
  // links no Python, and outside an interpreter this is never called.
  using IsValid = int (*)(void*, const char*);
  using GetPointer = void* (*)(void*, const char*);
  static const auto is_valid = reinterpret_cast<IsValid>(::dlsym(RTLD_DEFAULT, "PyCapsule_IsValid"));
  static const auto get_pointer = reinterpret_cast<GetPointer>(::dlsym(RTLD_DEFAULT, "PyCapsule_GetPointer"));
  if (capsule == nullptr || is_valid == nullptr || get_pointer == nullptr) return;
  // A consumer renames the capsule "used_dltensor" and owns the tensor; only
  // an unconsumed (or rejected) one still owns it. IsValid leaves any pending
  // Python exception (a consumer's refusal) untouched.
  if (is_valid(capsule, "dltensor") != 0) {
    bp_dlpack_tensor_delete(static_cast<DLManagedTensor*>(get_pointer(capsule, "dltensor")));
  }
}

}  // extern "C"
