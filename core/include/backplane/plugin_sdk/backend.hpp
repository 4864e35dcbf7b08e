// The plugin SDK's core: a backend is a class with hook methods, and
// `table<Impl>()` generates the whole BP_PluginApi around it: the entry table,
// handle validation, argument and range checks, probe caching, device
// descriptions that stay valid until backend_destroy, completed events for
// backends that run copies inline, and the translation of exceptions into
// BP_Error. A hook reports failure by throwing plugin_sdk::Failure (or any
// exception, which becomes BP_ERROR_INTERNAL); no exception crosses the ABI.
//
// What an Impl provides is the `Backend` concept and the optional-hook
// concepts in contract.hpp, checked hook by hook when the table is generated.
// Notes on the hooks the signatures do not say:
//   probe is called once; describe once per device; memory per device_info.
//   Buffer's destructor releases the memory (memory_free, backend_destroy);
//   Event's destructor waits if needed, then releases.
//   wait throws the asynchronous error, if any; query is true once complete.
//   timing (BP_CAPABILITY_EVENT_TIMING): for a completed event, when the
//       device ran its work (CLOCK_MONOTONIC ns), or nullopt for work that
//       was not timed. The async hooks see plugin_sdk::timing_requested()
//       true when the caller asked for it.
//   refusal (optional, no capability bit): non-empty, why this process may
//       not use the backend now (a driver that does not survive fork(), say).
//       probe then reports unavailable with it, and every call that reaches
//       a device or a buffer fails UNAVAILABLE with "<call>: <refusal>"
//       before any hook runs. The destroy calls still run, so destructors
//       must check for themselves; so must probe, which device_count runs
//       without asking refusal. The text must stay valid until
//       backend_destroy.
//   release (optional, no capability bit): memory_free frees through it, so
//       that a failure reaches the caller; the handle is gone either way and
//       the buffer's destructor runs after.
//
// A copy hook returns nullptr when the copy has completed, or an event. In
// Mode::kBlocking the SDK waits on a returned event before the call returns;
// in Mode::kAsync it hands the event out (a completed one when the hook
// returned nullptr).
//
// Guarantees to the hooks: the backend, buffers and events are live handles
// of this backend; copies and conversions run on an available backend (one
// that is not gives UNAVAILABLE with its reason, not "no such buffer");
// ordinals are in range of an available backend; copy and
// conversion ranges fit their buffers; host pointers are non-NULL unless the
// size is 0; memory kinds are ones the capabilities offer.
#ifndef BACKPLANE_PLUGIN_SDK_BACKEND_HPP
#define BACKPLANE_PLUGIN_SDK_BACKEND_HPP

