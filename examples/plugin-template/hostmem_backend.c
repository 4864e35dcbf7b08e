/* The hostmem backend. Every entry checks its arguments first and returns an
 * error (never aborts); see hostmem_backend.h for the contract. */
#define _DEFAULT_SOURCE /* sysconf(_SC_PHYS_PAGES) */

#include "hostmem_backend.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOSTMEM_MAX_DEVICES 16

/* ------------------------------------------------------------- errors -- */

typedef struct HostmemError {
  BP_Error error; /* first: a BP_Error* is a HostmemError* */
  char text[320];
} HostmemError;

static void destroy_error(BP_Error* error) { free(error); }
static void destroy_static_error(BP_Error* error) { (void)error; }

/* A new error the caller owns; printf-style message. */
static BP_Error* fail(BP_ErrorCode code, const char* format, ...) {
  static BP_Error out_of_memory = {sizeof(BP_Error), BP_ERROR_OUT_OF_MEMORY, "hostmem: out of host memory", 27,
                                   destroy_static_error};
  HostmemError* owned = malloc(sizeof(*owned));
  if (owned == NULL) return &out_of_memory;
  va_list list;
  va_start(list, format);
  int length = vsnprintf(owned->text, sizeof(owned->text), format, list);
  va_end(list);
  if (length < 0) length = 0;
  if ((size_t)length >= sizeof(owned->text)) length = (int)sizeof(owned->text) - 1;
  owned->error = (BP_Error){sizeof(BP_Error), code, owned->text, (size_t)length, destroy_error};
  return &owned->error;
}

/* Checks the args pointer and that it holds at least `minimum` bytes. */
#define CHECK_ARGS_SIZE(args, call, minimum)                                                                   \
  do {                                                                                                         \
    if ((args) == NULL) return fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: %s: args is NULL", call);             \
    if ((args)->struct_size < (minimum))                                                                       \
      return fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: %s: args.struct_size %zu is smaller than %zu", call,    \
                  (args)->struct_size, (size_t)(minimum));                                                     \
    if ((args)->backend == NULL) return fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: %s: backend is NULL", call); \
  } while (0)
/* ... every field of the struct this plugin was built against. Only for
 * structs that have not grown since 1.0: for one that has, check the size
 * an older core passes (BP_*_ARGS_SIZE_1_0 in plugin.h), not sizeof, or the
 * plugin refuses that core's calls once rebuilt against a newer header. */
#define CHECK_ARGS(args, call) CHECK_ARGS_SIZE(args, call, sizeof(*(args)))

/* -------------------------------------------------------------- state -- */

typedef struct HostmemBuffer {
  struct HostmemBuffer* next;
  unsigned char* data; /* never NULL (size 0 gets one byte) */
  uint64_t size;
  int32_t ordinal;
} HostmemBuffer;

typedef struct HostmemEvent {
  struct HostmemEvent* next;
} HostmemEvent;

struct BP_Backend {
  int32_t devices;
  char names[HOSTMEM_MAX_DEVICES][32];
  pthread_mutex_t mutex; /* guards buffers and events */
  HostmemBuffer* buffers;
  HostmemEvent* events;
};

static uint64_t host_memory(int name) {
  long pages = sysconf(name);
  long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? (uint64_t)pages * (uint64_t)page_size : 0;
}

/* The live buffer behind `handle`, or NULL. Caller holds the mutex. */
static HostmemBuffer* find_buffer(BP_Backend* backend, BP_Buffer* handle) {
  for (HostmemBuffer* buffer = backend->buffers; buffer != NULL; buffer = buffer->next) {
    if ((BP_Buffer*)buffer == handle) return buffer;
  }
  return NULL;
}

/* Copies the live buffer's fields into *out; an error when it is not live. */
static BP_Error* lookup(BP_Backend* backend, BP_Buffer* handle, const char* call, const char* role,
                        HostmemBuffer* out) {
  if (handle == NULL) return fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: %s: %s buffer is NULL", call, role);
  pthread_mutex_lock(&backend->mutex);
  HostmemBuffer* buffer = find_buffer(backend, handle);
  if (buffer != NULL) *out = *buffer;
  pthread_mutex_unlock(&backend->mutex);
  if (buffer == NULL) {
    return fail(BP_ERROR_INVALID_ARGUMENT,
                "hostmem: %s: %s buffer is not a live buffer of this backend (freed, or from another backend)", call,
                role);
  }
  return NULL;
}

