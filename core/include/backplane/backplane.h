/*
 * backplane embedding API (C11).
 *
 * Conventions
 * -----------
 * - Names are bp_<noun>_<verb>. Every function returns a bp_status; BP_OK (0)
 *   is success and any other value is an error whose message is available
 *   from bp_last_error() on the same thread until the next failing call.
 *   Outputs are written only on success.
 * - Handles are opaque; each *_create has a *_destroy. Destroying NULL is a
 *   no-op. Passing a destroyed handle is detected where possible
 *   (BP_STATUS_INVALID_ARGUMENT) but is a caller bug.
 * - No function throws, aborts or exits on bad arguments.
 * - Strings returned through `const char*` are owned by the library; each
 *   function says how long they stay valid. Strings passed in are copied.
 * - Thread-safety: every function may be called from any thread; a runtime
 *   may be shared between threads.
 *
 * Compatibility: functions are only ever added. Structs that the caller
 * fills start with `struct_size` (set it to sizeof), so they can grow.
 */
#ifndef BACKPLANE_BACKPLANE_H
#define BACKPLANE_BACKPLANE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BP_API_VERSION_MAJOR 0
#define BP_API_VERSION_MINOR 1
#define BP_API_VERSION_PATCH 0

/* The version of the library loaded at run time, e.g. "0.1.0". Static string. */
const char* bp_version(void);

/* ----------------------------------------------------------- status -- */

/* Stable codes, never renumbered (the C++ API's ErrorCode has the same values). */
typedef int32_t bp_status;
#define BP_OK ((bp_status)0)
#define BP_STATUS_INVALID_ARGUMENT ((bp_status)1) /* bad handle, NULL pointer, malformed selector */
#define BP_STATUS_OUT_OF_MEMORY ((bp_status)2)
#define BP_STATUS_UNAVAILABLE ((bp_status)3) /* the backend or device named cannot be used */
#define BP_STATUS_UNSUPPORTED ((bp_status)4)
#define BP_STATUS_DEVICE ((bp_status)5) /* the driver or device reported a failure */
#define BP_STATUS_INTERNAL ((bp_status)6)
#define BP_STATUS_OUT_OF_RANGE ((bp_status)7) /* index, ordinal, offset or size */
#define BP_STATUS_NOT_FOUND ((bp_status)8)    /* file, backend or tensor */
#define BP_STATUS_CONFIG ((bp_status)9)       /* malformed configuration file */
#define BP_STATUS_INVALID_FILE ((bp_status)10)
#define BP_STATUS_PLUGIN ((bp_status)11) /* a plugin broke the ABI contract */
#define BP_STATUS_IO ((bp_status)12)     /* the file system refused a read or write */

/* The message of the last failing call on this thread ("" if none). Valid
 * until the next failing call on this thread. */
const char* bp_last_error(void);

/* A short name for a status code ("out of range"). Static string. */
const char* bp_status_name(bp_status status);

/* ---------------------------------------------------------- runtime -- */

typedef struct bp_runtime bp_runtime;

typedef struct bp_runtime_options {
  size_t struct_size;
  /* Searched first, before BACKPLANE_PLUGIN_PATH. Copied. */
  const char* const* plugin_paths;
  size_t plugin_path_count;
  /* Use this config file instead of searching (it must exist); may be NULL. */
  const char* config_file;
  /* Non-zero: ignore every BACKPLANE_* variable and read no config file
   * unless config_file is given. */
  int32_t ignore_environment;
  /* Non-zero: skip the install directory and the one next to the library. */
  int32_t skip_default_paths;
} bp_runtime_options;

/* A new, independent runtime. `options` may be NULL for the defaults.
 * Discovery runs on first use. Destroy with bp_runtime_destroy. */
bp_status bp_runtime_create(const bp_runtime_options* options, bp_runtime** out);

/* The process-wide runtime. Never destroy it (bp_runtime_destroy ignores it). */
bp_status bp_runtime_default(bp_runtime** out);

void bp_runtime_destroy(bp_runtime* runtime);

/* The config file used: path, or NULL when none was found. Valid until the
 * runtime is destroyed. Fails with BP_STATUS_CONFIG / BP_STATUS_NOT_FOUND
 * when the config file is unusable (so does every call needing discovery). */
bp_status bp_runtime_config_path(bp_runtime* runtime, const char** out);

/* --------------------------------------------------------- backends -- */

typedef int32_t bp_backend_status;
#define BP_BACKEND_AVAILABLE ((bp_backend_status)0)
#define BP_BACKEND_UNAVAILABLE ((bp_backend_status)1)
#define BP_BACKEND_INCOMPATIBLE ((bp_backend_status)2)
#define BP_BACKEND_FAILED ((bp_backend_status)3)
#define BP_BACKEND_DISABLED ((bp_backend_status)4)
#define BP_BACKEND_SHADOWED ((bp_backend_status)5)

