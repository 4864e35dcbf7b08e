#include "placement/executor.hpp"

#include "util/fork.hpp"

#include <memory>

namespace backplane::detail {

TransferExecutor::~TransferExecutor() {
  Pool* pool = pool_.load(std::memory_order_acquire);
  if (pool == nullptr) return;
  if (pool->generation != fork_generation()) return;  // the parent's pool: see Pool::inherited
  {
    std::lock_guard lock(pool->mutex);
    pool->stopping = true;
  }
  pool->wake.notify_all();
  bool on_own_thread = false;
  for (auto& thread : pool->threads) {
    // The last owner may let go on a transfer thread (a progress callback that
    // drops the runtime): that thread cannot join itself; it ends on return.
    if (thread.get_id() == std::this_thread::get_id()) {
      thread.detach();
      on_own_thread = true;
    } else {
      thread.join();
    }
  }
  // That thread still locks the pool's mutex once the job returns, then sees
  // `stopping` and ends: the pool must outlive it, so it is not freed.
  if (!on_own_thread) delete pool;
}

TransferExecutor::Pool& TransferExecutor::current_pool() {
  const std::uint64_t generation = fork_generation();
  Pool* pool = pool_.load(std::memory_order_acquire);
  if (pool != nullptr && pool->generation == generation) return *pool;

  auto fresh = std::make_unique<Pool>();
  fresh->generation = generation;
  fresh->inherited = pool;
  if (!pool_.compare_exchange_strong(pool, fresh.get(), std::memory_order_acq_rel)) {
    return *pool;  // another thread of this process installed one first
  }
  Pool& made = *fresh.release();
  // Started after publishing: a concurrent submit may queue a job before the
  // threads exist, and they pick it up when they start.
  std::lock_guard lock(made.mutex);
  made.threads.reserve(thread_count_);
  for (unsigned index = 0; index < thread_count_; ++index) made.threads.emplace_back([&made] { run(made); });
  return made;
}

void TransferExecutor::submit(std::function<void()> job) {
  Pool& pool = current_pool();
  {
    std::lock_guard lock(pool.mutex);
    pool.jobs.push_back(std::move(job));
  }
  pool.wake.notify_one();
}

void TransferExecutor::run(Pool& pool) {
  std::unique_lock lock(pool.mutex);
  for (;;) {
    pool.wake.wait(lock, [&pool] { return pool.stopping || !pool.jobs.empty(); });
    if (pool.jobs.empty()) return;  // stopping and drained
    std::function<void()> job = std::move(pool.jobs.front());
    pool.jobs.pop_front();
    lock.unlock();
    job();
    job = nullptr;  // release what the job held before sleeping
    lock.lock();
  }
}

}  // namespace backplane::detail
