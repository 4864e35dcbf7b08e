/*
 * backplane Backend ABI — the only header a backend plugin needs.
 *
 * Plain C (C11 and C++), no dependency on the rest of backplane. A plugin is a
 * shared object named `backplane-<name>.so` exporting exactly one symbol,
 * BP_PLUGIN_ENTRY_SYMBOL, of type BP_PluginEntryFn.
 *
 * Versioning
 * ----------
 * BP_ABI_MAJOR changes only when an existing field or call changes meaning or
 * layout; a core and a plugin with different majors never talk (the core
 * reports the plugin as `incompatible`, naming both versions).
 * BP_ABI_MINOR grows when fields are appended to the END of a struct. Rules:
 *   1. Every struct starts with `size_t struct_size`, set by whoever fills the
 *      struct to sizeof() of the version it was compiled against.
 *   2. A reader touches a field only if struct_size covers it (use
 *      BP_STRUCT_HAS_FIELD). Function pointers added in a minor may also be
 *      NULL; the core checks both before calling.
 *   3. Fields are never removed, reordered or renumbered within a major.
 *   4. Enum values are fixed-width int32_t constants, never renumbered.
 *
 * Changelog
 *   1.0  first version.
 *   1.1  memory_wrap (optional, BP_CAPABILITY_WRAP_MEMORY): adopt memory the
 *        plugin did not allocate (DLPack imports of device memory).
 *   1.2  BP_ProbeArgs.priority (in/out): the plugin may set its priority from
 *        what the probe found. BP_PluginApi.dlpack_device_type: the DLPack
 *        device type of the backend's memory, so the core never needs to know
 *        a backend by name to share its arrays.
 *        Later, with no layout change: BP_DeviceInfoArgs.memory_free may be
 *        BP_MEMORY_FREE_UNKNOWN. No answer that was valid before changes
 *        meaning (free never exceeded total), so the version stays.
 *   1.3  Device time (optional, BP_CAPABILITY_EVENT_TIMING): the async copies
 *        and convert_integers take `timed` (in), asking the plugin to time
 *        that work on the device, and event_timing answers, for a completed
 *        event, when the work began and ended, in the host's CLOCK_MONOTONIC.
 *        Older plugins keep loading; the core traces their work with host
 *        times. Also: plugins declaring 1.3 may report memory_free as
 *        BP_MEMORY_FREE_UNKNOWN, and the core treats that value as unknown
 *        from a plugin of any minor.
 *   1.4  Backends whose answers depend on what the probe found, and backends
 *        whose probe must not run in the caller. BP_ProbeArgs.capabilities and
 *        .dlpack_device_type (in/out): one plugin serving several kinds of
 *        device (the pjrt adapter: a CPU platform's buffers are host memory, a
 *        GPU's are not) states them per backend. BP_CAPABILITY_PROBE_IN_CHILD:
 *        probing makes device state, so the core probes in a separate process
 *        and, in the caller, makes no call but backend_create until a device
 *        is used. BP_CAPABILITY_NO_DEVICE_TO_DEVICE: the core copies between
 *        the backend's buffers through host memory. BP_DeviceInfoArgs.memories:
 *        the memory kinds of a device.
 *
 * Errors
 * ------
 * Every call returns `BP_Error*`: NULL means success. A non-NULL error is owned
 * by the caller, who reads `code` and `message` and then calls
 * `error->destroy(error)` exactly once. No call throws, aborts or exits on bad
 * input; a plugin written in C++ catches everything at its boundary.
 *
 * Strings are (pointer, size) pairs, UTF-8, not necessarily NUL-terminated.
 *
 * Threading: every call may be made from any thread. Calls on different
 * backends (instances) are independent. A plugin must make concurrent calls on
 * one backend safe (allocation and copies from several threads at once).
 *
 * Side effects: the entry function and `backend_create` only record state.
 * `probe` may look for drivers and devices but must not create contexts,
 * reserve device memory or start threads. Devices are initialised on first
 * use (allocation or copy).
 */
#ifndef BACKPLANE_PLUGIN_H
#define BACKPLANE_PLUGIN_H

#include <backplane/struct_size.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BP_ABI_MAJOR 1
#define BP_ABI_MINOR 4

