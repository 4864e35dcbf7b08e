// The pjrt adapter's hooks (pjrt_backend.hpp). The SDK has checked every
// handle, ordinal, range and pointer before a hook runs.
#include "pjrt_backend.hpp"

#include <backplane/plugin_sdk/host_memory.hpp>

#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

namespace backplane::pjrt {
namespace {

using sdk::Failure;

constexpr std::string_view kKnownOptions = "library, data_path, create.<PJRT option>, backend";

DataPath parse_data_path(const std::string& backend, const std::string_view* value) {
  if (value == nullptr || *value == "auto") return DataPath::kAuto;
  if (*value == "host") return DataPath::kHost;
  if (*value == "copy") return DataPath::kCopy;
  throw Failure(BP_ERROR_INVALID_ARGUMENT,
                backend + ": option data_path = " + sdk::quoted(*value) + " is invalid: expected auto, host or copy");
}

const char* data_path_name(DataPath path) { return path == DataPath::kHost ? "host" : "copy"; }

// True in a child of fork() once any backend made a client: every device
// call asks refusal(), and getpid() is a system call the parent should not
// pay for on each. The handler is safe to leave registered: the adapter is
// never unloaded (-z nodelete, plugins/pjrt/meson.build).
std::atomic<bool> in_forked_child{false};
std::once_flag fork_handler;

void note_forked_child() { in_forked_child.store(true, std::memory_order_relaxed); }

// The cpu platform's memory: the host's as this process can use it (the
// SDK's one figure, which the cpu plugin reports too), never 0 (the ABI's
// rule) even where nothing can be told.
sdk::MemoryFigures cpu_platform_memory() {
  sdk::MemoryFigures memory = sdk::host_memory();
  if (memory.total == 0) memory.total = 1;
  if (memory.free && *memory.free > memory.total) memory.free = memory.total;
  return memory;
}

std::string device_count_text(std::size_t count) {
  return std::to_string(count) + (count == 1 ? " device" : " devices");
}

}  // namespace

PjrtBackend::~PjrtBackend() = default;

std::unique_ptr<PjrtBackend> PjrtBackend::create(const sdk::Options& options) {
  // The core names each instance (pjrt_<name>) in this option, so that its
  // messages and device labels read as the user selects them.
  const std::string_view* named = options.find("backend");
  const std::string backend = named != nullptr && !named->empty() ? std::string(*named) : std::string(kIdentity.name);
  std::map<std::string, CreateOption> create_options;  // by PJRT name: the last one given wins
  std::vector<std::string> order;
  for (const auto& [key, value] : options.entries()) {
    if (key.substr(0, kCreatePrefix.size()) == kCreatePrefix) {
      CreateOption option = [&] {
        try {
          return parse_create_option(key, value);
        } catch (const Failure& failure) {
          throw Failure(failure.code(), backend + ": " + failure.what());
        }
      }();
      if (create_options.count(option.name) == 0) order.push_back(option.name);
      create_options[option.name] = std::move(option);
    } else if (key != "library" && key != "data_path" && key != "backend") {
      throw Failure(BP_ERROR_INVALID_ARGUMENT, backend + ": unknown option " + sdk::quoted(key) + " = " +
                                                   sdk::quoted(value) +
                                                   " (known options: " + std::string(kKnownOptions) + ")");
    }
  }
  const std::string_view* library = options.find("library");
  if (library == nullptr || library->empty()) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  backend +
                      ": option library is required: the path of a PJRT plugin library, a shared library "
                      "exporting GetPjrtApi (the xla-cpu-pjrt wheel's xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so, "
                      "say)");
  }
  const std::string path(*library);
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  backend + ": option library = " + sdk::quoted(path) + ": " + std::strerror(errno));
  }
  std::vector<CreateOption> ordered;
  for (const std::string& name : order) ordered.push_back(std::move(create_options[name]));
  return std::make_unique<PjrtBackend>(backend, path, std::move(ordered),
                                       parse_data_path(backend, options.find("data_path")));
}

std::string_view PjrtBackend::refusal() {
  if (!in_forked_child.load(std::memory_order_relaxed)) [[likely]]
    return {};
  return fork_.forked() ? std::string_view(refusal_text_) : std::string_view();
}

sdk::Probe PjrtBackend::probe() {
  if (probe_failure_) throw *probe_failure_;
  try {
    return probe_client();
  } catch (const Failure& failure) {
    probe_failure_ = failure;
    throw;
  }
}

