// Independent jobs run on a few threads at once, the calling thread among
// them: for work that mostly waits (loading and probing plugins waits on the
// disk, on driver initialisation, on probe helper processes), so that the
// whole takes about as long as its slowest job.
#pragma once

#include <cstddef>
#include <functional>

namespace backplane::detail {

// Calls job(0) ... job(count - 1), each exactly once, on at most
// `max_threads` threads (the caller's included; 0 counts as 1), and returns
// once every call has returned. Jobs are taken in index order. The extra
// threads are named `thread_name` (at most 15 characters, as the OS keeps
// them). When the OS refuses another thread, the threads already running take
// the remaining jobs, with a warning. An exception a job throws is rethrown
// here once every job is done: the one from the lowest index.
void run_concurrently(std::size_t count, std::size_t max_threads, const char* thread_name,
                      const std::function<void(std::size_t index)>& job);

}  // namespace backplane::detail
