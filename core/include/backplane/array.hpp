// Placement: arrays on devices, asynchronous device_put, batch windows and the
// per-device caching allocator. docs/placement.md is the guide.
//
// Error model: every failure is a backplane::Error. Failures found while a call
// runs (bad arguments, out of memory, a plugin refusing a copy) are thrown by
// that call; failures of an asynchronous transfer are thrown by
// Array::block_until_ready (and by every call that has to wait for the data:
// copy_to_host, to_vector, a device_put or take_windows reading the array).
//
// Thread-safety: Arrays are immutable values; any number of threads may use
// the same Array, and call device_put / take_windows / memory_stats /
// empty_cache at once.
//
// Lifetime: an Array keeps its buffer, its device's allocator and its plugin
// alive, so it may outlive the Runtime that made it for reading and
// destruction. Placing new arrays (device_put, take_windows) needs the Runtime.
#ifndef BACKPLANE_ARRAY_HPP
#define BACKPLANE_ARRAY_HPP

#include <backplane/api.h>

#include <backplane/backplane.hpp>
#include <backplane/dtype.hpp>
#include <backplane/error.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

namespace backplane {

namespace detail {
struct ArrayState;
struct ArrayAccess;
}  // namespace detail

// A dense, row-major, contiguous n-dimensional array living on one device.
// A cheap handle (copying it shares the data); a default-constructed Array is
// empty (valid() == false) and every other member then throws kInvalidArgument.
class BACKPLANE_API Array {
 public:
  Array() = default;

  // Copies `size` bytes of host memory into a new array on `device` and
  // returns when the data has arrived (the caller may reuse `data` at once).
  // `size` must equal the byte size of `shape` and `dtype`.
  // Throws kInvalidArgument (size/shape mismatch, negative extent),
  // kOutOfMemory (see memory_stats), or what Runtime::resolve throws.
  static Array from_host(Runtime& runtime, const Device& device, DType dtype, std::vector<std::int64_t> shape,
                         const void* data, std::uint64_t size);

  // Zero-copy: an array over existing host memory on a host-addressable device
  // (the CPU backend). `owner` is kept alive until the last array (or view, or
  // transfer reading it) is gone: pass the mmap or the foreign tensor that owns
  // `data`. The memory must stay unmodified while transfers read it.
  // Throws kUnsupported when the device is not host-addressable.
  static Array wrap_host(Runtime& runtime, const Device& device, DType dtype, std::vector<std::int64_t> shape,
                         const void* data, std::shared_ptr<const void> owner);

  // Zero-copy: an array over device memory that something else allocated and
  // owns (a tensor imported through DLPack). The backend checks the address
  // where it can (CUDA: device memory of that device, inside one allocation).
  // `owner` is released after the last array, view or transfer using the
  // memory is gone and the backend has let go of it. The data must be ready
  // (CUDA: complete, or ordered before the legacy default stream).
  // Throws kUnsupported when the backend cannot adopt memory (plugin ABI 1.0),
  // or the backend's error (kInvalidArgument: not memory of `device`;
  // kOutOfRange: the range runs past its allocation).
  static Array wrap_device(Runtime& runtime, const Device& device, DType dtype, std::vector<std::int64_t> shape,
                           void* address, std::shared_ptr<const void> owner);

  bool valid() const noexcept { return state_ != nullptr; }
  DType dtype() const;
  const std::vector<std::int64_t>& shape() const;
  std::size_t rank() const { return shape().size(); }
  std::uint64_t element_count() const;
  std::uint64_t nbytes() const;
  // Offset of this array's first byte in its buffer (non-zero for views).
  std::uint64_t byte_offset() const;
  const Device& device() const;

  // Rows [begin, end) along axis 0, sharing the buffer. For sub-byte dtypes
  // both ends must fall on whole bytes. Throws kOutOfRange / kInvalidArgument.
  Array slice(std::int64_t begin, std::int64_t end) const;

  // The data as a host pointer when the device is host-addressable (CPU,
  // wrapped memory), else nullptr. Does not wait: call block_until_ready first
  // when the array may still be arriving.
  const void* host_data() const;
  // The plugin's native address of the first byte (host pointer on CPU, device
  // pointer on CUDA), for DLPack export; nullptr where the backend has none.
  void* native_address() const;
  // The DLPack device type (DLDeviceType) its backend declares for its
  // memory (backend ABI 1.2), 0 when it declares none.
  std::int32_t dlpack_device_type() const;

  // Waits for the data; copies nbytes() bytes into `destination`, which must
  // hold `size` >= nbytes() bytes. Throws the transfer's error, kInvalidArgument.
  void copy_to_host(void* destination, std::uint64_t size) const;
  // Waits, then returns the elements; sizeof(T) must match the dtype's size.
  template <class T>
  std::vector<T> to_vector() const {
    static_assert(std::is_trivially_copyable_v<T>);
    check_element_size(sizeof(T));
    std::vector<T> values(static_cast<std::size_t>(element_count()));
    copy_to_host(values.data(), values.size() * sizeof(T));
    return values;
  }

