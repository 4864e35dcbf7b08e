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
 *
 * Changes: 0.2 cancellable safetensors loads. 0.3 safetensors names and
 * metadata carried with their sizes (the *_n functions, name_size,
 * name_sizes), since the format allows NUL bytes in them. 0.4 DLPack device
 * types come from the backends (bp_backend_info.dlpack_device_type,
 * bp_array_dlpack_device), so any backend that declares one takes part.
 * 0.5 token files (bp_tokens_load, bp_tokens_load_files), the timeline
 * (bp_trace_start, bp_trace_stop), bp_dlpack_capsule_destructor, the batch
 * stream (bp_batch_stream_*). 0.6 the device's total and free memory in
 * bp_memory_stats (BP_MEMORY_UNKNOWN when the backend cannot tell, also from
 * bp_device_info_memory_free), bp_memory_reset_peak. 0.7
 * bp_batch_stream_resident_bytes, measured only when asked for: the field
 * resident_bytes left bp_batch_stream_stats, whose call it made slow; plugin
 * sources in code and Python site directories (bp_runtime_options.sources
 * and .python_paths, bp_runtime_default_set_python_paths), where a backend
 * came from (bp_backend_info.origin_detail and .library, PJRT libraries as
 * pjrt_NAME backends), a device's memory kinds (bp_device_info_memory_kind*),
 * BP_TRACE_DEFAULT_CAPACITY; trace file names take %p, %r, %h, and the file
 * is written atomically; bp_batch_stream_step,
 * BP_BATCH_STREAM_MAX_PREFETCH, BP_BATCH_STREAM_LAST_STEP,
 * bp_batch_stream_options.seed_from_state, bp_tokens_options.allow_empty_match.
 * 0.8 the document starts a token file records
 * (bp_token_files_document_starts); a Megatron-Core dataset's prefix, named
 * as bp_tokens_load takes it, matches itself in bp_tokens_load_files;
 * document-aligned batch streams: bp_documents_kind and
 * bp_batch_stream_options.documents, .document_token, .document_starts,
 * .document_start_counts and .max_documents (a 0.7 struct_size still
 * creates a stream without documents); bp_batch_pieces and
 * bp_batch_stream_next_documents, each device's document pieces
 * (cu_seqlens, position_ids, max_seqlen) beside its windows.
 * 0.9 schedules: bp_schedule_entry and bp_batch_stream_options.schedule
 * and .schedule_count (batch size and context that change at given steps),
 * .weight_steps and .weight_step_count (a mixture that changes); a 0.8
 * struct_size still creates a stream without them. State version 3.
 * 0.10 layouts: bp_mesh_axis, bp_sequence_order and
 * bp_batch_stream_options.mesh, .batch_axes, .sequence_axes,
 * .sequence_order and .mesh_ranks (a step's global batch laid out over a
 * mesh; a 0.9 struct_size still creates a stream without one);
 * bp_batch_stream_stats.read_bytes (a 0.9 struct_size is still filled,
 * without it).
 * 0.11 bp_batch_stream_stats.step and .epoch, the step handed out last and
 * the sampler's epoch at it (a 0.10 or 0.9 struct_size is still filled,
 * without them).
 */
#ifndef BACKPLANE_BACKPLANE_H
#define BACKPLANE_BACKPLANE_H

#include <backplane/api.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BP_API_VERSION_MAJOR 0
#define BP_API_VERSION_MINOR 11
#define BP_API_VERSION_PATCH 0

/* The version of the library loaded at run time, e.g. "0.1.0". Static string. */
BACKPLANE_API const char* bp_version(void);

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
#define BP_STATUS_PLUGIN ((bp_status)11)    /* a plugin broke the ABI contract */
#define BP_STATUS_IO ((bp_status)12)        /* the file system refused a read or write */
#define BP_STATUS_CANCELLED ((bp_status)13) /* the caller stopped it (a progress callback) */

/* The message of the last failing call on this thread ("" if none). Valid
 * until the next failing call on this thread. */
BACKPLANE_API const char* bp_last_error(void);

/* A short name for a status code ("out of range"). Static string. */
BACKPLANE_API const char* bp_status_name(bp_status status);

/* ---------------------------------------------------------- runtime -- */

typedef struct bp_runtime bp_runtime;

/* Where a plugin path or PJRT library came from (bp_plugin_source.origin). */
typedef int32_t bp_search_origin;
#define BP_ORIGIN_CODE ((bp_search_origin)0)
#define BP_ORIGIN_ENVIRONMENT ((bp_search_origin)1)
#define BP_ORIGIN_CONFIG ((bp_search_origin)2)
#define BP_ORIGIN_INSTALL_DIR ((bp_search_origin)3)
#define BP_ORIGIN_CORE_DIR ((bp_search_origin)4)
#define BP_ORIGIN_PACKAGE ((bp_search_origin)5) /* an installed Python package */

typedef int32_t bp_plugin_source_kind;
#define BP_PLUGIN_SOURCE_PATH ((bp_plugin_source_kind)0) /* a plugin file or directory */
#define BP_PLUGIN_SOURCE_PJRT ((bp_plugin_source_kind)1) /* a PJRT library: the backend pjrt_<name> */

/* API 0.7: a plugin path or a PJRT library given in code, listed with its
 * origin (docs/configuration.md). Strings are copied; NULL reads as "". */
typedef struct bp_plugin_source {
  size_t struct_size;
  bp_plugin_source_kind kind;
  /* A PJRT library's name (the backend is pjrt_<name>, lowercased, other
   * characters than [a-z0-9_] made '_'); for a path, the name it is listed
   * under when `problem` is set. */
  const char* name;
  const char* path;
  bp_search_origin origin; /* BP_ORIGIN_PACKAGE paths are searched after the config's */
  const char* origin_detail;
  /* Non-empty: a broken source, listed failed with this reason. */
  const char* problem;
  /* PJRT create options: key and "<type>:<value>", type int64, bool, float,
   * string or int64_list (comma-separated integers). */
  const char* const* create_option_keys;
  const char* const* create_option_values;
  size_t create_option_count;
} bp_plugin_source;

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
  /* API 0.7, read only when struct_size covers them. Plugin paths and PJRT
   * libraries listed with their origins; PJRT libraries given here come
   * first. Copied. */
  const bp_plugin_source* sources;
  size_t source_count;
  /* Site directories (a Python sys.path) whose installed packages are
   * scanned, without running them, for PJRT plugins (entry points
   * jax_plugins and xla_plugins, jax_plugins/ namespace packages) and
   * backplane plugins (entry point backplane.plugins). Copied. */
  const char* const* python_paths;
  size_t python_path_count;
} bp_runtime_options;

/* A new, independent runtime. `options` may be NULL for the defaults; an
 * API 0.6 struct (ending at skip_default_paths) is accepted. Discovery runs
 * on first use. Destroy with bp_runtime_destroy. A source with a NULL
 * bp_plugin_source array, path or option key is INVALID_ARGUMENT. */
BACKPLANE_API bp_status bp_runtime_create(const bp_runtime_options* options, bp_runtime** out);

/* The process-wide runtime. Never destroy it (bp_runtime_destroy ignores it). */
BACKPLANE_API bp_status bp_runtime_default(bp_runtime** out);

/* API 0.7: the site directories the process-wide runtime scans for installed
 * packages (see bp_runtime_options.python_paths). Only before that runtime
 * is first made (bp_runtime_default, or any call on it): afterwards
 * INVALID_ARGUMENT, saying its discovery already ran or may be running.
 * Copied. */
