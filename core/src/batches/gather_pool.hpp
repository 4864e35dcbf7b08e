// A few threads that split one gather between them: with cold pages each
// thread waits on its own page fault, so the disk sees several reads at once.
// A batch stream has one, which also scans its sources for documents.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace backplane::detail {

// The threads a pool gets for `asked` (BatchStreamOptions::threads): 0 is
// chosen from the machine, at least 4 (cold pages are read concurrently, one
// fault per thread at a time) and at most 8.
unsigned gather_thread_count(unsigned asked) noexcept;

class GatherPool {
 public:
  // `threads` workers in all, counting the caller of run(): threads - 1 are
  // started by start() or the first run(), none here (so a stream can make
  // its pool before its options are checked, and start it after).
  explicit GatherPool(unsigned threads) noexcept : threads_wanted_(threads) {}
  ~GatherPool();
  GatherPool(const GatherPool&) = delete;
  GatherPool& operator=(const GatherPool&) = delete;

  // Calls work(begin, end) over [0, count) in contiguous pieces, on the
  // caller's thread and the workers, and returns when all are done. Rethrows
  // the first exception a piece threw. One run() at a time.
  void run(std::size_t count, const std::function<void(std::size_t, std::size_t)>& work);

  // Starts the threads if they are not running yet. Throws
  // Error(kUnavailable) naming the thread the system refused (the ones
  // started before it are stopped). From the thread that calls run(), never
  // during one.
  void start();

 private:
  void worker();
  // Takes and runs pieces until none is left; returns with the lock held.
  void drain(std::unique_lock<std::mutex>& lock);

  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(std::size_t, std::size_t)>* work_ = nullptr;
  std::size_t count_ = 0;
  std::size_t piece_ = 1;
  std::size_t next_ = 0;     // first index not yet taken
  std::size_t running_ = 0;  // pieces taken and not finished
  std::uint64_t round_ = 0;  // run() calls so far, to wake workers once each
  std::exception_ptr failure_;
  bool stopping_ = false;
  const unsigned threads_wanted_;
  bool started_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace backplane::detail
