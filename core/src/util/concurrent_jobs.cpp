#include "util/concurrent_jobs.hpp"

#include "util/log.hpp"
#include "util/thread_name.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace backplane::detail {

void run_concurrently(std::size_t count, std::size_t max_threads, const char* thread_name,
                      const std::function<void(std::size_t index)>& job) {
  std::atomic<std::size_t> next{0};
  // One slot per job, each written by the one thread that ran it; read after
  // the joins.
  std::vector<std::exception_ptr> errors(count);
  auto work = [&] {
    for (std::size_t index = next.fetch_add(1); index < count; index = next.fetch_add(1)) {
      try {
        job(index);
      } catch (...) {  // handed to the caller below, after the other jobs finish
        errors[index] = std::current_exception();
      }
    }
  };

  const std::size_t threads_wanted = std::min(count, std::max<std::size_t>(max_threads, 1));
  std::vector<std::thread> threads;
  threads.reserve(threads_wanted);
  while (threads.size() + 1 < threads_wanted) {
    try {
      threads.emplace_back([&] {
        name_this_thread(thread_name);
        work();
      });
    } catch (const std::system_error& error) {
      log(LogLevel::kWarn, "cannot start a {} thread ({}); running {} jobs on {} thread(s)", thread_name, error.what(),
          count, threads.size() + 1);
      break;
    }
  }
  work();
  for (auto& thread : threads) thread.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace backplane::detail