BACKPLANE_API bp_status bp_runtime_default_set_python_paths(const char* const* paths, size_t count);

BACKPLANE_API void bp_runtime_destroy(bp_runtime* runtime);

/* The config file used: path, or NULL when none was found. Valid until the
 * runtime is destroyed. Fails with BP_STATUS_CONFIG / BP_STATUS_NOT_FOUND
 * when the config file is unusable (so does every call needing discovery). */
BACKPLANE_API bp_status bp_runtime_config_path(bp_runtime* runtime, const char** out);

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
  const char* abi_version; /* "1.1", or "" when the table could not be read */
  int32_t priority;        /* config priority, else the probe's, else the table's */
  uint64_t capabilities;   /* BP_CAPABILITY_* bits of plugin.h */
  /* API 0.4, written only when struct_size covers it: the DLPack device type
   * (DLDeviceType) the plugin declares for its memory, 0 when none. */
  int32_t dlpack_device_type;
  /* API 0.7, written only when struct_size covers them. Where it came from in
   * words ("config /etc/x.toml:12:1 [pjrt.cpu]", "PJRT_NAMES_AND_LIBRARY_PATHS",
   * "xla_cpu_pjrt 0.0.1 (entry point xla_plugins:xla_cpu_pjrt)"), "" for a
   * plugin of the search path no package put there; the PJRT library of a
   * pjrt_<name> backend, "" otherwise. */
  const char* origin_detail;
  const char* library;
} bp_backend_info;

/* Number of plugins found (every status counts). */
BACKPLANE_API bp_status bp_backend_count(bp_runtime* runtime, size_t* out);

/* Fills `out` (set out->struct_size first; the sizes of API 0.3, without
 * dlpack_device_type, and 0.4, without origin_detail, are accepted too) for
 * index 0..count-1. */
BACKPLANE_API bp_status bp_backend_get(bp_runtime* runtime, size_t index, bp_backend_info* out);

/* *out = 1 when a backend of that name is available, else 0. Never an error
 * for an unknown name: availability is a value. */
BACKPLANE_API bp_status bp_backend_is_available(bp_runtime* runtime, const char* name, int32_t* out);

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
BACKPLANE_API bp_status bp_device_resolve(bp_runtime* runtime, const char* selector, bp_device* out);

/* Writes "cpu:0" into `buffer` (NUL-terminated). OUT_OF_RANGE when it does
 * not fit in `capacity` bytes. */
BACKPLANE_API bp_status bp_device_selector(const bp_device* device, char* buffer, size_t capacity);

/* Number of devices of an available backend. */
BACKPLANE_API bp_status bp_device_count(bp_runtime* runtime, const char* backend, int32_t* out);

BACKPLANE_API bp_status bp_device_info_create(bp_runtime* runtime, const bp_device* device, bp_device_info** out);
BACKPLANE_API void bp_device_info_destroy(bp_device_info* info);
/* Strings are valid until the info is destroyed. */
BACKPLANE_API const char* bp_device_info_name(const bp_device_info* info);
BACKPLANE_API bp_device_kind bp_device_info_kind(const bp_device_info* info);
/* Bytes, as the backend reported them when the info was created. Free is
 * BP_MEMORY_UNKNOWN when the backend cannot tell (see bp_memory_stats). */
BACKPLANE_API uint64_t bp_device_info_memory_total(const bp_device_info* info);
BACKPLANE_API uint64_t bp_device_info_memory_free(const bp_device_info* info);
BACKPLANE_API size_t bp_device_info_attribute_count(const bp_device_info* info);
/* Key and value of attribute `index`; OUT_OF_RANGE past the end. */
BACKPLANE_API bp_status bp_device_info_attribute(const bp_device_info* info, size_t index, const char** key,
                                                 const char** value);
/* API 0.7: the device's memory kinds, the default first ("host", "device",
 * "pinned_host", "unpinned_host"): as the plugin states them, else derived
 * from its capabilities. OUT_OF_RANGE past the end. */
BACKPLANE_API size_t bp_device_info_memory_kind_count(const bp_device_info* info);
BACKPLANE_API bp_status bp_device_info_memory_kind(const bp_device_info* info, size_t index, const char** kind);

/* ---------------------------------------------------- default device -- */

/* Which precedence level decided the default device, highest first. */
typedef int32_t bp_device_source;
#define BP_SOURCE_SCOPED_OVERRIDE ((bp_device_source)0)
#define BP_SOURCE_PROCESS_SETTING ((bp_device_source)1)
#define BP_SOURCE_ENVIRONMENT ((bp_device_source)2) /* BACKPLANE_DEFAULT_DEVICE */
#define BP_SOURCE_CONFIG_FILE ((bp_device_source)3)
#define BP_SOURCE_AUTOMATIC ((bp_device_source)4)
/* Level 5 in a data-parallel job: device local_rank % device_count of the
 * backend the automatic choice picks, local_rank from LOCAL_RANK,
 * OMPI_COMM_WORLD_LOCAL_RANK or SLURM_LOCALID (the first one set). */
#define BP_SOURCE_LOCAL_RANK ((bp_device_source)5)

/* The default device and (when `source` is not NULL) what decided it. A
 * device the user named that cannot be used is an error with its reason. */
BACKPLANE_API bp_status bp_default_device(bp_runtime* runtime, bp_device* out, bp_device_source* source);

/* A short description of a source ("BACKPLANE_DEFAULT_DEVICE"). Static. */
BACKPLANE_API const char* bp_device_source_name(bp_device_source source);

/* As bp_default_device, plus (when `description` is not NULL) what decided
 * it in words: bp_device_source_name's text, except that BP_SOURCE_LOCAL_RANK
 * names the variable and its value ("LOCAL_RANK=1"). `source` may be NULL.
 * The string belongs to the library and stays valid until the next call of
 * this function on the same thread. */
BACKPLANE_API bp_status bp_default_device_describe(bp_runtime* runtime, bp_device* out, bp_device_source* source,
                                                   const char** description);

/* The process-wide setting; `selector` NULL clears it. Validated at once. */
BACKPLANE_API bp_status bp_default_device_set(bp_runtime* runtime, const char* selector);

/* Scoped override on the calling thread: makes `selector` the default until
 * the scope is exited on the same thread. Nestable; each runtime has its own
 * scopes. *token (not NULL) receives a number naming this scope, unique in
 * the process and never 0. Errors: as bp_device_resolve. */
BACKPLANE_API bp_status bp_default_device_push_scope(bp_runtime* runtime, const char* selector, uint64_t* token);

/* Exits the scope `token`, which must be the innermost open scope of this
 * runtime on this thread. Otherwise INVALID_ARGUMENT and nothing changes:
 * for a scope exited while a later one is still open, the message names both
 * ("default-device scope cuda:1 (token 7) exited while scope cpu:0 (token 9),
 * entered later, is still open; exit scopes innermost first"); also for a
 * token of another runtime, and for a token not open on this thread (already
 * exited, pushed on another thread, or never handed out). */
BACKPLANE_API bp_status bp_default_device_pop_scope(bp_runtime* runtime, uint64_t token);

/* The same without tokens: push is push_scope; pop exits the innermost scope
 * this runtime pushed through the C API on this thread, with pop_scope's
 * checks (a C++ DefaultDeviceScope of the runtime entered after it and still
 * open makes it fail). Popping with nothing pushed for this runtime on this
 * thread is INVALID_ARGUMENT. Prefer the token pair: a pop cannot tell
 * whether it closes the scope its caller meant. */
BACKPLANE_API bp_status bp_default_device_push(bp_runtime* runtime, const char* selector);
BACKPLANE_API bp_status bp_default_device_pop(bp_runtime* runtime);