/* The one symbol a plugin exports. */
#define BP_PLUGIN_ENTRY_SYMBOL "backplane_plugin_entry"

#if defined(_WIN32)
#define BP_PLUGIN_EXPORT __declspec(dllexport)
#else
#define BP_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* True when a struct filled by the other side is large enough to hold FIELD. */
#define BP_STRUCT_HAS_FIELD(ptr, type, field) ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* True when the BP_PluginApi at `table` has the optional CALL to make: its
 * struct_size covers the field (rule 2) and the pointer is not NULL. */
#define BP_TABLE_HAS_CALL(table, call) (BP_STRUCT_HAS_FIELD(table, BP_PluginApi, call) && (table)->call != NULL)

/* ---------------------------------------------------------------- errors -- */

/* Stable error codes. Never renumbered; new codes are appended. */
typedef int32_t BP_ErrorCode;
#define BP_ERROR_INVALID_ARGUMENT ((BP_ErrorCode)1) /* caller passed something wrong */
#define BP_ERROR_OUT_OF_MEMORY ((BP_ErrorCode)2)    /* device or host allocation failed */
#define BP_ERROR_UNAVAILABLE ((BP_ErrorCode)3)      /* backend/device cannot be used */
#define BP_ERROR_UNSUPPORTED ((BP_ErrorCode)4)      /* optional feature not offered */
#define BP_ERROR_DEVICE ((BP_ErrorCode)5)           /* driver/device reported a failure */
#define BP_ERROR_INTERNAL ((BP_ErrorCode)6)         /* bug or broken invariant */
#define BP_ERROR_OUT_OF_RANGE ((BP_ErrorCode)7)     /* ordinal, offset or size out of range */

typedef struct BP_Error BP_Error;
struct BP_Error {
  size_t struct_size;
  BP_ErrorCode code;
  const char* message; /* owned by the error, valid until destroy */
  size_t message_size;
  /* Releases the error. Called exactly once by whoever received it. */
  void (*destroy)(BP_Error* error);
};

/* ------------------------------------------------------------ basic types -- */

typedef struct BP_KeyValue {
  size_t struct_size;
  const char* key;
  size_t key_size;
  const char* value;
  size_t value_size;
} BP_KeyValue;

typedef int32_t BP_DeviceKind;
#define BP_DEVICE_KIND_CPU ((BP_DeviceKind)0)
#define BP_DEVICE_KIND_GPU ((BP_DeviceKind)1)
#define BP_DEVICE_KIND_ACCELERATOR ((BP_DeviceKind)2)

typedef int32_t BP_MemoryKind;
#define BP_MEMORY_DEVICE ((BP_MemoryKind)0)      /* memory of the device */
#define BP_MEMORY_PINNED_HOST ((BP_MemoryKind)1) /* page-locked host memory for staging */

/* Capability bits in BP_PluginApi.capabilities. */
typedef uint64_t BP_Capabilities;
/* Device memory is ordinary host memory: buffer addresses are host pointers
 * the core may read and write directly (CPU backends). */
#define BP_CAPABILITY_HOST_ADDRESSABLE ((BP_Capabilities)1 << 0)
/* memory_allocate accepts BP_MEMORY_PINNED_HOST. */
#define BP_CAPABILITY_PINNED_HOST ((BP_Capabilities)1 << 1)
/* Async copies truly overlap with the caller (otherwise they may run inline
 * and return an already-completed event). */
#define BP_CAPABILITY_ASYNC ((BP_Capabilities)1 << 2)
/* convert_integers is implemented. */
#define BP_CAPABILITY_CONVERT_INTEGERS ((BP_Capabilities)1 << 3)
/* memory_wrap is implemented (ABI 1.1). */
#define BP_CAPABILITY_WRAP_MEMORY ((BP_Capabilities)1 << 4)
/* The async copies and convert_integers honour `timed`, and event_timing is
 * implemented (ABI 1.3). */
#define BP_CAPABILITY_EVENT_TIMING ((BP_Capabilities)1 << 5)
/* ABI 1.4, table only. Probing makes device state in the process that probes
 * (PJRT's Client_Create makes GPU contexts and may reserve memory): the core
 * runs backend_create, probe, device_count and device_info in a separate
 * process and keeps their answers; in the caller it calls backend_create and
 * then nothing until a device is used (the first memory_allocate,
 * memory_wrap or copy), after which every call is made as usual. The
 * device ordinals must be the same in both processes. */
