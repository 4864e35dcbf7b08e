#include "batches/gather_pool.hpp"

#include "util/thread_name.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <system_error>
#include <utility>

namespace backplane::detail {

unsigned gather_thread_count(unsigned asked) noexcept {
  return asked != 0 ? asked : std::clamp(std::thread::hardware_concurrency(), 4U, 8U);
}

void GatherPool::start() {
  if (started_) return;
  try {
    for (unsigned index = 1; index < threads_wanted_; ++index) threads_.emplace_back([this] { worker(); });
  } catch (const std::system_error& error) {
    // Stop what started, so that a later start() begins afresh.
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    work_ready_.notify_all();
    const std::size_t refused = threads_.size() + 1;
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
    stopping_ = false;
    throw Error(ErrorCode::kUnavailable, fmt::format("BatchStream: cannot start gather thread {} of {}: {}", refused,
                                                     threads_wanted_, error.what()));
  }
  started_ = true;
}

GatherPool::~GatherPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void GatherPool::drain(std::unique_lock<std::mutex>& lock) {
  while (next_ < count_) {
    const std::size_t begin = next_;
    const std::size_t end = std::min(count_, begin + piece_);
    next_ = end;
    ++running_;
    const auto* work = work_;
    lock.unlock();
    std::exception_ptr failure;
    try {
      (*work)(begin, end);
    } catch (...) {
      failure = std::current_exception();  // rethrown by run() on the caller's thread
    }
    lock.lock();
    if (failure && !failure_) failure_ = failure;
    if (--running_ == 0 && next_ >= count_) work_done_.notify_all();
  }
}

void GatherPool::worker() {
  name_this_thread("batch stream gather", "bp-gather");
  std::unique_lock lock(mutex_);
  std::uint64_t seen = 0;
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || round_ != seen; });
    if (stopping_) return;
    seen = round_;
    drain(lock);
  }
}

void GatherPool::run(std::size_t count, const std::function<void(std::size_t, std::size_t)>& work) {
  if (count == 0) return;
  start();
  std::unique_lock lock(mutex_);
  work_ = &work;
  count_ = count;
  next_ = 0;
  failure_ = nullptr;
  const std::size_t workers = threads_.size() + 1;
  piece_ = (count + workers - 1) / workers;
  ++round_;
  if (!threads_.empty() && count > piece_) work_ready_.notify_all();
  drain(lock);
  work_done_.wait(lock, [&] { return running_ == 0 && next_ >= count_; });
  work_ = nullptr;
  count_ = 0;
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

}  // namespace backplane::detail
