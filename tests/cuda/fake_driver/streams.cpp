// The emulator's streams, events and copies. Each stream runs its operations
// in order on a worker thread of its own, so an asynchronous copy returns
// before its data moves and a missing wait shows up as wrong data. An
// operation that fails while running (BP_FAKE_CUDA_STICKY_AFTER, or memory
// freed under it) poisons its context as a GPU fault does: every later call
// on that context returns the error, and the operations still queued complete
// without doing their work, so no wait hangs.
#include "emulator.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <set>

namespace emulator {
namespace {

std::atomic<long> operations_run{0};

// Guarded by state_mutex().
std::set<Stream*>& live_streams() {
  static auto* streams = new std::set<Stream*>;
  return *streams;
}

struct Event {
  Context* context = nullptr;
  bool timing = true;
  std::mutex mutex;
  std::condition_variable completed_changed;
  std::uint64_t recorded = 0;   // how many records were issued
  std::uint64_t completed = 0;  // the latest record that ran
  std::chrono::steady_clock::time_point time;
};

// Guarded by state_mutex(). Shared: queued operations keep an event alive
// after cuEventDestroy, as the driver does.
std::map<Event*, std::shared_ptr<Event>>& live_events() {
  static auto* events = new std::map<Event*, std::shared_ptr<Event>>;
  return *events;
}

void run_stream(Stream* stream) {
  std::unique_lock lock(stream->mutex);
  for (;;) {
    stream->changed.wait(lock, [&] { return stream->stopping || !stream->queue.empty(); });
    if (stream->queue.empty()) return;  // stopping, and drained
    std::function<void()> operation = std::move(stream->queue.front());
    stream->queue.pop_front();
    stream->busy = true;
    lock.unlock();
    operation();
    lock.lock();
    stream->busy = false;
    stream->changed.notify_all();
  }
}

Stream* make_stream(Context* context) {
  auto* stream = new Stream;
  stream->context = context;
  stream->worker = std::thread(run_stream, stream);
  return stream;
}

void enqueue(Stream* stream, std::function<void()> operation) {
  std::lock_guard lock(stream->mutex);
  stream->queue.push_back(std::move(operation));
  stream->changed.notify_all();
}

void drain(Stream* stream) {
  std::unique_lock lock(stream->mutex);
  stream->changed.wait(lock, [&] { return stream->queue.empty() && !stream->busy; });
}

// The stream behind a handle: the legacy default stream of the current
// context for 0, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD (this emulator
// has one default stream per context).
CUresult resolve(CUstream handle, Stream** stream) {
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    Context* context = current_context();
    if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    std::lock_guard lock(state_mutex());
    if (context->legacy == nullptr) context->legacy = make_stream(context);
    *stream = context->legacy;
    return static_cast<CUresult>(context->sticky);
  }
  auto* candidate = reinterpret_cast<Stream*>(handle);
  std::lock_guard lock(state_mutex());
  if (live_streams().count(candidate) == 0) return CUDA_ERROR_INVALID_HANDLE;
  *stream = candidate;
  return static_cast<CUresult>(candidate->context->sticky);
}

CUresult event_of(CUevent handle, std::shared_ptr<Event>* event) {
  std::lock_guard lock(state_mutex());
  const auto found = live_events().find(reinterpret_cast<Event*>(handle));
  if (found == live_events().end()) return CUDA_ERROR_INVALID_HANDLE;
  *event = found->second;
  return CUDA_SUCCESS;
}

// The common part of every operation that does work on a stream: the delay,
// the operation count behind the sticky error, and skipping the work once
// the context is poisoned.
std::function<void()> work(Context* context, std::function<CUresult()> body) {
  return [context, body = std::move(body)] {
    const Config& settings = config();
    if (settings.delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(settings.delay_us));
    if (sticky_of(context) != CUDA_SUCCESS) return;
    const long number = ++operations_run;
    if (settings.sticky_after > 0 && number > settings.sticky_after) {
      poison(context, static_cast<CUresult>(settings.sticky_result));
      return;
    }
    const CUresult result = body();
    if (result != CUDA_SUCCESS) poison(context, result);
  };
}

bool usable(const Placement& placement) { return placement.valid; }

// Copies between any two ranges, as unified addressing allows; a range that
// is no longer valid when the copy runs (freed) is an illegal address.
CUresult copy_now(std::uintptr_t to, std::uintptr_t from, std::size_t size) {
  lock_memory_shared();
  const bool valid = usable(locate(to, size)) && usable(locate(from, size));
  if (valid) std::memmove(reinterpret_cast<void*>(to), reinterpret_cast<const void*>(from), size);
  unlock_memory_shared();
  return valid ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_ADDRESS;
}

// Checks both ranges when the copy is issued, as the real driver does.
CUresult check_copy(std::uintptr_t to, std::uintptr_t from, std::size_t size) {
  lock_memory_shared();
  const bool valid = usable(locate(to, size)) && usable(locate(from, size));
  unlock_memory_shared();
  return valid ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

}  // namespace
}  // namespace emulator