  // Waits until the data has arrived. Throws the asynchronous error, as an
  // Error with its code and a message naming the operation, the size and both
  // devices, every time it is called on a failed array.
  void block_until_ready() const;
  // True once the data has arrived or its transfer failed; never throws for a
  // failed transfer.
  bool is_ready() const;

  // True when both are views of the same buffer (for tests and no-copy checks).
  bool shares_buffer_with(const Array& other) const;
  // True when both handles refer to the same array (device_put to the same
  // device returns the array itself).
  bool same_as(const Array& other) const noexcept { return state_ == other.state_; }

 private:
  friend struct detail::ArrayAccess;
  explicit Array(std::shared_ptr<const detail::ArrayState> state) : state_(std::move(state)) {}
  const detail::ArrayState& state() const;
  void check_element_size(std::size_t size) const;

  std::shared_ptr<const detail::ArrayState> state_;
};

// Bytes done and the total, after each chunk of a transfer that reports it.
// Called on a transfer thread; must not throw.
using ProgressCallback = std::function<void(std::uint64_t done, std::uint64_t total)>;

struct BACKPLANE_API PutOptions {
  ProgressCallback progress;  // empty: no reports
};

// `array` on `device`. Returns `array` itself when it already lives there (no
// copy, no allocation). Otherwise returns at once an array whose data is still
// arriving: same backend -> the backend's device-to-device copy; host memory
// (CPU, wrapped) -> one copy from the host pointer, in chunks through a ring
// of pinned staging buffers when the destination offers pinned memory and the
// source is large; any other pair -> through host memory, chunked the same way.
// The destination buffer is allocated before returning, so out of memory is
// thrown here; copy failures surface at block_until_ready.
BACKPLANE_API Array device_put(Runtime& runtime, const Array& array, const Device& device,
                               const PutOptions& options = {});
// Same, with the runtime that made `array` (which must still exist).
BACKPLANE_API Array device_put(const Array& array, const Device& device, const PutOptions& options = {});

// nanoGPT's get_batch: B = offsets.size() windows tokens[o, o + length) of the
// 1-D host array `tokens` (CPU or wrapped memory), gathered into one [B, length]
// array on `device` with a single host->device transfer. With `output`, the
// integers are converted (e.g. U16 -> I64): on the device when its backend
// converts integers, else while gathering. Returns before the transfer ends.
// Throws kOutOfRange naming the first offset whose window does not fit;
// kUnsupported for a source that is not host-addressable or not 1-D, or a
// conversion between non-integer dtypes.
BACKPLANE_API Array take_windows(Runtime& runtime, const Array& tokens, std::span<const std::int64_t> offsets,
                                 std::int64_t length, const Device& device, std::optional<DType> output = std::nullopt);
BACKPLANE_API Array take_windows(const Array& tokens, std::span<const std::int64_t> offsets, std::int64_t length,
                                 const Device& device, std::optional<DType> output = std::nullopt);

// The caching allocator of one device, and the device's own memory figures.
// Device memory holds arrays; pinned host memory holds staging buffers (only
// on backends that offer it).
struct BACKPLANE_API MemoryStats {
  std::uint64_t in_use = 0;               // bytes of device blocks held by arrays or transfers
  std::uint64_t cached = 0;               // bytes of device blocks kept for reuse
  std::uint64_t peak = 0;                 // highest in_use since the runtime started or reset_peak
  std::uint64_t backend_allocations = 0;  // memory_allocate calls for device memory
  std::uint64_t backend_frees = 0;        // memory_free calls for device memory
  std::uint64_t pinned_in_use = 0;
  std::uint64_t pinned_cached = 0;
  std::uint64_t pinned_backend_allocations = 0;
  // The device's memory as its backend reports it at the time of the call,
  // whoever holds it (other processes too); cached blocks count as used.
  // cpu: MemTotal and MemAvailable of /proc/meminfo; cuda: cuMemGetInfo.
  std::uint64_t memory_total = 0;
  // Empty when the backend cannot tell: opencl (no portable query), cuda
  // before the device is first used in this process (asking would create a
  // context).
  std::optional<std::uint64_t> memory_free;
};
// Throws what Runtime::resolve throws for a device that does not exist, or
// the backend's error from device_info.
BACKPLANE_API MemoryStats memory_stats(Runtime& runtime, const Device& device);

// Sets the device's peak (device and pinned) to what is in use now, so that
// the next memory_stats reports the peak of what ran since: one phase of a
// program (a warm-up, an evaluation) at a time.
BACKPLANE_API void reset_peak(Runtime& runtime, const Device& device);

// Returns every cached (unused) block of `device`, device and pinned, to the
// backend. Blocks in use are untouched.
BACKPLANE_API void empty_cache(Runtime& runtime, const Device& device);

}  // namespace backplane

#endif  // BACKPLANE_ARRAY_HPP
