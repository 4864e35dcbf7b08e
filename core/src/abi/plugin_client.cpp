#include "abi/plugin_client.hpp"

#include "loader/plugin_limits.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace backplane::detail {

std::vector<BP_KeyValue> key_values(const std::vector<std::pair<std::string, std::string>>& options) {
  std::vector<BP_KeyValue> pairs;
  pairs.reserve(options.size());
  for (const auto& [key, value] : options) {
    pairs.push_back({sizeof(BP_KeyValue), key.data(), key.size(), value.data(), value.size()});
  }
  return pairs;
}

std::optional<PluginError> take_error(BP_Error* error, ErrorInspector* inspector) {
  if (error == nullptr) return std::nullopt;
  if (inspector != nullptr) inspector->inspect(*error);
  // An oversized message_size is cut, not an error: the error is already
  // being reported, and what the plugin wrote up to its NUL is still useful.
  PluginError taken{from_plugin_code(error->code),
                    std::string(plugin_text(error->message, std::min(error->message_size, kMaxPluginTextSize))),
                    error->code};
  if (error->message_size > kMaxPluginTextSize) {
    taken.message += fmt::format(" (cut: message_size {}, more than {})", error->message_size, kMaxPluginTextSize);
  }
  if (taken.message.empty()) taken.message = "(the plugin gave no message)";
  discard_error(error);
  return taken;
}

void discard_error(BP_Error* error) noexcept {
  // With a struct_size short of destroy, the pointer read there is not the
  // plugin's: calling it could crash, leaking cannot.
  if (error != nullptr && error->struct_size >= sizeof(BP_Error) && error->destroy != nullptr) error->destroy(error);
}

PluginResult<BP_Backend*> PluginClient::create(const BP_PluginApi& api, const BP_KeyValue* options,
                                               std::size_t option_count, ErrorInspector* inspector) {
  auto args = backend_create_args(options, option_count);
  if (auto error = take_error(api.backend_create(&args), inspector)) return std::move(*error);
  return args.backend;
}

PluginResult<BP_Backend*> PluginClient::create(const BP_PluginApi& api,
                                               const std::vector<std::pair<std::string, std::string>>& options,
                                               ErrorInspector* inspector) {
  const std::vector<BP_KeyValue> pairs = key_values(options);
  return create(api, pairs.data(), pairs.size(), inspector);
}

namespace {

// The result of a call whose answer is `value` once it succeeded.
template <class T>
PluginResult<T> answer(std::optional<PluginError> error, T value) {
  if (error) return std::move(*error);
  return value;
}

}  // namespace

PluginResult<BP_ProbeArgs> PluginClient::probe(std::int32_t priority, BP_Capabilities capabilities,
                                               std::int32_t dlpack_device_type) const {
  auto args = probe_args(backend_, priority, capabilities, dlpack_device_type);
  auto error = take_error(api_->probe(&args), inspector_);
  return answer(std::move(error), args);
}

PluginResult<BP_DeviceInfoArgs> PluginClient::device_info(std::int32_t ordinal) const {
  auto args = device_info_args(backend_, ordinal);
  auto error = take_error(api_->device_info(&args), inspector_);
  return answer(std::move(error), args);
}

PluginResult<BufferAllocation> PluginClient::memory_allocate(std::int32_t ordinal, BP_MemoryKind kind,
                                                             std::uint64_t size) const {
  auto args = memory_allocate_args(backend_, ordinal, kind, size);
  auto error = take_error(api_->memory_allocate(&args), inspector_);
  return answer(std::move(error), BufferAllocation{args.buffer, args.address});
}

PluginResult<BP_Buffer*> PluginClient::memory_wrap(std::int32_t ordinal, void* address, std::uint64_t size) const {
  auto args = memory_wrap_args(backend_, ordinal, address, size);
  auto error = take_error(api_->memory_wrap(&args), inspector_);
  return answer(std::move(error), args.buffer);
}

