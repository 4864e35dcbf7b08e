// bp_dtype_*, bp_array_*, bp_take_windows, bp_memory_stats_get, bp_memory_reset_peak, bp_empty_cache.
#include "c_api/c_api_support.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <mutex>
#include <unordered_set>
#include <vector>

struct bp_array {
  backplane::Array array;
};

namespace backplane::c_api {
namespace {

static_assert(static_cast<int>(DType::kU8) == BP_DTYPE_U8);
static_assert(static_cast<int>(DType::kU16) == BP_DTYPE_U16);
static_assert(static_cast<int>(DType::kU32) == BP_DTYPE_U32);
static_assert(static_cast<int>(DType::kI32) == BP_DTYPE_I32);
static_assert(static_cast<int>(DType::kI64) == BP_DTYPE_I64);
static_assert(static_cast<int>(DType::kBool) == BP_DTYPE_BOOL);
static_assert(static_cast<int>(DType::kI8) == BP_DTYPE_I8);
static_assert(static_cast<int>(DType::kI16) == BP_DTYPE_I16);
static_assert(static_cast<int>(DType::kU64) == BP_DTYPE_U64);
static_assert(static_cast<int>(DType::kF16) == BP_DTYPE_F16);
static_assert(static_cast<int>(DType::kBF16) == BP_DTYPE_BF16);
static_assert(static_cast<int>(DType::kF32) == BP_DTYPE_F32);
static_assert(static_cast<int>(DType::kF64) == BP_DTYPE_F64);
static_assert(static_cast<int>(DType::kC64) == BP_DTYPE_C64);
static_assert(static_cast<int>(DType::kF8_E5M2) == BP_DTYPE_F8_E5M2);
static_assert(static_cast<int>(DType::kF8_E4M3) == BP_DTYPE_F8_E4M3);
static_assert(static_cast<int>(DType::kF8_E8M0) == BP_DTYPE_F8_E8M0);
static_assert(static_cast<int>(DType::kF8_E4M3FNUZ) == BP_DTYPE_F8_E4M3FNUZ);
static_assert(static_cast<int>(DType::kF8_E5M2FNUZ) == BP_DTYPE_F8_E5M2FNUZ);
static_assert(static_cast<int>(DType::kF4) == BP_DTYPE_F4);
static_assert(static_cast<int>(DType::kF6_E2M3) == BP_DTYPE_F6_E2M3);
static_assert(static_cast<int>(DType::kF6_E3M2) == BP_DTYPE_F6_E3M2);
static_assert(kAllDTypes.size() == BP_DTYPE_F6_E3M2, "a new DType needs its BP_DTYPE_ constant");

LiveHandles<bp_array>& live_arrays = make_live_handles<bp_array>();

}  // namespace

bp_array* new_array_handle(Array array) { return live_arrays.add(std::make_shared<bp_array>(std::move(array))); }

const NamedArrays::value_type& entry_at(const NamedArrays& entries, std::size_t index, const char* function,
                                        const char* noun) {
  if (index >= entries.size()) {
    throw Error(ErrorCode::kOutOfRange,
                fmt::format("{}: index {} is out of range: {} {}", function, index, entries.size(), noun));
  }
  return entries[index];
}

std::shared_ptr<const Array> array_of(const bp_array* handle, const char* function) {
  require_non_null(handle, function, "array");
  std::shared_ptr<bp_array> live = live_arrays.acquire(handle);
  if (live == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: array is not a live handle (destroyed?)", function));
  }
  const Array* array = &live->array;
  return std::shared_ptr<const Array>(std::move(live), array);  // shares the handle's ownership
}

DType dtype_of(bp_dtype dtype, const char* function) {
  if (dtype_bits(static_cast<DType>(dtype)) == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} is not a bp_dtype (1..{})", function, dtype, static_cast<int>(kAllDTypes.size())));
  }
  return static_cast<DType>(dtype);
}

Device device_or_default(Runtime& runtime, const bp_device* device) {
  if (device == nullptr) return runtime.default_device().device;
  return runtime.resolve(to_device(*device).selector());
}

}  // namespace backplane::c_api

// The C functions below have C linkage and global scope; they call the
// C++ API and the C API's helpers by their short names.
using namespace ::backplane;
using namespace ::backplane::c_api;

