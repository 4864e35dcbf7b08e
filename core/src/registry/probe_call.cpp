#include "registry/probe_call.hpp"

#include "util/log.hpp"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

namespace backplane::detail {
namespace {

constexpr std::uint32_t kDefaultProbeTimeoutMs = 10000;
constexpr std::uint32_t kMaxProbeTimeoutMs = 3600 * 1000;

// State shared by the loader and the helper thread that calls the plugin. The
// helper may outlive the loader (a hung plugin), so it owns a reference too.
struct ProbeCall {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;                     // guarded by mutex
  std::string stage = "backend_create";  // guarded by mutex
  ProbeOutcome outcome;                  // guarded by mutex, set with done
  std::exception_ptr error;              // guarded by mutex: what the helper threw
};

}  // namespace

std::uint32_t probe_timeout_ms(const std::optional<std::string>& text) {
  if (!text || text->empty()) return kDefaultProbeTimeoutMs;
  std::uint32_t value = 0;
  auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc() || end != text->data() + text->size() || value > kMaxProbeTimeoutMs) {
    log(LogLevel::kWarn, "BACKPLANE_PROBE_TIMEOUT_MS='{}' is not a number of milliseconds in 0..{}; using {}", *text,
        kMaxProbeTimeoutMs, kDefaultProbeTimeoutMs);
    return kDefaultProbeTimeoutMs;
  }
  return value;
}

ProbeOutcome create_and_probe(const std::shared_ptr<PluginLibrary>& library, const PluginOptions& options,
                              const std::function<void(const char* stage)>& on_stage, const ProbeCalls& calls) {
  ProbeOutcome outcome;
  try {
    on_stage("backend_create");
    outcome.backend = Backend::create(library, options, calls.name);
    if (!calls.probe) return outcome;
    on_stage("probe");
    outcome.probed = outcome.backend->probe();
  } catch (const Error& error) {  // the plugin's failure: its status (see ProbeOutcome)
    outcome.failure = error;
  }
  return outcome;
}

std::pair<std::optional<ProbeOutcome>, std::string> create_and_probe_within(
    const std::shared_ptr<PluginLibrary>& library, const PluginOptions& options, std::uint32_t timeout_ms,
    const ProbeCalls& calls) {
  auto call = std::make_shared<ProbeCall>();
  std::thread helper;
  try {
    helper = std::thread([call, library, options, calls] {
      ProbeOutcome outcome;
      std::exception_ptr error;
      try {
        outcome = create_and_probe(
            library, options,
            [&](const char* stage) {
              std::lock_guard lock(call->mutex);
              call->stage = stage;
            },
            calls);
      } catch (...) {  // bad_alloc: handed to the loader's thread
        error = std::current_exception();
      }
      std::lock_guard lock(call->mutex);
      call->outcome = std::move(outcome);
      call->error = error;
      call->done = true;
      call->finished.notify_all();
    });
  } catch (const std::system_error& exception) {
    // No thread to spare: call the plugin here, without a deadline.
    log(LogLevel::kWarn, "{}: cannot start the probe thread ({}); probing without a time limit", library->name(),
        exception.what());
    return {create_and_probe(
                library, options, [](const char*) {}, calls),
            ""};
  }
  std::unique_lock lock(call->mutex);
  if (!call->finished.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return call->done; })) {
    // Set under the mutex the helper takes before it drops its references,
    // so the library's destructor (on whichever thread) sees it.
    library->keep_loaded();
    std::string stage = call->stage;
    lock.unlock();
    helper.detach();
    return {std::nullopt, stage};
  }
  if (call->error) {
    lock.unlock();
    helper.join();
    std::rethrow_exception(call->error);
  }
  ProbeOutcome outcome = std::move(call->outcome);
  lock.unlock();
  helper.join();
  return {std::move(outcome), ""};
}

ProbeVerdict verdict_of(const ProbeOutcome& outcome) {
  // Backend's create and probe word their errors as the reason.
  if (outcome.failure) return {BackendStatus::kFailed, outcome.failure->what()};
  const Backend::ProbeAnswer& answer = *outcome.probed;
  if (!answer.available) {
    return {BackendStatus::kUnavailable, answer.reason.empty() ? "the plugin gave no reason" : answer.reason};
  }
  return {BackendStatus::kAvailable, answer.reason};
}

}  // namespace backplane::detail
