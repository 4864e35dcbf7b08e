// The one place that speaks the plugin ABI: argument builders, the result of
// a call, and PluginClient, which makes each call and reports what came back.
//
// No policy lives here: nothing throws on a plugin's error, nothing checks
// forks, limits or out-values. The conformance kit needs to see exactly what
// a plugin returned; registry/Backend adds the core's rules on top; the
// plugin tests use it to drive plugins directly.
#pragma once

#include "util/error_codes.hpp"

#include <backplane/plugin.h>
#include <backplane/error.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace backplane::detail {

// ------------------------------------------------------- argument builders --
// Each returns its call's struct with struct_size and every input set, and
// every out-field zero. A caller testing how a plugin refuses bad input
// changes fields afterwards.

// A call's struct addressed to `backend`: struct_size set, the rest zero.
template <class Args>
Args args_for(BP_Backend* backend) {
  Args args{};
  args.struct_size = sizeof(args);
  args.backend = backend;
  return args;
}

inline BP_BackendCreateArgs backend_create_args(const BP_KeyValue* options, std::size_t option_count) {
  BP_BackendCreateArgs args{};
  args.struct_size = sizeof(args);
  args.options = options;
  args.option_count = option_count;
  return args;
}

// `priority` is in/out since ABI 1.2, `capabilities` and
// `dlpack_device_type` since 1.4: a plugin built against an older minor does
// not know them and leaves what the caller put there (the table's values,
// when the core calls).
inline BP_ProbeArgs probe_args(BP_Backend* backend, std::int32_t priority = 0, BP_Capabilities capabilities = 0,
                               std::int32_t dlpack_device_type = 0) {
  auto args = args_for<BP_ProbeArgs>(backend);
  args.priority = priority;
  args.capabilities = capabilities;
  args.dlpack_device_type = dlpack_device_type;
  return args;
}

inline BP_DeviceCountArgs device_count_args(BP_Backend* backend) {
  auto args = args_for<BP_DeviceCountArgs>(backend);
  return args;
}

inline BP_DeviceInfoArgs device_info_args(BP_Backend* backend, std::int32_t ordinal) {
  auto args = args_for<BP_DeviceInfoArgs>(backend);
  args.ordinal = ordinal;
  return args;
}

inline BP_MemoryAllocateArgs memory_allocate_args(BP_Backend* backend, std::int32_t ordinal, BP_MemoryKind kind,
                                                  std::uint64_t size) {
  auto args = args_for<BP_MemoryAllocateArgs>(backend);
  args.ordinal = ordinal;
  args.kind = kind;
  args.size = size;
  return args;
}

inline BP_MemoryWrapArgs memory_wrap_args(BP_Backend* backend, std::int32_t ordinal, void* address,
                                          std::uint64_t size) {
  auto args = args_for<BP_MemoryWrapArgs>(backend);
  args.ordinal = ordinal;
  args.address = address;
  args.size = size;
  return args;
}

inline BP_MemoryFreeArgs memory_free_args(BP_Backend* backend, BP_Buffer* buffer) {
  auto args = args_for<BP_MemoryFreeArgs>(backend);
  args.buffer = buffer;
  return args;
}

// The copy builders serve the synchronous call and its _async twin alike.
inline BP_CopyToDeviceArgs copy_to_device_args(BP_Backend* backend, BP_Buffer* destination,
                                               std::uint64_t destination_offset, const void* source,
                                               std::uint64_t size) {
  auto args = args_for<BP_CopyToDeviceArgs>(backend);
  args.destination = destination;
  args.destination_offset = destination_offset;
  args.source = source;
  args.size = size;
  return args;
}

inline BP_CopyToHostArgs copy_to_host_args(BP_Backend* backend, BP_Buffer* source, std::uint64_t source_offset,
                                           void* destination, std::uint64_t size) {
  auto args = args_for<BP_CopyToHostArgs>(backend);
  args.source = source;
  args.source_offset = source_offset;
  args.destination = destination;
  args.size = size;
  return args;
}

inline BP_CopyDeviceToDeviceArgs copy_device_to_device_args(BP_Backend* backend, BP_Buffer* source,
                                                            std::uint64_t source_offset, BP_Buffer* destination,
                                                            std::uint64_t destination_offset, std::uint64_t size) {
  auto args = args_for<BP_CopyDeviceToDeviceArgs>(backend);
  args.source = source;
  args.source_offset = source_offset;
  args.destination = destination;
  args.destination_offset = destination_offset;
  args.size = size;
  return args;
}

