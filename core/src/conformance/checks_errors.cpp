// Error paths: every bad argument, handle, size or range must come back as an
// error (docs/plugin-abi.md, rule 5), and a refused call must change nothing.
#include "conformance/checks.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace backplane::conformance {
namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
// Arrays viewed through std::span, not namespace-scope initializer_lists:
// with those, GCC 12 -O2 checked an unavailable backend against the
// two-code list (conformance-cuda failed although the ternary chose the
// three-code one).
constexpr BP_ErrorCode kArgumentCodes[] = {BP_ERROR_INVALID_ARGUMENT, BP_ERROR_OUT_OF_RANGE};
constexpr BP_ErrorCode kUnavailableCodes[] = {BP_ERROR_INVALID_ARGUMENT, BP_ERROR_OUT_OF_RANGE, BP_ERROR_UNAVAILABLE};

struct NamedCall {
  const char* name;
  std::function<BP_Error*()> call;
};

// A copy range outside a 1000-byte buffer, and why it is out of range.
struct BadRange {
  std::uint64_t offset;
  std::uint64_t size;
  const char* why;
};

constexpr std::uint64_t kSmallBuffer = 1000;
constexpr BadRange kBadRanges[] = {
    {kSmallBuffer + 1, 0, "offset past the end"},
    {kSmallBuffer - 10, 11, "one byte past the end"},
    {500, kSmallBuffer, "size larger than what is left"},
    {kMax - 3, 8, "offset + size wraps around 2^64"},
    {8, kMax, "size 2^64-1"},
};

// A freshly allocated device buffer to refuse calls against; freed on scope exit.
Buffer victim(Context& context, std::vector<std::uint8_t>& model) {
  Buffer buffer = context.allocate(0, kSmallBuffer);
  model = context.random_bytes(kSmallBuffer);
  context.write(buffer, 0, model.data(), kSmallBuffer);
  return buffer;
}

void require_unchanged(Context& context, const Buffer& buffer, const std::vector<std::uint8_t>& model,
                       std::string_view after) {
  require_equal_bytes(context.read(buffer, 0, buffer.size()), model, fmt::format("the buffer after {}", after));
}

// Submits an async copy that must be refused, at submission or by event_wait.
void require_async_refused(Context& context, BP_Error* submitted, BP_Event* event, std::string_view what) {
  if (submitted != nullptr) {
    context.require_error(submitted, what, kArgumentCodes);
    return;
  }
  if (event == nullptr) throw CheckFailure(fmt::format("{} returned success and no event", what));
  const detail::PluginClient calls = context.client();
  PluginStatus waited = calls.event_wait(event);
  calls.event_destroy(event);
  context.require_error(std::move(waited), fmt::format("{} (accepted at submission; event_wait)", what));
}

void check_out_of_range_copies(Context& context) {
  std::vector<std::uint8_t> model;
  Buffer buffer = victim(context, model);
  Buffer other = context.allocate(0, kSmallBuffer);
  std::vector<std::uint8_t> host(2 * kSmallBuffer, 0x5A);
  for (const BadRange& range : kBadRanges) {
    const std::string where = fmt::format("{} bytes at offset {} of a {}-byte buffer ({})", range.size, range.offset,
                                          kSmallBuffer, range.why);
    const detail::PluginClient calls = context.client();
    context.require_error(calls.copy_to_device(buffer.get(), range.offset, host.data(), range.size),
                          "copy_to_device of " + where, kArgumentCodes);
    context.require_error(calls.copy_to_host(buffer.get(), range.offset, host.data(), range.size),
                          "copy_to_host of " + where, kArgumentCodes);
    context.require_error(calls.copy_device_to_device(buffer.get(), range.offset, other.get(), 0, range.size),
                          "copy_device_to_device with the source range " + where, kArgumentCodes);
    if (range.size <= kSmallBuffer) {  // otherwise the source range is out of range too
      context.require_error(calls.copy_device_to_device(other.get(), 0, buffer.get(), range.offset, range.size),
                            "copy_device_to_device with the destination range " + where, kArgumentCodes);
    }
    require_unchanged(context, buffer, model, "refused copies of " + where);
  }
}