#define BP_CAPABILITY_PROBE_IN_CHILD ((BP_Capabilities)1 << 6)
/* ABI 1.4. copy_device_to_device and its async form cannot copy a byte range
 * between two buffers of the backend (core PJRT has no such call): the core
 * never calls them and copies through host memory instead. The table still
 * fills both calls (they may answer BP_ERROR_UNSUPPORTED). */
#define BP_CAPABILITY_NO_DEVICE_TO_DEVICE ((BP_Capabilities)1 << 7)

/* Opaque handles, owned by the plugin. */
typedef struct BP_Backend BP_Backend; /* one configured instance of the backend */
typedef struct BP_Buffer BP_Buffer;   /* one allocation */
typedef struct BP_Event BP_Event;     /* completion of one asynchronous call */

/* --------------------------------------------------------- call arguments -- */
/* One args struct per call. Fields marked "out" are written by the plugin. */

typedef struct BP_BackendCreateArgs {
  size_t struct_size;
  /* Options from the config file's [backend.NAME] table, as strings. Valid
   * only during the call: the plugin copies what it keeps. A plugin rejects
   * an option it does not know or cannot parse with BP_ERROR_INVALID_ARGUMENT
   * and a message naming the key. */
  const BP_KeyValue* options;
  size_t option_count;
  BP_Backend* backend; /* out */
} BP_BackendCreateArgs;

typedef struct BP_ProbeArgs {
  size_t struct_size;
  BP_Backend* backend;
  int32_t available; /* out: 1 usable, 0 not */
  /* out: why not (or a short description when available), owned by the
   * backend, valid until backend_destroy. */
  const char* reason;
  size_t reason_size;
  /* 1.2, in/out: the core sets it to the priority the table declares before
   * the call; a plugin may change it from what it found (an OpenCL backend
   * whose only devices are CPUs ranks below the native cpu backend, one with
   * a GPU above it). A priority from the config file still wins. Written
   * only when struct_size covers it. */
  int32_t priority;
  /* 1.4, in/out: the core sets them to the table's capabilities and
   * dlpack_device_type before the call; a plugin whose backends differ by
   * what they find (the pjrt adapter over a CPU or a GPU platform) states
   * this backend's. BP_CAPABILITY_PROBE_IN_CHILD is the table's alone and is
   * ignored here. The core checks them as it checks the table's (kDLCPU
   * needs BP_CAPABILITY_HOST_ADDRESSABLE). Written only when struct_size
   * covers them. */
  BP_Capabilities capabilities;
  int32_t dlpack_device_type;
} BP_ProbeArgs;

typedef struct BP_DeviceCountArgs {
  size_t struct_size;
  BP_Backend* backend;
  int32_t count; /* out; 0 when probe said unavailable */
} BP_DeviceCountArgs;

/* BP_DeviceInfoArgs.memory_free when the backend cannot tell. */
#define BP_MEMORY_FREE_UNKNOWN UINT64_MAX

typedef struct BP_DeviceInfoArgs {
  size_t struct_size;
  BP_Backend* backend;
  int32_t ordinal;
  /* out: name and attributes are owned by the backend and stay valid until
   * backend_destroy; memory figures are a snapshot taken by this call. */
  const char* name;
  size_t name_size;
  BP_DeviceKind kind;
  uint64_t memory_total; /* bytes; required, never 0 */
  /* Bytes a new allocation can get now, at most memory_total; or
   * BP_MEMORY_FREE_UNKNOWN when the backend cannot tell (no query for it, or
   * asking would initialise the device). Never an estimate. */
  uint64_t memory_free;
  const BP_KeyValue* attributes;
  size_t attribute_count;
  /* 1.4, out: the device's memories, the default first: key the kind
   * ("device", "pinned_host", "unpinned_host", or "host" for memory that is
   * ordinary host memory), value a description ("" allowed). Owned by the
   * backend until backend_destroy. Left NULL/0 (or a caller's struct that
   * ends before it), the core derives the list from the capabilities:
   * HOST_ADDRESSABLE "host", else "device" and, with PINNED_HOST,
   * "pinned_host". Written only when struct_size covers it. */
  const BP_KeyValue* memories;
  size_t memory_count;
} BP_DeviceInfoArgs;