/* [offset, offset + size) inside a buffer of buffer_size bytes, without overflow. */
static BP_Error* check_range(const char* call, const char* role, uint64_t offset, uint64_t size, uint64_t buffer_size) {
  if (offset > buffer_size || size > buffer_size - offset) {
    return fail(BP_ERROR_OUT_OF_RANGE,
                "hostmem: %s: %s range of %llu bytes at offset %llu does not fit in a buffer of %llu bytes", call, role,
                (unsigned long long)size, (unsigned long long)offset, (unsigned long long)buffer_size);
  }
  return NULL;
}

static BP_Error* check_ordinal(BP_Backend* backend, int32_t ordinal, const char* call) {
  if (ordinal < 0 || ordinal >= backend->devices) {
    return fail(BP_ERROR_OUT_OF_RANGE, "hostmem: %s: ordinal %d is out of range: there are %d device(s)", call,
                (int)ordinal, (int)backend->devices);
  }
  return NULL;
}

static BP_Event* completed_event(BP_Backend* backend) {
  HostmemEvent* event = calloc(1, sizeof(*event));
  if (event == NULL) return NULL;
  pthread_mutex_lock(&backend->mutex);
  event->next = backend->events;
  backend->events = event;
  pthread_mutex_unlock(&backend->mutex);
  return (BP_Event*)event;
}

/* -------------------------------------------------- backend and probe -- */

BP_Error* hostmem_backend_create(BP_BackendCreateArgs* args) {
  if (args == NULL) return fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: backend_create: args is NULL");
  if (args->struct_size < sizeof(*args)) {
    return fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: backend_create: args.struct_size %zu is smaller than %zu",
                args->struct_size, sizeof(*args));
  }
  if (args->options == NULL && args->option_count != 0) {
    return fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: backend_create: options is NULL");
  }
  int32_t devices = 1;
  for (size_t index = 0; index < args->option_count; ++index) {
    const BP_KeyValue* option = &args->options[index];
    const char* key = option->key != NULL ? option->key : "";
    const int key_size = (int)(option->key != NULL ? option->key_size : 0);
    char value[16] = {0};
    if (option->value != NULL && option->value_size < sizeof(value)) memcpy(value, option->value, option->value_size);
    if (key_size == 7 && memcmp(key, "devices", 7) == 0) {
      char* end = NULL;
      const long parsed = strtol(value, &end, 10);
      if (value[0] < '0' || value[0] > '9' || *end != '\0' || parsed < 1 || parsed > HOSTMEM_MAX_DEVICES) {
        return fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: option devices = \"%s\" is invalid: expected 1 to %d", value,
                    HOSTMEM_MAX_DEVICES);
      }
      devices = (int32_t)parsed;
    } else {
      return fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: unknown option \"%.*s\" (known options: devices)", key_size,
                  key);
    }
  }
  BP_Backend* backend = calloc(1, sizeof(*backend));
  if (backend == NULL) return fail(BP_ERROR_OUT_OF_MEMORY, "hostmem: backend_create: out of host memory");
  backend->devices = devices;
  for (int32_t ordinal = 0; ordinal < devices; ++ordinal) {
    snprintf(backend->names[ordinal], sizeof(backend->names[ordinal]), "host memory %d", (int)ordinal);
  }
  pthread_mutex_init(&backend->mutex, NULL);
  args->backend = backend;
  return NULL;
}

void hostmem_backend_destroy(BP_Backend* backend) {
  if (backend == NULL) return;
  while (backend->buffers != NULL) {
    HostmemBuffer* buffer = backend->buffers;
    backend->buffers = buffer->next;
    free(buffer->data);
    free(buffer);
  }
  while (backend->events != NULL) {
    HostmemEvent* event = backend->events;
    backend->events = event->next;
    free(event);
  }
  pthread_mutex_destroy(&backend->mutex);
  free(backend);
}

BP_Error* hostmem_probe(BP_ProbeArgs* args) {
  static const char kReason[] = "host memory exposed as a device (example plugin)";
  /* priority (ABI 1.2) is optional: a 1.0 or 1.1 core's struct ends before
   * it. This plugin keeps the table's priority, so it never writes it. */
  CHECK_ARGS_SIZE(args, "probe", BP_PROBE_ARGS_SIZE_1_0);
  args->available = 1;
  args->reason = kReason;
  args->reason_size = sizeof(kReason) - 1;
  return NULL;
}

