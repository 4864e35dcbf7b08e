/*
 * hostmem: an example backplane backend whose "device" memory is ordinary
 * host memory. Copy this directory to start a plugin of your own.
 *
 * Implements (Backend ABI 1.0, <backplane/plugin.h>):
 *   backend_create/destroy   option `devices` = 1..16 (default 1)
 *   probe                    always available
 *   device_count/info        N devices "hostmem:0".., memory = the host's RAM
 *   memory_allocate/free     BP_MEMORY_DEVICE (malloc); a size beyond the
 *                            host's RAM is BP_ERROR_OUT_OF_MEMORY
 *   copies                   memcpy/memmove with bounds checks; the async forms
 *                            run inline and return completed events
 *   events                   wait/query/destroy
 * Capabilities: BP_CAPABILITY_HOST_ADDRESSABLE only (no pinned memory, no
 * convert_integers).
 *
 * Errors: NULL args, a too-small struct_size, a NULL backend, an unknown
 * buffer or event handle: BP_ERROR_INVALID_ARGUMENT; a bad ordinal or copy
 * range: BP_ERROR_OUT_OF_RANGE. Every message names the call and the value.
 *
 * Thread-safety: each backend guards its buffer and event lists with a mutex;
 * copies run outside it.
 */
#ifndef HOSTMEM_BACKEND_H
#define HOSTMEM_BACKEND_H

#include <backplane/plugin.h>

#define HOSTMEM_NAME "hostmem"
#define HOSTMEM_VERSION "1.0.0"
#define HOSTMEM_PRIORITY 5
#define HOSTMEM_CAPABILITIES BP_CAPABILITY_HOST_ADDRESSABLE

BP_Error* hostmem_backend_create(BP_BackendCreateArgs* args);
void hostmem_backend_destroy(BP_Backend* backend);
BP_Error* hostmem_probe(BP_ProbeArgs* args);
BP_Error* hostmem_device_count(BP_DeviceCountArgs* args);
BP_Error* hostmem_device_info(BP_DeviceInfoArgs* args);
BP_Error* hostmem_memory_allocate(BP_MemoryAllocateArgs* args);
BP_Error* hostmem_memory_free(BP_MemoryFreeArgs* args);
BP_Error* hostmem_copy_to_device(BP_CopyToDeviceArgs* args);
BP_Error* hostmem_copy_to_host(BP_CopyToHostArgs* args);
BP_Error* hostmem_copy_device_to_device(BP_CopyDeviceToDeviceArgs* args);
BP_Error* hostmem_copy_to_device_async(BP_CopyToDeviceArgs* args);
BP_Error* hostmem_copy_to_host_async(BP_CopyToHostArgs* args);
BP_Error* hostmem_copy_device_to_device_async(BP_CopyDeviceToDeviceArgs* args);
BP_Error* hostmem_event_wait(BP_EventArgs* args);
BP_Error* hostmem_event_query(BP_EventArgs* args);
void hostmem_event_destroy(BP_Backend* backend, BP_Event* event);

#endif /* HOSTMEM_BACKEND_H */
