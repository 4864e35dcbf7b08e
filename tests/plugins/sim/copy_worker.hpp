// The simulated accelerator's copy engine: one thread per backend running
// queued jobs in submission order.
#ifndef BACKPLANE_TESTS_PLUGINS_SIM_COPY_WORKER_HPP
#define BACKPLANE_TESTS_PLUGINS_SIM_COPY_WORKER_HPP

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace backplane::sim {

// One thread running queued jobs in submission order; started by the first
// submit, drained and joined by stop().
class CopyWorker {
 public:
  void submit(std::function<void()> job) {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    jobs_.push_back(std::move(job));
    ++unfinished_;
    wake_.notify_one();
  }

  // Returns once every job submitted so far has run. Not from a job.
  void drain() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return unfinished_ == 0; });
  }

  void stop() noexcept {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and everything queued has run
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();  // jobs catch their own failures
      lock.lock();
      if (--unfinished_ == 0) idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> jobs_;
  std::size_t unfinished_ = 0;  // queued or running
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace backplane::sim

#endif  // BACKPLANE_TESTS_PLUGINS_SIM_COPY_WORKER_HPP