/* ----------------------------------------------------------- dtypes -- */

/* Element types: the numbers of the C++ backplane::DType, stable, never
 * renumbered. 0 is never a dtype. */
typedef int32_t bp_dtype;
#define BP_DTYPE_U8 ((bp_dtype)1)
#define BP_DTYPE_U16 ((bp_dtype)2)
#define BP_DTYPE_U32 ((bp_dtype)3)
#define BP_DTYPE_I32 ((bp_dtype)4)
#define BP_DTYPE_I64 ((bp_dtype)5)
#define BP_DTYPE_BOOL ((bp_dtype)6)
#define BP_DTYPE_I8 ((bp_dtype)7)
#define BP_DTYPE_I16 ((bp_dtype)8)
#define BP_DTYPE_U64 ((bp_dtype)9)
#define BP_DTYPE_F16 ((bp_dtype)10)
#define BP_DTYPE_BF16 ((bp_dtype)11)
#define BP_DTYPE_F32 ((bp_dtype)12)
#define BP_DTYPE_F64 ((bp_dtype)13)
#define BP_DTYPE_C64 ((bp_dtype)14) /* complex of two F32 */
#define BP_DTYPE_F8_E5M2 ((bp_dtype)15)
#define BP_DTYPE_F8_E4M3 ((bp_dtype)16)
#define BP_DTYPE_F8_E8M0 ((bp_dtype)17)
#define BP_DTYPE_F8_E4M3FNUZ ((bp_dtype)18)
#define BP_DTYPE_F8_E5M2FNUZ ((bp_dtype)19)
#define BP_DTYPE_F4 ((bp_dtype)20)      /* 4 bits, storage only */
#define BP_DTYPE_F6_E2M3 ((bp_dtype)21) /* 6 bits, storage only */
#define BP_DTYPE_F6_E3M2 ((bp_dtype)22) /* 6 bits, storage only */

/* The safetensors name ("U16", "BF16"); "" for a value that is not a dtype.
 * Static string. */
BACKPLANE_API const char* bp_dtype_name(bp_dtype dtype);

/* Inverse of bp_dtype_name, case-sensitive. INVALID_ARGUMENT naming the text
 * for an unknown name. */
BACKPLANE_API bp_status bp_dtype_from_name(const char* name, bp_dtype* out);

/* Bits per element (4, 6, 8, 16, 32, 64); 0 for a value that is not a dtype. */
BACKPLANE_API int32_t bp_dtype_bits(bp_dtype dtype);

/* ----------------------------------------------------------- arrays -- */

/* A dense, row-major array on one device (the C++ backplane::Array). A handle
 * owns one reference: the data lives while any handle, view, DLPack export or
 * transfer uses it, even after the runtime that made it is destroyed (reading
 * and destroying still work; placing new arrays needs the runtime). Each
 * function returning a new bp_array* hands the caller one handle to destroy
 * with bp_array_destroy. Arrays are immutable: any thread may use a handle,
 * but destroying it while another thread uses it is a caller bug. */
typedef struct bp_array bp_array;

/* Wherever a `const bp_device* device` parameter below may be NULL, NULL
 * means the runtime's default device as bp_default_device reports it on the
 * calling thread (scoped overrides included). */

/* Copies `size` bytes from `data` into a new array of `dtype` and `shape`
 * (`rank` extents; rank 0 is a scalar and `shape` may be NULL) on `device`.
 * Returns when the data has arrived: `data` may be reused at once. Errors:
 * INVALID_ARGUMENT (unknown dtype, negative extent, `size` not the byte size
 * of shape and dtype), OUT_OF_MEMORY, and what bp_device_resolve reports. */
BACKPLANE_API bp_status bp_array_create(bp_runtime* runtime, const bp_device* device, bp_dtype dtype,
                                        const int64_t* shape, size_t rank, const void* data, uint64_t size,
                                        bp_array** out);

/* Releases the handle. NULL and already destroyed handles are ignored. */
BACKPLANE_API void bp_array_destroy(bp_array* array);

BACKPLANE_API bp_status bp_array_dtype(const bp_array* array, bp_dtype* out);
BACKPLANE_API bp_status bp_array_rank(const bp_array* array, size_t* out);
/* Writes the rank extents into `shape`; OUT_OF_RANGE when `capacity` (in
 * elements) is smaller than the rank. `shape` may be NULL for rank 0. */
BACKPLANE_API bp_status bp_array_shape(const bp_array* array, int64_t* shape, size_t capacity);
BACKPLANE_API bp_status bp_array_nbytes(const bp_array* array, uint64_t* out);
BACKPLANE_API bp_status bp_array_device(const bp_array* array, bp_device* out);

/* The backend's address of the first byte (a host pointer on CPU, a device
 * pointer on CUDA; NULL where the backend has none). Does not wait for the
 * data. Valid while the array (any handle or view of its buffer) lives. */
BACKPLANE_API bp_status bp_array_native_address(const bp_array* array, void** out);

/* *out = 1 when both are views of the same buffer (device_put to the device
 * an array already lives on returns a handle to the same data). */
BACKPLANE_API bp_status bp_array_shares_buffer(const bp_array* first, const bp_array* second, int32_t* out);

/* Waits for the data, then copies nbytes into `destination`, which holds
 * `capacity` bytes. INVALID_ARGUMENT when capacity < nbytes; a failed
 * transfer's code and message. */
BACKPLANE_API bp_status bp_array_copy_to_host(const bp_array* array, void* destination, uint64_t capacity);

/* Rows [begin, end) along axis 0 as a new handle sharing the buffer.
 * OUT_OF_RANGE for bounds outside [0, shape[0]] or begin > end;
 * INVALID_ARGUMENT for a scalar or a sub-byte slice not on whole bytes. */
BACKPLANE_API bp_status bp_array_slice(const bp_array* array, int64_t begin, int64_t end, bp_array** out);

/* Progress of a transfer or load: bytes done of total. Called on a transfer
 * thread, possibly concurrently with the caller; must not block for long.
 * `user_data` is the pointer given alongside the callback. */
typedef void (*bp_progress_callback)(uint64_t done, uint64_t total, void* user_data);
/* A progress report that can stop the work: a non-zero return cancels it. */
typedef int32_t (*bp_cancellable_progress_callback)(uint64_t done, uint64_t total, void* user_data);

/* `array` on `device` (NULL: the default device). Asynchronous: returns at
 * once a new handle whose data may still be arriving (bp_array_wait). When
 * the array already lives there, the new handle shares its data (no copy).
 * `progress` may be NULL; when set, `user_data` must stay valid until the
 * transfer ends (bp_array_wait / bp_array_is_ready say so). Out of memory is
 * reported here; copy failures by bp_array_wait. */
BACKPLANE_API bp_status bp_array_device_put(bp_runtime* runtime, const bp_array* array, const bp_device* device,
                                            bp_progress_callback progress, void* user_data, bp_array** out);

/* Blocks until the data has arrived (block_until_ready). Returns the
 * transfer's error, every time, for a failed transfer. */
BACKPLANE_API bp_status bp_array_wait(const bp_array* array);

/* *out = 1 once the data has arrived or its transfer failed; 0 while it is
 * still moving. Never reports the transfer's error (bp_array_wait does). */
BACKPLANE_API bp_status bp_array_is_ready(const bp_array* array, int32_t* out);

