// The runtime's transfer threads: run the parts of device_put and take_windows
// that must not block the caller (chunked staging pipelines, copies on
// backends without asynchronous copies, waits on a source still arriving).
//
// Jobs run in submission order across a few threads. Because a job only ever
// waits on work submitted before it (its source array existed when it was
// submitted), FIFO dispatch cannot deadlock however many jobs wait.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace backplane {

class TransferExecutor {
 public:
  explicit TransferExecutor(unsigned thread_count) : thread_count_(thread_count == 0 ? 1 : thread_count) {}
  // Runs every queued job, then joins the threads.
  ~TransferExecutor();
  TransferExecutor(const TransferExecutor&) = delete;
  TransferExecutor& operator=(const TransferExecutor&) = delete;

  // `job` must not throw (it records its own failure). Threads start on the
  // first submission, so a runtime that never transfers has none.
  void submit(std::function<void()> job);

 private:
  void run();

  const unsigned thread_count_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace backplane
