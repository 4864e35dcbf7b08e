/* Shared by the C and C++ halves of the ABI layout test. */
#ifndef BACKPLANE_TESTS_ABI_LAYOUT_H
#define BACKPLANE_TESTS_ABI_LAYOUT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct AbiLayoutEntry {
  const char* what; /* "Type" or "Type.field" */
  size_t size;
  size_t offset;
  int is_field;
} AbiLayoutEntry;

const AbiLayoutEntry* abi_layout_from_c(size_t* count);

struct BP_PluginApi;

/* BP_TABLE_HAS_CALL(table, memory_wrap), compiled as C11. */
int abi_table_has_memory_wrap_from_c(const struct BP_PluginApi* table);
/* BP_STRUCT_HAS_FIELD(table, BP_PluginApi, dlpack_device_type), as C11. */
int abi_table_has_dlpack_device_type_from_c(const struct BP_PluginApi* table);
/* BP_PLUGIN_API_SIZE_1_1, as a C compiler computes it. */
size_t abi_plugin_api_size_1_1_from_c(void);
/* BP_PLUGIN_API_SIZE_1_2, as a C compiler computes it. */
size_t abi_plugin_api_size_1_2_from_c(void);
/* BP_PLUGIN_API_SIZE_1_3, BP_PROBE_ARGS_SIZE_1_2 and
 * BP_DEVICE_INFO_ARGS_SIZE_1_0, as a C compiler computes them. */
size_t abi_plugin_api_size_1_3_from_c(void);
size_t abi_probe_args_size_1_2_from_c(void);
size_t abi_device_info_args_size_1_0_from_c(void);
/* BP_TABLE_HAS_CALL(table, event_timing), compiled as C11. */
int abi_table_has_event_timing_from_c(const struct BP_PluginApi* table);

#ifdef __cplusplus
}
#endif

#endif