BP_Error* hostmem_device_count(BP_DeviceCountArgs* args) {
  CHECK_ARGS(args, "device_count");
  args->count = args->backend->devices;
  return NULL;
}

BP_Error* hostmem_device_info(BP_DeviceInfoArgs* args) {
  CHECK_ARGS(args, "device_info");
  BP_Error* error = check_ordinal(args->backend, args->ordinal, "device_info");
  if (error != NULL) return error;
  const char* name = args->backend->names[args->ordinal];
  args->name = name;
  args->name_size = strlen(name);
  args->kind = BP_DEVICE_KIND_CPU;
  args->memory_total = host_memory(_SC_PHYS_PAGES);
  args->memory_free = host_memory(_SC_AVPHYS_PAGES);
  if (args->memory_free > args->memory_total) args->memory_free = args->memory_total;
  args->attributes = NULL;
  args->attribute_count = 0;
  return NULL;
}

/* ------------------------------------------------------------- memory -- */

BP_Error* hostmem_memory_allocate(BP_MemoryAllocateArgs* args) {
  CHECK_ARGS(args, "memory_allocate");
  BP_Error* error = check_ordinal(args->backend, args->ordinal, "memory_allocate");
  if (error != NULL) return error;
  if (args->kind == BP_MEMORY_PINNED_HOST) {
    return fail(BP_ERROR_UNSUPPORTED, "hostmem: memory_allocate: pinned host memory is not offered");
  }
  if (args->kind != BP_MEMORY_DEVICE) {
    return fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: memory_allocate: unknown memory kind %d", (int)args->kind);
  }
  const uint64_t total = host_memory(_SC_PHYS_PAGES);
  HostmemBuffer* buffer = NULL;
  void* data = NULL;
  if (args->size <= total) {
    buffer = calloc(1, sizeof(*buffer));
    data = malloc(args->size == 0 ? 1 : (size_t)args->size);
  }
  if (buffer == NULL || data == NULL) {
    free(buffer);
    free(data);
    return fail(BP_ERROR_OUT_OF_MEMORY, "hostmem: memory_allocate of %llu bytes on hostmem:%d failed (%llu total)",
                (unsigned long long)args->size, (int)args->ordinal, (unsigned long long)total);
  }
  buffer->data = data;
  buffer->size = args->size;
  buffer->ordinal = args->ordinal;
  pthread_mutex_lock(&args->backend->mutex);
  buffer->next = args->backend->buffers;
  args->backend->buffers = buffer;
  pthread_mutex_unlock(&args->backend->mutex);
  args->buffer = (BP_Buffer*)buffer;
  args->address = data;
  return NULL;
}

BP_Error* hostmem_memory_free(BP_MemoryFreeArgs* args) {
  CHECK_ARGS(args, "memory_free");
  if (args->buffer == NULL) return NULL;
  BP_Backend* backend = args->backend;
  HostmemBuffer* found = NULL;
  pthread_mutex_lock(&backend->mutex);
  for (HostmemBuffer** link = &backend->buffers; *link != NULL; link = &(*link)->next) {
    if ((BP_Buffer*)*link == args->buffer) {
      found = *link;
      *link = found->next;
      break;
    }
  }
  pthread_mutex_unlock(&backend->mutex);
  if (found == NULL) {
    return fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: memory_free: not a live buffer of this backend");
  }
  free(found->data);
  free(found);
  return NULL;
}

/* ------------------------------------------------------------- copies -- */

BP_Error* hostmem_copy_to_device(BP_CopyToDeviceArgs* args) {
  CHECK_ARGS_SIZE(args, "copy_to_device", BP_COPY_TO_DEVICE_ARGS_SIZE_1_0); /* `timed` (1.3) is not read */
  HostmemBuffer destination = {0}; /* lookup() fills it; zeroed so -O3 sees no uninitialised read */
  BP_Error* error = lookup(args->backend, args->destination, "copy_to_device", "destination", &destination);
  if (error == NULL && args->source == NULL && args->size != 0) {
    error = fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: copy_to_device: source is NULL with size %llu",
                 (unsigned long long)args->size);
  }
  if (error == NULL)
    error = check_range("copy_to_device", "destination", args->destination_offset, args->size, destination.size);
  if (error != NULL) return error;
  if (args->size != 0) memcpy(destination.data + args->destination_offset, args->source, (size_t)args->size);
  return NULL;
}

