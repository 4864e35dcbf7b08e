#include "placement/executor.hpp"

namespace backplane {

TransferExecutor::~TransferExecutor() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& thread : threads_) {
    // The last owner may let go on a transfer thread (a progress callback that
    // drops the runtime): that thread cannot join itself; it ends on return.
    if (thread.get_id() == std::this_thread::get_id()) {
      thread.detach();
    } else {
      thread.join();
    }
  }
}

void TransferExecutor::submit(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    if (threads_.empty()) {
      threads_.reserve(thread_count_);
      for (unsigned index = 0; index < thread_count_; ++index) threads_.emplace_back([this] { run(); });
    }
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void TransferExecutor::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping and drained
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    job = nullptr;  // release what the job held before sleeping
    lock.lock();
  }
}

}  // namespace backplane