/* The batch sampler: `count` windows tokens[offsets[i], offsets[i] + length)
 * of the 1-D host array `tokens`, gathered into one new [count, length] array
 * on `device` (NULL: the default device) with one host->device transfer;
 * asynchronous like bp_array_device_put. `output` 0 keeps the dtype, else the
 * integers are converted (e.g. BP_DTYPE_I64). OUT_OF_RANGE names the first
 * offset whose window does not fit; UNSUPPORTED for a source that is not on a
 * host-addressable device or not 1-D, or a conversion between non-integers. */
BACKPLANE_API bp_status bp_take_windows(bp_runtime* runtime, const bp_array* tokens, const int64_t* offsets,
                                        size_t count, int64_t length, const bp_device* device, bp_dtype output,
                                        bp_array** out);

/* ----------------------------------------------------------- memory -- */

/* A memory figure the backend cannot tell. */
#define BP_MEMORY_UNKNOWN UINT64_MAX

/* The caching allocator of one device (bytes; counts since the runtime
 * started), and the device's own memory. Set struct_size to sizeof before
 * the call. */
typedef struct bp_memory_stats {
  size_t struct_size;
  uint64_t in_use;              /* device blocks held by arrays or transfers */
  uint64_t cached;              /* device blocks kept for reuse */
  uint64_t peak;                /* highest in_use since the start or bp_memory_reset_peak */
  uint64_t backend_allocations; /* memory_allocate calls of the backend */
  uint64_t backend_frees;
  uint64_t pinned_in_use; /* pinned host staging (backends that offer it) */
  uint64_t pinned_cached;
  uint64_t pinned_backend_allocations;
  /* API 0.6, written only when struct_size covers them: the device's memory
   * as its backend reports it at the time of the call, whoever holds it
   * (cached blocks count as used). memory_free is BP_MEMORY_UNKNOWN when the
   * backend cannot tell: opencl, and cuda before the device is first used in
   * this process. */
  uint64_t memory_total;
  uint64_t memory_free;
} bp_memory_stats;

/* `device` NULL: the default device. The API 0.5 size (up to
 * pinned_backend_allocations) is accepted too. */
BACKPLANE_API bp_status bp_memory_stats_get(bp_runtime* runtime, const bp_device* device, bp_memory_stats* out);

/* API 0.6. Sets the device's peak to what is in use now, so that the next
 * bp_memory_stats_get reports the peak of what ran since. `device` NULL: the
 * default device. */
BACKPLANE_API bp_status bp_memory_reset_peak(bp_runtime* runtime, const bp_device* device);

/* Returns the device's cached (unused) blocks to the backend. */
BACKPLANE_API bp_status bp_empty_cache(bp_runtime* runtime, const bp_device* device);

/* ----------------------------------------------------------- DLPack -- */

/* Zero-copy exchange with NumPy, PyTorch, CuPy and other DLPack users.
 * Include <dlpack/dlpack.h> to look inside the tensor; this header only needs
 * the name. The library is built against DLPack 0.6 (Debian's
 * libdlpack-dev), which has no DLManagedTensorVersioned: only the unversioned
 * form is offered. */
struct DLManagedTensor;

/* Exports the array as a DLManagedTensor sharing its buffer (no copy). Waits
 * for the data first. The tensor holds one reference to the data; the
 * consumer calls tensor->deleter(tensor) exactly once when done (or
 * bp_dlpack_tensor_delete), from any thread. The tensor's device is the one
 * bp_array_dlpack_device reports. Errors: UNSUPPORTED for a backend that
 * declares no DLPack device type and whose memory is not host memory, and
 * for dtypes DLPack cannot describe (F8, F6, F4); the transfer's error when
 * the data never arrived. */
BACKPLANE_API bp_status bp_array_to_dlpack(const bp_array* array, struct DLManagedTensor** out);

/* API 0.4: the DLPack device (DLDeviceType and device_id) the array exports
 * as, without exporting it: the type its backend declares (backend ABI 1.2)
 * with the device ordinal as device_id (0 for kDLCPU); kDLCPU for a backend
 * that declares none but whose memory is host memory. Errors: UNSUPPORTED,
 * naming the backend, when neither applies. Does not wait for the data. */
BACKPLANE_API bp_status bp_array_dlpack_device(const bp_array* array, int32_t* device_type, int32_t* device_id);

/* Imports a DLPack tensor without a copy. Where it lands:
 * - host memory (kDLCPU, kDLCUDAHost, kDLROCMHost): on the calling thread's
 *   default device when that device is host-addressable, else on device 0 of
 *   the first available host-addressable backend in priority order;
 * - any other device type: on device `device_id` of the first available
 *   backend, in priority order, that declares that DLPack device type
 *   (backend ABI 1.2), adopted through its memory_wrap (ABI 1.1), which
 *   checks what it can (CUDA: device memory of that GPU, inside one
 *   allocation).
 * On success the array owns `tensor`: its deleter runs (on whichever thread
 * drops the last reference) when the last handle, view or transfer using the
 * data is gone; the caller must not touch `tensor` again. On failure the
 * caller still owns it. The memory must not change while transfers read it,
 * and device memory must be ready: written, or (CUDA) its writes ordered
 * before the legacy default stream (what a DLPack producer does when asked
 * for stream 1). Errors: UNSUPPORTED for a device type no backend declares,
 * non-contiguous strides, lanes != 1, dtypes with no backplane equivalent,
 * and a plugin too old to adopt memory; INVALID_ARGUMENT for NULL data with a
 * non-empty shape, negative extents, a negative device_id, or memory the
 * plugin refuses (CUDA: unknown to the driver, or of another GPU);
 * OUT_OF_RANGE for a device_id past the backend's devices or a range past
 * the end of its allocation; UNAVAILABLE when the backends that declare the
 * type, or all host-addressable backends, are unavailable; the default
 * device's error when the default device cannot be decided. */
BACKPLANE_API bp_status bp_array_from_dlpack(bp_runtime* runtime, struct DLManagedTensor* tensor, bp_array** out);

/* Calls tensor->deleter(tensor) when both are non-NULL: for callers (such as
 * ctypes) that cannot call a function pointer from a struct easily. */
BACKPLANE_API void bp_dlpack_tensor_delete(struct DLManagedTensor* tensor);

/* A PyCapsule destructor (its argument is the PyObject* capsule) for
 * "dltensor" capsules made from bp_array_to_dlpack's tensor, for Python
 * bindings over this C API: it deletes the tensor unless a consumer took it
 * (renamed the capsule "used_dltensor"). Written in C so that a capsule
 * destroyed while a consumer's exception is pending (the consumer refused
 * it) runs no Python code: the consumer's error reaches the user and the
 * tensor is freed. Uses the interpreter's own PyCapsule functions. */
BACKPLANE_API void bp_dlpack_capsule_destructor(void* capsule);

/* ------------------------------------------------------ safetensors -- */

/* A validated safetensors header (the file's tensor table, never its data).
 * Opaque; destroy when done. Strings and arrays it returns are valid until
 * it is destroyed. */
typedef struct bp_safetensors_header bp_safetensors_header;

/* Reads and validates the 8-byte length and JSON header of `path`. Errors:
 * NOT_FOUND (no such file), INVALID_ARGUMENT (not a regular file, cannot be
 * opened), INVALID_FILE (a format rule is broken: the message names the file,
 * the rule and the tensor, as the reference implementation reports it). */
BACKPLANE_API bp_status bp_safetensors_inspect(const char* path, bp_safetensors_header** out);
BACKPLANE_API void bp_safetensors_header_destroy(bp_safetensors_header* header);

/* N (the JSON's length), 8 + N (where data starts) and the file's size. Any
 * output pointer may be NULL. */