void check_bad_handles(Context& context) {
  Buffer freed = context.allocate(0, 64);
  BP_Buffer* stale = freed.get();
  freed.free_checked();
  std::vector<std::uint8_t> host(64);
  const detail::PluginClient calls = context.client();
  context.require_error(calls.copy_to_device(stale, 0, host.data(), 16), "copy_to_device into a freed buffer");
  context.require_error(calls.copy_to_host(stale, 0, host.data(), 16), "copy_to_host from a freed buffer");
  context.require_error(calls.memory_free(stale), "a second memory_free of the same buffer");
}

// Calls that take only an args pointer, each given NULL.
std::vector<NamedCall> null_args_calls(const BP_PluginApi& api) {
  std::vector<NamedCall> calls = {
      {"backend_create", [&] { return api.backend_create(nullptr); }},
      {"probe", [&] { return api.probe(nullptr); }},
      {"device_count", [&] { return api.device_count(nullptr); }},
      {"device_info", [&] { return api.device_info(nullptr); }},
      {"memory_allocate", [&] { return api.memory_allocate(nullptr); }},
      {"memory_free", [&] { return api.memory_free(nullptr); }},
      {"copy_to_device", [&] { return api.copy_to_device(nullptr); }},
      {"copy_to_host", [&] { return api.copy_to_host(nullptr); }},
      {"copy_device_to_device", [&] { return api.copy_device_to_device(nullptr); }},
      {"copy_to_device_async", [&] { return api.copy_to_device_async(nullptr); }},
      {"copy_to_host_async", [&] { return api.copy_to_host_async(nullptr); }},
      {"copy_device_to_device_async", [&] { return api.copy_device_to_device_async(nullptr); }},
      {"event_wait", [&] { return api.event_wait(nullptr); }},
      {"event_query", [&] { return api.event_query(nullptr); }},
  };
  if (api.convert_integers != nullptr) {
    calls.push_back({"convert_integers", [&] { return api.convert_integers(nullptr); }});
  }
  if (BP_TABLE_HAS_CALL(&api, memory_wrap)) {
    calls.push_back({"memory_wrap", [&] { return api.memory_wrap(nullptr); }});
  }
  return calls;
}