typedef struct BP_MemoryAllocateArgs {
  size_t struct_size;
  BP_Backend* backend;
  int32_t ordinal;
  BP_MemoryKind kind;
  uint64_t size;     /* 0 is valid and yields a buffer usable with size-0 copies */
  BP_Buffer* buffer; /* out */
  /* out: the native address: a host pointer for HOST_ADDRESSABLE backends and
   * for PINNED_HOST memory, the device pointer where the device has one (CUDA),
   * NULL where memory is reachable only through copies. */
  void* address;
} BP_MemoryAllocateArgs;

/* Since 1.1. Makes a buffer handle for `size` bytes at `address`: memory of
 * device `ordinal` that something else allocated and owns (a tensor another
 * library exported through DLPack). The plugin checks what it can (CUDA: that
 * the address is device memory of that device and the range lies inside one
 * allocation) and refuses the rest with INVALID_ARGUMENT (not memory of this
 * device) or OUT_OF_RANGE (the range runs past the allocation). A range of
 * size 0 is accepted without checks (empty tensors often have no allocation
 * behind their pointer). The handle works in every call that takes a buffer;
 * memory_free on it waits for all work that uses it, then releases the handle
 * but never the memory. The owner keeps the memory alive until then.
 *
 * Readiness: the caller guarantees the producer's writes are complete, or (for
 * backends with streams) ordered before the device's default stream: the CUDA
 * plugin orders later work on the device after the legacy default stream at
 * this call, which is DLPack's convention for stream 1. */
typedef struct BP_MemoryWrapArgs {
  size_t struct_size;
  BP_Backend* backend;
  int32_t ordinal;
  void* address; /* NULL only with size 0 */
  uint64_t size;
  BP_Buffer* buffer; /* out */
} BP_MemoryWrapArgs;

typedef struct BP_MemoryFreeArgs {
  size_t struct_size;
  BP_Backend* backend;
  BP_Buffer* buffer; /* NULL is a no-op */
} BP_MemoryFreeArgs;

/* Copies. For the synchronous calls `event` is ignored and the data has
 * arrived when the call returns. For the asynchronous calls the plugin returns
 * an event (out) the caller must destroy; the source and destination must stay
 * valid until the event has completed. Errors found after submission are
 * reported by event_wait. Ranges are bounds-checked by the plugin. */
typedef struct BP_CopyToDeviceArgs {
  size_t struct_size;
  BP_Backend* backend;
  BP_Buffer* destination;
  uint64_t destination_offset;
  const void* source; /* host memory */
  uint64_t size;
  BP_Event* event; /* out (async only) */
  /* 1.3, in, async calls only: 1 asks the plugin to time this work on the
   * device for event_timing (BP_CAPABILITY_EVENT_TIMING). The core sets it
   * only while it records a trace, as timing costs more on some devices.
   * Read only when struct_size covers it; ignored without the capability. */
  int32_t timed;
} BP_CopyToDeviceArgs;

typedef struct BP_CopyToHostArgs {
  size_t struct_size;
  BP_Backend* backend;
  BP_Buffer* source;
  uint64_t source_offset;
  void* destination; /* host memory */
  uint64_t size;
  BP_Event* event; /* out (async only) */
  int32_t timed;   /* 1.3, in: as in BP_CopyToDeviceArgs */
} BP_CopyToHostArgs;

/* Both buffers belong to this backend; they may be on different devices. */
typedef struct BP_CopyDeviceToDeviceArgs {
  size_t struct_size;
  BP_Backend* backend;
  BP_Buffer* source;
  uint64_t source_offset;
  BP_Buffer* destination;
  uint64_t destination_offset;
  uint64_t size;
  BP_Event* event; /* out (async only) */
  int32_t timed;   /* 1.3, in: as in BP_CopyToDeviceArgs */
} BP_CopyDeviceToDeviceArgs;

typedef struct BP_EventArgs {
  size_t struct_size;
  BP_Backend* backend;
  BP_Event* event;
  int32_t done; /* out, event_query only: 1 once completed (successfully or not) */
} BP_EventArgs;

