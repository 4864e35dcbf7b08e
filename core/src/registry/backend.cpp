#include "registry/backend.hpp"

#include "loader/plugin_limits.hpp"
#include "loader/table_validation.hpp"
#include "trace/trace.hpp"
#include "util/error_codes.hpp"
#include "util/fork.hpp"
#include "util/log.hpp"

#include <unistd.h>

#include <fmt/format.h>

namespace backplane::detail {
namespace {

// Throws Error(kPlugin) naming `call`, the field and its value when a size
// or count a plugin answered is past `limit`.
void require_within(std::uint64_t value, std::size_t limit, std::string_view call, std::string_view field) {
  if (value > limit) {
    throw Error(ErrorCode::kPlugin, fmt::format("{} answered {} {}, more than {}", call, field, value, limit));
  }
}

}  // namespace

void throw_plugin_error(const PluginError& failure, std::string_view context) {
  throw Error(failure.code, fmt::format("{}: {}", context, failure.message));
}

std::unique_ptr<Backend> Backend::create(std::shared_ptr<PluginLibrary> library, const PluginOptions& options,
                                         std::string name) {
  if (name.empty()) name = std::string(library->name());
  BP_Backend* handle = throw_if_failed(detail::PluginClient::create(library->api(), options),
                                       [] { return std::string("backend_create failed"); });
  if (handle == nullptr) {
    throw Error(ErrorCode::kPlugin, "backend_create failed: backend_create returned no backend");
  }
  return std::unique_ptr<Backend>(new Backend(std::move(library), handle, std::move(name)));
}

Backend::Backend(std::shared_ptr<PluginLibrary> library, BP_Backend* handle, std::string name)
    : library_(std::move(library)),
      handle_(handle),
      client_(library_->api(), handle),
      name_(std::move(name)),
      capabilities_(library_->api().capabilities),
      dlpack_device_type_(library_->dlpack_device_type()),
      fork_generation_(fork_generation()),
      created_pid_(getpid()) {}

// The plugin's state for this backend belongs to the parent: leaked, not
// destroyed, in a child (see usable_here).
Backend::~Backend() {
  if (usable_here()) client_.backend_destroy();
}

bool Backend::usable_here() const noexcept {
  return fork_generation_ == fork_generation() || has(BP_CAPABILITY_HOST_ADDRESSABLE);
}

Error Backend::fork_error(int ordinal) const {
  return Error(ErrorCode::kUnavailable,
               fmt::format("{0}:{1} cannot be used in this process: the {0} backend was set up in process {2} "
                           "before fork(), and a backend whose memory is not host memory does not survive fork "
                           "(its device state stays in the parent); use {0} only in the parent, or start workers "
                           "with the 'spawn' method",
                           name(), ordinal, created_pid_));
}

Backend::ProbeAnswer Backend::probe() {
  // The table's priority, capabilities and DLPack type stand unless the
  // plugin answers its own (ABI 1.2, 1.4): a plugin that does not know the
  // fields leaves them as preset.
  const BP_Capabilities table_capabilities = api().capabilities;
  auto probed = client_.probe(api().priority, table_capabilities, library_->dlpack_device_type());
  if (!probed.ok()) throw_plugin_error(probed.error(), fmt::format("probe failed ({})", to_string(probed.code())));
  const BP_ProbeArgs& args = *probed;
  auto broken = [](const std::string& problem) {
    return Error(ErrorCode::kPlugin, fmt::format("probe failed ({}): {}", to_string(ErrorCode::kPlugin), problem));
  };
  if (args.reason_size > kMaxPluginTextSize) {
    throw broken(fmt::format("probe answered reason_size {}, more than {}", args.reason_size, kMaxPluginTextSize));
  }
  ProbeAnswer answer{args.available != 0, std::string(plugin_text(args.reason, args.reason_size)), args.priority};
  answer.capabilities =
      (args.capabilities & ~BP_CAPABILITY_PROBE_IN_CHILD) | (table_capabilities & BP_CAPABILITY_PROBE_IN_CHILD);
  answer.dlpack_device_type = args.dlpack_device_type;
  if (auto problem = probe_statement_problem(api(), answer.capabilities, answer.dlpack_device_type)) {
    throw broken(*problem);
  }
  take_statement(answer);
  return answer;
}

void Backend::take_statement(const ProbeAnswer& answer) {
  capabilities_ = answer.capabilities;
  dlpack_device_type_ = answer.dlpack_device_type;
}

void Backend::adopt_snapshot(ProbeSnapshot snapshot) {
  ProbeAnswer& answer = snapshot.answer;
  answer.capabilities =
      (answer.capabilities & ~BP_CAPABILITY_PROBE_IN_CHILD) | (api().capabilities & BP_CAPABILITY_PROBE_IN_CHILD);
  if (auto problem = probe_statement_problem(api(), answer.capabilities, answer.dlpack_device_type)) {
    throw Error(ErrorCode::kPlugin, fmt::format("probe in the probe helper: {}", *problem));
  }
  if (snapshot.devices.size() > static_cast<std::size_t>(kMaxPluginDevices)) {
    throw Error(ErrorCode::kPlugin, fmt::format("probe in the probe helper: {} devices, more than {}",
                                                snapshot.devices.size(), kMaxPluginDevices));
  }
  take_statement(answer);
  for (DeviceInfo& device : snapshot.devices) device.backend = name_;
  snapshot_ = std::make_unique<const ProbeSnapshot>(std::move(snapshot));
  snapshot_devices_ = static_cast<int>(snapshot_->devices.size());
}

void Backend::throw_device_count_error(const PluginResult<std::int32_t>& count) const {
  if (!count.ok()) throw_plugin_error(count.error(), fmt::format("{}: device_count", name()));
  throw Error(ErrorCode::kPlugin,
              fmt::format("{}: device_count answered {}, outside 0..{}", name(), *count, kMaxPluginDevices));
}

std::vector<std::string> Backend::derived_memory_kinds() const {
  if (has(BP_CAPABILITY_HOST_ADDRESSABLE)) return {"host"};
  if (has(BP_CAPABILITY_PINNED_HOST)) return {"device", "pinned_host"};
  return {"device"};
}

DeviceInfo Backend::device_info(int ordinal) {
  if (snapshot_ != nullptr && !in_use_.load(std::memory_order_acquire)) {
    if (ordinal < 0 || static_cast<std::size_t>(ordinal) >= snapshot_->devices.size()) {
      throw Error(ErrorCode::kOutOfRange, fmt::format("{}:{}: device_info: the backend has {} devices", name(), ordinal,
                                                      snapshot_->devices.size()));
    }
    return snapshot_->devices[static_cast<std::size_t>(ordinal)];
  }
  const BP_DeviceInfoArgs args =
      throw_if_failed(client_.device_info(ordinal), [&] { return fmt::format("{}:{}: device_info", name(), ordinal); });
  if ((args.name == nullptr && args.name_size != 0) || (args.attributes == nullptr && args.attribute_count != 0) ||
      (args.memories == nullptr && args.memory_count != 0)) {
    throw Error(ErrorCode::kPlugin,
                fmt::format("{}:{}: device_info returned NULL with a non-zero size", name(), ordinal));
  }
  const std::string call = fmt::format("{}:{}: device_info", name(), ordinal);
  require_within(args.name_size, kMaxPluginTextSize, call, "name_size");
  require_within(args.attribute_count, kMaxDeviceAttributes, call, "attribute_count");
  require_within(args.memory_count, kMaxDeviceMemories, call, "memory_count");
  DeviceInfo info;
  info.backend = std::string(name());
  info.ordinal = ordinal;
  info.name = std::string(plugin_text(args.name, args.name_size));
  switch (args.kind) {
    case BP_DEVICE_KIND_GPU: info.kind = DeviceKind::kGpu; break;
    case BP_DEVICE_KIND_ACCELERATOR: info.kind = DeviceKind::kAccelerator; break;
    default: info.kind = DeviceKind::kCpu; break;
  }
  info.memory_total = args.memory_total;
  if (args.memory_free != BP_MEMORY_FREE_UNKNOWN) info.memory_free = args.memory_free;
  for (std::size_t i = 0; i < args.attribute_count; ++i) {
    const BP_KeyValue& pair = args.attributes[i];
    require_within(pair.key_size, kMaxPluginTextSize, call, fmt::format("attribute {} key_size", i));
    require_within(pair.value_size, kMaxPluginTextSize, call, fmt::format("attribute {} value_size", i));
    info.attributes.emplace_back(std::string(plugin_text(pair.key, pair.key_size)),
                                 std::string(plugin_text(pair.value, pair.value_size)));
  }
  for (std::size_t i = 0; i < args.memory_count; ++i) {
    const BP_KeyValue& memory = args.memories[i];
    require_within(memory.key_size, kMaxPluginTextSize, call, fmt::format("memory {} key_size", i));
    std::string kind(plugin_text(memory.key, memory.key_size));
    if (kind.empty()) {
      throw Error(ErrorCode::kPlugin, fmt::format("{} answered memory {} with an empty kind", call, i));
    }
    info.memory_kinds.push_back(std::move(kind));
  }
  if (info.memory_kinds.empty()) info.memory_kinds = derived_memory_kinds();
  return info;
}

}  // namespace backplane::detail