/* One plugin found by discovery. Strings are valid until the runtime is
 * destroyed. */
typedef struct bp_backend_info {
  size_t struct_size;
  const char* name;
  bp_backend_status status;
  const char* status_name; /* "available", "unavailable", ... */
  const char* reason;      /* why this status; may be "" when available */
  const char* plugin_path;
  const char* abi_version; /* "1.0", or "" when the table could not be read */
  int32_t priority;
  uint64_t capabilities; /* BP_CAPABILITY_* bits of plugin.h */
} bp_backend_info;

/* Number of plugins found (every status counts). */
bp_status bp_backend_count(bp_runtime* runtime, size_t* out);

/* Fills `out` (set out->struct_size first) for index 0..count-1. */
bp_status bp_backend_get(bp_runtime* runtime, size_t index, bp_backend_info* out);

/* *out = 1 when a backend of that name is available, else 0. Never an error
 * for an unknown name: availability is a value. */
bp_status bp_backend_is_available(bp_runtime* runtime, const char* name, int32_t* out);

/* ---------------------------------------------------------- devices -- */

#define BP_BACKEND_NAME_CAPACITY 65

/* A device: a value, copied freely. */
typedef struct bp_device {
  char backend[BP_BACKEND_NAME_CAPACITY]; /* NUL-terminated */
  int32_t ordinal;
} bp_device;

typedef int32_t bp_device_kind;
#define BP_DEVICE_CPU ((bp_device_kind)0)
#define BP_DEVICE_GPU ((bp_device_kind)1)
#define BP_DEVICE_ACCELERATOR ((bp_device_kind)2)

/* A snapshot of one device's description. Opaque; destroy when done. */
typedef struct bp_device_info bp_device_info;

/* Resolves "cpu", "cpu:0", "cuda:1". Errors name the problem and the
 * backends that exist: INVALID_ARGUMENT (syntax), NOT_FOUND (no such
 * backend), UNAVAILABLE (with the backend's reason), OUT_OF_RANGE. */
bp_status bp_device_resolve(bp_runtime* runtime, const char* selector, bp_device* out);

/* Writes "cpu:0" into `buffer` (NUL-terminated). OUT_OF_RANGE when it does
 * not fit in `capacity` bytes. */
bp_status bp_device_selector(const bp_device* device, char* buffer, size_t capacity);

/* Number of devices of an available backend. */
bp_status bp_device_count(bp_runtime* runtime, const char* backend, int32_t* out);

bp_status bp_device_info_create(bp_runtime* runtime, const bp_device* device, bp_device_info** out);
void bp_device_info_destroy(bp_device_info* info);
/* Strings are valid until the info is destroyed. */
const char* bp_device_info_name(const bp_device_info* info);
bp_device_kind bp_device_info_kind(const bp_device_info* info);
uint64_t bp_device_info_memory_total(const bp_device_info* info);
uint64_t bp_device_info_memory_free(const bp_device_info* info);
size_t bp_device_info_attribute_count(const bp_device_info* info);
/* Key and value of attribute `index`; OUT_OF_RANGE past the end. */
bp_status bp_device_info_attribute(const bp_device_info* info, size_t index, const char** key,
                                   const char** value);

/* ---------------------------------------------------- default device -- */

/* Which precedence level decided the default device, highest first. */
typedef int32_t bp_device_source;
#define BP_SOURCE_SCOPED_OVERRIDE ((bp_device_source)0)
#define BP_SOURCE_PROCESS_SETTING ((bp_device_source)1)
#define BP_SOURCE_ENVIRONMENT ((bp_device_source)2) /* BACKPLANE_DEFAULT_DEVICE */
#define BP_SOURCE_CONFIG_FILE ((bp_device_source)3)
#define BP_SOURCE_AUTOMATIC ((bp_device_source)4)

/* The default device and (when `source` is not NULL) what decided it. A
 * device the user named that cannot be used is an error with its reason. */
bp_status bp_default_device(bp_runtime* runtime, bp_device* out, bp_device_source* source);

/* A short description of a source ("BACKPLANE_DEFAULT_DEVICE"). Static. */
const char* bp_device_source_name(bp_device_source source);

/* The process-wide setting; `selector` NULL clears it. Validated at once. */
bp_status bp_default_device_set(bp_runtime* runtime, const char* selector);

/* Scoped override on the calling thread: push makes `selector` the default
 * until the matching pop on the same thread. Nestable. Popping with nothing
 * pushed for this runtime on this thread is INVALID_ARGUMENT. */
bp_status bp_default_device_push(bp_runtime* runtime, const char* selector);
bp_status bp_default_device_pop(bp_runtime* runtime);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BACKPLANE_BACKPLANE_H */