void check_short_struct_sizes(Context& context) {
  const BP_PluginApi& api = context.api;
  BP_Backend* backend = context.backend;
  // Each args struct cut just before its last field, then with struct_size 0.
  for (const bool zero : {false, true}) {
    auto size_of = [&](std::size_t cut) { return zero ? std::size_t{0} : cut; };
    const std::string suffix = zero ? " with struct_size 0" : " with struct_size missing its last field";
    auto create = detail::backend_create_args(nullptr, 0);
    create.struct_size = size_of(offsetof(BP_BackendCreateArgs, backend));
    BP_Error* created = api.backend_create(&create);
    if (created == nullptr && create.backend != nullptr) detail::PluginClient(api, create.backend).backend_destroy();
    context.require_error(created, "backend_create" + suffix, {BP_ERROR_INVALID_ARGUMENT});
    auto probe = detail::probe_args(backend);
    probe.struct_size = size_of(offsetof(BP_ProbeArgs, reason_size));
    context.require_error(api.probe(&probe), "probe" + suffix, {BP_ERROR_INVALID_ARGUMENT});
    auto count = detail::device_count_args(backend);
    count.struct_size = size_of(offsetof(BP_DeviceCountArgs, count));
    context.require_error(api.device_count(&count), "device_count" + suffix, {BP_ERROR_INVALID_ARGUMENT});
    if (context.devices.empty()) continue;

    auto info = detail::device_info_args(backend, 0);
    info.struct_size = size_of(offsetof(BP_DeviceInfoArgs, attribute_count));
    context.require_error(api.device_info(&info), "device_info" + suffix, {BP_ERROR_INVALID_ARGUMENT});
    auto allocate = detail::memory_allocate_args(backend, 0, BP_MEMORY_DEVICE, 16);
    allocate.struct_size = size_of(offsetof(BP_MemoryAllocateArgs, address));
    BP_Error* allocated = api.memory_allocate(&allocate);
    if (allocated == nullptr && allocate.buffer != nullptr) {
      Buffer leaked(&context, allocate.buffer, nullptr, 16, 0);
    }
    context.require_error(allocated, "memory_allocate" + suffix, {BP_ERROR_INVALID_ARGUMENT});

    std::vector<std::uint8_t> model;
    Buffer buffer = victim(context, model);
    std::vector<std::uint8_t> host(64);
    auto release = detail::memory_free_args(backend, buffer.get());
    release.struct_size = size_of(offsetof(BP_MemoryFreeArgs, buffer));
    context.require_error(api.memory_free(&release), "memory_free" + suffix, {BP_ERROR_INVALID_ARGUMENT});
    auto to_device = detail::copy_to_device_args(backend, buffer.get(), 0, host.data(), host.size());
    to_device.struct_size = size_of(offsetof(BP_CopyToDeviceArgs, event));
    context.require_error(api.copy_to_device(&to_device), "copy_to_device" + suffix, {BP_ERROR_INVALID_ARGUMENT});
    auto to_host = detail::copy_to_host_args(backend, buffer.get(), 0, host.data(), host.size());
    to_host.struct_size = size_of(offsetof(BP_CopyToHostArgs, event));
    context.require_error(api.copy_to_host(&to_host), "copy_to_host" + suffix, {BP_ERROR_INVALID_ARGUMENT});
    auto device = detail::copy_device_to_device_args(backend, buffer.get(), 0, buffer.get(), 100, 10);
    device.struct_size = size_of(offsetof(BP_CopyDeviceToDeviceArgs, event));
    context.require_error(api.copy_device_to_device(&device), "copy_device_to_device" + suffix,
                          {BP_ERROR_INVALID_ARGUMENT});
    require_unchanged(context, buffer, model, "copies refused for their struct_size");
    // The buffer must still be alive: memory_free above was refused.
    buffer.free_checked();
  }
}

}  // namespace

void check_argument_errors(Context& context) {
  context.check("errors: NULL args are refused by every call", [&] {
    const auto calls = null_args_calls(context.api);
    for (const NamedCall& call : calls) {
      context.require_error(call.call(), fmt::format("{}(NULL)", call.name), {BP_ERROR_INVALID_ARGUMENT});
    }
    return fmt::format("{} calls", calls.size());
  });
  if (context.backend == nullptr) {
    for (const char* name : {"errors: struct_size too small is refused", "errors: a NULL backend handle is refused",
                             "errors: out-of-range ordinals are refused"}) {
      context.not_applicable(name, "no backend instance (backend_create failed)");
    }
    return;
  }
  context.check("errors: struct_size too small is refused", [&] {
    check_short_struct_sizes(context);
    return context.devices.empty() ? std::string("backend calls only (no device)") : std::string();
  });
  context.check("errors: a NULL backend handle is refused", [&] {
    const detail::PluginClient unbound(context.api, nullptr, &context.inspector());
    context.require_error(unbound.probe().status(), "probe with backend NULL", {BP_ERROR_INVALID_ARGUMENT});
    context.require_error(unbound.device_count().status(), "device_count with backend NULL",
                          {BP_ERROR_INVALID_ARGUMENT});
    context.require_error(unbound.device_info(0).status(), "device_info with backend NULL",
                          {BP_ERROR_INVALID_ARGUMENT});
    context.require_error(unbound.memory_allocate(0, BP_MEMORY_DEVICE, 16).status(),
                          "memory_allocate with backend NULL", {BP_ERROR_INVALID_ARGUMENT});
    return std::string();
  });
  context.check("errors: out-of-range ordinals are refused", [&] {
    // The count device_count answered, not the devices described: after a
    // failed devices check, ordinal 0 may well exist.
    if (!context.counted_devices) throw NotApplicable("device_count gave no usable count");
    const int count = *context.counted_devices;
    // An unavailable backend may say so instead of naming the ordinal.
    const auto codes = context.report.available ? std::span<const BP_ErrorCode>(kArgumentCodes)
                                                : std::span<const BP_ErrorCode>(kUnavailableCodes);
    for (const int ordinal : {-1, count, count + 1000}) {
      context.require_error(context.client().device_info(ordinal).status(),
                            fmt::format("device_info of ordinal {} ({} device(s))", ordinal, count), codes);
      auto allocate = detail::memory_allocate_args(context.backend, ordinal, BP_MEMORY_DEVICE, 16);
      BP_Error* error = context.api.memory_allocate(&allocate);
      if (error == nullptr && allocate.buffer != nullptr) Buffer(&context, allocate.buffer, nullptr, 16, 0).reset();
      context.require_error(error, fmt::format("memory_allocate on ordinal {} ({} device(s))", ordinal, count), codes);
    }
    return fmt::format("ordinals -1, {}, {}", count, count + 1000);
  });
}

