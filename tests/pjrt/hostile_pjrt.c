/* Hostile PJRT plugin libraries, one per HOSTILE_* macro, each breaking one
 * thing the pjrt adapter must survive and name:
 *   HOSTILE_NO_SYMBOL     exports no GetPjrtApi (not a PJRT plugin)
 *   HOSTILE_NULL_API      GetPjrtApi returns NULL
 *   HOSTILE_SHORT_TABLE   a PJRT_Api of 64 bytes (ends inside the plugin calls)
 *   HOSTILE_FUTURE_MAJOR  PJRT 1.0
 *   HOSTILE_OLD_MINOR     PJRT 0.60, before CreateUninitializedBuffer
 *   HOSTILE_NULL_CALL     a full table whose PJRT_Client_CreateUninitializedBuffer is NULL
 *   HOSTILE_CRASH         PJRT_Client_Create dereferences NULL
 *   HOSTILE_HANG          PJRT_Client_Create never returns
 *   HOSTILE_ERROR         PJRT_Client_Create fails FAILED_PRECONDITION with a message
 *   HOSTILE_OPTIONS       PJRT_Client_Create refuses the option "preallocate" by name (as a platform
 *                         without it may), then fails saying what it was asked
 *   HOSTILE_LONG_ERROR    PJRT_Client_Create fails FAILED_PRECONDITION with a message of 10,000,033 bytes
 *   HOSTILE_MANY_DEVICES  a cpu client with 5000 addressable devices, more than the core takes
 * Built against the pjrt_c_api.h the adapter uses. Every call the adapter
 * does not expect to reach answers UNIMPLEMENTED. */
#include <pjrt_c_api.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(HOSTILE_NO_SYMBOL)
/* A library with a symbol, but not the one a PJRT plugin exports. */
__attribute__((visibility("default"))) int not_a_pjrt_plugin(void) { return 1; }
#elif defined(HOSTILE_NULL_API)
__attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi(void) { return NULL; }
#else
struct PJRT_Error {
  PJRT_Error_Code code;
  const char* message;
};

static PJRT_Error* make_error(PJRT_Error_Code code, const char* message) {
  PJRT_Error* error = malloc(sizeof(PJRT_Error));
  error->code = code;
  error->message = message;
  return error;
}

static void error_destroy(PJRT_Error_Destroy_Args* args) { free(args->error); }

static void error_message(PJRT_Error_Message_Args* args) {
  args->message = args->error->message;
  args->message_size = strlen(args->error->message);
}

static PJRT_Error* error_get_code(PJRT_Error_GetCode_Args* args) {
  args->code = args->error->code;
  return NULL;
}

static PJRT_Error* plugin_initialize(PJRT_Plugin_Initialize_Args* args) {
  (void)args;
  return NULL;
}

static PJRT_NamedValue attributes[2];

static PJRT_Error* plugin_attributes(PJRT_Plugin_Attributes_Args* args) {
  attributes[0].struct_size = PJRT_NamedValue_STRUCT_SIZE;
  attributes[0].name = "xla_version";
  attributes[0].name_size = strlen("xla_version");
  attributes[0].type = PJRT_NamedValue_kInt64;
  attributes[0].int64_value = 2;
  attributes[0].value_size = 1;
  attributes[1].struct_size = PJRT_NamedValue_STRUCT_SIZE;
  attributes[1].name = "hostile_fixture";
  attributes[1].name_size = strlen("hostile_fixture");
  attributes[1].type = PJRT_NamedValue_kInt64;
  attributes[1].int64_value = 42;
  attributes[1].value_size = 1;
  args->attributes = attributes;
  args->num_attributes = 2;
  return NULL;
}

#if defined(HOSTILE_LONG_ERROR)
enum { kLongMessageSize = 10000033 };
static char* long_message;
#elif defined(HOSTILE_MANY_DEVICES)
/* Opaque to the adapter: any distinct non-NULL pointers do. */
enum { kManyDevices = 5000 };
static char things[kManyDevices];
static PJRT_Device* many_devices[kManyDevices];
static PJRT_Memory* the_memory = (PJRT_Memory*)&things[0];