BACKPLANE_API bp_status bp_safetensors_header_sizes(const bp_safetensors_header* header, uint64_t* header_size,
                                                    uint64_t* data_offset, uint64_t* file_size);
BACKPLANE_API bp_status bp_safetensors_header_tensor_count(const bp_safetensors_header* header, size_t* out);

/* Text from a safetensors file (tensor names, metadata keys and values) may
 * hold NUL bytes ("\u0000" in the JSON). The *_n functions and size fields
 * carry such text whole, as (pointer, size) (the pointer is still followed by
 * a NUL). A function that can only return NUL-terminated text fails with
 * INVALID_ARGUMENT naming the text (NUL shown as \u0000) rather than return
 * it cut short. */

/* One tensor of a header, in data order. Set struct_size to sizeof first
 * (sizeof of API 0.2, without name_size, is accepted too: then a name with
 * a NUL byte is INVALID_ARGUMENT naming the tensor). */
typedef struct bp_safetensors_tensor_info {
  size_t struct_size;
  const char* name;       /* name_size bytes, then a NUL */
  const char* dtype_name; /* "U16" */
  bp_dtype dtype;
  size_t rank;
  const uint64_t* shape; /* rank extents; may be NULL when rank is 0 */
  uint64_t begin;        /* data_offsets, relative to the data section */
  uint64_t end;
  size_t name_size; /* API 0.3: bytes of name, NUL bytes included */
} bp_safetensors_tensor_info;

/* OUT_OF_RANGE past the end. */
BACKPLANE_API bp_status bp_safetensors_header_tensor(const bp_safetensors_header* header, size_t index,
                                                     bp_safetensors_tensor_info* out);

/* Number of __metadata__ entries, or -1 when the file has none (absent or
 * null); then key/value of entry `index` in key order (OUT_OF_RANGE past the
 * end; INVALID_ARGUMENT naming the key when the key or value holds a NUL:
 * use the _n form). */
BACKPLANE_API bp_status bp_safetensors_header_metadata_count(const bp_safetensors_header* header, int64_t* out);
BACKPLANE_API bp_status bp_safetensors_header_metadata(const bp_safetensors_header* header, size_t index,
                                                       const char** key, const char** value);
/* API 0.3: as bp_safetensors_header_metadata, with the sizes in bytes (NUL
 * bytes included) in *key_size and *value_size; never refuses a NUL. */
BACKPLANE_API bp_status bp_safetensors_header_metadata_n(const bp_safetensors_header* header, size_t index,
                                                         const char** key, size_t* key_size, const char** value,
                                                         size_t* value_size);

/* Tensors loaded from a file: name -> array, plus the file's metadata.
 * Opaque; destroy when done (the arrays handed out live on). Strings are
 * valid until the map is destroyed. */
typedef struct bp_tensor_map bp_tensor_map;

typedef struct bp_safetensors_load_options {
  size_t struct_size;
  /* The tensors to load (copied); name_count 0 loads every tensor. */
  const char* const* names;
  size_t name_count;
  /* Bytes done of the selected tensors' data; called on the calling thread
   * before bp_safetensors_load returns. May be NULL. */
  bp_progress_callback progress;
  void* user_data;
  /* API 0.2, read only when struct_size covers it; may be NULL. Called like
   * `progress` (after it, with the same user_data); a non-zero return
   * cancels the load, which fails with BP_STATUS_CANCELLED once the copies
   * in flight have finished. Nothing loaded is handed out. */
  bp_cancellable_progress_callback cancellable_progress;
  /* API 0.3, read only when struct_size covers it; may be NULL. When set,
   * names[i] is name_sizes[i] bytes long (NUL bytes included) instead of
   * NUL-terminated. */
  const size_t* name_sizes;
} bp_safetensors_load_options;

/* Loads `path` onto `device` (NULL: the default device); `options` may be
 * NULL. On a host-addressable device (cpu) the arrays are zero-copy views of
 * a read-only memory map (do not write through a DLPack export of them); on
 * others the data streams through pinned staging and is ready on return.
 * Errors: as bp_safetensors_inspect, NOT_FOUND naming an unknown tensor name,
 * IO when a read fails, OUT_OF_MEMORY and the device's errors. */
BACKPLANE_API bp_status bp_safetensors_load(bp_runtime* runtime, const char* path, const bp_device* device,
                                            const bp_safetensors_load_options* options, bp_tensor_map** out);
BACKPLANE_API void bp_tensor_map_destroy(bp_tensor_map* map);

BACKPLANE_API bp_status bp_tensor_map_count(const bp_tensor_map* map, size_t* out);
/* Names in bytewise order; OUT_OF_RANGE past the end; INVALID_ARGUMENT
 * naming the tensor for a name with a NUL byte (use bp_tensor_map_name_n). */
BACKPLANE_API bp_status bp_tensor_map_name(const bp_tensor_map* map, size_t index, const char** out);
/* API 0.3: as bp_tensor_map_name, with the name's size in bytes (NUL bytes
 * included) in *size; never refuses a NUL. */
BACKPLANE_API bp_status bp_tensor_map_name_n(const bp_tensor_map* map, size_t index, const char** out, size_t* size);
/* A new handle to the tensor (destroy it with bp_array_destroy); NOT_FOUND
 * naming the tensor when the map has none of that name. */
BACKPLANE_API bp_status bp_tensor_map_get(const bp_tensor_map* map, const char* name, bp_array** out);
/* API 0.3: as bp_tensor_map_get for the `size` bytes at `name` (NUL bytes
 * included). `name` may be NULL when size is 0. */
BACKPLANE_API bp_status bp_tensor_map_get_n(const bp_tensor_map* map, const char* name, size_t size, bp_array** out);
/* As the header's metadata functions: -1 when the file has no __metadata__. */
BACKPLANE_API bp_status bp_tensor_map_metadata_count(const bp_tensor_map* map, int64_t* out);
BACKPLANE_API bp_status bp_tensor_map_metadata(const bp_tensor_map* map, size_t index, const char** key,
                                               const char** value);
/* API 0.3: as bp_safetensors_header_metadata_n. */
BACKPLANE_API bp_status bp_tensor_map_metadata_n(const bp_tensor_map* map, size_t index, const char** key,
                                                 size_t* key_size, const char** value, size_t* value_size);

/* Writes `count` arrays (on any devices; waits for arrays still arriving)
 * named names[i] to `path`, atomically, in the reference layout.
 * `metadata_count` -1 writes no __metadata__; otherwise that many key/value
 * pairs (0: an empty __metadata__ object). All inputs are read during the
 * call only. Errors: INVALID_ARGUMENT naming the tensor (duplicate name,
 * __metadata__, sub-byte tensor not filling whole bytes, text that is not
 * UTF-8), NOT_FOUND / INVALID_ARGUMENT for a directory that is missing or not
 * writable, an array's transfer error. */
BACKPLANE_API bp_status bp_safetensors_save(const char* path, const char* const* names, const bp_array* const* arrays,
                                            size_t count, const char* const* metadata_keys,
                                            const char* const* metadata_values, int64_t metadata_count);

/* API 0.3: as bp_safetensors_save, with the size in bytes of each text
 * (NUL bytes included, written as \u0000): names[i] is name_sizes[i] bytes,
 * metadata_keys[i] metadata_key_sizes[i], metadata_values[i]
 * metadata_value_sizes[i]. A size array may be NULL: its texts are then
 * NUL-terminated. */