// ------------------------------------------------------ device operations --
// Used by the placement layer. Messages name the device and the size so that
// an error read far from the call still says what failed.

namespace backplane::detail {
namespace {

PluginEvent require_event(Backend& backend, BP_Event* event, int ordinal, const char* call) {
  if (event == nullptr) {
    throw Error(ErrorCode::kPlugin,
                fmt::format("{}:{}: {} succeeded but returned no event", backend.name(), ordinal, call));
  }
  return PluginEvent(backend, event);
}

}  // namespace

Backend::Allocation Backend::allocate(int ordinal, BP_MemoryKind kind, std::uint64_t size) {
  note_device_use(ordinal);
  const char* what = kind == BP_MEMORY_PINNED_HOST ? "pinned host memory_allocate" : "memory_allocate";
  const detail::BufferAllocation args = throw_if_failed(client_.memory_allocate(ordinal, kind, size), [&] {
    return fmt::format("{}:{}: {} of {} bytes", name(), ordinal, what, size);
  });
  if (args.buffer == nullptr) {
    throw Error(ErrorCode::kPlugin, fmt::format("{}:{}: {} succeeded but returned no buffer", name(), ordinal, what));
  }
  // The core writes through this address (take_windows, DLPack export,
  // staging) whenever the memory is host memory: NULL there would be a crash
  // far from the plugin that caused it.
  const bool host_memory = kind == BP_MEMORY_PINNED_HOST || has(BP_CAPABILITY_HOST_ADDRESSABLE);
  if (host_memory && args.address == nullptr && size != 0) {
    free(args.buffer);
    throw Error(ErrorCode::kPlugin,
                fmt::format("{}:{}: {} of {} bytes succeeded but returned no address, which {} memory must have",
                            name(), ordinal, what, size,
                            kind == BP_MEMORY_PINNED_HOST ? "pinned host" : "a host-addressable backend's"));
  }
  return {args.buffer, args.address};
}

void Backend::free(BP_Buffer* buffer) noexcept {
  if (buffer == nullptr || !usable_here()) return;
  try {
    const PluginStatus freed = client_.memory_free(buffer);
    if (!freed.ok()) log(LogLevel::kWarn, "{}: memory_free failed: {}", name(), freed.message());
  } catch (...) {  // logging may throw (allocation); nothing else to do
  }
}

bool Backend::wraps_memory() const {
  // A 1.0 table ends before memory_wrap: read the field only where it exists.
  return has(BP_CAPABILITY_WRAP_MEMORY) && BP_TABLE_HAS_CALL(&api(), memory_wrap);
}

BP_Buffer* Backend::wrap(int ordinal, void* address, std::uint64_t size) {
  if (!wraps_memory()) {
    const bool too_old = !BP_STRUCT_HAS_FIELD(&api(), BP_PluginApi, memory_wrap);
    throw Error(ErrorCode::kUnsupported,
                fmt::format("{}:{}: the backend cannot adopt memory it did not allocate ({})", name(), ordinal,
                            too_old ? fmt::format("plugin ABI {}.{} has no memory_wrap; it arrived in ABI 1.1",
                                                  api().abi_major, api().abi_minor)
                                    : std::string("the plugin does not offer the optional memory_wrap")));
  }
  note_device_use(ordinal);
  BP_Buffer* buffer = throw_if_failed(client_.memory_wrap(ordinal, address, size), [&] {
    return fmt::format("{}:{}: memory_wrap of {} bytes at {}", name(), ordinal, size, address);
  });
  if (buffer == nullptr) {
    throw Error(ErrorCode::kPlugin,
                fmt::format("{}:{}: memory_wrap succeeded but returned no buffer", name(), ordinal));
  }
  return buffer;
}

namespace {

// The error context of a copy, formatted only if the copy fails.
auto copy_context(std::string_view backend, int ordinal, const char* call, std::uint64_t size) {
  return [=] { return fmt::format("{}:{}: {} of {} bytes", backend, ordinal, call, size); };
}

}  // namespace

void Backend::copy_to_device(int ordinal, BP_Buffer* destination, std::uint64_t offset, const void* source,
                             std::uint64_t size) {
  note_device_use(ordinal);
  throw_if_failed(client_.copy_to_device(destination, offset, source, size),
                  copy_context(name(), ordinal, "copy_to_device", size));
}

void Backend::copy_to_host(int ordinal, BP_Buffer* source, std::uint64_t offset, void* destination,
                           std::uint64_t size) {
  note_device_use(ordinal);
  throw_if_failed(client_.copy_to_host(source, offset, destination, size),
                  copy_context(name(), ordinal, "copy_to_host", size));
}

void Backend::copy_device_to_device(int ordinal, BP_Buffer* source, std::uint64_t source_offset, BP_Buffer* destination,
                                    std::uint64_t destination_offset, std::uint64_t size) {
  note_device_use(ordinal);
  throw_if_failed(client_.copy_device_to_device(source, source_offset, destination, destination_offset, size),
                  copy_context(name(), ordinal, "copy_device_to_device", size));
}

PluginEvent Backend::copy_to_device_async(int ordinal, BP_Buffer* destination, std::uint64_t offset, const void* source,
                                          std::uint64_t size) {
  note_device_use(ordinal);
  BP_Event* event = throw_if_failed(client_.copy_to_device_async(destination, offset, source, size, timing_request()),
                                    copy_context(name(), ordinal, "copy_to_device_async", size));
  return require_event(*this, event, ordinal, "copy_to_device_async");
}

PluginEvent Backend::copy_to_host_async(int ordinal, BP_Buffer* source, std::uint64_t offset, void* destination,
                                        std::uint64_t size) {
  note_device_use(ordinal);
  BP_Event* event = throw_if_failed(client_.copy_to_host_async(source, offset, destination, size, timing_request()),
                                    copy_context(name(), ordinal, "copy_to_host_async", size));
  return require_event(*this, event, ordinal, "copy_to_host_async");
}

PluginEvent Backend::copy_device_to_device_async(int ordinal, BP_Buffer* source, std::uint64_t source_offset,
                                                 BP_Buffer* destination, std::uint64_t destination_offset,
                                                 std::uint64_t size) {
  note_device_use(ordinal);
  BP_Event* event = throw_if_failed(client_.copy_device_to_device_async(source, source_offset, destination,
                                                                        destination_offset, size, timing_request()),
                                    copy_context(name(), ordinal, "copy_device_to_device_async", size));
  return require_event(*this, event, ordinal, "copy_device_to_device_async");
}

PluginEvent Backend::convert_integers(int ordinal, BP_Buffer* source, std::uint64_t source_offset,
                                      BP_IntegerType source_type, BP_Buffer* destination,
                                      std::uint64_t destination_offset, BP_IntegerType destination_type,
                                      std::uint64_t count) {
  if (!has(BP_CAPABILITY_CONVERT_INTEGERS) || api().convert_integers == nullptr) {
    throw Error(ErrorCode::kUnsupported, fmt::format("{}:{}: the backend does not convert integers", name(), ordinal));
  }
  note_device_use(ordinal);
  BP_Event* event =
      throw_if_failed(client_.convert_integers(source, source_offset, source_type, destination, destination_offset,
                                               destination_type, count, timing_request()),
                      [&] { return fmt::format("{}:{}: convert_integers of {} elements", name(), ordinal, count); });
  return require_event(*this, event, ordinal, "convert_integers");
}

PluginStatus Backend::wait_event(BP_Event* event) {
  if (!usable_here()) return PluginError{ErrorCode::kUnavailable, fork_error(0).what()};
  return client_.event_wait(event);
}

bool Backend::query_event(BP_Event* event) noexcept {
  if (!usable_here()) return true;  // wait_event reports why
  // A failed query counts as done: event_wait will report what went wrong.
  try {
    const PluginResult<std::int32_t> done = client_.event_query(event);
    return !done.ok() || *done != 0;
  } catch (...) {  // no memory to copy the query's error: done, as for any failed query
    return true;
  }
}

std::int32_t Backend::timing_request() const { return trace::recording() && times_events() ? 1 : 0; }

DeviceTiming Backend::event_timing(BP_Event* event) noexcept {
  DeviceTiming timing;
  if (!times_events() || !usable_here()) return timing;
  try {
    auto answered = client_.event_timing(event);
    if (!answered.ok()) {
      timing.error = std::move(answered).error().message;
    } else if (const BP_EventTimingArgs& args = *answered; args.available != 0) {
      if (args.begin_ns > args.end_ns) {
        timing.error =
            fmt::format("event_timing answered a begin ({} ns) after the end ({} ns)", args.begin_ns, args.end_ns);
      } else {
        timing.span.emplace(args.begin_ns, args.end_ns);
      }
    }
  } catch (...) {  // no memory for the message: the event keeps its host times
  }
  return timing;
}

void Backend::destroy_event(BP_Event* event) noexcept {
  if (event != nullptr && usable_here()) client_.event_destroy(event);
}

PluginEvent& PluginEvent::operator=(PluginEvent&& other) noexcept {
  if (this != &other) {
    reset();
    backend_ = other.backend_;
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

PluginStatus PluginEvent::finish(DeviceTiming* timing) {
  if (event_ == nullptr) return {};
  PluginStatus waited = backend_->wait_event(event_);
  if (waited.ok() && timing != nullptr) *timing = backend_->event_timing(event_);
  reset();
  return waited;
}

bool PluginEvent::query() noexcept { return event_ == nullptr || backend_->query_event(event_); }

void PluginEvent::reset() noexcept {
  if (event_ != nullptr) backend_->destroy_event(std::exchange(event_, nullptr));
}

}  // namespace backplane::detail