PluginStatus PluginClient::memory_free(BP_Buffer* buffer) const {
  auto args = memory_free_args(backend_, buffer);
  return status(api_->memory_free(&args));
}

PluginStatus PluginClient::copy_to_device(BP_Buffer* destination, std::uint64_t destination_offset, const void* source,
                                          std::uint64_t size) const {
  auto args = copy_to_device_args(backend_, destination, destination_offset, source, size);
  return status(api_->copy_to_device(&args));
}

PluginStatus PluginClient::copy_to_host(BP_Buffer* source, std::uint64_t source_offset, void* destination,
                                        std::uint64_t size) const {
  auto args = copy_to_host_args(backend_, source, source_offset, destination, size);
  return status(api_->copy_to_host(&args));
}

PluginStatus PluginClient::copy_device_to_device(BP_Buffer* source, std::uint64_t source_offset, BP_Buffer* destination,
                                                 std::uint64_t destination_offset, std::uint64_t size) const {
  auto args = copy_device_to_device_args(backend_, source, source_offset, destination, destination_offset, size);
  return status(api_->copy_device_to_device(&args));
}

PluginResult<BP_Event*> PluginClient::copy_to_device_async(BP_Buffer* destination, std::uint64_t destination_offset,
                                                           const void* source, std::uint64_t size,
                                                           std::int32_t timed) const {
  auto args = copy_to_device_args(backend_, destination, destination_offset, source, size);
  args.timed = timed;
  auto error = take_error(api_->copy_to_device_async(&args), inspector_);
  return answer(std::move(error), args.event);
}

PluginResult<BP_Event*> PluginClient::copy_to_host_async(BP_Buffer* source, std::uint64_t source_offset,
                                                         void* destination, std::uint64_t size,
                                                         std::int32_t timed) const {
  auto args = copy_to_host_args(backend_, source, source_offset, destination, size);
  args.timed = timed;
  auto error = take_error(api_->copy_to_host_async(&args), inspector_);
  return answer(std::move(error), args.event);
}

PluginResult<BP_Event*> PluginClient::copy_device_to_device_async(BP_Buffer* source, std::uint64_t source_offset,
                                                                  BP_Buffer* destination,
                                                                  std::uint64_t destination_offset, std::uint64_t size,
                                                                  std::int32_t timed) const {
  auto args = copy_device_to_device_args(backend_, source, source_offset, destination, destination_offset, size);
  args.timed = timed;
  auto error = take_error(api_->copy_device_to_device_async(&args), inspector_);
  return answer(std::move(error), args.event);
}

PluginResult<BP_Event*> PluginClient::convert_integers(BP_Buffer* source, std::uint64_t source_offset,
                                                       BP_IntegerType source_type, BP_Buffer* destination,
                                                       std::uint64_t destination_offset,
                                                       BP_IntegerType destination_type, std::uint64_t count,
                                                       std::int32_t timed) const {
  auto args = convert_integers_args(backend_, source, source_offset, source_type, destination, destination_offset,
                                    destination_type, count);
  args.timed = timed;
  auto error = take_error(api_->convert_integers(&args), inspector_);
  return answer(std::move(error), args.event);
}

PluginStatus PluginClient::event_wait(BP_Event* event) const {
  auto args = event_args(backend_, event);
  return status(api_->event_wait(&args));
}

PluginResult<std::int32_t> PluginClient::event_query(BP_Event* event) const {
  auto args = event_args(backend_, event);
  auto error = take_error(api_->event_query(&args), inspector_);
  return answer(std::move(error), args.done);
}

PluginResult<BP_EventTimingArgs> PluginClient::event_timing(BP_Event* event) const {
  auto args = event_timing_args(backend_, event);
  auto error = take_error(api_->event_timing(&args), inspector_);
  return answer(std::move(error), args);
}

}  // namespace backplane::detail
