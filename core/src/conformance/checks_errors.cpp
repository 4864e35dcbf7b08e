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
constexpr BP_ErrorCode kUnavailableCodes[] = {BP_ERROR_INVALID_ARGUMENT, BP_ERROR_OUT_OF_RANGE,
                                              BP_ERROR_UNAVAILABLE};

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

template <class Args>
Args sized_args(std::size_t struct_size, BP_Backend* backend) {
  Args args{};
  args.struct_size = struct_size;
  args.backend = backend;
  return args;
}

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
  BP_EventArgs wait{};
  wait.struct_size = sizeof(wait);
  wait.backend = context.backend;
  wait.event = event;
  BP_Error* waited = context.api.event_wait(&wait);
  context.api.event_destroy(context.backend, event);
  context.require_error(waited, fmt::format("{} (accepted at submission; event_wait)", what));
}

void check_out_of_range_copies(Context& context) {
  std::vector<std::uint8_t> model;
  Buffer buffer = victim(context, model);
  Buffer other = context.allocate(0, kSmallBuffer);
  std::vector<std::uint8_t> host(2 * kSmallBuffer, 0x5A);
  for (const BadRange& range : kBadRanges) {
    const std::string where = fmt::format("{} bytes at offset {} of a {}-byte buffer ({})", range.size, range.offset,
                                          kSmallBuffer, range.why);
    BP_CopyToDeviceArgs to_device{};
    to_device.struct_size = sizeof(to_device);
    to_device.backend = context.backend;
    to_device.destination = buffer.get();
    to_device.destination_offset = range.offset;
    to_device.source = host.data();
    to_device.size = range.size;
    context.require_error(context.api.copy_to_device(&to_device), "copy_to_device of " + where, kArgumentCodes);

    BP_CopyToHostArgs to_host{};
    to_host.struct_size = sizeof(to_host);
    to_host.backend = context.backend;
    to_host.source = buffer.get();
    to_host.source_offset = range.offset;
    to_host.destination = host.data();
    to_host.size = range.size;
    context.require_error(context.api.copy_to_host(&to_host), "copy_to_host of " + where, kArgumentCodes);

    BP_CopyDeviceToDeviceArgs device{};
    device.struct_size = sizeof(device);
    device.backend = context.backend;
    device.source = buffer.get();
    device.source_offset = range.offset;
    device.destination = other.get();
    device.size = range.size;
    context.require_error(context.api.copy_device_to_device(&device),
                          "copy_device_to_device with the source range " + where, kArgumentCodes);
    device.source = other.get();
    device.source_offset = 0;
    device.destination = buffer.get();
    device.destination_offset = range.offset;
    if (range.size <= kSmallBuffer) {  // otherwise the source range is out of range too
      context.require_error(context.api.copy_device_to_device(&device),
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
  BP_CopyToDeviceArgs to_device{};
  to_device.struct_size = sizeof(to_device);
  to_device.backend = context.backend;
  to_device.destination = stale;
  to_device.source = host.data();
  to_device.size = 16;
  context.require_error(context.api.copy_to_device(&to_device), "copy_to_device into a freed buffer");
  BP_CopyToHostArgs to_host{};
  to_host.struct_size = sizeof(to_host);
  to_host.backend = context.backend;
  to_host.source = stale;
  to_host.destination = host.data();
  to_host.size = 16;
  context.require_error(context.api.copy_to_host(&to_host), "copy_to_host from a freed buffer");
  BP_MemoryFreeArgs free_again{};
  free_again.struct_size = sizeof(free_again);
  free_again.backend = context.backend;
  free_again.buffer = stale;
  context.require_error(context.api.memory_free(&free_again), "a second memory_free of the same buffer");
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
    BP_BackendCreateArgs create{};
    create.struct_size = size_of(offsetof(BP_BackendCreateArgs, backend));
    BP_Error* created = api.backend_create(&create);
    if (created == nullptr && create.backend != nullptr) api.backend_destroy(create.backend);
    context.require_error(created, "backend_create" + suffix, {BP_ERROR_INVALID_ARGUMENT});
    auto probe = sized_args<BP_ProbeArgs>(size_of(offsetof(BP_ProbeArgs, reason_size)), backend);
    context.require_error(api.probe(&probe), "probe" + suffix, {BP_ERROR_INVALID_ARGUMENT});
    auto count = sized_args<BP_DeviceCountArgs>(size_of(offsetof(BP_DeviceCountArgs, count)), backend);
    context.require_error(api.device_count(&count), "device_count" + suffix, {BP_ERROR_INVALID_ARGUMENT});
    if (context.devices.empty()) continue;

    auto info = sized_args<BP_DeviceInfoArgs>(size_of(offsetof(BP_DeviceInfoArgs, attribute_count)), backend);
    context.require_error(api.device_info(&info), "device_info" + suffix, {BP_ERROR_INVALID_ARGUMENT});
    auto allocate = sized_args<BP_MemoryAllocateArgs>(size_of(offsetof(BP_MemoryAllocateArgs, address)), backend);
    allocate.size = 16;
    BP_Error* allocated = api.memory_allocate(&allocate);
    if (allocated == nullptr && allocate.buffer != nullptr) {
      Buffer leaked(&context, allocate.buffer, nullptr, 16, 0);
    }
    context.require_error(allocated, "memory_allocate" + suffix, {BP_ERROR_INVALID_ARGUMENT});

    std::vector<std::uint8_t> model;
    Buffer buffer = victim(context, model);
    std::vector<std::uint8_t> host(64);
    auto release = sized_args<BP_MemoryFreeArgs>(size_of(offsetof(BP_MemoryFreeArgs, buffer)), backend);
    release.buffer = buffer.get();
    context.require_error(api.memory_free(&release), "memory_free" + suffix, {BP_ERROR_INVALID_ARGUMENT});
    auto to_device = sized_args<BP_CopyToDeviceArgs>(size_of(offsetof(BP_CopyToDeviceArgs, event)), backend);
    to_device.destination = buffer.get();
    to_device.source = host.data();
    to_device.size = host.size();
    context.require_error(api.copy_to_device(&to_device), "copy_to_device" + suffix, {BP_ERROR_INVALID_ARGUMENT});
    auto to_host = sized_args<BP_CopyToHostArgs>(size_of(offsetof(BP_CopyToHostArgs, event)), backend);
    to_host.source = buffer.get();
    to_host.destination = host.data();
    to_host.size = host.size();
    context.require_error(api.copy_to_host(&to_host), "copy_to_host" + suffix, {BP_ERROR_INVALID_ARGUMENT});
    auto device = sized_args<BP_CopyDeviceToDeviceArgs>(size_of(offsetof(BP_CopyDeviceToDeviceArgs, event)), backend);
    device.source = buffer.get();
    device.destination = buffer.get();
    device.destination_offset = 100;
    device.size = 10;
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
    const BP_PluginApi& api = context.api;
    auto probe = sized_args<BP_ProbeArgs>(sizeof(BP_ProbeArgs), nullptr);
    context.require_error(api.probe(&probe), "probe with backend NULL", {BP_ERROR_INVALID_ARGUMENT});
    auto count = sized_args<BP_DeviceCountArgs>(sizeof(BP_DeviceCountArgs), nullptr);
    context.require_error(api.device_count(&count), "device_count with backend NULL", {BP_ERROR_INVALID_ARGUMENT});
    auto info = sized_args<BP_DeviceInfoArgs>(sizeof(BP_DeviceInfoArgs), nullptr);
    context.require_error(api.device_info(&info), "device_info with backend NULL", {BP_ERROR_INVALID_ARGUMENT});
    auto allocate = sized_args<BP_MemoryAllocateArgs>(sizeof(BP_MemoryAllocateArgs), nullptr);
    allocate.size = 16;
    context.require_error(api.memory_allocate(&allocate), "memory_allocate with backend NULL",
                          {BP_ERROR_INVALID_ARGUMENT});
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
      auto info = sized_args<BP_DeviceInfoArgs>(sizeof(BP_DeviceInfoArgs), context.backend);
      info.ordinal = ordinal;
      context.require_error(context.api.device_info(&info),
                            fmt::format("device_info of ordinal {} ({} device(s))", ordinal, count), codes);
      auto allocate = sized_args<BP_MemoryAllocateArgs>(sizeof(BP_MemoryAllocateArgs), context.backend);
      allocate.ordinal = ordinal;
      allocate.size = 16;
      BP_Error* error = context.api.memory_allocate(&allocate);
      if (error == nullptr && allocate.buffer != nullptr) Buffer(&context, allocate.buffer, nullptr, 16, 0).reset();
      context.require_error(error, fmt::format("memory_allocate on ordinal {} ({} device(s))", ordinal, count),
                            codes);
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
      auto allocate = sized_args<BP_MemoryAllocateArgs>(sizeof(BP_MemoryAllocateArgs), context.backend);
      allocate.size = size;
      BP_Error* error = context.api.memory_allocate(&allocate);
      if (error == nullptr && allocate.buffer != nullptr) Buffer(&context, allocate.buffer, nullptr, size, 0).reset();
      context.require_error(error,
                            fmt::format("memory_allocate of {} bytes on {} (memory_total {})", size, context.label(0),
                                        total),
                            {BP_ERROR_OUT_OF_MEMORY, BP_ERROR_OUT_OF_RANGE, BP_ERROR_INVALID_ARGUMENT});
    }
    std::vector<std::uint8_t> model;
    Buffer after = victim(context, model);
    require_unchanged(context, after, model, "a refused huge allocation (a new buffer)");
    return fmt::format("{} and {} bytes refused", beyond, kMax);
  });
  context.check("errors: an unknown memory kind is refused", [&] {
    context.require_devices();
    auto allocate = sized_args<BP_MemoryAllocateArgs>(sizeof(BP_MemoryAllocateArgs), context.backend);
    allocate.kind = 99;
    allocate.size = 16;
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
    BP_CopyToDeviceArgs to_device{};
    to_device.struct_size = sizeof(to_device);
    to_device.backend = context.backend;
    to_device.destination = buffer.get();
    to_device.destination_offset = kSmallBuffer - 10;
    to_device.source = host.data();
    to_device.size = 11;
    require_async_refused(context, context.api.copy_to_device_async(&to_device), to_device.event,
                          "copy_to_device_async one byte past the end");
    BP_CopyToHostArgs to_host{};
    to_host.struct_size = sizeof(to_host);
    to_host.backend = context.backend;
    to_host.source = buffer.get();
    to_host.source_offset = kSmallBuffer - 10;
    to_host.destination = host.data();
    to_host.size = 11;
    require_async_refused(context, context.api.copy_to_host_async(&to_host), to_host.event,
                          "copy_to_host_async one byte past the end");
    BP_CopyDeviceToDeviceArgs device{};
    device.struct_size = sizeof(device);
    device.backend = context.backend;
    device.source = buffer.get();
    device.destination = buffer.get();
    device.destination_offset = kSmallBuffer - 10;
    device.size = 11;
    require_async_refused(context, context.api.copy_device_to_device_async(&device), device.event,
                          "copy_device_to_device_async one byte past the end");
    require_unchanged(context, buffer, model, "refused async copies");
    return std::string();
  });
  context.check("errors: a NULL host pointer with a non-zero size is refused", [&] {
    context.require_devices();
    std::vector<std::uint8_t> model;
    Buffer buffer = victim(context, model);
    BP_CopyToDeviceArgs to_device{};
    to_device.struct_size = sizeof(to_device);
    to_device.backend = context.backend;
    to_device.destination = buffer.get();
    to_device.size = 16;
    context.require_error(context.api.copy_to_device(&to_device), "copy_to_device from source NULL",
                          {BP_ERROR_INVALID_ARGUMENT});
    BP_CopyToHostArgs to_host{};
    to_host.struct_size = sizeof(to_host);
    to_host.backend = context.backend;
    to_host.source = buffer.get();
    to_host.size = 16;
    context.require_error(context.api.copy_to_host(&to_host), "copy_to_host into destination NULL",
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
    BP_BackendCreateArgs create{};
    create.struct_size = sizeof(create);
    std::vector<BP_KeyValue> pairs;
    for (const auto& [key, value] : context.options.plugin_options) {
      pairs.push_back({sizeof(BP_KeyValue), key.data(), key.size(), value.data(), value.size()});
    }
    create.options = pairs.data();
    create.option_count = pairs.size();
    context.require_ok(context.api.backend_create(&create), "a second backend_create");
    BP_Backend* other = create.backend;
    auto allocate = sized_args<BP_MemoryAllocateArgs>(sizeof(BP_MemoryAllocateArgs), other);
    allocate.size = 64;
    if (auto failure = context.take(context.api.memory_allocate(&allocate))) {
      context.api.backend_destroy(other);
      throw CheckFailure("memory_allocate on a second instance failed: " + failure->message);
    }
    std::vector<std::uint8_t> host(64);
    BP_CopyToHostArgs to_host{};
    to_host.struct_size = sizeof(to_host);
    to_host.backend = context.backend;
    to_host.source = allocate.buffer;
    to_host.destination = host.data();
    to_host.size = 16;
    auto refused = context.take(context.api.copy_to_host(&to_host));
    BP_MemoryFreeArgs release{};
    release.struct_size = sizeof(release);
    release.backend = other;
    release.buffer = allocate.buffer;
    context.take(context.api.memory_free(&release));
    context.api.backend_destroy(other);
    if (!refused) throw CheckFailure("copy_to_host with a buffer of another instance returned success");
    return std::string();
  });
  context.check("errors: NULL and destroyed event handles are refused", [&] {
    context.require_devices();
    BP_EventArgs args{};
    args.struct_size = sizeof(args);
    args.backend = context.backend;
    context.require_error(context.api.event_wait(&args), "event_wait of event NULL", {BP_ERROR_INVALID_ARGUMENT});
    context.require_error(context.api.event_query(&args), "event_query of event NULL", {BP_ERROR_INVALID_ARGUMENT});
    Buffer buffer = context.allocate(0, 64);
    std::vector<std::uint8_t> host(64, 1);
    BP_CopyToDeviceArgs to_device{};
    to_device.struct_size = sizeof(to_device);
    to_device.backend = context.backend;
    to_device.destination = buffer.get();
    to_device.source = host.data();
    to_device.size = host.size();
    context.require_ok(context.api.copy_to_device_async(&to_device), "copy_to_device_async");
    context.finish(to_device.event, "copy_to_device_async");  // destroys it
    args.event = to_device.event;
    context.require_error(context.api.event_wait(&args), "event_wait of a destroyed event",
                          {BP_ERROR_INVALID_ARGUMENT});
    context.require_error(context.api.event_query(&args), "event_query of a destroyed event",
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
