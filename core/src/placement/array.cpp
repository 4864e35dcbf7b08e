// Array: queries, views, copy-out, readiness, and the factories.
#include "placement/array_state.hpp"
#include "util/bytes.hpp"

#include <fmt/format.h>

#include <cstring>

namespace backplane {
using detail::Backend;
using detail::describe_bytes;
namespace detail {

const ArrayState& ArrayAccess::state(const Array& array, const char* call) {
  if (!array.state_) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: the array is empty (default-constructed)", call));
  }
  return *array.state_;
}

Extent extent_of(DType dtype, const std::vector<std::int64_t>& shape, const char* call) {
  if (dtype_bits(dtype) == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} is not a dtype", call, static_cast<std::int32_t>(dtype)));
  }
  std::uint64_t elements = 1;
  for (std::size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis] < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: shape [{}] has a negative extent on axis {}", call, fmt::join(shape, ", "), axis));
    }
    if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(shape[axis]), &elements)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: shape [{}] has more elements than 64 bits count", call, fmt::join(shape, ", ")));
    }
  }
  const auto bytes = dtype_storage_bytes(dtype, elements);
  if (!bytes) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: shape [{}] of {} overflows 64-bit byte sizes", call,
                                                         fmt::join(shape, ", "), dtype_name(dtype)));
  }
  return {elements, *bytes};
}

Array make_array(std::shared_ptr<const ArrayStorage> storage, DType dtype, std::vector<std::int64_t> shape,
                 const Extent& extent) {
  auto state = std::make_shared<ArrayState>();
  state->storage = std::move(storage);
  state->dtype = dtype;
  state->shape = std::move(shape);
  state->nbytes = extent.bytes;
  state->elements = extent.elements;
  return ArrayAccess::make(std::move(state));
}

Array make_result(Placement& placement, std::shared_ptr<LiveDevice> device, std::shared_ptr<Block> block,
                  std::shared_ptr<Completion> arrival, DType dtype, std::vector<std::int64_t> shape,
                  const Extent& extent) {
  auto storage = std::make_shared<ArrayStorage>();
  storage->native = block->address();
  if (device->host_addressable()) storage->host = block->address();
  storage->buffer = block->buffer();
  storage->block = std::move(block);
  storage->arrival = std::move(arrival);
  storage->device = std::move(device);
  storage->placement = placement.weak_from_this();
  return make_array(std::move(storage), dtype, std::move(shape), extent);
}

void wait_for(const ArrayStorage& storage) {
  if (storage.arrival) storage.arrival->wait();
}

}  // namespace detail

using detail::ArrayAccess;
using detail::ArrayState;
using detail::ArrayStorage;

const ArrayState& Array::state() const { return ArrayAccess::state(*this, "Array"); }

DType Array::dtype() const { return state().dtype; }
const std::vector<std::int64_t>& Array::shape() const { return state().shape; }
std::uint64_t Array::element_count() const { return state().elements; }
std::uint64_t Array::nbytes() const { return state().nbytes; }
std::uint64_t Array::byte_offset() const { return state().offset; }
const Device& Array::device() const { return state().storage->device->device(); }

const void* Array::host_data() const {
  const ArrayState& array = state();
  return array.storage->host == nullptr ? nullptr : array.storage->host + array.offset;
}

void* Array::native_address() const {
  const ArrayState& array = state();
  return array.storage->native == nullptr ? nullptr : static_cast<std::byte*>(array.storage->native) + array.offset;
}

std::int32_t Array::dlpack_device_type() const { return state().storage->device->backend().dlpack_device_type(); }

bool Array::shares_buffer_with(const Array& other) const {
  return state_ != nullptr && other.state_ != nullptr && state_->storage == other.state_->storage;
}

Array Array::slice(std::int64_t begin, std::int64_t end) const {
  const ArrayState& array = state();
  if (array.shape.empty()) throw Error(ErrorCode::kInvalidArgument, "Array::slice: a scalar (rank 0) has no axis 0");
  const std::int64_t rows = array.shape[0];
  if (begin < 0 || end < begin || end > rows) {
    throw Error(ErrorCode::kOutOfRange,
                fmt::format("Array::slice({}, {}): rows must satisfy 0 <= begin <= end <= {}", begin, end, rows));
  }
  const std::uint64_t row_elements = rows == 0 ? 0 : array.elements / static_cast<std::uint64_t>(rows);
  const auto bits = static_cast<std::uint64_t>(dtype_bits(array.dtype));
  // Fits: begin * row_elements <= elements, whose bit count fit at creation.
  const std::uint64_t begin_bits = static_cast<std::uint64_t>(begin) * row_elements * bits;
  const std::uint64_t end_bits = static_cast<std::uint64_t>(end) * row_elements * bits;
  if (begin_bits % 8 != 0 || (end != rows && end_bits % 8 != 0)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Array::slice({}, {}): rows of {} {} elements do not start or end on a whole byte", begin,
                            end, row_elements, dtype_name(array.dtype)));
  }
  auto view = std::make_shared<ArrayState>(array);
  view->shape[0] = end - begin;
  view->offset = array.offset + begin_bits / 8;
  view->elements = static_cast<std::uint64_t>(end - begin) * row_elements;
  view->nbytes = *dtype_storage_bytes(array.dtype, view->elements);
  return ArrayAccess::make(std::move(view));
}

void Array::check_element_size(std::size_t size) const {
  const ArrayState& array = state();
  if (static_cast<std::size_t>(dtype_bits(array.dtype)) != size * 8) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Array::to_vector: an element of {} is {} bits, the requested type has {} bytes",
                            dtype_name(array.dtype), dtype_bits(array.dtype), size));
  }
}