BACKPLANE_API bp_status bp_safetensors_save_n(const char* path, const char* const* names, const size_t* name_sizes,
                                              const bp_array* const* arrays, size_t count,
                                              const char* const* metadata_keys, const size_t* metadata_key_sizes,
                                              const char* const* metadata_values, const size_t* metadata_value_sizes,
                                              int64_t metadata_count);

/* API 0.7: how bp_safetensors_save_with writes. NULL options: the defaults. */
typedef struct bp_save_options {
  size_t struct_size;
  /* Nonzero (the default): flush the file to disk before it replaces `path`,
   * and the rename after, so that a machine that loses power keeps the old
   * file or the whole new one. 0: for scratch files, skip both flushes; the
   * save is still atomic for every process, but a crash of the machine may
   * leave a partial file. */
  int32_t durable;
} bp_save_options;

/* API 0.7: bp_safetensors_save_n with options. */
BACKPLANE_API bp_status bp_safetensors_save_with(const char* path, const char* const* names, const size_t* name_sizes,
                                                 const bp_array* const* arrays, size_t count,
                                                 const char* const* metadata_keys, const size_t* metadata_key_sizes,
                                                 const char* const* metadata_values, const size_t* metadata_value_sizes,
                                                 int64_t metadata_count, const bp_save_options* options);

/* ----------------------------------------------------- batch stream -- */

/* The training loop's data path (the C++ backplane::BatchStream; the guide,
 * docs/batch-stream.md, specifies the sampling exactly). Each step hands out
 * batch_size windows of context + 1 tokens drawn from one or more 1-D token
 * arrays, gathered on worker threads and moved to the target device(s)
 * `prefetch` steps ahead, so bp_batch_stream_next only waits for a step that
 * is still being prepared. The windows of a global step are a pure function
 * of (seed, step, the sources' lengths, the weights, context, batch_size *
 * world_size): a saved state resumes the stream exactly, on any rank and any
 * world_size that keeps the global batch.
 *
 * Thread-safety: any thread may call any function on a stream; calls to
 * bp_batch_stream_next on one stream are serialised by the stream (as its C++
 * and Python faces are): each step goes to exactly one caller. The stream
 * keeps its runtime and its sources alive until it is destroyed. */
typedef struct bp_batch_stream bp_batch_stream;

/* API 0.7. The most steps a stream prepares ahead (options.prefetch). */
#define BP_BATCH_STREAM_MAX_PREFETCH 64
/* API 0.7. The last global step a stream hands out (2^63 - 129), and the last
 * a state may resume at: the next call after it fails with OUT_OF_RANGE, so
 * that no step count overflows. */
#define BP_BATCH_STREAM_LAST_STEP 9223372036854775679

/* API 0.8. Where documents start in the sources, for document-aligned
 * windows (docs/batch-stream.md, "Documents"): with a kind other than NONE
 * every window starts at a document start, and each batch carries its
 * document pieces (bp_batch_stream_next_documents). */
typedef int32_t bp_documents_kind;
#define BP_DOCUMENTS_NONE ((bp_documents_kind)0)   /* windows start at any token */
#define BP_DOCUMENTS_BOS ((bp_documents_kind)1)    /* a document starts at every document_token */
#define BP_DOCUMENTS_EOS ((bp_documents_kind)2)    /* a document starts at 0 and after every document_token */
#define BP_DOCUMENTS_STARTS ((bp_documents_kind)3) /* document_starts lists them */

/* API 0.9. From global step `step` on, each step has `batch_size` windows
 * on each rank of `context` + 1 tokens. */
typedef struct bp_schedule_entry {
  int64_t step;
  int64_t batch_size;
  int64_t context;
} bp_schedule_entry;

/* API 0.10. One named axis of a layout's mesh (docs/batch-stream.md, "Many
 * devices, many processes"). */
typedef struct bp_mesh_axis {
  const char* name; /* NUL-terminated, copied */
  int64_t size;     /* >= 1 */
} bp_mesh_axis;

/* API 0.10. How the sequence axes split the columns. */
typedef int32_t bp_sequence_order;
#define BP_SEQUENCE_CONTIGUOUS ((bp_sequence_order)0) /* coordinate c of cp: the c-th of cp equal chunks */
#define BP_SEQUENCE_HEAD_TAIL ((bp_sequence_order)1)  /* of 2 cp chunks: chunks c and 2 cp - 1 - c */

/* Set struct_size to sizeof, zero what you do not set, then fill at least
 * batch_size and context, or a schedule. */
typedef struct bp_batch_stream_options {
  size_t struct_size;
  int64_t batch_size; /* B: windows per step on this rank (>= 1) */
  int64_t context;    /* T: each window is T + 1 tokens (>= 1) */
  /* The targets (read during create only); device_count 0: the runtime's
   * default device on the calling thread. Several: the B windows are split
   * evenly across them, in order (B must divide evenly). */
  const bp_device* devices;
  size_t device_count;
  /* The element type handed out; 0: the sources' (then the same for every
   * source). Only integers may be converted to another type. */
  bp_dtype dtype;
  uint64_t seed;      /* the sampling key */
  int64_t rank;       /* in [0, world_size) */
  int64_t world_size; /* ranks sharing each global step; 0 counts as 1 */
  int64_t prefetch;   /* steps prepared ahead of the one handed out, in [1, 64]; 0 counts as 2 */
  /* One weight per source (>= 0, not all zero): the share of windows drawn
   * from it (read during create only). weight_count 0: in proportion to each
   * source's window starts. */
  const double* weights;
  size_t weight_count;
  uint32_t threads;      /* gather threads; 0: chosen from the machine */
  int32_t release_pages; /* non-zero: give back the pages of gathered windows */
  /* NULL, or the NUL-terminated JSON of bp_batch_stream_state (copied): the
   * stream starts at that state's step. seed, context, batch_size *
   * world_size, the weights and the sources must match the state's. */
  const char* state;
  /* API 0.7. Non-zero: the seed is `state`'s (0 without a state), and `seed`
   * must be 0. */
  int32_t seed_from_state;
  /* API 0.8 (read only when struct_size covers them; a 0.7 struct_size
   * means BP_DOCUMENTS_NONE). The fields below are read during create
   * only. */
  bp_documents_kind documents;
  int64_t document_token; /* BOS, EOS: the marker token, a value of the sources' dtype */
  /* STARTS: source_count arrays, array j holding document_start_counts[j]
   * increasing token offsets inside source j (an array of count 0 may be
   * NULL). Ignored for other kinds. */
  const int64_t* const* document_starts;
  const size_t* document_start_counts;
  /* With documents: C, the pieces each device's batch describes (its
   * cu_seqlens holds C + 1 offsets), in [0, rows * context]; 0: rows *
   * context, which no batch exceeds. A step with more pieces fails at its next call (OUT_OF_RANGE,
   * naming the step and the count). */
  int64_t max_documents;
  /* API 0.9 (read only when struct_size covers them; a 0.8 struct_size
   * means neither schedule). Read during create only. */
  /* schedule_count entries in strictly increasing step, the first at step
   * 0; batch_size and context are then the first entry's (0, or the same
   * values). 0: batch_size and context for every step. */
  const bp_schedule_entry* schedule;
  size_t schedule_count;
  /* A mixture that changes: weight_step_count entries, entry k from step
   * weight_steps[k] on (strictly increasing, the first 0) with the
   * source_count weights at weights + k * source_count, so weight_count is
   * weight_step_count * source_count. 0: `weights` for every step. */
  const int64_t* weight_steps;
  size_t weight_step_count;
  /* API 0.10 (read only when struct_size covers them; a 0.9 struct_size
   * means no layout). Read during create only. A layout: the mesh's axes,
   * row-major in this order (mesh_axis_count 0: no layout); the axes that
   * split the rows (batch_axes) and the columns (sequence_axes), by name;
   * and the mesh positions this process takes, one per device (or one for
   * the default device). With a layout, batch_size is per coordinate of the
   * batch axes, rank and world_size stay 0, and each device gets the piece
   * of its position: [rows, L + 1] arrays, or [rows, 2, L / 2 + 1] with
   * BP_SEQUENCE_HEAD_TAIL and a sequence axis (batch_stream.hpp,
   * StreamBatch). */
  const bp_mesh_axis* mesh;
  size_t mesh_axis_count;
  const char* const* batch_axes;
  size_t batch_axis_count;
  const char* const* sequence_axes;
  size_t sequence_axis_count;
  bp_sequence_order sequence_order;
  const int64_t* mesh_ranks;
  size_t mesh_rank_count;
} bp_batch_stream_options;