#define HOSTILE_TEXT(field, size_field, text) \
  do {                                        \
    args->field = text;                       \
    args->size_field = strlen(text);          \
  } while (0)

static PJRT_Error* platform_name(PJRT_Client_PlatformName_Args* args) {
  HOSTILE_TEXT(platform_name, platform_name_size, "cpu");
  return NULL;
}
static PJRT_Error* platform_version(PJRT_Client_PlatformVersion_Args* args) {
  HOSTILE_TEXT(platform_version, platform_version_size, "hostile");
  return NULL;
}
static PJRT_Error* addressable_devices(PJRT_Client_AddressableDevices_Args* args) {
  size_t index;
  for (index = 0; index < kManyDevices; ++index) many_devices[index] = (PJRT_Device*)&things[index];
  args->addressable_devices = many_devices;
  args->num_addressable_devices = kManyDevices;
  return NULL;
}
static PJRT_Error* get_description(PJRT_Device_GetDescription_Args* args) {
  args->device_description = (PJRT_DeviceDescription*)args->device;
  return NULL;
}
static PJRT_Error* description_kind(PJRT_DeviceDescription_Kind_Args* args) {
  HOSTILE_TEXT(device_kind, device_kind_size, "cpu");
  return NULL;
}
static PJRT_Error* description_to_string(PJRT_DeviceDescription_ToString_Args* args) {
  HOSTILE_TEXT(to_string, to_string_size, "HostileDevice");
  return NULL;
}
static PJRT_Error* description_debug_string(PJRT_DeviceDescription_DebugString_Args* args) {
  HOSTILE_TEXT(debug_string, debug_string_size, "HostileDevice");
  return NULL;
}
static PJRT_Error* description_id(PJRT_DeviceDescription_Id_Args* args) {
  args->id = (int)((char*)args->device_description - things);
  return NULL;
}
static PJRT_Error* local_hardware_id(PJRT_Device_LocalHardwareId_Args* args) {
  args->local_hardware_id = (int)((char*)args->device - things);
  return NULL;
}
static PJRT_Error* description_attributes(PJRT_DeviceDescription_Attributes_Args* args) {
  args->attributes = NULL;
  args->num_attributes = 0;
  return NULL;
}
static PJRT_Error* addressable_memories(PJRT_Device_AddressableMemories_Args* args) {
  args->memories = &the_memory;
  args->num_memories = 1;
  return NULL;
}
static PJRT_Error* default_memory(PJRT_Device_DefaultMemory_Args* args) {
  args->memory = the_memory;
  return NULL;
}
static PJRT_Error* memory_kind(PJRT_Memory_Kind_Args* args) {
  HOSTILE_TEXT(kind, kind_size, "device");
  return NULL;
}
static PJRT_Error* memory_debug_string(PJRT_Memory_DebugString_Args* args) {
  HOSTILE_TEXT(debug_string, debug_string_size, "HostileMemory");
  return NULL;
}
static PJRT_Error* client_destroy(PJRT_Client_Destroy_Args* args) {
  (void)args;
  return NULL;
}
#endif