/* Since 1.3 (BP_CAPABILITY_EVENT_TIMING). For an event that has completed
 * successfully (event_wait returned NULL, or event_query answered done and
 * event_wait then returned NULL), when the device began and ended the work,
 * as nanoseconds of the host's CLOCK_MONOTONIC: the plugin measures on the
 * device (CUDA events, OpenCL profiling) and converts with a calibration of
 * the device's clock against the host's. Untimed events (issued without
 * `timed`, or work the plugin ran inline) answer available = 0 and no error.
 * An event that has not completed is an error (INVALID_ARGUMENT) naming it,
 * as is a handle that is not a live event; the call never waits. */
typedef struct BP_EventTimingArgs {
  size_t struct_size;
  BP_Backend* backend;
  BP_Event* event;
  int32_t available; /* out: 1 when begin_ns and end_ns are set */
  int64_t begin_ns;  /* out: CLOCK_MONOTONIC, begin_ns <= end_ns */
  int64_t end_ns;    /* out */
} BP_EventTimingArgs;

/* Integer element types for convert_integers (values match the core's dtype
 * numbering for these types). */
typedef int32_t BP_IntegerType;
#define BP_INTEGER_U8 ((BP_IntegerType)1)
#define BP_INTEGER_U16 ((BP_IntegerType)2)
#define BP_INTEGER_U32 ((BP_IntegerType)3)
#define BP_INTEGER_I32 ((BP_IntegerType)4)
#define BP_INTEGER_I64 ((BP_IntegerType)5)

/* Widens `count` unsigned integers from `source` into `destination` on the
 * device (e.g. uint16 tokens to int64), so batches cross the bus narrow.
 * Asynchronous: returns an event like the async copies. */
typedef struct BP_ConvertIntegersArgs {
  size_t struct_size;
  BP_Backend* backend;
  BP_Buffer* source;
  uint64_t source_offset;
  BP_IntegerType source_type;
  BP_Buffer* destination;
  uint64_t destination_offset;
  BP_IntegerType destination_type;
  uint64_t count;
  BP_Event* event; /* out */
  int32_t timed;   /* 1.3, in: as in BP_CopyToDeviceArgs */
} BP_ConvertIntegersArgs;

/* ------------------------------------------------------------ the table -- */

typedef struct BP_PluginApi {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;

  /* Backend name: [a-z0-9_]+, equal to <name> in backplane-<name>.so. */
  const char* name;
  size_t name_size;
  const char* version; /* the plugin's own version, free-form */
  size_t version_size;
  /* Default priority when the config says nothing; higher wins the default
   * device. Convention: cpu 10, gpus 100. */
  int32_t priority;
  BP_Capabilities capabilities;

  BP_Error* (*backend_create)(BP_BackendCreateArgs* args);
  void (*backend_destroy)(BP_Backend* backend); /* frees everything it owns */
  BP_Error* (*probe)(BP_ProbeArgs* args);
  BP_Error* (*device_count)(BP_DeviceCountArgs* args);
  BP_Error* (*device_info)(BP_DeviceInfoArgs* args);

  BP_Error* (*memory_allocate)(BP_MemoryAllocateArgs* args);
  BP_Error* (*memory_free)(BP_MemoryFreeArgs* args);

  BP_Error* (*copy_to_device)(BP_CopyToDeviceArgs* args);
  BP_Error* (*copy_to_host)(BP_CopyToHostArgs* args);
  BP_Error* (*copy_device_to_device)(BP_CopyDeviceToDeviceArgs* args);
  BP_Error* (*copy_to_device_async)(BP_CopyToDeviceArgs* args);
  BP_Error* (*copy_to_host_async)(BP_CopyToHostArgs* args);
  BP_Error* (*copy_device_to_device_async)(BP_CopyDeviceToDeviceArgs* args);

  /* Blocks until the event completes; returns the asynchronous error, if any.
   * May be called more than once. */
  BP_Error* (*event_wait)(BP_EventArgs* args);
  BP_Error* (*event_query)(BP_EventArgs* args);
  /* Waits for completion if needed, then releases the event. */
  void (*event_destroy)(BP_Backend* backend, BP_Event* event);

  /* Optional (BP_CAPABILITY_CONVERT_INTEGERS), may be NULL. */
  BP_Error* (*convert_integers)(BP_ConvertIntegersArgs* args);
  /* 1.0 ends here; fields of later minors are appended below. */

  /* 1.1. Optional (BP_CAPABILITY_WRAP_MEMORY), may be NULL. */
  BP_Error* (*memory_wrap)(BP_MemoryWrapArgs* args);

  /* 1.2. The DLPack device type (DLDeviceType: kDLCPU 1, kDLCUDA 2,
   * kDLOpenCL 4, kDLROCM 10, ...) that describes this backend's memory in a
   * DLPack tensor, with the device ordinal as device_id. 0 means not declared:
   * the core then exports host-addressable memory as kDLCPU and nothing else.
   * Tables older than 1.2 read as 0. */
  int32_t dlpack_device_type;

  /* 1.3. Optional (BP_CAPABILITY_EVENT_TIMING), may be NULL. */
  BP_Error* (*event_timing)(BP_EventTimingArgs* args);
} BP_PluginApi;