/* A new stream over `sources` (source_count 1-D arrays of integer tokens, all
 * of one dtype, in host memory; each handle stays the caller's: the stream
 * holds its own reference to the data). Starts preparing the first steps at
 * once. Errors, each naming the option and its value: INVALID_ARGUMENT for
 * batch_size or context < 1, rank outside [0, world_size), prefetch outside
 * [1, 64], threads > 256, a weight count other than source_count, a weight
 * negative or not finite or all of them zero, a device listed twice, B not
 * divisible by the device count, release_pages on memory that is not a
 * read-only file mapping; OUT_OF_RANGE for a window longer than every source
 * and for more windows per global step than the sources have starts (with
 * weights: than a source of positive weight has); UNSUPPORTED for a source
 * that is not 1-D integers in host memory or not of source 0's dtype, and a
 * dtype that is not an integer; INVALID_FILE for a `state` that is not one
 * (malformed JSON or JSON nested deeper than 16 levels, a missing field,
 * another format version) and INVALID_ARGUMENT naming both values for a state
 * of another stream or one past BP_BATCH_STREAM_LAST_STEP; INVALID_ARGUMENT
 * for a non-zero seed with seed_from_state; what bp_device_resolve reports for
 * the devices; INVALID_ARGUMENT for a `documents` that is no
 * bp_documents_kind, and for STARTS with document_starts or
 * document_start_counts NULL, and what the C++ BatchStream reports for the
 * documents (a marker token the sources' dtype cannot hold, starts not
 * increasing or outside their source, max_documents < 0 or above rows *
 * context); INVALID_ARGUMENT
 * for schedule or weight_steps NULL with a count, a weight_count other than
 * weight_step_count * source_count, and what the C++ BatchStream reports
 * for the schedules (an entry not after the one before it or the first not
 * at step 0, a batch_size or context below 1, entries a resumed state
 * started differently, a global batch the world_size cannot split). The
 * messages are the C++ BatchStream's, word for word. */
BACKPLANE_API bp_status bp_batch_stream_create(bp_runtime* runtime, const bp_array* const* sources, size_t source_count,
                                               const bp_batch_stream_options* options, bp_batch_stream** out);

/* Destroys the stream (its threads stop; batches handed out live on). NULL
 * and already destroyed handles are ignored. */
BACKPLANE_API void bp_batch_stream_destroy(bp_batch_stream* stream);

/* The next step's batch: one new [B / device_count, T + 1] array handle per
 * device, in the order of the devices, written to out[0 .. *count) (destroy
 * each with bp_array_destroy), the data ready to read. Blocks only while that
 * step is still being prepared. OUT_OF_RANGE naming the needed count when
 * `capacity` is smaller than the number of devices: then *count is set to it
 * and no step is consumed. A failure while preparing the step (a refused
 * copy, out of memory) is returned by the call that would hand it out, with
 * its code and message; the stream then stays failed, and its state still
 * names that step, so that a new stream can retry it. OUT_OF_RANGE after
 * BP_BATCH_STREAM_LAST_STEP was handed out. */
BACKPLANE_API bp_status bp_batch_stream_next(bp_batch_stream* stream, bp_array** out, size_t capacity, size_t* count);

/* API 0.8. The document pieces of one device's batch of `rows` windows: the
 * runs of its x (the windows without their last token, rows * context tokens
 * flattened) that lie in one document; every row starts a piece. The arrays
 * are new handles on the batch's device (destroy each with
 * bp_array_destroy). */
typedef struct bp_batch_pieces {
  bp_array* cu_seqlens;   /* int32 [max_documents + 1]: 0, each piece's end, then rows * context repeated */
  bp_array* position_ids; /* int32 [rows, context]: 0 at each piece's first token, counting up */
  int64_t max_seqlen;     /* the longest piece, in tokens */
  int64_t pieces;         /* pieces in use: cu_seqlens[pieces] == rows * context */
} bp_batch_pieces;

/* API 0.8. As bp_batch_stream_next, for a stream made with documents: also
 * each device's pieces, into pieces[0 .. *count) in the order of the
 * devices; `capacity` counts both arrays. INVALID_ARGUMENT for a stream made
 * without documents (it has no pieces: call bp_batch_stream_next), before
 * any step is consumed. OUT_OF_RANGE for a step with more pieces than
 * max_documents on a device, naming the step and the count, with the other
 * failures of bp_batch_stream_next. */
BACKPLANE_API bp_status bp_batch_stream_next_documents(bp_batch_stream* stream, bp_array** out, bp_batch_pieces* pieces,
                                                       size_t capacity, size_t* count);

/* API 0.7. The global step bp_batch_stream_next hands out next (the state's
 * "step"), in *out. */
BACKPLANE_API bp_status bp_batch_stream_step(bp_batch_stream* stream, int64_t* out);

/* Where the stream stands: a small JSON object (docs/batch-stream.md lists
 * its fields) naming the next global step to hand out, enough to resume it
 * exactly through bp_batch_stream_options.state, on any rank. Written
 * NUL-terminated to `buffer`, which holds `capacity` bytes. *length is set
 * to the JSON's length in bytes (without the NUL) whether or not it fits, so
 * that a call with capacity 0 (`buffer` may then be NULL) sizes the buffer;
 * OUT_OF_RANGE naming the bytes needed when capacity < *length + 1. */
BACKPLANE_API bp_status bp_batch_stream_state(bp_batch_stream* stream, char* buffer, size_t capacity, size_t* length);

/* What the stream did so far (seconds of wall time, steady clock): counters
 * only, about a microsecond a call. Set struct_size to sizeof before the
 * call. */
typedef struct bp_batch_stream_stats {
  size_t struct_size;
  int64_t steps;              /* batches handed out */
  uint64_t windows;           /* windows handed out */
  uint64_t bytes;             /* bytes of those batches, as handed out */
  double wait_seconds;        /* inside next, waiting for data */
  double gather_seconds;      /* gathering windows (summed over steps, not threads) */
  double transfer_seconds;    /* from a batch's copy issue to its arrival */
  double elapsed_seconds;     /* from the first next call to the last return */
  double windows_per_second;  /* windows / elapsed_seconds */
  double data_stall_fraction; /* wait_seconds / elapsed_seconds, in [0, 1] */
  /* API 0.10, written only when struct_size covers it: bytes gathered from
   * the sources, steps prepared ahead included (each piece's own columns). */
  uint64_t read_bytes;
  /* API 0.11, written only when struct_size covers them: the global step of
   * the batch handed out last (the stream's step - 1: -1 before a new
   * stream's first next), and the epoch that step draws in (0 in the first
   * pass over the window starts; with weights the least of the sources'
   * own; docs/batch-stream.md, "Epochs"). */
  int64_t step;
  uint64_t epoch;
} bp_batch_stream_stats;