#include <backplane/plugin.h>
#include <backplane/plugin_sdk/checks.hpp>
#include <backplane/plugin_sdk/contract.hpp>
#include <backplane/plugin_sdk/handles.hpp>
#include <backplane/plugin_sdk/timing.hpp>
#include <backplane/plugin_support.hpp>

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace backplane::plugin_sdk {

namespace detail {

// A device's description in the form device_info hands out; built once and
// kept until backend_destroy, as the ABI promises.
struct DescribedDevice {
  std::string name;
  BP_DeviceKind kind = BP_DEVICE_KIND_CPU;
  std::vector<std::pair<std::string, std::string>> text;
  std::vector<BP_KeyValue> attributes;  // views into text
  std::vector<std::pair<std::string, std::string>> memory_text;
  std::vector<BP_KeyValue> memories;  // views into memory_text
};

inline std::vector<BP_KeyValue> key_values(const std::vector<std::pair<std::string, std::string>>& text) {
  std::vector<BP_KeyValue> views;
  views.reserve(text.size());
  for (const auto& [key, value] : text) {
    views.push_back({sizeof(BP_KeyValue), key.data(), key.size(), value.data(), value.size()});
  }
  return views;
}

// An ABI event: the backend's event, or none when the work had completed.
template <class Event>
struct EventSlot {
  std::unique_ptr<Event> event;
};

// One backend instance: the Impl plus the SDK's bookkeeping around it.
// Members are destroyed in reverse order: events, then buffers, then Impl.
template <class Impl>
struct Instance {
  std::unique_ptr<Impl> impl;
  // Double-checked rather than std::call_once, whose libstdc++ version costs
  // more than the rest of a device_count call.
  std::atomic<bool> probed{false};
  std::mutex probe_mutex;
  Probe probe;
  std::int32_t device_count = 0;
  // In effect once probed: what the backend stated after its probe (ABI
  // 1.4), else the table's.
  BP_Capabilities capabilities = Impl::kIdentity.capabilities;
  std::int32_t dlpack_device_type = Impl::kIdentity.dlpack_device_type;
  std::mutex describe_mutex;
  std::vector<std::unique_ptr<DescribedDevice>> described;  // by ordinal, filled on demand
  HandleTable<typename Impl::Buffer, BP_Buffer> buffers;
  HandleTable<EventSlot<typename Impl::Event>, BP_Event> events;
};

// Whether an async call's args ask for device timing.
template <class Impl, class Args>
bool timed(const Args* args) {
  if constexpr (TimesEvents<Impl>) {
    return BP_STRUCT_HAS_FIELD(args, Args, timed) && args->timed != 0;
  } else {
    return false;
  }
}

// The plugin's live backends. One the embedder never destroyed is left alone
// at exit (its drivers may already be gone) and stays reachable from here, so
// it is not reported as a leak; once all are destroyed, unloading the plugin
// frees the table. A variable rather than a function-local static, so the hot
// path pays no initialisation guard.
template <class Impl>
inline HandleTable<Instance<Impl>, BP_Backend> live_backends{
    HandleTable<Instance<Impl>, BP_Backend>::AtDestruction::kLeaveLiveObjects};

}  // namespace detail

template <class Impl>
class Entries {
  using Buffer = typename Impl::Buffer;
  using Event = typename Impl::Event;
  using Instance = detail::Instance<Impl>;
  static constexpr Identity kId = Impl::kIdentity;

  static std::string name() { return std::string(kId.name); }

  [[noreturn, gnu::cold, gnu::noinline]] static void throw_not_live(const char* call, const char* role,
                                                                    const char* what, const void* handle) {
    const std::string subject = std::string(call) + ": " + (*role != '\0' ? std::string(role) + " " : "");
    if (handle == nullptr) throw Failure(BP_ERROR_INVALID_ARGUMENT, subject + what + " is NULL");
    if (std::string_view(what) == "backend") {
      throw Failure(BP_ERROR_INVALID_ARGUMENT, subject + "backend handle is not a live " + name() + " backend");
    }
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  subject + what + " handle is not a live " + what + " of this " + name() + " backend" +
                      (std::string_view(what) == "buffer" ? " (already freed, or from another backend)" : ""));
  }

  static Instance& instance(BP_Backend* handle, const char* call) {
    Instance* found = detail::live_backends<Impl>.find(handle);
    if (found == nullptr) [[unlikely]]
      throw_not_live(call, "", "backend", handle);
    return *found;
  }

  [[gnu::noinline]] static Instance& probe_once(Instance& self) {
    const std::lock_guard lock(self.probe_mutex);
    if (!self.probed.load(std::memory_order_relaxed)) {
      self.probe = self.impl->probe();
      self.probe.reason = fitted_text(std::move(self.probe.reason));
      if constexpr (StatesCapabilities<Impl>) {
        self.capabilities = self.impl->capabilities();
        self.dlpack_device_type = self.impl->dlpack_device_type();
      }
      self.device_count = self.probe.available ? self.impl->device_count() : 0;
      self.probed.store(true, std::memory_order_release);
    }
    return self;
  }

  static Instance& probed(Instance& self) {
    if (self.probed.load(std::memory_order_acquire)) [[likely]]
      return self;
    return probe_once(self);
  }

  static Instance& probed(BP_Backend* handle, const char* call) { return probed(instance(handle, call)); }

  // The backend, unless it refuses this process (see refusal()).
  static Instance& admitted(BP_Backend* handle, const char* call) {
    Instance& self = instance(handle, call);
    if constexpr (Refuses<Impl>) {
      const std::string_view refusal = self.impl->refusal();
      if (!refusal.empty()) [[unlikely]] {
        throw Failure(BP_ERROR_UNAVAILABLE, std::string(call) + ": " + std::string(refusal));
      }
    }
    return self;
  }

  // The backend, admitted, probed and available.
  static Instance& working(BP_Backend* handle, const char* call) {
    Instance& self = probed(admitted(handle, call));
    if (!self.probe.available) [[unlikely]] {
      throw Failure(BP_ERROR_UNAVAILABLE, std::string(call) + ": " + name() + " is unavailable: " + self.probe.reason);
    }
    return self;
  }

  static Instance& usable(BP_Backend* handle, const char* call, std::int32_t ordinal) {
    Instance& self = working(handle, call);
    if (ordinal < 0 || ordinal >= self.device_count) {
      throw Failure(
          BP_ERROR_OUT_OF_RANGE,
          std::string(call) + ": " + name() + " device ordinal " + std::to_string(ordinal) +
              " is out of range: the backend has " + std::to_string(self.device_count) + " device(s)" +
              (self.device_count > 0 ? ", " + name() + ":0.." + name() + ":" + std::to_string(self.device_count - 1)
                                     : ""));
    }
    return self;
  }

  static Buffer& buffer(Instance& self, BP_Buffer* handle, const char* call, const char* role) {
    Buffer* found = self.buffers.find(handle);
    if (found == nullptr) [[unlikely]]
      throw_not_live(call, role, "buffer", handle);
    return *found;
  }

  static detail::EventSlot<Event>& event(Instance& self, BP_Event* handle, const char* call) {
    auto* found = self.events.find(handle);
    if (found == nullptr) [[unlikely]]
      throw_not_live(call, "", "event", handle);
    return *found;
  }

  // Blocking: waits on the event, if any, before returning. Async: hands out
  // an event (an empty one when the work already completed).
  static void finish(Instance& self, std::unique_ptr<Event> event, Mode mode, BP_Event** out) {
    if (mode == Mode::kBlocking) {
      if (event != nullptr) self.impl->wait(*event);
      return;
    }
    auto slot = std::make_unique<detail::EventSlot<Event>>(detail::EventSlot<Event>{std::move(event)});
    BP_Event* handle = self.events.insert(slot);
    if (handle == nullptr) {
      throw Failure(BP_ERROR_OUT_OF_MEMORY, "too many live events on this " + name() + " backend");
    }
    *out = handle;
  }

  template <class Object, class Handle>
  static Handle* keep(HandleTable<Object, Handle>& table, std::unique_ptr<Object> object, const char* what) {
    Handle* handle = table.insert(object);
    if (handle == nullptr)
      throw Failure(BP_ERROR_OUT_OF_MEMORY, std::string("too many live ") + what + " on this " + name() + " backend");
    return handle;
  }

  static std::uint64_t integer_width(BP_IntegerType type, std::string_view role) {
    const std::uint64_t width = integer_size(type);
    if (width == 0) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    "convert_integers: unknown " + std::string(role) + " type " + std::to_string(type));
    }
    return width;
  }

  // The bytes `count` elements of `width` take, or OUT_OF_RANGE on overflow.
  static std::uint64_t element_bytes(std::uint64_t count, std::uint64_t width, std::string_view role) {
    if (count > UINT64_MAX / width) {
      throw Failure(BP_ERROR_OUT_OF_RANGE, "convert_integers: " + std::to_string(count) + " " + std::string(role) +
                                               " elements overflow a 64-bit byte count");
    }
    return count * width;
  }

  template <class Body>
  static BP_Error* run(Body&& body) noexcept {
    return guarded([&]() -> BP_Error* {
      body();
      return nullptr;
    });
  }

 public:
  static BP_Error* backend_create(BP_BackendCreateArgs* args) noexcept {
    return run([&] {
      require_args(args, "backend_create");
      const Options options(kId.name, args->options, args->option_count);
      auto created = std::make_unique<Instance>();
      created->impl = Impl::create(options);
      args->backend = keep(detail::live_backends<Impl>, std::move(created), "backends");
    });
  }

  static void backend_destroy(BP_Backend* handle) noexcept {
    BP_Error* error = run([&] {
      if (handle == nullptr) return;
      std::unique_ptr<Instance> removed = detail::live_backends<Impl>.remove(handle);
      if (removed == nullptr)
        throw Failure(BP_ERROR_INVALID_ARGUMENT, "backend_destroy: not a live " + name() + " backend");
      removed->events.drain();   // each waits for its work
      removed->buffers.drain();  // then memory goes, then the backend
    });
    if (error != nullptr) error->destroy(error);  // a void call: nowhere to report it
  }

  static BP_Error* probe(BP_ProbeArgs* args) noexcept {
    return run([&] {
      require_args(args, "probe");  // a 1.1 caller's struct ends before priority
      Instance& self = instance(args->backend, "probe");
      if constexpr (Refuses<Impl>) {
        if (const std::string_view refusal = self.impl->refusal(); !refusal.empty()) {
          args->available = 0;
          args->reason = refusal.data();
          args->reason_size = refusal.size();
          return;
        }
      }
      probed(self);
      args->available = self.probe.available ? 1 : 0;
      args->reason = self.probe.reason.data();
      args->reason_size = self.probe.reason.size();
      if (self.probe.priority && BP_STRUCT_HAS_FIELD(args, BP_ProbeArgs, priority))
        args->priority = *self.probe.priority;
      if (StatesCapabilities<Impl> && BP_STRUCT_HAS_FIELD(args, BP_ProbeArgs, dlpack_device_type)) {
        args->capabilities = self.capabilities & ~BP_CAPABILITY_PROBE_IN_CHILD;
        args->dlpack_device_type = self.dlpack_device_type;
      }
    });
  }

  static BP_Error* device_count(BP_DeviceCountArgs* args) noexcept {
    return run([&] {
      require_args(args, "device_count");
      args->count = probed(args->backend, "device_count").device_count;
    });
  }

  static BP_Error* device_info(BP_DeviceInfoArgs* args) noexcept {
    return run([&] {
      require_args(args, "device_info");
      Instance& self = usable(args->backend, "device_info", args->ordinal);
      const auto ordinal = static_cast<std::size_t>(args->ordinal);
      const detail::DescribedDevice* device = nullptr;
      {
        const std::lock_guard lock(self.describe_mutex);
        if (self.described.size() <= ordinal) self.described.resize(ordinal + 1);
        if (self.described[ordinal] == nullptr) {
          DeviceDescription description = self.impl->describe(args->ordinal);
          auto described = std::make_unique<detail::DescribedDevice>();
          described->name = std::move(description.name);
          described->kind = description.kind;
          described->text = std::move(description.attributes);
          described->attributes = detail::key_values(described->text);
          if constexpr (DescribesMemories<Impl>) {
            described->memory_text = self.impl->memories(args->ordinal);
            described->memories = detail::key_values(described->memory_text);
          }
          self.described[ordinal] = std::move(described);
        }
        device = self.described[ordinal].get();
      }
      const MemoryFigures memory = self.impl->memory(args->ordinal);
      args->name = device->name.data();
      args->name_size = device->name.size();
      args->kind = device->kind;
      args->memory_total = memory.total;
      args->memory_free = memory.free.value_or(BP_MEMORY_FREE_UNKNOWN);
      args->attributes = device->attributes.data();
      args->attribute_count = device->attributes.size();
      if (BP_STRUCT_HAS_FIELD(args, BP_DeviceInfoArgs, memory_count) && !device->memories.empty()) {
        args->memories = device->memories.data();
        args->memory_count = device->memories.size();
      }
    });
  }

  static BP_Error* memory_allocate(BP_MemoryAllocateArgs* args) noexcept {
    return run([&] {
      require_args(args, "memory_allocate");
      Instance& self = usable(args->backend, "memory_allocate", args->ordinal);
      if (args->kind == BP_MEMORY_PINNED_HOST && (self.capabilities & BP_CAPABILITY_PINNED_HOST) == 0) {
        throw Failure(BP_ERROR_UNSUPPORTED, "memory_allocate: " + name() + " offers no pinned host memory");
      }
      if (args->kind != BP_MEMORY_DEVICE && args->kind != BP_MEMORY_PINNED_HOST) {
        throw Failure(BP_ERROR_INVALID_ARGUMENT, "memory_allocate: unknown memory kind " + std::to_string(args->kind) +
                                                     " on " + name() + ":" + std::to_string(args->ordinal));
      }
      std::unique_ptr<Buffer> allocated = self.impl->allocate(args->ordinal, args->kind, args->size);
      if ((self.capabilities & BP_CAPABILITY_HOST_ADDRESSABLE) != 0 && allocated->address == nullptr) {
        throw Failure(BP_ERROR_INTERNAL, "memory_allocate: " + name() + " returned no address for host memory");
      }
      void* address = allocated->address;
      args->buffer = keep(self.buffers, std::move(allocated), "buffers");
      args->address = address;
    });
  }

  static BP_Error* memory_wrap(BP_MemoryWrapArgs* args) noexcept {
    return run([&] {
      require_args(args, "memory_wrap");
      Instance& self = usable(args->backend, "memory_wrap", args->ordinal);
      if (args->address == nullptr && args->size != 0) {
        throw Failure(BP_ERROR_INVALID_ARGUMENT, "memory_wrap: address is NULL for " + std::to_string(args->size) +
                                                     " bytes on " + name() + ":" + std::to_string(args->ordinal));
      }
      if (args->size > UINTPTR_MAX - reinterpret_cast<std::uintptr_t>(args->address)) {
        throw Failure(BP_ERROR_OUT_OF_RANGE, "memory_wrap: " + std::to_string(args->size) +
                                                 " bytes from the address run past the end of the address space");
      }
      args->buffer = keep(self.buffers, self.impl->wrap(args->ordinal, args->address, args->size), "buffers");
    });
  }

  static BP_Error* memory_free(BP_MemoryFreeArgs* args) noexcept {
    return run([&] {
      require_args(args, "memory_free");
      Instance& self = admitted(args->backend, "memory_free");
      if (args->buffer == nullptr) return;
      const std::unique_ptr<Buffer> removed = self.buffers.remove(args->buffer);
      if (removed == nullptr) {
        throw Failure(BP_ERROR_INVALID_ARGUMENT, "memory_free: buffer handle is not a live buffer of this " + name() +
                                                     " backend (already freed, or from another backend)");
      }
      if constexpr (Releases<Impl>) self.impl->release(*removed);
    });
  }

  template <Mode kMode>
  static BP_Error* copy_to_device(BP_CopyToDeviceArgs* args) noexcept {
    constexpr const char* call = kMode == Mode::kAsync ? "copy_to_device_async" : "copy_to_device";
    return run([&] {
      require_args(args, call);
      Instance& self = working(args->backend, call);
      const detail::TimingRequest timing(kMode == Mode::kAsync && detail::timed<Impl>(args));
      Buffer& destination = buffer(self, args->destination, call, "destination");
      check_host_pointer(call, "source", args->source, args->size);
      check_range(call, "destination", args->destination_offset, args->size, destination.size);
      finish(self, self.impl->copy_to_device(destination, args->destination_offset, args->source, args->size, kMode),
             kMode, &args->event);
    });
  }

  template <Mode kMode>
  static BP_Error* copy_to_host(BP_CopyToHostArgs* args) noexcept {
    constexpr const char* call = kMode == Mode::kAsync ? "copy_to_host_async" : "copy_to_host";
    return run([&] {
      require_args(args, call);
      Instance& self = working(args->backend, call);
      const detail::TimingRequest timing(kMode == Mode::kAsync && detail::timed<Impl>(args));
      Buffer& source = buffer(self, args->source, call, "source");
      check_host_pointer(call, "destination", args->destination, args->size);
      check_range(call, "source", args->source_offset, args->size, source.size);
      finish(self, self.impl->copy_to_host(source, args->source_offset, args->destination, args->size, kMode), kMode,
             &args->event);
    });
  }

  template <Mode kMode>
  static BP_Error* copy_device_to_device(BP_CopyDeviceToDeviceArgs* args) noexcept {
    constexpr const char* call = kMode == Mode::kAsync ? "copy_device_to_device_async" : "copy_device_to_device";
    return run([&] {
      require_args(args, call);
      Instance& self = working(args->backend, call);
      const detail::TimingRequest timing(kMode == Mode::kAsync && detail::timed<Impl>(args));
      Buffer& source = buffer(self, args->source, call, "source");
      Buffer& destination = buffer(self, args->destination, call, "destination");
      check_range(call, "source", args->source_offset, args->size, source.size);
      check_range(call, "destination", args->destination_offset, args->size, destination.size);
      finish(self,
             self.impl->copy_device_to_device(source, args->source_offset, destination, args->destination_offset,
                                              args->size, kMode),
             kMode, &args->event);
    });
  }

  static BP_Error* convert_integers(BP_ConvertIntegersArgs* args) noexcept {
    return run([&] {
      require_args(args, "convert_integers");
      Instance& self = working(args->backend, "convert_integers");
      const detail::TimingRequest timing(detail::timed<Impl>(args));
      Buffer& source = buffer(self, args->source, "convert_integers", "source");
      Buffer& destination = buffer(self, args->destination, "convert_integers", "destination");
      const std::uint64_t source_bytes =
          element_bytes(args->count, integer_width(args->source_type, "source"), "source");
      const std::uint64_t destination_bytes =
          element_bytes(args->count, integer_width(args->destination_type, "destination"), "destination");
      check_range("convert_integers", "source", args->source_offset, source_bytes, source.size);
      check_range("convert_integers", "destination", args->destination_offset, destination_bytes, destination.size);
      finish(self,
             self.impl->convert_integers(source, args->source_offset, args->source_type, destination,
                                         args->destination_offset, args->destination_type, args->count),
             Mode::kAsync, &args->event);
    });
  }

  static BP_Error* event_wait(BP_EventArgs* args) noexcept {
    return run([&] {
      require_args(args, "event_wait");
      Instance& self = admitted(args->backend, "event_wait");
      detail::EventSlot<Event>& slot = event(self, args->event, "event_wait");
      if (slot.event != nullptr) self.impl->wait(*slot.event);
    });
  }

  static BP_Error* event_query(BP_EventArgs* args) noexcept {
    return run([&] {
      require_args(args, "event_query");
      Instance& self = admitted(args->backend, "event_query");
      detail::EventSlot<Event>& slot = event(self, args->event, "event_query");
      args->done = slot.event == nullptr || self.impl->query(*slot.event) ? 1 : 0;
    });
  }

  static BP_Error* event_timing(BP_EventTimingArgs* args) noexcept {
    return run([&] {
      require_args(args, "event_timing");
      Instance& self = admitted(args->backend, "event_timing");
      detail::EventSlot<Event>& slot = event(self, args->event, "event_timing");
      args->available = 0;
      if (slot.event == nullptr) return;  // the work completed inline: nothing was timed
      if (!self.impl->query(*slot.event)) {
        throw Failure(BP_ERROR_INVALID_ARGUMENT,
                      "event_timing: the event has not completed; wait for it (event_wait) before asking its times");
      }
      if (const std::optional<DeviceSpan> span = self.impl->timing(*slot.event)) {
        args->begin_ns = span->begin_ns;
        args->end_ns = span->end_ns;
        args->available = 1;
      }
    });
  }

  static void event_destroy(BP_Backend* backend, BP_Event* handle) noexcept {
    BP_Error* error = run([&] {
      if (handle == nullptr) return;
      Instance& self = instance(backend, "event_destroy");
      if (self.events.remove(handle) == nullptr) {
        throw Failure(BP_ERROR_INVALID_ARGUMENT,
                      "event_destroy: event handle is not a live event of this " + name() + " backend");
      }
    });
    if (error != nullptr) error->destroy(error);  // a void call: nowhere to report it
  }
};

