#include "util/fork.hpp"

#include <pthread.h>
#include <atomic>
#include <thread>

namespace backplane::detail {

// Every live ForkSafeMutex, in an intrusive list (registering allocates
// nothing, so it cannot fail). The registry's own mutex is held from prepare
// to parent/child, so no mutex joins or leaves the list while fork() holds
// them all.
struct ForkRegistry {
  std::mutex mutex;
  ForkSafeMutex* head = nullptr;
  std::atomic<std::uint64_t> generation{0};

  static ForkRegistry& instance() {
    // Leaked on purpose: a mutex may outlive static destruction (a detached
    // thread, a plugin's static), and the handlers stay registered until exit.
    static ForkRegistry* registry = [] {
      auto* made = new ForkRegistry;
      pthread_atfork(&prepare, &parent, &child);
      return made;
    }();
    return *registry;
  }

  // Takes every registered mutex. A holder may be waiting for nothing but its
  // own short critical section, yet two holders' sections are unordered, so
  // take them all or none and retry rather than risk a lock-order deadlock.
  static void prepare() {
    ForkRegistry& registry = instance();
    registry.mutex.lock();
    for (;;) {
      ForkSafeMutex* failed = nullptr;
      for (ForkSafeMutex* each = registry.head; each != nullptr; each = each->next_) {
        if (!each->mutex_.try_lock()) {
          failed = each;
          break;
        }
      }
      if (failed == nullptr) return;
      for (ForkSafeMutex* each = registry.head; each != failed; each = each->next_) each->mutex_.unlock();
      std::this_thread::yield();
    }
  }

  static void release_all() {
    ForkRegistry& registry = instance();
    for (ForkSafeMutex* each = registry.head; each != nullptr; each = each->next_) each->mutex_.unlock();
    registry.mutex.unlock();
  }

  static void parent() { release_all(); }

  static void child() {
    instance().generation.fetch_add(1, std::memory_order_acq_rel);
    release_all();
  }
};

std::uint64_t fork_generation() noexcept { return ForkRegistry::instance().generation.load(std::memory_order_acquire); }

ForkSafeMutex::ForkSafeMutex() {
  ForkRegistry& registry = ForkRegistry::instance();
  const std::lock_guard lock(registry.mutex);
  next_ = registry.head;
  if (next_ != nullptr) next_->previous_ = this;
  registry.head = this;
}

ForkSafeMutex::~ForkSafeMutex() {
  ForkRegistry& registry = ForkRegistry::instance();
  const std::lock_guard lock(registry.mutex);
  if (previous_ != nullptr)
    previous_->next_ = next_;
  else
    registry.head = next_;
  if (next_ != nullptr) next_->previous_ = previous_;
}

}  // namespace backplane::detail