static PJRT_Error* client_create(PJRT_Client_Create_Args* args) {
  (void)args;
#if defined(HOSTILE_CRASH)
  raise(SIGSEGV);
#elif defined(HOSTILE_HANG)
  for (;;) pause();
#elif defined(HOSTILE_OPTIONS)
  static const char* asked_preallocate = "never";
  static char said[160];
  size_t index;
  for (index = 0; index < args->num_options; ++index) {
    const PJRT_NamedValue* option = &args->create_options[index];
    if (option->name_size == strlen("preallocate") && memcmp(option->name, "preallocate", option->name_size) == 0) {
      asked_preallocate = option->type != PJRT_NamedValue_kBool ? "not a bool" : option->bool_value ? "true" : "false";
      return make_error(PJRT_Error_Code_INVALID_ARGUMENT, "hostile fixture: unknown option preallocate");
    }
  }
  snprintf(said, sizeof(said), "hostile fixture: asked preallocate=%s, refused it, then asked with %zu option(s)",
           asked_preallocate, args->num_options);
  return make_error(PJRT_Error_Code_FAILED_PRECONDITION, said);
#elif defined(HOSTILE_LONG_ERROR)
  /* A beginning to recognise, then filler. */
  if (long_message == NULL) {
    static const char beginning[] = "hostile fixture: the beginning of a long message";
    long_message = malloc(kLongMessageSize + 1);
    memset(long_message, 'x', kLongMessageSize);
    memcpy(long_message, beginning, sizeof(beginning) - 1);
    long_message[kLongMessageSize] = '\0';
  }
  return make_error(PJRT_Error_Code_FAILED_PRECONDITION, long_message);
#elif defined(HOSTILE_MANY_DEVICES)
  args->client = (PJRT_Client*)&things[0];
  return NULL;
#endif
  return make_error(PJRT_Error_Code_FAILED_PRECONDITION, "hostile fixture: no devices are visible to this plugin");
}

/* Anything else: not implemented (never reached by the adapter's probe). */
static PJRT_Error* unimplemented(void* args) {
  (void)args;
  return make_error(PJRT_Error_Code_UNIMPLEMENTED, "hostile fixture: not implemented");
}

static PJRT_Api api;

__attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi(void) {
  /* Every function pointer of the table, then the ones that mean something. */
  typedef PJRT_Error* (*Stub)(void*);
  Stub* slot = (Stub*)&api.PJRT_Error_Destroy;
  Stub* end = (Stub*)((char*)&api + sizeof(api));
  for (; slot < end; ++slot) *slot = unimplemented;
  api.struct_size = PJRT_Api_STRUCT_SIZE;
  api.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
  api.pjrt_api_version.major_version = PJRT_API_MAJOR;
  api.pjrt_api_version.minor_version = PJRT_API_MINOR;
  api.PJRT_Error_Destroy = error_destroy;
  api.PJRT_Error_Message = error_message;
  api.PJRT_Error_GetCode = error_get_code;
  api.PJRT_Plugin_Initialize = plugin_initialize;
  api.PJRT_Plugin_Attributes = plugin_attributes;
  api.PJRT_Client_Create = client_create;
#if defined(HOSTILE_MANY_DEVICES)
  api.PJRT_Client_Destroy = client_destroy;
  api.PJRT_Client_PlatformName = platform_name;
  api.PJRT_Client_PlatformVersion = platform_version;
  api.PJRT_Client_AddressableDevices = addressable_devices;
  api.PJRT_Device_GetDescription = get_description;
  api.PJRT_DeviceDescription_Kind = description_kind;
  api.PJRT_DeviceDescription_ToString = description_to_string;
  api.PJRT_DeviceDescription_DebugString = description_debug_string;
  api.PJRT_DeviceDescription_Id = description_id;
  api.PJRT_Device_LocalHardwareId = local_hardware_id;
  api.PJRT_DeviceDescription_Attributes = description_attributes;
  api.PJRT_Device_AddressableMemories = addressable_memories;
  api.PJRT_Device_DefaultMemory = default_memory;
  api.PJRT_Memory_Kind = memory_kind;
  api.PJRT_Memory_DebugString = memory_debug_string;
#endif
#if defined(HOSTILE_SHORT_TABLE)
  api.struct_size = 64;
#elif defined(HOSTILE_FUTURE_MAJOR)
  api.pjrt_api_version.major_version = 1;
  api.pjrt_api_version.minor_version = 0;
#elif defined(HOSTILE_OLD_MINOR)
  api.pjrt_api_version.minor_version = 60;
#elif defined(HOSTILE_NULL_CALL)
  api.PJRT_Client_CreateUninitializedBuffer = NULL;
#endif
  return &api;
}
#endif