/* The struct_size of a 1.0 table: every 1.x table is at least this large. */
#define BP_PLUGIN_API_SIZE_1_0 BP_STRUCT_SIZE(BP_PluginApi, convert_integers)
/* The struct_size of a 1.1 table (up to and including memory_wrap). */
#define BP_PLUGIN_API_SIZE_1_1 BP_STRUCT_SIZE(BP_PluginApi, memory_wrap)
/* The struct_size of a 1.2 table (up to and including dlpack_device_type,
 * with the padding after it that sizeof counted). */
#define BP_PLUGIN_API_SIZE_1_2 BP_STRUCT_SIZE(BP_PluginApi, dlpack_device_type)
/* The struct_size of a 1.3 table (up to and including event_timing); 1.4
 * appended no call, so a 1.4 table has this size too. */
#define BP_PLUGIN_API_SIZE_1_3 BP_STRUCT_SIZE(BP_PluginApi, event_timing)

/* The struct_size an older caller passes in an args struct that grew later.
 * A plugin checks struct_size against the size of the oldest caller it
 * serves, and BP_STRUCT_HAS_FIELD before it reads a newer field: checked
 * against sizeof() of the header it was built with, it would refuse every
 * call of an older core, whose structs are shorter. Each constant is the size
 * of the version that ended with the field named (BP_STRUCT_SIZE). */
#define BP_PROBE_ARGS_SIZE_1_0 BP_STRUCT_SIZE(BP_ProbeArgs, reason_size)                /* 1.2 appended priority */
#define BP_PROBE_ARGS_SIZE_1_2 BP_STRUCT_SIZE(BP_ProbeArgs, priority)                   /* 1.4 appended capabilities */
#define BP_DEVICE_INFO_ARGS_SIZE_1_0 BP_STRUCT_SIZE(BP_DeviceInfoArgs, attribute_count) /* 1.4 appended memories */
#define BP_COPY_TO_DEVICE_ARGS_SIZE_1_0 BP_STRUCT_SIZE(BP_CopyToDeviceArgs, event)      /* 1.3 appended timed */
#define BP_COPY_TO_HOST_ARGS_SIZE_1_0 BP_STRUCT_SIZE(BP_CopyToHostArgs, event)
#define BP_COPY_DEVICE_TO_DEVICE_ARGS_SIZE_1_0 BP_STRUCT_SIZE(BP_CopyDeviceToDeviceArgs, event)
#define BP_CONVERT_INTEGERS_ARGS_SIZE_1_0 BP_STRUCT_SIZE(BP_ConvertIntegersArgs, event)

/* Offered by the core to the entry function. */
typedef struct BP_PluginEntryArgs {
  size_t struct_size;
  const uint32_t* core_abi_majors; /* the majors the core speaks */
  size_t core_abi_major_count;
  uint32_t core_abi_minor; /* the newest minor of the core's BP_ABI_MAJOR */
} BP_PluginEntryArgs;

/* Returns a table the plugin owns for its whole lifetime (usually static).
 * The plugin picks the newest major it shares with the core. If it shares
 * none it still returns its own table, so that the core can name both
 * versions; it never returns NULL except when it cannot run at all. */
typedef const BP_PluginApi* (*BP_PluginEntryFn)(const BP_PluginEntryArgs* args);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BACKPLANE_PLUGIN_H */
