// The PJRT client, its devices and their memories (pjrt_client.hpp).
#include "pjrt_client.hpp"

#include <backplane/plugin_sdk/typed_value.hpp>

#include <cstdio>

namespace backplane::pjrt {
namespace {

using sdk::Failure;

[[noreturn]] void bad_option(std::string_view key, std::string_view value, const std::string& why) {
  throw Failure(BP_ERROR_INVALID_ARGUMENT,
                "option " + std::string(key) + " = " + sdk::quoted(value) + " is invalid: " + why);
}

// The named values Client_Create reads; they point into `options`.
std::vector<PJRT_NamedValue> named_values(const std::vector<CreateOption>& options) {
  std::vector<PJRT_NamedValue> values;
  for (const CreateOption& option : options) {
    PJRT_NamedValue value{};
    value.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    value.name = option.name.data();
    value.name_size = option.name.size();
    value.type = option.type;
    value.value_size = 1;
    switch (option.type) {
      case PJRT_NamedValue_kString:
        value.string_value = option.text.data();
        value.value_size = option.text.size();
        break;
      case PJRT_NamedValue_kInt64: value.int64_value = option.integer; break;
      case PJRT_NamedValue_kInt64List:
        value.int64_array_value = option.list.data();
        value.value_size = option.list.size();
        break;
      case PJRT_NamedValue_kFloat: value.float_value = option.real; break;
      case PJRT_NamedValue_kBool: value.bool_value = option.boolean; break;
    }
    values.push_back(value);
  }
  return values;
}

std::string text_of(const char* data, std::size_t size) {
  return data == nullptr ? std::string() : std::string(data, size);
}

}  // namespace

CreateOption parse_create_option(std::string_view key, std::string_view value) {
  using Problem = sdk::TypedValueProblem;
  using Type = sdk::TypedValue::Type;
  CreateOption option;
  option.name = std::string(key.substr(kCreatePrefix.size()));
  if (option.name.empty()) bad_option(key, value, "the PJRT option has no name after \"create.\"");
  auto parsed = sdk::parse_typed_value(value);
  if (const auto* problem = std::get_if<Problem>(&parsed)) {
    switch (problem->kind) {
      case Problem::Kind::kNoType:
        bad_option(key, value, "expected <type>:<value>, with type " + std::string(sdk::kTypedValueTypes));
      case Problem::Kind::kUnknownType:
        bad_option(key, value,
                   "unknown type " + sdk::quoted(problem->type) + ": expected " + std::string(sdk::kTypedValueTypes));
      case Problem::Kind::kBadValue: break;
    }
    const std::string_view type = problem->type;
    bad_option(key, value,
               sdk::quoted(problem->part) + " is not " +
                   (type == "bool"    ? "true or false"
                    : type == "float" ? "a float"
                                      : "a 64-bit integer"));
  }
  sdk::TypedValue& typed = std::get<sdk::TypedValue>(parsed);
  switch (typed.type) {
    case Type::kString:
      option.type = PJRT_NamedValue_kString;
      option.text = std::move(typed.text);
      break;
    case Type::kInt64:
      option.type = PJRT_NamedValue_kInt64;
      option.integer = typed.integer;
      break;
    case Type::kInt64List:
      option.type = PJRT_NamedValue_kInt64List;
      option.list = std::move(typed.integers);
      break;
    case Type::kFloat:
      option.type = PJRT_NamedValue_kFloat;
      option.real = typed.real;
      break;
    case Type::kBool:
      option.type = PJRT_NamedValue_kBool;
      option.boolean = typed.boolean;
      break;
  }
  return option;
}

std::variant<std::unique_ptr<Client>, PjrtFailure> Client::create(const Library& library,
                                                                  const std::vector<CreateOption>& options) {
  std::vector<CreateOption> asked = options;
  bool added_preallocate = true;
  for (const CreateOption& option : options) added_preallocate = added_preallocate && option.name != kPreallocate;
  if (added_preallocate) {
    CreateOption off;
    off.name = std::string(kPreallocate);
    off.type = PJRT_NamedValue_kBool;
    off.boolean = false;
    asked.push_back(off);
  }
  for (;;) {
    const std::vector<PJRT_NamedValue> values = named_values(asked);
    PJRT_Client_Create_Args args{};
    args.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
    args.create_options = values.data();
    args.num_options = values.size();
    std::optional<PjrtFailure> failure = library.take(library.api().PJRT_Client_Create(&args));
    if (!failure) {
      if (args.client == nullptr) return PjrtFailure{PJRT_Error_Code_INTERNAL, "PJRT_Client_Create returned no client"};
      auto client = std::make_unique<Client>(library, args.client);
      client->read_platform();  // a failure here still destroys the client
      return client;
    }
    // A platform without the option (TPU, say) may refuse it by name.
    if (added_preallocate && failure->code == PJRT_Error_Code_INVALID_ARGUMENT &&
        failure->message.find(kPreallocate) != std::string::npos) {
      asked.pop_back();
      added_preallocate = false;
      continue;
    }
    return *failure;
  }
}

Client::Client(const Library& library, PJRT_Client* client) : library_(library), client_(client) {
  fork_.note_initialised();
}

void Client::read_platform() {
  PJRT_Client_PlatformName_Args name{};
  name.struct_size = PJRT_Client_PlatformName_Args_STRUCT_SIZE;
  name.client = client_;
  library_.check(library_.api().PJRT_Client_PlatformName(&name),
                 [] { return std::string("PJRT_Client_PlatformName"); });
  platform_ = text_of(name.platform_name, name.platform_name_size);
  PJRT_Client_PlatformVersion_Args version{};
  version.struct_size = PJRT_Client_PlatformVersion_Args_STRUCT_SIZE;
  version.client = client_;
  library_.check(library_.api().PJRT_Client_PlatformVersion(&version),
                 [] { return std::string("PJRT_Client_PlatformVersion"); });
  platform_version_ = text_of(version.platform_version, version.platform_version_size);
}

Client::~Client() {
  if (fork_.forked()) return;  // the parent's client; its threads are not in this process
  PJRT_Client_Destroy_Args args{};
  args.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE;
  args.client = client_;
  if (const auto failure = library_.take(library_.api().PJRT_Client_Destroy(&args))) {
    std::fprintf(stderr, "backplane pjrt: PJRT_Client_Destroy of %s failed: %s\n", library_.path().c_str(),
                 failure->message.c_str());
  }
}

std::string Client::forked_message() const {
  return fork_.message("the PJRT client of " + library_.path(), "PJRT plugins do not survive fork()", "pjrt");
}

std::vector<std::unique_ptr<Device>> Client::devices(std::string_view backend) const {
  const PJRT_Api& api = library_.api();
  PJRT_Client_AddressableDevices_Args listed{};
  listed.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
  listed.client = client_;
  library_.check(api.PJRT_Client_AddressableDevices(&listed),
                 [] { return std::string("PJRT_Client_AddressableDevices"); });
  std::vector<std::unique_ptr<Device>> devices;
  for (std::size_t index = 0; index < listed.num_addressable_devices; ++index) {
    auto device = std::make_unique<Device>();
    device->ordinal = static_cast<std::int32_t>(index);
    device->label = std::string(backend) + ":" + std::to_string(index);
    device->device = listed.addressable_devices[index];
    device->kind = kind_of_platform(platform_);
    const auto what = [&](const char* call) { return [call, &device] { return call + (" of " + device->label); }; };

    PJRT_Device_GetDescription_Args description{};
    description.struct_size = PJRT_Device_GetDescription_Args_STRUCT_SIZE;
    description.device = device->device;
    library_.check(api.PJRT_Device_GetDescription(&description), what("PJRT_Device_GetDescription"));
    PJRT_DeviceDescription_Kind_Args kind{};
    kind.struct_size = PJRT_DeviceDescription_Kind_Args_STRUCT_SIZE;
    kind.device_description = description.device_description;
    library_.check(api.PJRT_DeviceDescription_Kind(&kind), what("PJRT_DeviceDescription_Kind"));
    PJRT_DeviceDescription_ToString_Args to_string{};
    to_string.struct_size = PJRT_DeviceDescription_ToString_Args_STRUCT_SIZE;
    to_string.device_description = description.device_description;
    library_.check(api.PJRT_DeviceDescription_ToString(&to_string), what("PJRT_DeviceDescription_ToString"));
    PJRT_DeviceDescription_DebugString_Args debug{};
    debug.struct_size = PJRT_DeviceDescription_DebugString_Args_STRUCT_SIZE;
    debug.device_description = description.device_description;
    library_.check(api.PJRT_DeviceDescription_DebugString(&debug), what("PJRT_DeviceDescription_DebugString"));
    PJRT_DeviceDescription_Id_Args id{};
    id.struct_size = PJRT_DeviceDescription_Id_Args_STRUCT_SIZE;
    id.device_description = description.device_description;
    library_.check(api.PJRT_DeviceDescription_Id(&id), what("PJRT_DeviceDescription_Id"));
    PJRT_Device_LocalHardwareId_Args hardware{};
    hardware.struct_size = PJRT_Device_LocalHardwareId_Args_STRUCT_SIZE;
    hardware.device = device->device;
    library_.check(api.PJRT_Device_LocalHardwareId(&hardware), what("PJRT_Device_LocalHardwareId"));
    PJRT_DeviceDescription_Attributes_Args attributes{};
    attributes.struct_size = PJRT_DeviceDescription_Attributes_Args_STRUCT_SIZE;
    attributes.device_description = description.device_description;
    library_.check(api.PJRT_DeviceDescription_Attributes(&attributes), what("PJRT_DeviceDescription_Attributes"));

    const std::string device_kind = text_of(kind.device_kind, kind.device_kind_size);
    // "CpuDevice(id=0)", "NVIDIA H200 (CudaDevice(id=0))": the kind only where it says more than the platform.
    const std::string short_name = text_of(to_string.to_string, to_string.to_string_size);
    device->name = device_kind == platform_ || device_kind.empty() ? short_name : device_kind + " (" + short_name + ")";
    device->attributes = named_values_text(attributes.attributes, attributes.num_attributes);
    device->attributes.insert(device->attributes.end(),
                              {{"pjrt_device_kind", device_kind},
                               {"pjrt_device_id", std::to_string(id.id)},
                               {"local_hardware_id", std::to_string(hardware.local_hardware_id)},
                               {"pjrt_debug_string", text_of(debug.debug_string, debug.debug_string_size)},
                               {"platform", platform_},
                               {"platform_version", platform_version_},
                               {"pjrt_api_version", library_.version()},
                               {"pjrt_library", library_.path()}});
    for (const auto& [key, value] : library_.attributes()) device->attributes.emplace_back("plugin." + key, value);

    PJRT_Device_AddressableMemories_Args memories{};
    memories.struct_size = PJRT_Device_AddressableMemories_Args_STRUCT_SIZE;
    memories.device = device->device;
    library_.check(api.PJRT_Device_AddressableMemories(&memories), what("PJRT_Device_AddressableMemories"));
    PJRT_Device_DefaultMemory_Args default_memory{};
    default_memory.struct_size = PJRT_Device_DefaultMemory_Args_STRUCT_SIZE;
    default_memory.device = device->device;
    library_.check(api.PJRT_Device_DefaultMemory(&default_memory), what("PJRT_Device_DefaultMemory"));
    for (std::size_t slot = 0; slot < memories.num_memories; ++slot) {
      Memory memory;
      memory.memory = memories.memories[slot];
      PJRT_Memory_Kind_Args memory_kind{};
      memory_kind.struct_size = PJRT_Memory_Kind_Args_STRUCT_SIZE;
      memory_kind.memory = memory.memory;
      library_.check(api.PJRT_Memory_Kind(&memory_kind), what("PJRT_Memory_Kind"));
      memory.kind = text_of(memory_kind.kind, memory_kind.kind_size);
      PJRT_Memory_DebugString_Args memory_debug{};
      memory_debug.struct_size = PJRT_Memory_DebugString_Args_STRUCT_SIZE;
      memory_debug.memory = memory.memory;
      library_.check(api.PJRT_Memory_DebugString(&memory_debug), what("PJRT_Memory_DebugString"));
      memory.description = text_of(memory_debug.debug_string, memory_debug.debug_string_size);
      if (memory.kind == "device") device->device_memory = memory.memory;
      if (memory.kind == "pinned_host") device->pinned_memory = memory.memory;
      const bool is_default = memory.memory == default_memory.memory;
      device->memories.insert(is_default ? device->memories.begin() : device->memories.end(), std::move(memory));
    }
    if (device->device_memory == nullptr) device->device_memory = default_memory.memory;
    if (device->device_memory == nullptr) {
      throw Failure(BP_ERROR_DEVICE, device->label + " (" + device->name + ") has no default memory");
    }
    devices.push_back(std::move(device));
  }
  return devices;
}

std::optional<Client::Stats> Client::memory_stats(PJRT_Device* device) const {
  PJRT_Device_MemoryStats_Args args{};
  args.struct_size = PJRT_Device_MemoryStats_Args_STRUCT_SIZE;
  args.device = device;
  if (library_.take(library_.api().PJRT_Device_MemoryStats(&args)) || !args.bytes_limit_is_set ||
      args.bytes_limit <= 0) {
    return std::nullopt;
  }
  return Stats{static_cast<std::uint64_t>(args.bytes_limit),
               static_cast<std::uint64_t>(args.bytes_in_use > 0 ? args.bytes_in_use : 0)};
}

BP_DeviceKind kind_of_platform(std::string_view platform) {
  if (platform == "cpu") return BP_DEVICE_KIND_CPU;
  if (platform == "cuda" || platform == "rocm" || platform == "gpu") return BP_DEVICE_KIND_GPU;
  return BP_DEVICE_KIND_ACCELERATOR;
}

}  // namespace backplane::pjrt