using namespace emulator;

CUresult cuStreamCreate(CUstream* handle, unsigned int flags) {
  if (CUresult entered = enter("cuStreamCreate"); entered != CUDA_SUCCESS) return entered;
  Context* context = current_context();
  if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult sticky = sticky_of(context); sticky != CUDA_SUCCESS) return sticky;
  if (handle == nullptr || (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Stream* stream = make_stream(context);
  std::lock_guard lock(state_mutex());
  live_streams().insert(stream);
  *handle = reinterpret_cast<CUstream>(stream);
  return CUDA_SUCCESS;
}

// Waits for the queued work, then ends the worker (the real driver returns
// at once and releases the stream later; the difference is not observable
// through the handle, which is invalid either way).
CUresult cuStreamDestroy(CUstream handle) {
  if (CUresult entered = enter("cuStreamDestroy"); entered != CUDA_SUCCESS) return entered;
  auto* stream = reinterpret_cast<Stream*>(handle);
  {
    std::lock_guard lock(state_mutex());
    if (live_streams().erase(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  }
  {
    std::lock_guard lock(stream->mutex);
    stream->stopping = true;
    stream->changed.notify_all();
  }
  stream->worker.join();
  delete stream;
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream handle) {
  if (CUresult entered = enter("cuStreamSynchronize"); entered != CUDA_SUCCESS) return entered;
  Stream* stream = nullptr;
  if (CUresult resolved = resolve(handle, &stream); resolved != CUDA_SUCCESS) return resolved;
  drain(stream);
  return sticky_of(stream->context);
}

CUresult cuStreamWaitEvent(CUstream handle, CUevent event_handle, unsigned int flags) {
  if (CUresult entered = enter("cuStreamWaitEvent"); entered != CUDA_SUCCESS) return entered;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Stream* stream = nullptr;
  if (CUresult resolved = resolve(handle, &stream); resolved != CUDA_SUCCESS) return resolved;
  std::shared_ptr<Event> event;
  if (CUresult found = event_of(event_handle, &event); found != CUDA_SUCCESS) return found;
  std::uint64_t target = 0;
  {
    std::lock_guard lock(event->mutex);
    target = event->recorded;  // the record issued before this call; later ones do not count
  }
  if (target == 0) return CUDA_SUCCESS;
  enqueue(stream, [event, target] {
    std::unique_lock lock(event->mutex);
    event->completed_changed.wait(lock, [&] { return event->completed >= target; });
  });
  return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent* handle, unsigned int flags) {
  if (CUresult entered = enter("cuEventCreate"); entered != CUDA_SUCCESS) return entered;
  Context* context = current_context();
  if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult sticky = sticky_of(context); sticky != CUDA_SUCCESS) return sticky;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto event = std::make_shared<Event>();
  event->context = context;
  event->timing = (flags & CU_EVENT_DISABLE_TIMING) == 0;
  std::lock_guard lock(state_mutex());
  *handle = reinterpret_cast<CUevent>(event.get());
  live_events().emplace(event.get(), std::move(event));
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent handle, CUstream stream_handle) {
  if (CUresult entered = enter("cuEventRecord"); entered != CUDA_SUCCESS) return entered;
  std::shared_ptr<Event> event;
  if (CUresult found = event_of(handle, &event); found != CUDA_SUCCESS) return found;
  Stream* stream = nullptr;
  if (CUresult resolved = resolve(stream_handle, &stream); resolved != CUDA_SUCCESS) return resolved;
  if (stream->context != event->context) return CUDA_ERROR_INVALID_HANDLE;
  std::uint64_t number = 0;
  {
    std::lock_guard lock(event->mutex);
    number = ++event->recorded;
  }
  // Completing an event is not work: it runs even on a poisoned context, so
  // waits end (and report the error).
  enqueue(stream, [event, number] {
    std::lock_guard lock(event->mutex);
    event->completed = std::max(event->completed, number);
    event->time = std::chrono::steady_clock::now();
    event->completed_changed.notify_all();
  });
  return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent handle) {
  if (CUresult entered = enter("cuEventQuery"); entered != CUDA_SUCCESS) return entered;
  std::shared_ptr<Event> event;
  if (CUresult found = event_of(handle, &event); found != CUDA_SUCCESS) return found;
  if (CUresult sticky = sticky_of(event->context); sticky != CUDA_SUCCESS) return sticky;
  std::lock_guard lock(event->mutex);
  return event->completed >= event->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent handle) {
  if (CUresult entered = enter("cuEventSynchronize"); entered != CUDA_SUCCESS) return entered;
  std::shared_ptr<Event> event;
  if (CUresult found = event_of(handle, &event); found != CUDA_SUCCESS) return found;
  {
    std::unique_lock lock(event->mutex);
    const std::uint64_t target = event->recorded;
    event->completed_changed.wait(lock, [&] { return event->completed >= target; });
  }
  return sticky_of(event->context);
}

CUresult cuEventElapsedTime(float* milliseconds, CUevent start_handle, CUevent end_handle) {
  if (CUresult entered = enter("cuEventElapsedTime"); entered != CUDA_SUCCESS) return entered;
  std::shared_ptr<Event> start;
  std::shared_ptr<Event> end;
  if (CUresult found = event_of(start_handle, &start); found != CUDA_SUCCESS) return found;
  if (CUresult found = event_of(end_handle, &end); found != CUDA_SUCCESS) return found;
  if (milliseconds == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!start->timing || !end->timing) return CUDA_ERROR_INVALID_HANDLE;
  std::scoped_lock lock(start->mutex, end->mutex);
  if (start->recorded == 0 || end->recorded == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (start->completed < start->recorded || end->completed < end->recorded) return CUDA_ERROR_NOT_READY;
  *milliseconds = std::chrono::duration<float, std::milli>(end->time - start->time).count();
  return CUDA_SUCCESS;
}

// The handle is gone at once; a record still queued completes unobserved.
CUresult cuEventDestroy(CUevent handle) {
  if (CUresult entered = enter("cuEventDestroy"); entered != CUDA_SUCCESS) return entered;
  std::lock_guard lock(state_mutex());
  if (live_events().erase(reinterpret_cast<Event*>(handle)) == 0) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

CUresult cuMemcpyAsync(CUdeviceptr to, CUdeviceptr from, std::size_t size, CUstream handle) {
  if (CUresult entered = enter("cuMemcpyAsync"); entered != CUDA_SUCCESS) return entered;
  Stream* stream = nullptr;
  if (CUresult resolved = resolve(handle, &stream); resolved != CUDA_SUCCESS) return resolved;
  if (size == 0) return CUDA_SUCCESS;
  if (CUresult checked = check_copy(to, from, size); checked != CUDA_SUCCESS) return checked;
  enqueue(stream, work(stream->context, [to, from, size] { return copy_now(to, from, size); }));
  return CUDA_SUCCESS;
}

CUresult cuMemcpyPeerAsync(CUdeviceptr to, CUcontext to_context, CUdeviceptr from, CUcontext from_context,
                           std::size_t size, CUstream handle) {
  if (CUresult entered = enter("cuMemcpyPeerAsync"); entered != CUDA_SUCCESS) return entered;
  if (!is_live_context(to_context) || !is_live_context(from_context)) return CUDA_ERROR_INVALID_CONTEXT;
  Stream* stream = nullptr;
  if (CUresult resolved = resolve(handle, &stream); resolved != CUDA_SUCCESS) return resolved;
  if (size == 0) return CUDA_SUCCESS;
  lock_memory_shared();
  const Placement target = locate(to, size);
  const Placement origin = locate(from, size);
  unlock_memory_shared();
  // Both ends must be device memory of the contexts named.
  if (!target.valid || !origin.valid || target.kind != MemoryKind::kDevice || origin.kind != MemoryKind::kDevice ||
      target.device != reinterpret_cast<Context*>(to_context)->device ||
      origin.device != reinterpret_cast<Context*>(from_context)->device) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  enqueue(stream, work(stream->context, [to, from, size] { return copy_now(to, from, size); }));
  return CUDA_SUCCESS;
}

CUresult cuMemsetD32Async(CUdeviceptr to, unsigned int value, std::size_t count, CUstream handle) {
  if (CUresult entered = enter("cuMemsetD32Async"); entered != CUDA_SUCCESS) return entered;
  Stream* stream = nullptr;
  if (CUresult resolved = resolve(handle, &stream); resolved != CUDA_SUCCESS) return resolved;
  if (count == 0) return CUDA_SUCCESS;
  lock_memory_shared();
  const Placement target = locate(to, count * 4);
  unlock_memory_shared();
  if (!target.valid || target.kind == MemoryKind::kPageable || to % 4 != 0) return CUDA_ERROR_INVALID_VALUE;
  enqueue(stream, work(stream->context, [to, value, count] {
            lock_memory_shared();
            const bool valid = locate(to, count * 4).valid;
            if (valid) {
              auto* words = reinterpret_cast<std::uint32_t*>(to);
              for (std::size_t index = 0; index < count; ++index) words[index] = value;
            }
            unlock_memory_shared();
            return valid ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_ADDRESS;
          }));
  return CUDA_SUCCESS;
}
