// Opening a PJRT library and reading its errors (pjrt_library.hpp).
#include "pjrt_library.hpp"

#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

namespace backplane::pjrt {
namespace {

using sdk::Failure;

// One call of the PJRT_Api table the adapter makes, and the minor that added it.
struct Call {
  const char* name;
  std::size_t offset;  // of its function pointer in PJRT_Api
  int since_minor;
};

#define BP_PJRT_CALL(name, since) \
  Call { #name, offsetof(PJRT_Api, name), since }

// Every call the adapter makes; all must be present. Minors from the PJRT
// changelog (0 where the call is older than its record, 0.29).
constexpr Call kCalls[] = {
    BP_PJRT_CALL(PJRT_Error_Destroy, 0),
    BP_PJRT_CALL(PJRT_Error_Message, 0),
    BP_PJRT_CALL(PJRT_Error_GetCode, 0),
    BP_PJRT_CALL(PJRT_Plugin_Initialize, 0),
    BP_PJRT_CALL(PJRT_Plugin_Attributes, 0),
    BP_PJRT_CALL(PJRT_Event_Destroy, 0),
    BP_PJRT_CALL(PJRT_Event_IsReady, 0),
    BP_PJRT_CALL(PJRT_Event_Await, 0),
    BP_PJRT_CALL(PJRT_Client_Create, 0),
    BP_PJRT_CALL(PJRT_Client_Destroy, 0),
    BP_PJRT_CALL(PJRT_Client_PlatformName, 0),
    BP_PJRT_CALL(PJRT_Client_PlatformVersion, 0),
    BP_PJRT_CALL(PJRT_Client_AddressableDevices, 0),
    BP_PJRT_CALL(PJRT_Client_BufferFromHostBuffer, 0),
    BP_PJRT_CALL(PJRT_DeviceDescription_Id, 0),
    BP_PJRT_CALL(PJRT_DeviceDescription_Attributes, 0),
    BP_PJRT_CALL(PJRT_DeviceDescription_Kind, 0),
    BP_PJRT_CALL(PJRT_DeviceDescription_DebugString, 0),
    BP_PJRT_CALL(PJRT_DeviceDescription_ToString, 0),
    BP_PJRT_CALL(PJRT_Device_GetDescription, 0),
    BP_PJRT_CALL(PJRT_Device_LocalHardwareId, 0),
    BP_PJRT_CALL(PJRT_Device_AddressableMemories, 0),
    BP_PJRT_CALL(PJRT_Device_DefaultMemory, 0),
    BP_PJRT_CALL(PJRT_Device_MemoryStats, 0),
    BP_PJRT_CALL(PJRT_Memory_Kind, 0),
    BP_PJRT_CALL(PJRT_Memory_DebugString, 0),
    BP_PJRT_CALL(PJRT_Buffer_Destroy, 0),
    BP_PJRT_CALL(PJRT_Buffer_ReadyEvent, 0),
    BP_PJRT_CALL(PJRT_Buffer_UnsafePointer, 0),
    BP_PJRT_CALL(PJRT_Buffer_CopyToMemory, 32),
    BP_PJRT_CALL(PJRT_Client_CreateViewOfDeviceBuffer, 33),
    BP_PJRT_CALL(PJRT_Buffer_CopyRawToHost, 56),
    BP_PJRT_CALL(PJRT_AsyncHostToDeviceTransferManager_Destroy, 60),
    BP_PJRT_CALL(PJRT_AsyncHostToDeviceTransferManager_TransferData, 60),
    BP_PJRT_CALL(PJRT_Client_CreateBuffersForAsyncHostToDevice, 60),
    BP_PJRT_CALL(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer, 60),
    BP_PJRT_CALL(PJRT_Client_CreateUninitializedBuffer, 69),
};

#undef BP_PJRT_CALL

constexpr std::size_t kVersionEnd = offsetof(PJRT_Api, pjrt_api_version) + sizeof(PJRT_Api_Version);

// Refuses a table the adapter cannot drive, naming why.
void check_table(const std::string& path, const PJRT_Api* api) {
  if (api->struct_size < kVersionEnd) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT, "GetPjrtApi of " + path + " returned a PJRT_Api of " +
                                                 std::to_string(api->struct_size) + " bytes, too short to hold " +
                                                 "its version (" + std::to_string(kVersionEnd) + " bytes)");
  }
  const int major = api->pjrt_api_version.major_version;
  const int minor = api->pjrt_api_version.minor_version;
  const std::string version = "PJRT " + std::to_string(major) + "." + std::to_string(minor);
  if (major != PJRT_API_MAJOR) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  path + " speaks " + version + ", a major version this adapter does not know: it speaks PJRT " +
                      std::to_string(PJRT_API_MAJOR) + ".x (built against " + std::to_string(PJRT_API_MAJOR) + "." +
                      std::to_string(PJRT_API_MINOR) + ")");
  }
  if (minor < kMinimumMinor) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  path + " speaks " + version + ", older than PJRT 0." + std::to_string(kMinimumMinor) +
                      ", the first with PJRT_Client_CreateUninitializedBuffer, which the adapter allocates with");
  }
  for (const Call& call : kCalls) {
    const std::size_t end = call.offset + sizeof(void*);
    if (minor < call.since_minor || api->struct_size < end) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT, "the PJRT_Api of " + path + " (" + version + ", " +
                                                   std::to_string(api->struct_size) + " bytes) ends before " +
                                                   call.name + ", which the adapter calls (it needs " +
                                                   std::to_string(end) + " bytes)");
    }
    void* pointer = nullptr;
    std::memcpy(&pointer, reinterpret_cast<const char*>(api) + call.offset, sizeof(pointer));
    if (pointer == nullptr) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    "the PJRT_Api of " + path + " (" + version + ") has no " + call.name + " (a NULL pointer)");
    }
  }
}

