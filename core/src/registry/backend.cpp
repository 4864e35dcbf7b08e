#include "registry/backend.hpp"

#include <fmt/format.h>


namespace backplane {
namespace {

// The plugin ABI numbers its codes like ErrorCode's first block on purpose.
ErrorCode to_error_code(BP_ErrorCode code) {
  if (code >= BP_ERROR_INVALID_ARGUMENT && code <= BP_ERROR_OUT_OF_RANGE) {
    return static_cast<ErrorCode>(code);
  }
  return ErrorCode::kPlugin;
}

std::string_view view(const char* data, std::size_t size) {
  return data == nullptr ? std::string_view() : std::string_view(data, size);
}

// A plugin answering with more devices than this is treated as broken.
constexpr int kMaxDevices = 4096;

}  // namespace

std::optional<PluginFailure> consume_error(BP_Error* error) {
  if (error == nullptr) return std::nullopt;
  PluginFailure failure{to_error_code(error->code), std::string(view(error->message, error->message_size))};
  if (failure.message.empty()) failure.message = "(the plugin gave no message)";
  if (error->destroy != nullptr) error->destroy(error);
  return failure;
}

void throw_if_error(BP_Error* error, std::string_view context) {
  if (auto failure = consume_error(error)) {
    throw Error(failure->code, fmt::format("{}: {}", context, failure->message));
  }
}

Backend::Created Backend::create(std::shared_ptr<PluginLibrary> library, const PluginOptions& options) {
  std::vector<BP_KeyValue> pairs;
  pairs.reserve(options.size());
  for (const auto& [key, value] : options) {
    pairs.push_back({sizeof(BP_KeyValue), key.data(), key.size(), value.data(), value.size()});
  }
  BP_BackendCreateArgs args{};
  args.struct_size = sizeof(args);
  args.options = pairs.data();
  args.option_count = pairs.size();
  Created created;
  if (auto failure = consume_error(library->api().backend_create(&args))) {
    created.failure = std::move(failure);
  } else if (args.backend == nullptr) {
    created.failure = PluginFailure{ErrorCode::kPlugin, "backend_create returned no backend"};
  } else {
    created.backend.reset(new Backend(std::move(library), args.backend));
  }
  return created;
}

Backend::~Backend() { api().backend_destroy(handle_); }

std::pair<std::optional<Backend::ProbeAnswer>, std::optional<PluginFailure>> Backend::probe() {
  BP_ProbeArgs args{};
  args.struct_size = sizeof(args);
  args.backend = handle_;
  if (auto failure = consume_error(api().probe(&args))) return {std::nullopt, std::move(failure)};
  ProbeAnswer answer{args.available != 0, std::string(view(args.reason, args.reason_size))};
  return {std::move(answer), std::nullopt};
}

int Backend::device_count() {
  BP_DeviceCountArgs args{};
  args.struct_size = sizeof(args);
  args.backend = handle_;
  throw_if_error(api().device_count(&args), fmt::format("{}: device_count", name()));
  if (args.count < 0 || args.count > kMaxDevices) {
    throw Error(ErrorCode::kPlugin,
                fmt::format("{}: device_count answered {}, outside 0..{}", name(), args.count, kMaxDevices));
  }
  return args.count;
}

DeviceInfo Backend::device_info(int ordinal) {
  BP_DeviceInfoArgs args{};
  args.struct_size = sizeof(args);
  args.backend = handle_;
  args.ordinal = ordinal;
  throw_if_error(api().device_info(&args), fmt::format("{}:{}: device_info", name(), ordinal));
  if ((args.name == nullptr && args.name_size != 0) ||
      (args.attributes == nullptr && args.attribute_count != 0)) {
    throw Error(ErrorCode::kPlugin,
                fmt::format("{}:{}: device_info returned NULL with a non-zero size", name(), ordinal));
  }
  DeviceInfo info;
  info.backend = std::string(name());
  info.ordinal = ordinal;
  info.name = std::string(view(args.name, args.name_size));
  switch (args.kind) {
    case BP_DEVICE_KIND_GPU: info.kind = DeviceKind::kGpu; break;
    case BP_DEVICE_KIND_ACCELERATOR: info.kind = DeviceKind::kAccelerator; break;
    default: info.kind = DeviceKind::kCpu; break;
  }
  info.memory_total = args.memory_total;
  info.memory_free = args.memory_free;
  for (std::size_t i = 0; i < args.attribute_count; ++i) {
    const BP_KeyValue& pair = args.attributes[i];
    info.attributes.emplace_back(std::string(view(pair.key, pair.key_size)),
                                 std::string(view(pair.value, pair.value_size)));
  }
  return info;
}

}  // namespace backplane