namespace detail {

template <class Impl>
const BP_PluginApi* generated_table() noexcept {
  using E = Entries<Impl>;
  static const BP_PluginApi api = [] {
    constexpr Identity id = Impl::kIdentity;
    BP_PluginApi table{};
    table.struct_size = sizeof(BP_PluginApi);
    table.abi_major = BP_ABI_MAJOR;
    table.abi_minor = BP_ABI_MINOR;
    table.name = id.name.data();
    table.name_size = id.name.size();
    table.version = id.version.data();
    table.version_size = id.version.size();
    table.priority = id.priority;
    table.capabilities = id.capabilities;
    table.backend_create = E::backend_create;
    table.backend_destroy = E::backend_destroy;
    table.probe = E::probe;
    table.device_count = E::device_count;
    table.device_info = E::device_info;
    table.memory_allocate = E::memory_allocate;
    table.memory_free = E::memory_free;
    table.copy_to_device = E::template copy_to_device<Mode::kBlocking>;
    table.copy_to_host = E::template copy_to_host<Mode::kBlocking>;
    table.copy_device_to_device = E::template copy_device_to_device<Mode::kBlocking>;
    table.copy_to_device_async = E::template copy_to_device<Mode::kAsync>;
    table.copy_to_host_async = E::template copy_to_host<Mode::kAsync>;
    table.copy_device_to_device_async = E::template copy_device_to_device<Mode::kAsync>;
    table.event_wait = E::event_wait;
    table.event_query = E::event_query;
    table.event_destroy = E::event_destroy;
    if constexpr (ConvertsIntegers<Impl>) table.convert_integers = E::convert_integers;
    if constexpr (WrapsMemory<Impl>) table.memory_wrap = E::memory_wrap;
    table.dlpack_device_type = id.dlpack_device_type;
    if constexpr (TimesEvents<Impl>) table.event_timing = E::event_timing;
    return table;
  }();
  return &api;
}

}  // namespace detail

// The ABI table for backend class Impl; static, valid for the plugin's life.
// A class that is not a backend (contract.hpp) gets one compile error per
// missing or mismatched hook, and nothing generated.
template <class Impl>
const BP_PluginApi* table() noexcept {
  if constexpr (!detail::check_contract<Impl>()) {
    return nullptr;
  } else {
    return detail::generated_table<Impl>();
  }
}

}  // namespace backplane::plugin_sdk

// Defines the plugin's one exported symbol for backend class IMPL. The plugin
// speaks the ABI major it was built with and returns its table whatever the
// core offers, so that a core without that major can name both versions.
#define BACKPLANE_PLUGIN_SDK_ENTRY(IMPL)                                                                       \
  extern "C" BP_PLUGIN_EXPORT const BP_PluginApi* backplane_plugin_entry(const BP_PluginEntryArgs*) noexcept { \
    return ::backplane::plugin_sdk::table<IMPL>();                                                             \
  }

#endif  // BACKPLANE_PLUGIN_SDK_BACKEND_HPP
