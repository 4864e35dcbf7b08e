// Handle tables: turn the ABI's opaque handles back into objects, and tell a
// live handle from a NULL, foreign, stale or made-up one without a crash.
//
// A handle is not a pointer. It packs (table tag, slot generation, slot
// index) into the pointer-sized value the ABI carries, so looking one up
// never dereferences anything the caller gave us: it indexes our own slot
// array and compares generations. Lookups take no lock (two acquire loads);
// inserting and removing take a mutex, since they allocate anyway.
//
// The first segment of slots lives inside the table, so a lookup of one of
// the first 4096 objects loads no segment pointer: one dependent load fewer
// on every call (bench/bench_abi_call), for 64 KiB more per table.
//
// Limits, documented rather than hidden: a table holds at most 2^24 live
// objects; a slot's generation wraps after 2^24 reuses, so a handle stale by
// exactly that many reuses of one slot would read as live; two tables share a
// tag only after 2^16 tables have been made in one process.
#ifndef BACKPLANE_PLUGIN_SDK_HANDLES_HPP
#define BACKPLANE_PLUGIN_SDK_HANDLES_HPP

#include <pthread.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

namespace backplane::plugin_sdk {

namespace detail {

// One lock for every table of a plugin, so that fork() can take it (see
// install_fork_guard): a child must not inherit it held by a thread that
// stayed behind in the parent.
inline std::mutex& table_mutex() {
  static std::mutex mutex;
  return mutex;
}

inline void install_fork_guard() {
  static const bool installed = [] {
    auto lock = [] { table_mutex().lock(); };
    auto unlock = [] { table_mutex().unlock(); };
    return pthread_atfork(lock, unlock, unlock) == 0;
  }();
  (void)installed;
}

inline std::uint64_t next_table_tag() {
  static std::atomic<std::uint64_t> counter{0};
  return (counter.fetch_add(1, std::memory_order_relaxed) % 0xFFFF) + 1;  // never 0
}

}  // namespace detail

// Owns objects of type T and hands out opaque handles of type Handle
// (BP_Buffer, BP_Event, BP_Backend).
template <class T, class Handle>
class HandleTable {
 public:
  static constexpr std::uint64_t kIndexBits = 24;
  static constexpr std::uint64_t kGenerationBits = 24;
  static constexpr std::uint64_t kMaxObjects = (std::uint64_t{1} << kIndexBits) - 1;

  // What the destructor does with objects still in the table.
  enum class AtDestruction {
    kDeleteObjects,
    // Leave them, and the slots that point at them, untouched: for a table
    // in static storage whose objects' destructors would call drivers that
    // may already be gone at exit. They stay reachable from the table, so
    // leak checkers do not report them; an empty table is freed as usual.
    kLeaveLiveObjects,
  };

  explicit HandleTable(AtDestruction at_destruction = AtDestruction::kDeleteObjects)
      : tag_(detail::next_table_tag()), at_destruction_(at_destruction) {
    detail::install_fork_guard();
  }
  ~HandleTable() {
    if (at_destruction_ == AtDestruction::kLeaveLiveObjects && used_ != free_.size()) return;
    for (Slot& slot : first_.slots) delete slot.object.load(std::memory_order_relaxed);
    for (auto& segment : segments_) {
      Segment* slots = segment.load(std::memory_order_relaxed);
      if (slots == nullptr) continue;
      for (Slot& slot : slots->slots) delete slot.object.load(std::memory_order_relaxed);
      delete slots;
    }
  }
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  // Takes ownership and returns the object's handle; nullptr (and the object
  // back in `object`) when the table is full.
  Handle* insert(std::unique_ptr<T>& object) {
    const std::lock_guard lock(detail::table_mutex());
    std::uint64_t index = 0;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      if (used_ == kMaxObjects) return nullptr;
      index = used_++;
      if (index >= kSegmentSize) {
        std::atomic<Segment*>& segment = segments_[index / kSegmentSize];
        if (segment.load(std::memory_order_relaxed) == nullptr) segment.store(new Segment, std::memory_order_release);
      }
    }
    Slot& slot = slot_at(index);
    const std::uint64_t generation = (slot.state.load(std::memory_order_relaxed) >> 1) + 1;
    slot.object.store(object.release(), std::memory_order_relaxed);
    slot.state.store(generation << 1 | 1, std::memory_order_release);
    return encode(index, generation);
  }

