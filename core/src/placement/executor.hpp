// The runtime's transfer threads: run the parts of device_put and take_windows
// that must not block the caller (chunked staging pipelines, copies on
// backends without asynchronous copies, waits on a source still arriving).
//
// Jobs run in submission order across a few threads. Because a job only ever
// waits on work submitted before it (its source array existed when it was
// submitted), FIFO dispatch cannot deadlock however many jobs wait.
//
// Fork: a child inherits the executor but none of its threads. The first
// submission in the child starts a fresh pool of threads; the parent's pool
// (its queue, its possibly locked mutex, its thread handles) is left alone and
// never freed in the child. The jobs it held are not run there: their arrays
// report that they were in flight in the parent (see Completion).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace backplane::detail {

class TransferExecutor {
 public:
  explicit TransferExecutor(unsigned thread_count) : thread_count_(thread_count == 0 ? 1 : thread_count) {}
  // Runs every queued job, then joins the threads (those of this process).
  ~TransferExecutor();
  TransferExecutor(const TransferExecutor&) = delete;
  TransferExecutor& operator=(const TransferExecutor&) = delete;

  // `job` must not throw (it records its own failure). Threads start on the
  // first submission in each process, so a runtime that never transfers has
  // none. Throws std::system_error when no thread can be started.
  void submit(std::function<void()> job);

 private:
  // One process's threads and their queue.
  struct Pool {
    std::uint64_t generation = 0;  // fork_generation() of the process that made it
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::function<void()>> jobs;
    bool stopping = false;
    std::vector<std::thread> threads;
    // The parent's pool, when this one replaced it after fork(). Never freed
    // (its mutex may be locked by a thread that does not exist here, and
    // destroying its joinable thread handles would terminate the process);
    // kept reachable so leak checkers see a deliberate leak.
    Pool* inherited = nullptr;
  };

  // This process's pool, made (with its threads) if there is none yet.
  Pool& current_pool();
  static void run(Pool& pool);

  const unsigned thread_count_;
  std::atomic<Pool*> pool_{nullptr};
};

}  // namespace backplane::detail
