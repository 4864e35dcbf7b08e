/* Compiled as strict C11: proves plugin.h is plain C, and reports the layout a
 * C compiler gives the ABI structs so the C++ side can compare. */
#include <backplane/plugin.h>

#include "abi_layout.h"

#define LAYOUT(type) \
  { #type, sizeof(type), 0, 0 }
#define FIELD(type, field) \
  { #type "." #field, sizeof(((type*)0)->field), offsetof(type, field), 1 }

static const AbiLayoutEntry kEntries[] = {
    LAYOUT(BP_Error),
    FIELD(BP_Error, code),
    FIELD(BP_Error, message),
    FIELD(BP_Error, destroy),
    LAYOUT(BP_KeyValue),
    LAYOUT(BP_BackendCreateArgs),
    FIELD(BP_BackendCreateArgs, backend),
    LAYOUT(BP_ProbeArgs),
    FIELD(BP_ProbeArgs, available),
    FIELD(BP_ProbeArgs, reason_size),
    FIELD(BP_ProbeArgs, priority),
    FIELD(BP_ProbeArgs, capabilities),
    FIELD(BP_ProbeArgs, dlpack_device_type),
    LAYOUT(BP_DeviceCountArgs),
    LAYOUT(BP_DeviceInfoArgs),
    FIELD(BP_DeviceInfoArgs, kind),
    FIELD(BP_DeviceInfoArgs, memory_total),
    FIELD(BP_DeviceInfoArgs, attribute_count),
    FIELD(BP_DeviceInfoArgs, memories),
    FIELD(BP_DeviceInfoArgs, memory_count),
    LAYOUT(BP_MemoryAllocateArgs),
    FIELD(BP_MemoryAllocateArgs, size),
    FIELD(BP_MemoryAllocateArgs, address),
    LAYOUT(BP_MemoryWrapArgs),
    FIELD(BP_MemoryWrapArgs, address),
    FIELD(BP_MemoryWrapArgs, buffer),
    LAYOUT(BP_MemoryFreeArgs),
    LAYOUT(BP_CopyToDeviceArgs),
    FIELD(BP_CopyToDeviceArgs, event),
    FIELD(BP_CopyToDeviceArgs, timed),
    LAYOUT(BP_CopyToHostArgs),
    FIELD(BP_CopyToHostArgs, timed),
    LAYOUT(BP_CopyDeviceToDeviceArgs),
    FIELD(BP_CopyDeviceToDeviceArgs, event),
    FIELD(BP_CopyDeviceToDeviceArgs, timed),
    LAYOUT(BP_EventArgs),
    LAYOUT(BP_ConvertIntegersArgs),
    FIELD(BP_ConvertIntegersArgs, event),
    FIELD(BP_ConvertIntegersArgs, timed),
    LAYOUT(BP_EventTimingArgs),
    FIELD(BP_EventTimingArgs, available),
    FIELD(BP_EventTimingArgs, begin_ns),
    FIELD(BP_EventTimingArgs, end_ns),
    LAYOUT(BP_PluginApi),
    FIELD(BP_PluginApi, abi_major),
    FIELD(BP_PluginApi, abi_minor),
    FIELD(BP_PluginApi, name),
    FIELD(BP_PluginApi, priority),
    FIELD(BP_PluginApi, capabilities),
    FIELD(BP_PluginApi, backend_create),
    FIELD(BP_PluginApi, event_destroy),
    FIELD(BP_PluginApi, convert_integers),
    FIELD(BP_PluginApi, memory_wrap),
    FIELD(BP_PluginApi, dlpack_device_type),
    FIELD(BP_PluginApi, event_timing),
    LAYOUT(BP_PluginEntryArgs),
    FIELD(BP_PluginEntryArgs, core_abi_minor),
};

int abi_table_has_memory_wrap_from_c(const BP_PluginApi* table) { return BP_TABLE_HAS_CALL(table, memory_wrap); }

int abi_table_has_dlpack_device_type_from_c(const BP_PluginApi* table) {
  return BP_STRUCT_HAS_FIELD(table, BP_PluginApi, dlpack_device_type);
}

size_t abi_plugin_api_size_1_1_from_c(void) { return BP_PLUGIN_API_SIZE_1_1; }

size_t abi_plugin_api_size_1_2_from_c(void) { return BP_PLUGIN_API_SIZE_1_2; }

size_t abi_plugin_api_size_1_3_from_c(void) { return BP_PLUGIN_API_SIZE_1_3; }

size_t abi_probe_args_size_1_2_from_c(void) { return BP_PROBE_ARGS_SIZE_1_2; }

size_t abi_device_info_args_size_1_0_from_c(void) { return BP_DEVICE_INFO_ARGS_SIZE_1_0; }

int abi_table_has_event_timing_from_c(const BP_PluginApi* table) { return BP_TABLE_HAS_CALL(table, event_timing); }

const AbiLayoutEntry* abi_layout_from_c(size_t* count) {
  *count = sizeof(kEntries) / sizeof(kEntries[0]);
  return kEntries;
}