  // The live object behind `handle`, or nullptr. Takes no lock.
  T* find(const Handle* handle) const noexcept {
    const Decoded decoded = decode(handle);
    if (!decoded.valid) return nullptr;
    const Segment* segment = decoded.index < kSegmentSize
                                 ? &first_
                                 : segments_[decoded.index / kSegmentSize].load(std::memory_order_acquire);
    if (segment == nullptr) return nullptr;
    const Slot& slot = segment->slots[decoded.index % kSegmentSize];
    const std::uint64_t state = slot.state.load(std::memory_order_acquire);
    if ((state & 1) == 0 || ((state >> 1) & kGenerationMask) != decoded.generation) return nullptr;
    return slot.object.load(std::memory_order_relaxed);
  }

  // Removes the object and hands it back; nullptr when `handle` is not live.
  std::unique_ptr<T> remove(const Handle* handle) {
    const std::lock_guard lock(detail::table_mutex());
    if (find(handle) == nullptr) return nullptr;
    const std::uint64_t index = decode(handle).index;
    Slot& slot = slot_at(index);
    std::unique_ptr<T> object(slot.object.exchange(nullptr, std::memory_order_relaxed));
    slot.state.store(slot.state.load(std::memory_order_relaxed) & ~std::uint64_t{1}, std::memory_order_release);
    free_.push_back(index);
    return object;
  }

  // Every live object, removed (for backend_destroy).
  std::vector<std::unique_ptr<T>> drain() {
    const std::lock_guard lock(detail::table_mutex());
    std::vector<std::unique_ptr<T>> objects;
    for (std::uint64_t index = 0; index < used_; ++index) {
      Slot& slot = slot_at(index);
      if ((slot.state.load(std::memory_order_relaxed) & 1) == 0) continue;
      objects.emplace_back(slot.object.exchange(nullptr, std::memory_order_relaxed));
      slot.state.store(slot.state.load(std::memory_order_relaxed) & ~std::uint64_t{1}, std::memory_order_release);
      free_.push_back(index);
    }
    return objects;
  }

 private:
  static constexpr std::uint64_t kSegmentSize = 4096;
  static constexpr std::uint64_t kGenerationMask = (std::uint64_t{1} << kGenerationBits) - 1;

  struct Slot {
    std::atomic<std::uint64_t> state{0};  // generation << 1 | live
    std::atomic<T*> object{nullptr};
  };
  struct Segment {
    std::array<Slot, kSegmentSize> slots;
  };
  struct Decoded {
    bool valid = false;
    std::uint64_t index = 0;
    std::uint64_t generation = 0;
  };

  Handle* encode(std::uint64_t index, std::uint64_t generation) const {
    const std::uint64_t value =
        tag_ << (kIndexBits + kGenerationBits) | (generation & kGenerationMask) << kIndexBits | (index + 1);
    return reinterpret_cast<Handle*>(static_cast<std::uintptr_t>(value));
  }

  Decoded decode(const Handle* handle) const noexcept {
    const auto value = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(handle));
    const std::uint64_t index_plus_one = value & kMaxObjects;
    if (value >> (kIndexBits + kGenerationBits) != tag_ || index_plus_one == 0) return {};
    const std::uint64_t index = index_plus_one - 1;
    if (index >= kSegmentCount * kSegmentSize) return {};
    return {true, index, (value >> kIndexBits) & kGenerationMask};
  }

  Slot& slot_at(std::uint64_t index) {
    Segment* segment = index < kSegmentSize ? &first_ : segments_[index / kSegmentSize].load(std::memory_order_relaxed);
    return segment->slots[index % kSegmentSize];
  }

  static constexpr std::uint64_t kSegmentCount = (kMaxObjects + kSegmentSize) / kSegmentSize;

  const std::uint64_t tag_;
  const AtDestruction at_destruction_;
  Segment first_;                                                // slots 0..kSegmentSize-1
  std::array<std::atomic<Segment*>, kSegmentCount> segments_{};  // [0] unused: first_ holds those
  std::uint64_t used_ = 0;                                       // slots ever used; guarded by table_mutex
  std::vector<std::uint64_t> free_;                              // guarded by table_mutex
};

}  // namespace backplane::plugin_sdk

#endif  // BACKPLANE_PLUGIN_SDK_HANDLES_HPP