extern "C" {

const char* bp_dtype_name(bp_dtype dtype) {
  const std::string_view name = dtype_name(static_cast<DType>(dtype));
  return name.empty() ? "" : name.data();  // static, NUL-terminated literals; an empty view may have no data()
}

bp_status bp_dtype_from_name(const char* name, bp_dtype* out) {
  return guarded([&] {
    require_non_null(name, "bp_dtype_from_name", "name");
    require_non_null(out, "bp_dtype_from_name", "out");
    auto dtype = backplane::dtype_from_name(name);
    if (!dtype) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("bp_dtype_from_name: '{}' is not a dtype (names are case-sensitive: U16, BF16, F32, ...)", name));
    }
    *out = static_cast<bp_dtype>(*dtype);
  });
}

int32_t bp_dtype_bits(bp_dtype dtype) { return dtype_bits(static_cast<DType>(dtype)); }

bp_status bp_array_create(bp_runtime* runtime, const bp_device* device, bp_dtype dtype, const int64_t* shape,
                          size_t rank, const void* data, uint64_t size, bp_array** out) {
  return guarded([&] {
    auto cxx = runtime_of(runtime, "bp_array_create");
    require_non_null(out, "bp_array_create", "out");
    if (rank > 0) require_non_null(shape, "bp_array_create", "shape");
    if (size > 0) require_non_null(data, "bp_array_create", "data");
    const DType element = dtype_of(dtype, "bp_array_create");
    std::vector<std::int64_t> extents(shape, shape + rank);
    Device where = device_or_default(*cxx, device);
    *out = new_array_handle(Array::from_host(*cxx, where, element, std::move(extents), data, size));
  });
}

void bp_array_destroy(bp_array* array) {
  // NULL or destroyed twice: nothing. The last reference (here, or in a call
  // still in flight on another thread) may end a foreign owner such as a
  // DLPack deleter: remove() hands it back to be dropped outside the lock.
  live_arrays.remove(array);
}

bp_status bp_array_dtype(const bp_array* array, bp_dtype* out) {
  return guarded([&] {
    auto cxx = array_of(array, "bp_array_dtype");
    require_non_null(out, "bp_array_dtype", "out");
    *out = static_cast<bp_dtype>(cxx->dtype());
  });
}

bp_status bp_array_rank(const bp_array* array, size_t* out) {
  return guarded([&] {
    auto cxx = array_of(array, "bp_array_rank");
    require_non_null(out, "bp_array_rank", "out");
    *out = cxx->rank();
  });
}

bp_status bp_array_shape(const bp_array* array, int64_t* shape, size_t capacity) {
  return guarded([&] {
    auto cxx = array_of(array, "bp_array_shape");
    const auto& extents = cxx->shape();
    if (capacity < extents.size()) {
      throw Error(ErrorCode::kOutOfRange,
                  fmt::format("bp_array_shape: the array has rank {}, capacity is {}", extents.size(), capacity));
    }
    if (!extents.empty()) require_non_null(shape, "bp_array_shape", "shape");
    std::copy(extents.begin(), extents.end(), shape);
  });
}

bp_status bp_array_nbytes(const bp_array* array, uint64_t* out) {
  return guarded([&] {
    auto cxx = array_of(array, "bp_array_nbytes");
    require_non_null(out, "bp_array_nbytes", "out");
    *out = cxx->nbytes();
  });
}

bp_status bp_array_device(const bp_array* array, bp_device* out) {
  return guarded([&] {
    auto cxx = array_of(array, "bp_array_device");
    require_non_null(out, "bp_array_device", "out");
    *out = from_device(cxx->device());
  });
}

bp_status bp_array_native_address(const bp_array* array, void** out) {
  return guarded([&] {
    auto cxx = array_of(array, "bp_array_native_address");
    require_non_null(out, "bp_array_native_address", "out");
    *out = cxx->native_address();
  });
}

bp_status bp_array_shares_buffer(const bp_array* first, const bp_array* second, int32_t* out) {
  return guarded([&] {
    auto a = array_of(first, "bp_array_shares_buffer");
    auto b = array_of(second, "bp_array_shares_buffer");
    require_non_null(out, "bp_array_shares_buffer", "out");
    *out = a->shares_buffer_with(*b) ? 1 : 0;
  });
}

bp_status bp_array_copy_to_host(const bp_array* array, void* destination, uint64_t capacity) {
  return guarded([&] {
    auto cxx = array_of(array, "bp_array_copy_to_host");
    if (capacity < cxx->nbytes()) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("bp_array_copy_to_host: the array has {} bytes, capacity is {}", cxx->nbytes(), capacity));
    }
    if (cxx->nbytes() > 0) require_non_null(destination, "bp_array_copy_to_host", "destination");
    cxx->copy_to_host(destination, capacity);
  });
}