// A file that is not there or not readable fails here with the system's
// words, before dlopen (whose message for a directory or a text file is
// less clear).
void check_readable(const std::string& opened, const std::string& path) {
  struct stat status {};
  if (::stat(opened.c_str(), &status) != 0) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT, "PJRT library " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(status.st_mode)) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT, "PJRT library " + path + " is not a regular file");
  }
}

constexpr std::string_view kDescriptorPrefix = "/proc/self/fd/";

// One entry per opened file (dlopen's handle): the check and
// Plugin_Initialize run once, and their failure is kept.
struct Entry {
  std::mutex mutex;
  bool done = false;
  std::unique_ptr<Library> library;
  std::optional<Failure> failure;
};

std::mutex entries_mutex;
std::map<void*, std::unique_ptr<Entry>> entries;  // never shrinks: libraries are never closed

}  // namespace

std::string code_name(PJRT_Error_Code code) {
  static constexpr const char* kNames[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  const auto index = static_cast<int>(code);
  if (index >= 0 && index < static_cast<int>(std::size(kNames))) return kNames[index];
  return "code " + std::to_string(index);
}

BP_ErrorCode abi_code(PJRT_Error_Code code) {
  switch (code) {
    case PJRT_Error_Code_INVALID_ARGUMENT: return BP_ERROR_INVALID_ARGUMENT;
    case PJRT_Error_Code_RESOURCE_EXHAUSTED: return BP_ERROR_OUT_OF_MEMORY;
    case PJRT_Error_Code_OUT_OF_RANGE: return BP_ERROR_OUT_OF_RANGE;
    case PJRT_Error_Code_UNIMPLEMENTED: return BP_ERROR_UNSUPPORTED;
    case PJRT_Error_Code_UNAVAILABLE:
    case PJRT_Error_Code_FAILED_PRECONDITION: return BP_ERROR_UNAVAILABLE;
    case PJRT_Error_Code_INTERNAL: return BP_ERROR_INTERNAL;
    default: return BP_ERROR_DEVICE;
  }
}

std::string value_text(const PJRT_NamedValue& value) {
  switch (value.type) {
    case PJRT_NamedValue_kString:
      return value.string_value == nullptr ? std::string() : std::string(value.string_value, value.value_size);
    case PJRT_NamedValue_kInt64: return std::to_string(value.int64_value);
    case PJRT_NamedValue_kInt64List: {
      std::string text;
      for (std::size_t index = 0; index < value.value_size && value.int64_array_value != nullptr; ++index) {
        text += (index == 0 ? "" : ",") + std::to_string(value.int64_array_value[index]);
      }
      return text;
    }
    case PJRT_NamedValue_kFloat: {
      char text[32];
      const auto written = std::to_chars(text, text + sizeof(text), value.float_value);
      return std::string(text, written.ptr);
    }
    case PJRT_NamedValue_kBool: return value.bool_value ? "true" : "false";
  }
  return "(a value of unknown type " + std::to_string(static_cast<int>(value.type)) + ")";
}

TextPairs named_values_text(const PJRT_NamedValue* values, std::size_t count) {
  TextPairs text;
  for (std::size_t index = 0; index < count && values != nullptr; ++index) {
    const PJRT_NamedValue& value = values[index];
    text.emplace_back(value.name == nullptr ? std::string() : std::string(value.name, value.name_size),
                      value_text(value));
  }
  return text;
}

std::string library_name(const std::string& path) {
  if (path.compare(0, kDescriptorPrefix.size(), kDescriptorPrefix) != 0) return path;
  char target[PATH_MAX];
  const ssize_t size = ::readlink(path.c_str(), target, sizeof(target));
  if (size <= 0 || static_cast<std::size_t>(size) >= sizeof(target)) return path;
  return std::string(target, static_cast<std::size_t>(size));
}

const Library& Library::open(const std::string& opened) {
  const std::string path = library_name(opened);
  check_readable(opened, path);
  // RTLD_LOCAL: the plugin's own copies of LLVM, absl and protobuf stay out
  // of the global namespace. The handle is never closed: XLA plugins do not
  // survive being unloaded (their static destructors and threads).
  void* handle = dlopen(opened.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw Failure(BP_ERROR_INVALID_ARGUMENT,
                  "dlopen of PJRT library " + path + " failed: " + (why != nullptr ? why : "no reason given"));
  }
  Entry* entry = nullptr;
  {
    const std::lock_guard lock(entries_mutex);
    std::unique_ptr<Entry>& slot = entries[handle];
    if (slot == nullptr) slot = std::make_unique<Entry>();
    entry = slot.get();
  }
  // Only this library waits here, never another one (a hanging
  // Plugin_Initialize holds this entry's lock alone).
  const std::lock_guard lock(entry->mutex);
  if (!entry->done) {
    try {
      using GetPjrtApi = const PJRT_Api* (*)();
      dlerror();
      auto* get = reinterpret_cast<GetPjrtApi>(dlsym(handle, "GetPjrtApi"));
      if (get == nullptr) {
        throw Failure(BP_ERROR_INVALID_ARGUMENT,
                      path +
                          " exports no GetPjrtApi: it is not a PJRT plugin (a PJRT plugin library exports "
                          "`const PJRT_Api* GetPjrtApi()`)");
      }
      const PJRT_Api* api = get();
      if (api == nullptr) throw Failure(BP_ERROR_INVALID_ARGUMENT, "GetPjrtApi of " + path + " returned NULL");
      check_table(path, api);
      auto library = std::make_unique<Library>(path, api);
      library->initialise();
      entry->library = std::move(library);
    } catch (const Failure& failure) {
      entry->failure = failure;
    }
    entry->done = true;
  }
  if (entry->failure) throw *entry->failure;
  return *entry->library;
}

void Library::initialise() {
  PJRT_Plugin_Initialize_Args initialise{};
  initialise.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE;
  check(api_->PJRT_Plugin_Initialize(&initialise), [&] { return "PJRT_Plugin_Initialize of " + path_; });
  PJRT_Plugin_Attributes_Args attributes{};
  attributes.struct_size = PJRT_Plugin_Attributes_Args_STRUCT_SIZE;
  check(api_->PJRT_Plugin_Attributes(&attributes), [&] { return "PJRT_Plugin_Attributes of " + path_; });
  attributes_ = named_values_text(attributes.attributes, attributes.num_attributes);
}

std::string Library::version() const {
  return std::to_string(api_->pjrt_api_version.major_version) + "." + std::to_string(minor());
}

std::string Library::identifying_attributes() const {
  std::string text;
  for (const auto& [key, value] : attributes_) {
    if (key == "xla_version" || key.rfind("stablehlo_", 0) == 0) continue;
    text += (text.empty() ? "" : ", ") + key + " " + value;
  }
  return text;
}

std::optional<PjrtFailure> Library::take(PJRT_Error* error) const {
  if (error == nullptr) return std::nullopt;
  PjrtFailure failure;
  PJRT_Error_Message_Args message{};
  message.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  message.error = error;
  api_->PJRT_Error_Message(&message);
  if (message.message != nullptr) failure.message.assign(message.message, message.message_size);
  PJRT_Error_GetCode_Args code{};
  code.struct_size = PJRT_Error_GetCode_Args_STRUCT_SIZE;
  code.error = error;
  PJRT_Error* code_error = api_->PJRT_Error_GetCode(&code);
  failure.code = code_error == nullptr ? code.code : PJRT_Error_Code_UNKNOWN;
  PJRT_Error_Destroy_Args destroy{};
  destroy.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  destroy.error = code_error;
  if (code_error != nullptr) api_->PJRT_Error_Destroy(&destroy);
  destroy.error = error;
  api_->PJRT_Error_Destroy(&destroy);
  if (failure.message.empty()) failure.message = "(no message)";
  return failure;
}

void Library::fail(PJRT_Error* error, const std::string& what) const {
  const PjrtFailure failure = *take(error);
  throw Failure(abi_code(failure.code), what + ": " + failure.message + " (" + code_name(failure.code) + ")");
}

}  // namespace backplane::pjrt
