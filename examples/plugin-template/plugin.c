/* Entry point of the hostmem plugin: the one exported symbol and its static
 * table. The backend itself lives in hostmem_backend.c. */
#include "hostmem_backend.h"

static const BP_PluginApi kApi = {
    .struct_size = sizeof(BP_PluginApi),
    .abi_major = BP_ABI_MAJOR,
    .abi_minor = BP_ABI_MINOR,
    .name = HOSTMEM_NAME,
    .name_size = sizeof(HOSTMEM_NAME) - 1,
    .version = HOSTMEM_VERSION,
    .version_size = sizeof(HOSTMEM_VERSION) - 1,
    .priority = HOSTMEM_PRIORITY,
    .capabilities = HOSTMEM_CAPABILITIES,
    .backend_create = hostmem_backend_create,
    .backend_destroy = hostmem_backend_destroy,
    .probe = hostmem_probe,
    .device_count = hostmem_device_count,
    .device_info = hostmem_device_info,
    .memory_allocate = hostmem_memory_allocate,
    .memory_free = hostmem_memory_free,
    .copy_to_device = hostmem_copy_to_device,
    .copy_to_host = hostmem_copy_to_host,
    .copy_device_to_device = hostmem_copy_device_to_device,
    .copy_to_device_async = hostmem_copy_to_device_async,
    .copy_to_host_async = hostmem_copy_to_host_async,
    .copy_device_to_device_async = hostmem_copy_device_to_device_async,
    .event_wait = hostmem_event_wait,
    .event_query = hostmem_event_query,
    .event_destroy = hostmem_event_destroy,
    .convert_integers = NULL, /* BP_CAPABILITY_CONVERT_INTEGERS not offered */
    .memory_wrap = NULL,      /* 1.1: BP_CAPABILITY_WRAP_MEMORY not offered */
    .dlpack_device_type = 1,  /* 1.2: kDLCPU, its memory is host memory */
};

/* Speaks ABI major 1 only; returns its table whatever the core offers, so a
 * core without major 1 can still name both versions. */
BP_PLUGIN_EXPORT const BP_PluginApi* backplane_plugin_entry(const BP_PluginEntryArgs* args) {
  (void)args;
  return &kApi;
}