void check_device_errors(Context& context) {
  context.check("errors: allocation beyond memory_total fails, and the device stays usable", [&] {
    context.require_devices();
    const std::uint64_t total = context.devices[0].memory_total;
    const std::uint64_t beyond = total > kMax / 16 ? kMax / 2 : total * 16;
    for (const std::uint64_t size : {beyond, kMax}) {
      auto allocate = detail::memory_allocate_args(context.backend, 0, BP_MEMORY_DEVICE, size);
      BP_Error* error = context.api.memory_allocate(&allocate);
      if (error == nullptr && allocate.buffer != nullptr) Buffer(&context, allocate.buffer, nullptr, size, 0).reset();
      context.require_error(
          error, fmt::format("memory_allocate of {} bytes on {} (memory_total {})", size, context.label(0), total),
          {BP_ERROR_OUT_OF_MEMORY, BP_ERROR_OUT_OF_RANGE, BP_ERROR_INVALID_ARGUMENT});
    }
    std::vector<std::uint8_t> model;
    Buffer after = victim(context, model);
    require_unchanged(context, after, model, "a refused huge allocation (a new buffer)");
    return fmt::format("{} and {} bytes refused", beyond, kMax);
  });
  context.check("errors: an unknown memory kind is refused", [&] {
    context.require_devices();
    auto allocate = detail::memory_allocate_args(context.backend, 0, 99, 16);
    BP_Error* error = context.api.memory_allocate(&allocate);
    if (error == nullptr && allocate.buffer != nullptr) Buffer(&context, allocate.buffer, nullptr, 16, 0).reset();
    context.require_error(error, "memory_allocate of memory kind 99",
                          {BP_ERROR_INVALID_ARGUMENT, BP_ERROR_UNSUPPORTED});
    return std::string();
  });
  context.check("errors: out-of-range copies are refused and move no data", [&] {
    context.require_devices();
    check_out_of_range_copies(context);
    return fmt::format("{} ranges x 4 copy forms", std::size(kBadRanges));
  });
  context.check("errors: out-of-range async copies fail at submission or in event_wait", [&] {
    context.require_devices();
    std::vector<std::uint8_t> model;
    Buffer buffer = victim(context, model);
    std::vector<std::uint8_t> host(2 * kSmallBuffer);
    auto to_device = detail::copy_to_device_args(context.backend, buffer.get(), kSmallBuffer - 10, host.data(), 11);
    require_async_refused(context, context.api.copy_to_device_async(&to_device), to_device.event,
                          "copy_to_device_async one byte past the end");
    auto to_host = detail::copy_to_host_args(context.backend, buffer.get(), kSmallBuffer - 10, host.data(), 11);
    require_async_refused(context, context.api.copy_to_host_async(&to_host), to_host.event,
                          "copy_to_host_async one byte past the end");
    auto device =
        detail::copy_device_to_device_args(context.backend, buffer.get(), 0, buffer.get(), kSmallBuffer - 10, 11);
    require_async_refused(context, context.api.copy_device_to_device_async(&device), device.event,
                          "copy_device_to_device_async one byte past the end");
    require_unchanged(context, buffer, model, "refused async copies");
    return std::string();
  });
  context.check("errors: a NULL host pointer with a non-zero size is refused", [&] {
    context.require_devices();
    std::vector<std::uint8_t> model;
    Buffer buffer = victim(context, model);
    const detail::PluginClient calls = context.client();
    context.require_error(calls.copy_to_device(buffer.get(), 0, nullptr, 16), "copy_to_device from source NULL",
                          {BP_ERROR_INVALID_ARGUMENT});
    context.require_error(calls.copy_to_host(buffer.get(), 0, nullptr, 16), "copy_to_host into destination NULL",
                          {BP_ERROR_INVALID_ARGUMENT});
    require_unchanged(context, buffer, model, "refused copies from NULL");
    return std::string();
  });
  context.check("errors: freed buffer handles are refused", [&] {
    context.require_devices();
    check_bad_handles(context);
    return std::string();
  });
  context.check("errors: a buffer of another backend instance is refused", [&] {
    context.require_devices();
    auto created = detail::PluginClient::create(context.api, context.options.plugin_options, &context.inspector());
    context.require_ok(created.status(), "a second backend_create");
    const detail::PluginClient other(context.api, *created, &context.inspector());
    auto allocated = other.memory_allocate(0, BP_MEMORY_DEVICE, 64);
    if (!allocated.ok()) {
      other.backend_destroy();
      throw CheckFailure("memory_allocate on a second instance failed: " + allocated.error().message);
    }
    std::vector<std::uint8_t> host(64);
    const PluginStatus refused = context.client().copy_to_host(allocated->buffer, 0, host.data(), 16);
    (void)other.memory_free(allocated->buffer);
    other.backend_destroy();
    if (refused.ok()) throw CheckFailure("copy_to_host with a buffer of another instance returned success");
    return std::string();
  });
  context.check("errors: NULL and destroyed event handles are refused", [&] {
    context.require_devices();
    const detail::PluginClient calls = context.client();
    context.require_error(calls.event_wait(nullptr), "event_wait of event NULL", {BP_ERROR_INVALID_ARGUMENT});
    context.require_error(calls.event_query(nullptr).status(), "event_query of event NULL",
                          {BP_ERROR_INVALID_ARGUMENT});
    Buffer buffer = context.allocate(0, 64);
    std::vector<std::uint8_t> host(64, 1);
    auto submitted = calls.copy_to_device_async(buffer.get(), 0, host.data(), host.size());
    context.require_ok(submitted.status(), "copy_to_device_async");
    context.finish(*submitted, "copy_to_device_async");  // destroys it
    context.require_error(calls.event_wait(*submitted), "event_wait of a destroyed event", {BP_ERROR_INVALID_ARGUMENT});
    context.require_error(calls.event_query(*submitted).status(), "event_query of a destroyed event",
                          {BP_ERROR_INVALID_ARGUMENT});
    return std::string();
  });
}

void check_error_objects(Context& context) {
  context.check("errors: every BP_Error returned was well-formed", [&] {
    const auto problems = context.malformed_errors();
    if (!problems.empty()) throw CheckFailure(fmt::format("{}", fmt::join(problems, "; ")));
    if (context.errors_seen() == 0) throw NotApplicable("the plugin returned no error to inspect");
    return fmt::format("{} errors with a known code, a message and destroy", context.errors_seen());
  });
}

}  // namespace backplane::conformance