sdk::Probe PjrtBackend::probe_client() {
  library_ = &Library::open(library_path_);
  const std::string identity =
      "PJRT " + library_->version() +
      (library_->identifying_attributes().empty() ? std::string() : ", " + library_->identifying_attributes());
  // Before the client exists, so that no fork() can come between.
  std::call_once(fork_handler, [] { pthread_atfork(nullptr, nullptr, note_forked_child); });
  auto created = Client::create(*library_, create_options_);
  if (auto* failure = std::get_if<PjrtFailure>(&created)) {
    const std::string text = failure->message + " (" + code_name(failure->code) + ", " + identity + ")";
    if (failure->code == PJRT_Error_Code_INVALID_ARGUMENT) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    "PJRT_Client_Create of " + library_name_ + " refused the create options: " + text);
    }
    return {.available = false, .reason = text, .priority = {}};
  }
  std::unique_ptr<Client> client = std::move(std::get<std::unique_ptr<Client>>(created));
  const bool cpu = client->platform() == "cpu";
  if (data_path_ == DataPath::kAuto) data_path_ = cpu ? DataPath::kHost : DataPath::kCopy;
  if (data_path_ == DataPath::kHost && !cpu) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT, backend_ +
                                                 ": option data_path = \"host\" needs the cpu platform, whose "
                                                 "buffers are host memory; " +
                                                 library_name_ + " is platform " + client->platform());
  }
  std::vector<std::unique_ptr<Device>> devices = client->devices(backend_);
  if (devices.empty()) {
    return {.available = false,
            .reason = "PJRT_Client_AddressableDevices found no devices (platform " + client->platform() + ", " +
                      identity + ")",
            .priority = {}};
  }
  const sdk::MemoryFigures host = cpu_platform_memory();
  for (auto& device : devices) {
    if (cpu) {
      device->memory_total = host.total;
      device->memory_source = "host memory (/proc/meminfo, RLIMIT_AS and the cgroup's limit)";
    } else if (const auto stats = client->memory_stats(device->device)) {
      device->memory_total = stats->limit;
      device->memory_source = "PJRT_Device_MemoryStats bytes_limit";
    } else {
      device->memory_total = host.total;
      device->memory_source =
          "host memory (/proc/meminfo, RLIMIT_AS and the cgroup's limit): PJRT_Device_MemoryStats gives no bytes_limit";
    }
  }
  const std::string reason = "platform " + client->platform() + " (" + client->platform_version() + ") through " +
                             identity + ": " + device_count_text(devices.size()) + ", data path " +
                             data_path_name(data_path_) + ", " + library_name_;
  refusal_text_ = client->forked_message();
  fork_.note_initialised();
  devices_.assign(std::move(devices));
  client_ = std::move(client);
  return {.available = true, .reason = reason, .priority = cpu ? kCpuPlatformPriority : kDevicePriority};
}

BP_Capabilities PjrtBackend::capabilities() {
  if (client_ == nullptr) return kIdentity.capabilities;
  bool pinned = true;
  for (const Device& device : devices_) pinned = pinned && device.pinned_memory != nullptr;
  const BP_Capabilities path = host_path() ? BP_CAPABILITY_HOST_ADDRESSABLE | BP_CAPABILITY_WRAP_MEMORY
                                           : BP_CAPABILITY_ASYNC | BP_CAPABILITY_NO_DEVICE_TO_DEVICE;
  return BP_CAPABILITY_PROBE_IN_CHILD | path | (pinned ? BP_CAPABILITY_PINNED_HOST : 0);
}

std::int32_t PjrtBackend::dlpack_device_type() { return client_ != nullptr && host_path() ? 1 : 0; }  // kDLCPU

sdk::DeviceDescription PjrtBackend::describe(std::int32_t ordinal) {
  const Device& device = devices_.at(ordinal);
  TextPairs attributes = device.attributes;
  attributes.emplace_back("data_path", data_path_name(data_path_));
  attributes.emplace_back("memory_total_source", device.memory_source);
  return {device.name, device.kind, std::move(attributes)};
}

sdk::MemoryList PjrtBackend::memories(std::int32_t ordinal) {
  sdk::MemoryList list;
  for (const Memory& memory : devices_.at(ordinal).memories) list.emplace_back(memory.kind, memory.description);
  return list;
}

// The cpu platform's memory is the host's (MemoryStats is UNIMPLEMENTED
// there); elsewhere the PJRT allocator's limit and what it has not handed out.
sdk::MemoryFigures PjrtBackend::memory(std::int32_t ordinal) {
  const Device& device = devices_.at(ordinal);
  if (client_->platform() == "cpu") return cpu_platform_memory();
  if (const auto stats = client_->memory_stats(device.device)) {
    return {stats->limit, stats->limit - std::min(stats->in_use, stats->limit)};
  }
  return {device.memory_total, std::nullopt};
}

std::unique_ptr<PjrtBackend::Buffer> PjrtBackend::allocate(std::int32_t ordinal, BP_MemoryKind kind,
                                                           std::uint64_t size) {
  Device& device = devices_.at(ordinal);
  if (kind == BP_MEMORY_PINNED_HOST && device.pinned_memory == nullptr) {
    throw Failure(BP_ERROR_UNSUPPORTED,
                  "memory_allocate: " + device.label + " (" + device.name + ") has no pinned_host memory");
  }
  const std::uint64_t limit = kind == BP_MEMORY_PINNED_HOST ? cpu_platform_memory().total : device.memory_total;
  return allocate_buffer(*client_, device, kind, size, !host_path(), limit);
}

std::unique_ptr<PjrtBackend::Buffer> PjrtBackend::wrap(std::int32_t ordinal, void* address, std::uint64_t size) {
  Device& device = devices_.at(ordinal);
  if (!host_path()) {
    throw Failure(BP_ERROR_UNSUPPORTED, "memory_wrap: " + device.label +
                                            " is on the copy data path, where a write replaces the PJRT "
                                            "buffer behind a handle, so foreign memory cannot be written in "
                                            "place");
  }
  return wrap_buffer(*client_, device, address, size);
}

std::unique_ptr<PjrtBackend::Event> PjrtBackend::copy_to_device(Buffer& destination, std::uint64_t offset,
                                                                const void* source, std::uint64_t size, sdk::Mode) {
  return write(destination, offset, source, size);
}

std::unique_ptr<PjrtBackend::Event> PjrtBackend::copy_to_host(Buffer& source, std::uint64_t offset, void* destination,
                                                              std::uint64_t size, sdk::Mode) {
  return read(source, offset, destination, size);
}

std::unique_ptr<PjrtBackend::Event> PjrtBackend::copy_device_to_device(Buffer& source, std::uint64_t source_offset,
                                                                       Buffer& destination,
                                                                       std::uint64_t destination_offset,
                                                                       std::uint64_t size, sdk::Mode) {
  return copy_between(source, source_offset, destination, destination_offset, size);
}

}  // namespace backplane::pjrt
