#include "placement/executor.hpp"

namespace backplane {

TransferExecutor::~TransferExecutor() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& thread : threads_) thread.join();
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