BACKPLANE_API bp_status bp_batch_stream_stats_get(bp_batch_stream* stream, bp_batch_stream_stats* out);

/* Resident bytes, in this process, of the shared file mappings holding the
 * stream's sources (what release_pages keeps bounded; 0 for other memory).
 * Reads /proc/self/smaps, which costs milliseconds with large mappings: call
 * it when the figure is wanted, not every step. */
BACKPLANE_API bp_status bp_batch_stream_resident_bytes(bp_batch_stream* stream, uint64_t* out);

/* This rank's windows at global step `step` (any step >= 0, without
 * preparing it), in batch order: window i comes from source sources[i] and
 * starts at token starts[i]. *count is set to the number of windows (B)
 * whether or not they fit; OUT_OF_RANGE when `capacity` is smaller, and for
 * a negative step. Either output array may be NULL when not wanted. */
BACKPLANE_API bp_status bp_batch_stream_windows(bp_batch_stream* stream, int64_t step, int32_t* sources,
                                                int64_t* starts, size_t capacity, size_t* count);

/* ------------------------------------------------------------ trace -- */

/* Recording a timeline for ui.perfetto.dev and chrome://tracing
 * (docs/tracing.md). Same as the C++ trace_start/trace_stop
 * (backplane/trace.hpp); BACKPLANE_TRACE=FILE does it without code. */

/* API 0.7. The events kept when bp_trace_options.capacity is 0. */
#define BP_TRACE_DEFAULT_CAPACITY 1048576

typedef struct bp_trace_options {
  size_t struct_size; /* set to sizeof(bp_trace_options) */
  /* The most events kept (0: BP_TRACE_DEFAULT_CAPACITY); when more are
   * recorded the oldest are dropped and the file says how many. */
  uint64_t capacity;
} bp_trace_options;

/* Starts recording to the file `path` names: %p (the process id), %r (the
 * launcher's local rank: LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK or
 * SLURM_LOCALID, 0 when none is set), %h (the host name) and %% (a %) are
 * replaced, and the path is made absolute now. A temporary file is made
 * beside it now; bp_trace_stop renames the whole trace over `path`.
 * `options` may be NULL.
 * Errors: IO naming the path when it cannot be created there;
 * INVALID_ARGUMENT for a NULL or empty path, an unknown %-sequence, a path
 * naming what is not a regular file (a FIFO) or leading through a symlink the
 * protected_symlinks rule forbids following, a struct_size too small, or a
 * trace already being recorded. */
BACKPLANE_API bp_status bp_trace_start(const char* path, const bp_trace_options* options);
/* Stops recording and writes the file; OK (and nothing written) when no trace
 * was being recorded. IO when the file cannot be written. A bp_trace_start
 * on another thread meanwhile waits until the file is written. */
BACKPLANE_API bp_status bp_trace_stop(void);

/* ----------------------------------------------------------- tokens -- */

/* API 0.5. Token files (docs/tokens.md): the training set as a 1-D array of
 * integer tokens, a zero-copy view of one read-only memory map of the whole
 * file (pages are read when first touched; the map lives until the last
 * handle, view or transfer using it is gone; do not write through a DLPack
 * export of it). Formats, recognised by content first, name second: a NumPy
 * .npy file (1.0, 2.0, 3.0; little-endian integers; the shape flattened), an
 * llm.c shard (magic 20240520 version 1: U16; magic 20240801 version 7:
 * U32), a file named *.safetensors (its one tensor, or the one named,
 * flattened), else raw tokens of the dtype given. */

typedef struct bp_tokens_options {
  size_t struct_size;
  /* The dtype of a raw file; for the other formats a check: the header's
   * must be this one. 0: from the header (a raw file then fails). */
  bp_dtype dtype;
  /* The tensor to read from a safetensors file holding several; NULL or "":
   * the file's only tensor. Read during the call only. */
  const char* name;
  /* A host-addressable device; NULL: the runtime's "cpu" device (not the
   * default device, which may be a GPU: token files stay in host memory and
   * batches move with bp_take_windows). */
  const bp_device* device;
  /* API 0.7. Non-zero: bp_tokens_load_files hands out an empty set for a
   * pattern nothing matches, instead of failing with NOT_FOUND; the caller
   * tells "no file" from other errors by the count, not by a message. */
  int32_t allow_empty_match;
} bp_tokens_options;

/* Loads the token file `path` as a new 1-D array (destroy it with
 * bp_array_destroy). `options` may be NULL for the defaults; set
 * options->struct_size to sizeof. Errors, each naming the file:
 * NOT_FOUND (no such file, no tensor of that name), INVALID_FILE (a header
 * that lies: a wrong llm.c version, a token count or shape that does not
 * match the file's size, a dtype that is not an integer, a big-endian or
 * Fortran-ordered NumPy array, a truncated header, an empty raw file or one
 * that is not a whole number of tokens; the message names the field),
 * INVALID_ARGUMENT (a raw file without dtype, a dtype that is not an
 * integer or contradicts the header, a name for a file that is not
 * safetensors or none for one holding several tensors, not a regular file,
 * a device that is not host-addressable, a struct_size too small), IO and
 * OUT_OF_MEMORY when reading or mapping fails, and what bp_device_resolve
 * reports for the device. */
BACKPLANE_API bp_status bp_tokens_load(bp_runtime* runtime, const char* path, const bp_tokens_options* options,
                                       bp_array** out);

/* The token files matching a pattern, each with its path. Opaque; destroy
 * when done (the arrays handed out live on). Strings are valid until it is
 * destroyed. */
typedef struct bp_token_files bp_token_files;

/* Loads every file matching the glob(3) `pattern` (*, ?, [...]; when glob
 * matches nothing, a path that exists as written matches itself, and since
 * API 0.8 so does a Megatron-Core dataset's prefix) as bp_tokens_load does,
 * with the same options, in bytewise order of their paths. Errors:
 * NOT_FOUND naming the pattern when nothing matches (unless
 * options->allow_empty_match); the first failing file's error (nothing is
 * handed out then). */
BACKPLANE_API bp_status bp_tokens_load_files(bp_runtime* runtime, const char* pattern, const bp_tokens_options* options,
                                             bp_token_files** out);
BACKPLANE_API void bp_token_files_destroy(bp_token_files* files);

BACKPLANE_API bp_status bp_token_files_count(const bp_token_files* files, size_t* out);
/* The path of file `index` as glob(3) wrote it; OUT_OF_RANGE past the end. */
BACKPLANE_API bp_status bp_token_files_path(const bp_token_files* files, size_t index, const char** out);
/* A new handle to the tokens of file `index` (destroy it with
 * bp_array_destroy); OUT_OF_RANGE past the end. */
BACKPLANE_API bp_status bp_token_files_get(const bp_token_files* files, size_t index, bp_array** out);
/* API 0.8. Where the documents of file `index` start, for a format whose
 * files record documents (a Megatron-Core indexed dataset: the first token
 * of each document's first sequence): *count token offsets into its tokens,
 * strictly increasing, each below the token count (a document with no
 * tokens starts nowhere), at *starts, valid until `files` is destroyed.
 * NOT_FOUND, naming the file, for a format that records no documents (the
 * others: find them by BOS or EOS tokens instead); OUT_OF_RANGE past the end. */
BACKPLANE_API bp_status bp_token_files_document_starts(const bp_token_files* files, size_t index,
                                                       const int64_t** starts, size_t* count);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BACKPLANE_BACKPLANE_H */