inline BP_ConvertIntegersArgs convert_integers_args(BP_Backend* backend, BP_Buffer* source, std::uint64_t source_offset,
                                                    BP_IntegerType source_type, BP_Buffer* destination,
                                                    std::uint64_t destination_offset, BP_IntegerType destination_type,
                                                    std::uint64_t count) {
  auto args = args_for<BP_ConvertIntegersArgs>(backend);
  args.source = source;
  args.source_offset = source_offset;
  args.source_type = source_type;
  args.destination = destination;
  args.destination_offset = destination_offset;
  args.destination_type = destination_type;
  args.count = count;
  return args;
}

// For event_wait and event_query.
inline BP_EventArgs event_args(BP_Backend* backend, BP_Event* event) {
  auto args = args_for<BP_EventArgs>(backend);
  args.event = event;
  return args;
}

inline BP_EventTimingArgs event_timing_args(BP_Backend* backend, BP_Event* event) {
  auto args = args_for<BP_EventTimingArgs>(backend);
  args.event = event;
  return args;
}

// The options as BP_KeyValue pairs; they point into `options`, which must
// outlive them.
std::vector<BP_KeyValue> key_values(const std::vector<std::pair<std::string, std::string>>& options);

// ------------------------------------------------------------------ results --

// A plugin's error, copied out of its BP_Error before that was destroyed.
struct PluginError {
  ErrorCode code = ErrorCode::kInternal;  // from the table in util/error_codes.hpp
  std::string message;
  // As the plugin wrote it: the conformance kit names a code the ABI does not
  // define, which `code` folds into kPlugin.
  BP_ErrorCode plugin_code = 0;
};

// The message of a call that succeeded.
inline const std::string& no_message() noexcept {
  static const std::string empty;
  return empty;
}

// Sees each BP_Error just before it is read and destroyed. The conformance
// kit judges the error's shape there; the core only has to survive it.
class ErrorInspector {
 public:
  virtual void inspect(const BP_Error& error) = 0;

 protected:
  ~ErrorInspector() = default;
};

// Copies `error` and destroys it; NULL is success. Never throws but for
// bad_alloc. An error whose struct_size is too small for destroy to be read
// is leaked, not destroyed. A message past kMaxPluginTextSize is cut (and
// says so); an empty one reads "(the plugin gave no message)".
std::optional<PluginError> take_error(BP_Error* error, ErrorInspector* inspector = nullptr);

// Destroys `error` unread (NULL is fine), by the same rule as take_error.
void discard_error(BP_Error* error) noexcept;

// The outcome of a call that returns nothing but its error.
class [[nodiscard]] PluginStatus {
 public:
  PluginStatus() = default;
  PluginStatus(PluginError error) : error_(std::move(error)) {}
  PluginStatus(std::optional<PluginError> error) : error_(std::move(error)) {}
  // Takes (and destroys) the error a raw call returned.
  explicit PluginStatus(BP_Error* error, ErrorInspector* inspector = nullptr) : error_(take_error(error, inspector)) {}

  bool ok() const noexcept { return !error_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  // Requires !ok().
  const PluginError& error() const& { return *error_; }
  PluginError&& error() && { return std::move(*error_); }
  // The error, or nullopt on success.
  const std::optional<PluginError>& failure() const& noexcept { return error_; }
  std::optional<PluginError>&& failure() && noexcept { return std::move(error_); }
  // kOk, 0 and "" on success.
  ErrorCode code() const noexcept { return error_ ? error_->code : ErrorCode::kOk; }
  BP_ErrorCode plugin_code() const noexcept { return error_ ? error_->plugin_code : 0; }
  const std::string& message() const noexcept { return error_ ? error_->message : no_message(); }

 private:
  std::optional<PluginError> error_;
};

// The outcome of a call that answers a value: the value, or the error.
template <class T>
class [[nodiscard]] PluginResult {
 public:
  PluginResult(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  PluginResult(PluginError error) : state_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  // Require ok().
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // Requires !ok().
  const PluginError& error() const& { return std::get<1>(state_); }
  PluginError&& error() && { return std::get<1>(std::move(state_)); }
  ErrorCode code() const noexcept { return ok() ? ErrorCode::kOk : std::get<1>(state_).code; }
  BP_ErrorCode plugin_code() const noexcept { return ok() ? 0 : std::get<1>(state_).plugin_code; }
  const std::string& message() const noexcept { return ok() ? no_message() : std::get<1>(state_).message; }
  // Drops the value: for a caller that only asks whether the call worked.
  PluginStatus status() const& { return ok() ? PluginStatus() : PluginStatus(error()); }

 private:
  std::variant<T, PluginError> state_;
};

// ------------------------------------------------------------------- client --

// What memory_allocate answered.
struct BufferAllocation {
  BP_Buffer* buffer = nullptr;
  void* address = nullptr;  // the plugin's native address, may be NULL
};

// One backend instance's calls. Out-values come back as the plugin wrote
// them (a NULL buffer or event on success included); text a plugin answers
// (probe's reason, device_info's strings) is the filled args struct, whose
// pointers stay the plugin's. Optional calls (memory_wrap, convert_integers,
// event_timing) must be present in the table: the caller checks.
class PluginClient {
 public:
  PluginClient(const BP_PluginApi& api, BP_Backend* backend, ErrorInspector* inspector = nullptr)
      : api_(&api), backend_(backend), inspector_(inspector) {}

