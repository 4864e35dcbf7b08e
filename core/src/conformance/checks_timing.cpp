// Device time (ABI 1.3, BP_CAPABILITY_EVENT_TIMING): a timed copy's event
// answers a span on CLOCK_MONOTONIC that lies within the host's view of the
// copy; an untimed one answers "not available"; a NULL event is refused.
#include "conformance/checks.hpp"

#include <backplane/plugin_sdk/timing.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace backplane::conformance {
namespace {

using plugin_sdk::monotonic_ns;

// The device clock is calibrated against the host's to within a clock
// reading's round trip; 2 ms allows for a descheduled thread on a loaded
// machine, and still fails any time on another clock or left unconverted.
constexpr std::int64_t kToleranceNs = 2'000'000;

void require_event_timing(const Context& context) {
  if (!context.has_capability(BP_CAPABILITY_EVENT_TIMING)) {
    throw NotApplicable("BP_CAPABILITY_EVENT_TIMING not advertised");
  }
  if (!BP_TABLE_HAS_CALL(&context.api, event_timing)) {
    throw CheckFailure("BP_CAPABILITY_EVENT_TIMING is advertised but the table has no event_timing");
  }
  context.require_devices();
}

BP_EventTimingArgs timing_args(const Context& context, BP_Event* event) {
  auto args = detail::args_for<BP_EventTimingArgs>(context.backend);
  args.event = event;
  return args;
}

// Uploads `size` bytes asynchronously, `timed` or not, waits, and asks the
// event's times; `issued` and `done` are the host's readings around it.
struct Timed {
  BP_EventTimingArgs args;
  std::int64_t issued;
  std::int64_t done;
};

Timed upload(Context& context, bool timed, std::uint64_t size) {
  Buffer device = context.allocate(0, size);
  const auto data = context.random_bytes(size);
  auto args = detail::copy_to_device_args(context.backend, device.get(), 0, data.data(), size);
  args.timed = timed ? 1 : 0;
  const std::string what = fmt::format("copy_to_device_async of {} bytes{}", size, timed ? " (timed)" : "");
  const std::int64_t issued = monotonic_ns();
  context.require_ok(context.api.copy_to_device_async(&args), what);
  if (args.event == nullptr) throw CheckFailure(what + " succeeded but returned no event");
  const detail::PluginClient calls = context.client();
  context.require_ok(calls.event_wait(args.event), "event_wait for " + what);
  const std::int64_t done = monotonic_ns();
  auto timing = timing_args(context, args.event);
  const PluginStatus answered = calls.status(context.api.event_timing(&timing));
  calls.event_destroy(args.event);
  context.require_ok(answered, "event_timing for " + what);
  return {timing, issued, done};
}

}  // namespace

void check_timing(Context& context) {
  context.check("optional: event_timing places a timed copy within the host's view of it", [&] {
    require_event_timing(context);
    const Timed timed = upload(context, true, std::uint64_t{1} << 20);
    const BP_EventTimingArgs& args = timed.args;
    if (args.available == 0) {
      // Work the plugin ran inline has no device times, and says so.
      return std::string("the copy completed inline: no device times (available = 0)");
    }
    if (args.begin_ns > args.end_ns) {
      throw CheckFailure(fmt::format("event_timing answered begin {} ns after end {} ns", args.begin_ns, args.end_ns));
    }
    if (args.begin_ns < timed.issued - kToleranceNs || args.end_ns > timed.done + kToleranceNs) {
      throw CheckFailure(fmt::format(
          "event_timing answered {}..{} ns, outside the host's {}..{} ns around the copy (tolerance {} ns): the "
          "times must be CLOCK_MONOTONIC",
          args.begin_ns, args.end_ns, timed.issued, timed.done, kToleranceNs));
    }
    return fmt::format("{:.1f} us on the device within {:.1f} us on the host",
                       static_cast<double>(args.end_ns - args.begin_ns) / 1e3,
                       static_cast<double>(timed.done - timed.issued) / 1e3);
  });
  context.check("optional: event_timing of an untimed copy answers not available", [&] {
    require_event_timing(context);
    const Timed untimed = upload(context, false, 4096);
    if (untimed.args.available != 0) {
      throw CheckFailure("event_timing answered times for a copy issued without `timed`");
    }
    return std::string();
  });
  context.check("optional: event_timing of a NULL event is INVALID_ARGUMENT", [&] {
    require_event_timing(context);
    auto args = timing_args(context, nullptr);
    context.require_error(context.api.event_timing(&args), "event_timing of a NULL event", {BP_ERROR_INVALID_ARGUMENT});
    return std::string();
  });
}

}  // namespace backplane::conformance
