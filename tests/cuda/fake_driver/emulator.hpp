// Internal state of the libcuda.so.1 emulator (see README.md in this
// directory for what it emulates and the variables that steer it).
//
// The exported entry points are cuda.h's own declarations, so the compiler
// checks every signature against the ABI the plugin resolves; cuda.h maps the
// plain names to their current versions (cuMemAlloc is cuMemAlloc_v2), as it
// does for the plugin.
#ifndef BACKPLANE_TESTS_CUDA_FAKE_DRIVER_EMULATOR_HPP
#define BACKPLANE_TESTS_CUDA_FAKE_DRIVER_EMULATOR_HPP

// Everything declared by cuda.h is exported; the rest of the library is
// hidden (-fvisibility=hidden).
#pragma GCC visibility push(default)
#include <cuda.h>
extern "C" int bp_fake_cuda_context_calls(void);
#pragma GCC visibility pop

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace emulator {

// The environment, read once per process.
struct Config {
  int version = 13000;                // BP_FAKE_CUDA_VERSION
  int init_result = 0;                // BP_FAKE_CUDA_INIT
  int devices = 0;                    // BP_FAKE_CUDA_DEVICES
  std::vector<std::uint64_t> memory;  // BP_FAKE_CUDA_MEMORY, per ordinal (last repeats)
  bool peer = true;                   // BP_FAKE_CUDA_PEER=0: no device reaches another's memory
  long fail_call = 0;                 // BP_FAKE_CUDA_FAIL_CALL: the Nth counted call fails
  std::string fail_function;          // BP_FAKE_CUDA_FAIL_FUNCTION: count only this entry point
  int fail_result = 999;              // BP_FAKE_CUDA_FAIL_RESULT
  long sticky_after = 0;              // BP_FAKE_CUDA_STICKY_AFTER: operation N+1 poisons its context
  int sticky_result = 700;            // BP_FAKE_CUDA_STICKY_RESULT
  long delay_us = 0;                  // BP_FAKE_CUDA_OP_DELAY_US: per stream operation
};
const Config& config();
std::uint64_t capacity(int ordinal);

// One device's primary context. Never freed: handles stay valid until exit.
struct Context {
  int device = 0;
  int references = 0;               // guarded by state_mutex()
  int sticky = 0;                   // a CUresult once a stream operation failed; guarded by state_mutex()
  std::vector<bool> peers;          // peer access enabled to each device; guarded by state_mutex()
  struct Stream* legacy = nullptr;  // the legacy default stream, made on first use
};

std::mutex& state_mutex();
bool initialised();

// Every entry point that needs a context calls this first: it counts the
// call and answers NOT_INITIALIZED or an injected failure.
CUresult enter(const char* function);

Context* primary_context(int device);  // NULL for an unknown ordinal
bool is_live_context(CUcontext context);
Context* current_context();  // NULL when none is current on this thread
CUresult sticky_of(const Context* context);
// Records the context's first failure; every later call on it returns it.
void poison(Context* context, CUresult result);

// ---------------------------------------------------------------- memory --

enum class MemoryKind { kPageable, kDevice, kPinnedHost };

// Where [address, address + size) lives. kPageable: memory the emulator does
// not know (ordinary host memory); `valid` is false for a range that starts
// in a known allocation and runs past its end, or lies in a device's address
// range without a live allocation (freed memory).
struct Placement {
  MemoryKind kind = MemoryKind::kPageable;
  int device = -1;
  bool valid = true;
};
Placement locate(std::uintptr_t address, std::size_t size);

// Held (shared) while a stream operation touches memory, so cuMemFree cannot
// unmap it in the middle of a copy.
void lock_memory_shared();
void unlock_memory_shared();

// ---------------------------------------------------------------- streams --

// A stream: its operations run in order on one worker thread.
struct Stream {
  Context* context = nullptr;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> queue;
  bool busy = false;
  bool stopping = false;
  std::thread worker;
};

}  // namespace emulator

#endif  // BACKPLANE_TESTS_CUDA_FAKE_DRIVER_EMULATOR_HPP