BP_Error* hostmem_copy_to_host(BP_CopyToHostArgs* args) {
  CHECK_ARGS_SIZE(args, "copy_to_host", BP_COPY_TO_HOST_ARGS_SIZE_1_0);
  HostmemBuffer source = {0};
  BP_Error* error = lookup(args->backend, args->source, "copy_to_host", "source", &source);
  if (error == NULL && args->destination == NULL && args->size != 0) {
    error = fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: copy_to_host: destination is NULL with size %llu",
                 (unsigned long long)args->size);
  }
  if (error == NULL) error = check_range("copy_to_host", "source", args->source_offset, args->size, source.size);
  if (error != NULL) return error;
  if (args->size != 0) memcpy(args->destination, source.data + args->source_offset, (size_t)args->size);
  return NULL;
}

BP_Error* hostmem_copy_device_to_device(BP_CopyDeviceToDeviceArgs* args) {
  CHECK_ARGS_SIZE(args, "copy_device_to_device", BP_COPY_DEVICE_TO_DEVICE_ARGS_SIZE_1_0);
  HostmemBuffer source = {0};
  HostmemBuffer destination = {0};
  BP_Error* error = lookup(args->backend, args->source, "copy_device_to_device", "source", &source);
  if (error == NULL) {
    error = lookup(args->backend, args->destination, "copy_device_to_device", "destination", &destination);
  }
  if (error == NULL) {
    error = check_range("copy_device_to_device", "source", args->source_offset, args->size, source.size);
  }
  if (error == NULL) {
    error = check_range("copy_device_to_device", "destination", args->destination_offset, args->size, destination.size);
  }
  if (error != NULL) return error;
  if (args->size != 0) {
    memmove(destination.data + args->destination_offset, source.data + args->source_offset, (size_t)args->size);
  }
  return NULL;
}

/* The async forms run inline, then hand out an already-completed event. */
#define ASYNC_FROM_SYNC(name, Args, sync)                                                         \
  BP_Error* name(Args* args) {                                                                    \
    BP_Error* error = sync(args);                                                                 \
    if (error != NULL) return error;                                                              \
    args->event = completed_event(args->backend);                                                 \
    if (args->event == NULL) return fail(BP_ERROR_OUT_OF_MEMORY, "hostmem: " #name ": no event"); \
    return NULL;                                                                                  \
  }

ASYNC_FROM_SYNC(hostmem_copy_to_device_async, BP_CopyToDeviceArgs, hostmem_copy_to_device)
ASYNC_FROM_SYNC(hostmem_copy_to_host_async, BP_CopyToHostArgs, hostmem_copy_to_host)
ASYNC_FROM_SYNC(hostmem_copy_device_to_device_async, BP_CopyDeviceToDeviceArgs, hostmem_copy_device_to_device)

/* ------------------------------------------------------------- events -- */

static BP_Error* check_event(BP_EventArgs* args, const char* call) {
  CHECK_ARGS(args, call);
  if (args->event == NULL) return fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: %s: event is NULL", call);
  int live = 0;
  pthread_mutex_lock(&args->backend->mutex);
  for (HostmemEvent* event = args->backend->events; event != NULL; event = event->next) {
    if ((BP_Event*)event == args->event) live = 1;
  }
  pthread_mutex_unlock(&args->backend->mutex);
  if (!live) return fail(BP_ERROR_INVALID_ARGUMENT, "hostmem: %s: not a live event of this backend", call);
  return NULL;
}

BP_Error* hostmem_event_wait(BP_EventArgs* args) { return check_event(args, "event_wait"); }

BP_Error* hostmem_event_query(BP_EventArgs* args) {
  BP_Error* error = check_event(args, "event_query");
  if (error == NULL) args->done = 1;
  return error;
}

void hostmem_event_destroy(BP_Backend* backend, BP_Event* event) {
  if (backend == NULL || event == NULL) return;
  HostmemEvent* found = NULL;
  pthread_mutex_lock(&backend->mutex);
  for (HostmemEvent** link = &backend->events; *link != NULL; link = &(*link)->next) {
    if ((BP_Event*)*link == event) {
      found = *link;
      *link = found->next;
      break;
    }
  }
  pthread_mutex_unlock(&backend->mutex);
  free(found);
}