  // backend_create: the handle as the plugin set it (NULL when it set none).
  static PluginResult<BP_Backend*> create(const BP_PluginApi& api, const BP_KeyValue* options, std::size_t option_count,
                                          ErrorInspector* inspector = nullptr);
  static PluginResult<BP_Backend*> create(const BP_PluginApi& api,
                                          const std::vector<std::pair<std::string, std::string>>& options,
                                          ErrorInspector* inspector = nullptr);

  const BP_PluginApi& api() const noexcept { return *api_; }
  BP_Backend* backend() const noexcept { return backend_; }

  // Takes an error a raw call returned, through this client's inspector.
  PluginStatus status(BP_Error* error) const { return PluginStatus(error, inspector_); }

  // The in/out fields start as given (probe_args).
  PluginResult<BP_ProbeArgs> probe(std::int32_t priority = 0, BP_Capabilities capabilities = 0,
                                   std::int32_t dlpack_device_type = 0) const;
  PluginResult<std::int32_t> device_count() const;
  PluginResult<BP_DeviceInfoArgs> device_info(std::int32_t ordinal) const;
  PluginResult<BufferAllocation> memory_allocate(std::int32_t ordinal, BP_MemoryKind kind, std::uint64_t size) const;
  PluginResult<BP_Buffer*> memory_wrap(std::int32_t ordinal, void* address, std::uint64_t size) const;
  PluginStatus memory_free(BP_Buffer* buffer) const;

  PluginStatus copy_to_device(BP_Buffer* destination, std::uint64_t destination_offset, const void* source,
                              std::uint64_t size) const;
  PluginStatus copy_to_host(BP_Buffer* source, std::uint64_t source_offset, void* destination,
                            std::uint64_t size) const;
  PluginStatus copy_device_to_device(BP_Buffer* source, std::uint64_t source_offset, BP_Buffer* destination,
                                     std::uint64_t destination_offset, std::uint64_t size) const;
  // The asynchronous calls pass `timed` as the args' field (ABI 1.3): 1 asks
  // the plugin to time the work on the device for event_timing.
  PluginResult<BP_Event*> copy_to_device_async(BP_Buffer* destination, std::uint64_t destination_offset,
                                               const void* source, std::uint64_t size, std::int32_t timed = 0) const;
  PluginResult<BP_Event*> copy_to_host_async(BP_Buffer* source, std::uint64_t source_offset, void* destination,
                                             std::uint64_t size, std::int32_t timed = 0) const;
  PluginResult<BP_Event*> copy_device_to_device_async(BP_Buffer* source, std::uint64_t source_offset,
                                                      BP_Buffer* destination, std::uint64_t destination_offset,
                                                      std::uint64_t size, std::int32_t timed = 0) const;
  PluginResult<BP_Event*> convert_integers(BP_Buffer* source, std::uint64_t source_offset, BP_IntegerType source_type,
                                           BP_Buffer* destination, std::uint64_t destination_offset,
                                           BP_IntegerType destination_type, std::uint64_t count,
                                           std::int32_t timed = 0) const;

  PluginStatus event_wait(BP_Event* event) const;
  // The done flag as the plugin set it (0 when it set none).
  PluginResult<std::int32_t> event_query(BP_Event* event) const;
  // The filled args, as the plugin answered them (optional call, ABI 1.3).
  PluginResult<BP_EventTimingArgs> event_timing(BP_Event* event) const;
  void event_destroy(BP_Event* event) const noexcept { api_->event_destroy(backend_, event); }
  void backend_destroy() const noexcept { api_->backend_destroy(backend_); }

 private:
  const BP_PluginApi* api_;
  BP_Backend* backend_;
  ErrorInspector* inspector_;
};

// Inline, as the measure of a call's fixed cost (bench_abi_call): on success
// it is the table call and nothing else.
inline PluginResult<std::int32_t> PluginClient::device_count() const {
  auto args = device_count_args(backend_);
  if (BP_Error* error = api_->device_count(&args)) [[unlikely]] {
    return std::move(*take_error(error, inspector_));
  }
  return args.count;
}

}  // namespace backplane::detail
