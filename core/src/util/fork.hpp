// What the core needs to survive fork(): a generation number that changes in
// every child, and mutexes that fork() never leaves locked in the child.
//
// After fork() only the forking thread exists in the child. Two kinds of state
// would then be broken: work that a parent thread was doing (it never ends:
// code stamps such state with fork_generation() and treats an older stamp as
// "belonged to the parent"), and locks a parent thread held at that moment
// (they stay locked: ForkSafeMutex is taken by fork() itself, see below).
#pragma once

#include <cstdint>
#include <mutex>

namespace backplane::detail {

// 0 in a process that never forked since the core was loaded; incremented in
// each child by a pthread_atfork handler. Installs the handlers on first call,
// so call it before making any state that stamps itself. Lock-free.
std::uint64_t fork_generation() noexcept;

// A std::mutex that fork() takes before forking and releases afterwards in the
// parent and the child, so the child finds it unlocked and the data it guards
// consistent. Only for short critical sections that never call a plugin nor
// lock another ForkSafeMutex: fork() waits for every holder to leave.
class ForkSafeMutex {
 public:
  ForkSafeMutex();
  ~ForkSafeMutex();
  ForkSafeMutex(const ForkSafeMutex&) = delete;
  ForkSafeMutex& operator=(const ForkSafeMutex&) = delete;

  void lock() { mutex_.lock(); }
  bool try_lock() { return mutex_.try_lock(); }
  void unlock() { mutex_.unlock(); }

 private:
  friend struct ForkRegistry;
  std::mutex mutex_;
  ForkSafeMutex* previous_ = nullptr;  // the registry's intrusive list
  ForkSafeMutex* next_ = nullptr;
};

}  // namespace backplane::detail
