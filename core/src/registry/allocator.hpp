// The per-device caching allocator (one for device memory, one for pinned
// staging memory where the backend has it).
//
// Freed blocks are not returned to the backend: they wait in a cache keyed by
// size and are handed out again for any request they fit without wasting more
// than a quarter of the block, so a training loop that places same-shaped
// batches calls the backend's allocator only during its first steps. Sizes are
// rounded up to kGranularity so that near-equal requests share blocks.
// On an out-of-memory answer the cache is released and the allocation retried
// once; a second failure is an Error naming the size and the device's
// free/total memory.
#pragma once

#include "registry/backend.hpp"
#include "util/fork.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace backplane::detail {

class CachingAllocator;

// One block in use. Destroying the last reference returns it to the cache; the
// block keeps its allocator (and through it the backend) alive.
class Block {
 public:
  Block(std::shared_ptr<CachingAllocator> allocator, BP_Buffer* buffer, void* address, std::uint64_t size)
      : allocator_(std::move(allocator)), buffer_(buffer), address_(address), size_(size) {}
  ~Block();
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  BP_Buffer* buffer() const { return buffer_; }
  // The plugin's native address (host pointer for CPU and pinned memory).
  std::byte* address() const { return static_cast<std::byte*>(address_); }
  std::uint64_t size() const { return size_; }  // at least the size asked for

 private:
  std::shared_ptr<CachingAllocator> allocator_;
  BP_Buffer* buffer_;
  void* address_;
  std::uint64_t size_;
};

class CachingAllocator : public std::enable_shared_from_this<CachingAllocator> {
 public:
  static constexpr std::uint64_t kGranularity = 512;

  struct Counters {
    std::uint64_t in_use = 0;
    std::uint64_t cached = 0;
    std::uint64_t peak = 0;
    std::uint64_t backend_allocations = 0;
    std::uint64_t backend_frees = 0;
  };

  // `selector` ("sim:0") names the device in messages.
  CachingAllocator(std::shared_ptr<Backend> backend, int ordinal, BP_MemoryKind kind, std::string selector)
      : backend_(std::move(backend)), ordinal_(ordinal), kind_(kind), selector_(std::move(selector)) {}
  // Frees the cached blocks (blocks in use keep the allocator alive).
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `size` bytes. Throws Error(kOutOfMemory) as described
  // above, or the backend's error.
  std::shared_ptr<Block> allocate(std::uint64_t size);
  // Frees every cached block; returns the bytes released.
  std::uint64_t empty_cache();
  // Peak becomes what is in use now.
  void reset_peak();
  Counters counters() const;

 private:
  friend class Block;
  struct Cached {
    BP_Buffer* buffer;
    void* address;
  };
  void give_back(BP_Buffer* buffer, void* address, std::uint64_t size) noexcept;
  // Records the counters as a trace counter sample ("device memory sim:0").
  void trace_counters(const Counters& now) const noexcept;
  [[noreturn]] void throw_out_of_memory(std::uint64_t size, std::uint64_t released, const Error& cause) const;

  const std::shared_ptr<Backend> backend_;
  const int ordinal_;
  const BP_MemoryKind kind_;
  const std::string selector_;

  // Transfer threads take it for a moment around each block; fork() takes it
  // too, so a child never finds it locked. Never held across a plugin call.
  mutable ForkSafeMutex mutex_;
  // Free blocks by size. Emptied lists stay in the map so that the steady
  // state (same sizes over and over) allocates no map nodes either.
  std::map<std::uint64_t, std::vector<Cached>> cache_;
  Counters counters_;
};

}  // namespace backplane::detail