void Array::copy_to_host(void* destination, std::uint64_t size) const {
  const ArrayState& array = state();
  if (size < array.nbytes || (destination == nullptr && array.nbytes != 0)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Array::copy_to_host: the destination holds {} but the array on {} has {}",
                            destination == nullptr ? "nothing (NULL)" : describe_bytes(size),
                            array.storage->device->selector(), describe_bytes(array.nbytes)));
  }
  const ArrayStorage& storage = *array.storage;
  detail::wait_for(storage);
  if (array.nbytes == 0) return;
  if (storage.host != nullptr) {
    std::memcpy(destination, storage.host + array.offset, array.nbytes);
  } else {
    storage.device->copy_to_host(storage.buffer, array.offset, destination, array.nbytes);
  }
}

void Array::block_until_ready() const { detail::wait_for(*state().storage); }

bool Array::is_ready() const {
  const ArrayStorage& storage = *state().storage;
  return !storage.arrival || storage.arrival->ready();
}

namespace {

// Fresh storage on `device`, tied to the runtime's placement.
std::shared_ptr<detail::ArrayStorage> storage_on(Runtime& runtime, const Device& device) {
  const auto placement = detail::placement_of(runtime);
  auto storage = std::make_shared<detail::ArrayStorage>();
  storage->device = placement->device(device);
  storage->placement = placement;
  return storage;
}

}  // namespace

Array Array::from_host(Runtime& runtime, const Device& device, DType dtype, std::vector<std::int64_t> shape,
                       const void* data, std::uint64_t size) {
  const detail::Extent extent = detail::extent_of(dtype, shape, "Array::from_host");
  if (size != extent.bytes || (data == nullptr && size != 0)) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("Array::from_host: {} bytes{} given for shape [{}] of {}, which needs {} bytes", size,
                    data == nullptr ? " at NULL" : "", fmt::join(shape, ", "), dtype_name(dtype), extent.bytes));
  }
  auto storage = storage_on(runtime, device);
  detail::LiveDevice& live = *storage->device;
  storage->block = live.memory().allocate(extent.bytes);
  storage->buffer = storage->block->buffer();
  storage->native = storage->block->address();
  if (live.host_addressable()) {
    storage->host = storage->block->address();
    if (size != 0) std::memcpy(storage->block->address(), data, size);
  } else if (size != 0) {
    // Synchronous: the caller may reuse `data` as soon as this returns.
    live.copy_to_device(storage->buffer, 0, data, size);
  }
  return detail::make_array(std::move(storage), dtype, std::move(shape), extent);
}

Array Array::wrap_host(Runtime& runtime, const Device& device, DType dtype, std::vector<std::int64_t> shape,
                       const void* data, std::shared_ptr<const void> owner) {
  const detail::Extent extent = detail::extent_of(dtype, shape, "Array::wrap_host");
  if (data == nullptr && extent.bytes != 0) {
    throw Error(ErrorCode::kInvalidArgument, "Array::wrap_host: data is NULL for a non-empty array");
  }
  auto storage = storage_on(runtime, device);
  if (!storage->device->host_addressable()) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("Array::wrap_host: {} is not host-addressable, so host memory cannot be used there "
                            "without a copy (wrap it on a cpu device, then device_put it)",
                            storage->device->selector()));
  }
  storage->host = static_cast<const std::byte*>(data);
  // The export path (DLPack) hands this out as the tensor's data pointer.
  storage->native = const_cast<void*>(data);
  storage->owner = std::move(owner);
  return detail::make_array(std::move(storage), dtype, std::move(shape), extent);
}

namespace {

// A plugin's handle over memory someone else owns: released before the owner,
// so the plugin has finished with the memory when the owner frees it.
class WrappedMemory {
 public:
  WrappedMemory(std::shared_ptr<Backend> backend, BP_Buffer* buffer, std::shared_ptr<const void> owner)
      : backend_(std::move(backend)), buffer_(buffer), owner_(std::move(owner)) {}
  ~WrappedMemory() {
    backend_->free(buffer_);  // waits for queued work on the buffer; logs a failure
    owner_.reset();
  }
  WrappedMemory(const WrappedMemory&) = delete;
  WrappedMemory& operator=(const WrappedMemory&) = delete;

 private:
  std::shared_ptr<Backend> backend_;
  BP_Buffer* buffer_;
  std::shared_ptr<const void> owner_;
};

}  // namespace

Array Array::wrap_device(Runtime& runtime, const Device& device, DType dtype, std::vector<std::int64_t> shape,
                         void* address, std::shared_ptr<const void> owner) {
  const detail::Extent extent = detail::extent_of(dtype, shape, "Array::wrap_device");
  if (address == nullptr && extent.bytes != 0) {
    throw Error(ErrorCode::kInvalidArgument, "Array::wrap_device: address is NULL for a non-empty array");
  }
  auto storage = storage_on(runtime, device);
  detail::LiveDevice& live = *storage->device;
  BP_Buffer* buffer = live.wrap(address, extent.bytes);
  try {
    storage->owner = std::make_shared<WrappedMemory>(live.shared_backend(), buffer, std::move(owner));
  } catch (...) {  // bad_alloc: nothing holds the handle yet
    live.backend().free(buffer);
    throw;
  }
  storage->buffer = buffer;
  storage->native = address;
  if (live.host_addressable()) storage->host = static_cast<const std::byte*>(address);
  return detail::make_array(std::move(storage), dtype, std::move(shape), extent);
}

}  // namespace backplane