bp_status bp_array_slice(const bp_array* array, int64_t begin, int64_t end, bp_array** out) {
  return guarded([&] {
    auto cxx = array_of(array, "bp_array_slice");
    require_non_null(out, "bp_array_slice", "out");
    *out = new_array_handle(cxx->slice(begin, end));
  });
}

bp_status bp_array_device_put(bp_runtime* runtime, const bp_array* array, const bp_device* device,
                              bp_progress_callback progress, void* user_data, bp_array** out) {
  return guarded([&] {
    auto cxx = runtime_of(runtime, "bp_array_device_put");
    auto source = array_of(array, "bp_array_device_put");
    require_non_null(out, "bp_array_device_put", "out");
    PutOptions options;
    if (progress != nullptr) {
      options.progress = [progress, user_data](std::uint64_t done, std::uint64_t total) {
        progress(done, total, user_data);
      };
    }
    *out = new_array_handle(device_put(*cxx, *source, device_or_default(*cxx, device), options));
  });
}

bp_status bp_array_wait(const bp_array* array) {
  return guarded([&] { array_of(array, "bp_array_wait")->block_until_ready(); });
}

bp_status bp_array_is_ready(const bp_array* array, int32_t* out) {
  return guarded([&] {
    auto cxx = array_of(array, "bp_array_is_ready");
    require_non_null(out, "bp_array_is_ready", "out");
    *out = cxx->is_ready() ? 1 : 0;
  });
}

bp_status bp_take_windows(bp_runtime* runtime, const bp_array* tokens, const int64_t* offsets, size_t count,
                          int64_t length, const bp_device* device, bp_dtype output, bp_array** out) {
  return guarded([&] {
    auto cxx = runtime_of(runtime, "bp_take_windows");
    auto source = array_of(tokens, "bp_take_windows");
    require_non_null(out, "bp_take_windows", "out");
    if (count > 0) require_non_null(offsets, "bp_take_windows", "offsets");
    std::optional<DType> converted;
    if (output != 0) converted = dtype_of(output, "bp_take_windows");
    std::span<const std::int64_t> windows(offsets, count);
    *out = new_array_handle(take_windows(*cxx, *source, windows, length, device_or_default(*cxx, device), converted));
  });
}

bp_status bp_memory_stats_get(bp_runtime* runtime, const bp_device* device, bp_memory_stats* out) {
  return guarded([&] {
    auto cxx = runtime_of(runtime, "bp_memory_stats_get");
    require_non_null(out, "bp_memory_stats_get", "out");
    // API 0.5's struct, which ends before memory_total, is accepted too; the
    // message for anything smaller still asks for sizeof.
    if (out->struct_size < BP_STRUCT_SIZE(bp_memory_stats, pinned_backend_allocations)) {
      require_struct_size(out->struct_size, sizeof(bp_memory_stats), "bp_memory_stats_get", "out");
    }
    const MemoryStats stats = memory_stats(*cxx, device_or_default(*cxx, device));
    out->in_use = stats.in_use;
    out->cached = stats.cached;
    out->peak = stats.peak;
    out->backend_allocations = stats.backend_allocations;
    out->backend_frees = stats.backend_frees;
    out->pinned_in_use = stats.pinned_in_use;
    out->pinned_cached = stats.pinned_cached;
    out->pinned_backend_allocations = stats.pinned_backend_allocations;
    if (out->struct_size >= BP_STRUCT_SIZE(bp_memory_stats, memory_free)) {  // API 0.6
      out->memory_total = stats.memory_total;
      out->memory_free = stats.memory_free.value_or(BP_MEMORY_UNKNOWN);
    }
  });
}

bp_status bp_memory_reset_peak(bp_runtime* runtime, const bp_device* device) {
  return guarded([&] {
    auto cxx = runtime_of(runtime, "bp_memory_reset_peak");
    reset_peak(*cxx, device_or_default(*cxx, device));
  });
}

bp_status bp_empty_cache(bp_runtime* runtime, const bp_device* device) {
  return guarded([&] {
    auto cxx = runtime_of(runtime, "bp_empty_cache");
    empty_cache(*cxx, device_or_default(*cxx, device));
  });
}

}  // extern "C"
