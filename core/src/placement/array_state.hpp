// What an Array handle points to. Internal to placement and the streamed
// safetensors load; the C API uses the public Array API (wrap_host,
// host_data, native_address) instead.
#pragma once

#include "placement/completion.hpp"
#include "placement/placement.hpp"
#include "registry/allocator.hpp"
#include "registry/device.hpp"

#include <backplane/array.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace backplane::detail {

// One buffer, shared by an array and all its views. Immutable once made; the
// completion says when its bytes are valid. Three kinds: a block of the
// device's allocator; wrapped host memory (no plugin buffer); wrapped device
// memory (a plugin buffer from memory_wrap, released by `owner`).
struct ArrayStorage {
  std::shared_ptr<LiveDevice> device;
  // The runtime's placement, for device_put without a Runtime; expired once
  // the runtime is gone.
  std::weak_ptr<Placement> placement;
  std::shared_ptr<Block> block;         // null for wrapped memory
  BP_Buffer* buffer = nullptr;          // the plugin's handle; null for wrapped host memory
  const std::byte* host = nullptr;      // set when the bytes are host-addressable
  void* native = nullptr;               // the plugin's address (or the wrapped pointer)
  std::shared_ptr<const void> owner;    // keeps wrapped memory (and its handle) alive
  std::shared_ptr<Completion> arrival;  // null: valid from the start
};

struct ArrayState {
  std::shared_ptr<const ArrayStorage> storage;
  DType dtype = DType::kU8;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  // bytes into the storage
  std::uint64_t nbytes = 0;
  std::uint64_t elements = 0;
};

struct ArrayAccess {
  static Array make(std::shared_ptr<const ArrayState> state) { return Array(std::move(state)); }
  // Throws kInvalidArgument for an empty Array, naming `call`.
  static const ArrayState& state(const Array& array, const char* call);
};

// Element count and byte size of `shape`; throws kInvalidArgument naming
// `call` for a negative extent, a non-DType or overflow.
struct Extent {
  std::uint64_t elements;
  std::uint64_t bytes;
};
Extent extent_of(DType dtype, const std::vector<std::int64_t>& shape, const char* call);

// A fresh array over `storage` covering it from byte 0.
Array make_array(std::shared_ptr<const ArrayStorage> storage, DType dtype, std::vector<std::int64_t> shape,
                 const Extent& extent);

// The array that a completed or pending copy fills: `block` on `device`.
Array make_result(Placement& placement, std::shared_ptr<LiveDevice> device, std::shared_ptr<Block> block,
                  std::shared_ptr<Completion> arrival, DType dtype, std::vector<std::int64_t> shape,
                  const Extent& extent);

// Waits for the storage's data; throws its transfer error.
void wait_for(const ArrayStorage& storage);

}  // namespace backplane::detail
