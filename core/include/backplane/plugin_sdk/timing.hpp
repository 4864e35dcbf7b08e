// Device time for plugins (ABI 1.3, BP_CAPABILITY_EVENT_TIMING): the span a
// backend reports for an event's work, the host clock it is reported on, and
// whether the hook call in progress was asked to time its work.
#ifndef BACKPLANE_PLUGIN_SDK_TIMING_HPP
#define BACKPLANE_PLUGIN_SDK_TIMING_HPP

#include <pthread.h>
#include <time.h>

#include <cstdint>

namespace backplane::plugin_sdk {

// The host clock device times are reported on: CLOCK_MONOTONIC, in
// nanoseconds.
inline std::int64_t monotonic_ns() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

// When the device began and ended an event's work, as CLOCK_MONOTONIC
// nanoseconds (ABI 1.3, event_timing).
struct DeviceSpan {
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
};

namespace detail {
// Whether the hook call in progress on this thread was asked to time its
// work, kept under a pthread key rather than in a thread_local: a plugin is
// dlopen'd, so its thread_locals would live in dynamic TLS, which
// LeakSanitizer's exit-time scan of PoCL's worker threads crashes on, and
// initial-exec TLS does not fit beside the CUDA runtime's in glibc's static
// reserve. Key 0 with `usable` false: no key could be made, so nothing is
// timed.
struct TimingKey {
  pthread_key_t key{};
  bool usable = false;
  TimingKey() noexcept { usable = pthread_key_create(&key, nullptr) == 0; }
};
inline const TimingKey& timing_key() noexcept {
  static const TimingKey key;
  return key;
}

// Sets the request for one hook call.
class TimingRequest {
 public:
  explicit TimingRequest(bool requested) noexcept {
    if (requested && timing_key().usable) set_ = pthread_setspecific(timing_key().key, this) == 0;
  }
  ~TimingRequest() {
    if (set_) pthread_setspecific(timing_key().key, nullptr);
  }
  TimingRequest(const TimingRequest&) = delete;
  TimingRequest& operator=(const TimingRequest&) = delete;

 private:
  bool set_ = false;
};
}  // namespace detail

// True inside an asynchronous copy or convert_integers hook whose caller set
// `timed` (ABI 1.3): the backend times that work for timing(Event&). Only
// backends that declare BP_CAPABILITY_EVENT_TIMING are ever asked.
inline bool timing_requested() noexcept {
  const detail::TimingKey& key = detail::timing_key();
  return key.usable && pthread_getspecific(key.key) != nullptr;
}

}  // namespace backplane::plugin_sdk

#endif  // BACKPLANE_PLUGIN_SDK_TIMING_HPP
