// The Backend ABI is a binary contract: C and C++ must agree on every layout,
// and the x86-64 layout of 1.0 is pinned so that an accidental change to a
// struct (reordering, a field added in the middle) fails here.
#include "abi_layout.h"

#include <backplane/plugin.h>

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <string>

namespace {

#define CXX_LAYOUT(type)       \
  {                            \
#type, { sizeof(type), 0 } \
  }
#define CXX_FIELD(type, field)                                             \
  {                                                                        \
#type "." #field, { sizeof(((type*)0)->field), offsetof(type, field) } \
  }

struct Layout {
  size_t size;
  size_t offset;
};

const std::map<std::string, Layout>& cxx_layout() {
  static const std::map<std::string, Layout> layout = {
      CXX_LAYOUT(BP_Error),
      CXX_FIELD(BP_Error, code),
      CXX_FIELD(BP_Error, message),
      CXX_FIELD(BP_Error, destroy),
      CXX_LAYOUT(BP_KeyValue),
      CXX_LAYOUT(BP_BackendCreateArgs),
      CXX_FIELD(BP_BackendCreateArgs, backend),
      CXX_LAYOUT(BP_ProbeArgs),
      CXX_FIELD(BP_ProbeArgs, available),
      CXX_FIELD(BP_ProbeArgs, reason_size),
      CXX_FIELD(BP_ProbeArgs, priority),
      CXX_FIELD(BP_ProbeArgs, capabilities),
      CXX_FIELD(BP_ProbeArgs, dlpack_device_type),
      CXX_LAYOUT(BP_DeviceCountArgs),
      CXX_LAYOUT(BP_DeviceInfoArgs),
      CXX_FIELD(BP_DeviceInfoArgs, kind),
      CXX_FIELD(BP_DeviceInfoArgs, memory_total),
      CXX_FIELD(BP_DeviceInfoArgs, attribute_count),
      CXX_FIELD(BP_DeviceInfoArgs, memories),
      CXX_FIELD(BP_DeviceInfoArgs, memory_count),
      CXX_LAYOUT(BP_MemoryAllocateArgs),
      CXX_FIELD(BP_MemoryAllocateArgs, size),
      CXX_FIELD(BP_MemoryAllocateArgs, address),
      CXX_LAYOUT(BP_MemoryWrapArgs),
      CXX_FIELD(BP_MemoryWrapArgs, address),
      CXX_FIELD(BP_MemoryWrapArgs, buffer),
      CXX_LAYOUT(BP_MemoryFreeArgs),
      CXX_LAYOUT(BP_CopyToDeviceArgs),
      CXX_FIELD(BP_CopyToDeviceArgs, event),
      CXX_FIELD(BP_CopyToDeviceArgs, timed),
      CXX_LAYOUT(BP_CopyToHostArgs),
      CXX_FIELD(BP_CopyToHostArgs, timed),
      CXX_LAYOUT(BP_CopyDeviceToDeviceArgs),
      CXX_FIELD(BP_CopyDeviceToDeviceArgs, event),
      CXX_FIELD(BP_CopyDeviceToDeviceArgs, timed),
      CXX_LAYOUT(BP_EventArgs),
      CXX_LAYOUT(BP_ConvertIntegersArgs),
      CXX_FIELD(BP_ConvertIntegersArgs, event),
      CXX_FIELD(BP_ConvertIntegersArgs, timed),
      CXX_LAYOUT(BP_EventTimingArgs),
      CXX_FIELD(BP_EventTimingArgs, available),
      CXX_FIELD(BP_EventTimingArgs, begin_ns),
      CXX_FIELD(BP_EventTimingArgs, end_ns),
      CXX_LAYOUT(BP_PluginApi),
      CXX_FIELD(BP_PluginApi, abi_major),
      CXX_FIELD(BP_PluginApi, abi_minor),
      CXX_FIELD(BP_PluginApi, name),
      CXX_FIELD(BP_PluginApi, priority),
      CXX_FIELD(BP_PluginApi, capabilities),
      CXX_FIELD(BP_PluginApi, backend_create),
      CXX_FIELD(BP_PluginApi, event_destroy),
      CXX_FIELD(BP_PluginApi, convert_integers),
      CXX_FIELD(BP_PluginApi, memory_wrap),
      CXX_FIELD(BP_PluginApi, dlpack_device_type),
      CXX_FIELD(BP_PluginApi, event_timing),
      CXX_LAYOUT(BP_PluginEntryArgs),
      CXX_FIELD(BP_PluginEntryArgs, core_abi_minor),
  };
  return layout;
}

}  // namespace

TEST_CASE("[abi] C and C++ compilers agree on every struct size and offset") {
  size_t count = 0;
  const AbiLayoutEntry* entries = abi_layout_from_c(&count);
  REQUIRE(count == cxx_layout().size());
  for (size_t i = 0; i < count; ++i) {
    CAPTURE(entries[i].what);
    auto found = cxx_layout().find(entries[i].what);
    REQUIRE(found != cxx_layout().end());
    CHECK(found->second.size == entries[i].size);
    CHECK(found->second.offset == entries[i].offset);
  }
}

TEST_CASE("[abi] every struct starts with struct_size") {
  CHECK(offsetof(BP_Error, struct_size) == 0);
  CHECK(offsetof(BP_KeyValue, struct_size) == 0);
  CHECK(offsetof(BP_PluginApi, struct_size) == 0);
  CHECK(offsetof(BP_PluginEntryArgs, struct_size) == 0);
  CHECK(offsetof(BP_DeviceInfoArgs, struct_size) == 0);
  CHECK(offsetof(BP_ConvertIntegersArgs, struct_size) == 0);
  CHECK(offsetof(BP_MemoryWrapArgs, struct_size) == 0);
}

TEST_CASE("[abi] the 1.4 layout on LP64 is pinned (earlier minors' fields where they had them)") {
  if (sizeof(void*) != 8) return;  // the pinned numbers below are for 64-bit targets
  CHECK(BP_ABI_MAJOR == 1);
  CHECK(sizeof(BP_Error) == 40);
  CHECK(sizeof(BP_KeyValue) == 40);
  CHECK(offsetof(BP_PluginApi, abi_major) == 8);
  CHECK(offsetof(BP_PluginApi, abi_minor) == 12);
  CHECK(offsetof(BP_PluginApi, capabilities) == 56);
  CHECK(offsetof(BP_PluginApi, backend_create) == 64);
  CHECK(offsetof(BP_PluginApi, convert_integers) == 192);
  CHECK(offsetof(BP_PluginApi, memory_wrap) == 200);  // 1.1: appended after 1.0's 200 bytes
  CHECK(BP_PLUGIN_API_SIZE_1_0 == 200);
  CHECK(BP_PLUGIN_API_SIZE_1_1 == 208);
  CHECK(abi_plugin_api_size_1_1_from_c() == 208);
  CHECK(offsetof(BP_PluginApi, dlpack_device_type) == 208);  // 1.2: appended after 1.1's 208 bytes
  // 1.2's table ends 4 bytes into its last 8: sizeof, as a 1.2 plugin sets it, counts the padding.
  CHECK(BP_PLUGIN_API_SIZE_1_2 == 216);
  CHECK(abi_plugin_api_size_1_2_from_c() == 216);
  CHECK(offsetof(BP_PluginApi, event_timing) == 216);  // 1.3: after 1.2's 216 bytes
  CHECK(sizeof(BP_PluginApi) == 224);
  // 1.4 appended no call: its table is 1.3's.
  CHECK(BP_PLUGIN_API_SIZE_1_3 == 224);
  CHECK(abi_plugin_api_size_1_3_from_c() == 224);
  // 1.3's `timed` follows each async call's 1.2 struct, whose size it keeps for old callers.
  CHECK(offsetof(BP_CopyToDeviceArgs, timed) == 56);
  CHECK(sizeof(BP_CopyToDeviceArgs) == 64);
  CHECK(offsetof(BP_CopyToHostArgs, timed) == 56);
  CHECK(sizeof(BP_CopyToHostArgs) == 64);
  CHECK(offsetof(BP_CopyDeviceToDeviceArgs, timed) == 64);
  CHECK(sizeof(BP_CopyDeviceToDeviceArgs) == 72);
  CHECK(offsetof(BP_ConvertIntegersArgs, timed) == 80);
  CHECK(sizeof(BP_ConvertIntegersArgs) == 88);
  CHECK(offsetof(BP_EventTimingArgs, begin_ns) == 32);
  CHECK(sizeof(BP_EventTimingArgs) == 48);
  CHECK(offsetof(BP_ProbeArgs, reason_size) == 32);
  CHECK(offsetof(BP_ProbeArgs, priority) == 40);      // 1.2: appended after 1.1's 40 bytes
  CHECK(offsetof(BP_ProbeArgs, capabilities) == 48);  // 1.4: after 1.2's 48 bytes (44 and padding)
  CHECK(offsetof(BP_ProbeArgs, dlpack_device_type) == 56);
  CHECK(sizeof(BP_ProbeArgs) == 64);
  CHECK(BP_PROBE_ARGS_SIZE_1_0 == 40);
  CHECK(BP_PROBE_ARGS_SIZE_1_2 == 48);
  CHECK(abi_probe_args_size_1_2_from_c() == 48);
  CHECK(offsetof(BP_MemoryWrapArgs, address) == 24);
  CHECK(sizeof(BP_MemoryWrapArgs) == 48);
  CHECK(offsetof(BP_DeviceInfoArgs, memories) == 80);  // 1.4: appended after 1.3's 80 bytes
  CHECK(offsetof(BP_DeviceInfoArgs, memory_count) == 88);
  CHECK(sizeof(BP_DeviceInfoArgs) == 96);
  CHECK(BP_DEVICE_INFO_ARGS_SIZE_1_0 == 80);
  CHECK(abi_device_info_args_size_1_0_from_c() == 80);
  CHECK(sizeof(BP_PluginEntryArgs) == 32);
}

namespace {
// One struct in two versions: 1.1 appended `added` to 1.0's.
struct Version_1_0 {
  size_t struct_size;
  const char* name;
  int32_t last;
};
struct Version_1_1 {
  size_t struct_size;
  const char* name;
  int32_t last;
  int64_t added;
};
}  // namespace

TEST_CASE("[abi] BP_STRUCT_SIZE is the sizeof of the version that ended with the field") {
  CHECK(BP_STRUCT_SIZE(Version_1_1, last) == sizeof(Version_1_0));  // 20 bytes and the padding after
  CHECK(BP_STRUCT_SIZE(Version_1_1, name) == offsetof(Version_1_1, last));
  CHECK(BP_STRUCT_SIZE(Version_1_1, added) == sizeof(Version_1_1));
}

TEST_CASE("[abi] BP_TABLE_HAS_CALL needs both the field and a pointer") {
  BP_PluginApi table;
  std::memset(&table, 0, sizeof(table));
  table.struct_size = sizeof(table);
  CHECK_FALSE(BP_TABLE_HAS_CALL(&table, memory_wrap));  // NULL
  table.memory_wrap = [](BP_MemoryWrapArgs*) -> BP_Error* { return nullptr; };
  CHECK(BP_TABLE_HAS_CALL(&table, memory_wrap));
  CHECK(abi_table_has_memory_wrap_from_c(&table) == 1);
  table.struct_size = BP_PLUGIN_API_SIZE_1_0;  // a 1.0 table ends before the field
  CHECK_FALSE(BP_TABLE_HAS_CALL(&table, memory_wrap));
  CHECK(abi_table_has_memory_wrap_from_c(&table) == 0);
}

TEST_CASE("[abi] a table of each minor has exactly its own fields") {
  BP_PluginApi table;
  std::memset(&table, 0, sizeof(table));
  table.struct_size = BP_PLUGIN_API_SIZE_1_0;
  CHECK_FALSE(BP_STRUCT_HAS_FIELD(&table, BP_PluginApi, memory_wrap));
  CHECK_FALSE(BP_STRUCT_HAS_FIELD(&table, BP_PluginApi, dlpack_device_type));
  table.struct_size = BP_PLUGIN_API_SIZE_1_1;
  CHECK(BP_STRUCT_HAS_FIELD(&table, BP_PluginApi, memory_wrap));
  CHECK_FALSE(BP_STRUCT_HAS_FIELD(&table, BP_PluginApi, dlpack_device_type));
  CHECK(abi_table_has_dlpack_device_type_from_c(&table) == 0);
  table.struct_size = BP_PLUGIN_API_SIZE_1_2;
  CHECK(BP_STRUCT_HAS_FIELD(&table, BP_PluginApi, dlpack_device_type));
  CHECK(abi_table_has_dlpack_device_type_from_c(&table) == 1);
  table.event_timing = [](BP_EventTimingArgs*) -> BP_Error* { return nullptr; };
  CHECK_FALSE(BP_TABLE_HAS_CALL(&table, event_timing));  // set, but beyond a 1.2 table's end
  CHECK(abi_table_has_event_timing_from_c(&table) == 0);
  table.struct_size = sizeof(table);
  CHECK(BP_TABLE_HAS_CALL(&table, event_timing));
  CHECK(abi_table_has_event_timing_from_c(&table) == 1);
}

TEST_CASE("[abi] BP_STRUCT_HAS_FIELD reads struct_size") {
  BP_ProbeArgs args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = offsetof(BP_ProbeArgs, reason);
  CHECK(BP_STRUCT_HAS_FIELD(&args, BP_ProbeArgs, available));
  CHECK_FALSE(BP_STRUCT_HAS_FIELD(&args, BP_ProbeArgs, reason));
  args.struct_size = offsetof(BP_ProbeArgs, priority);  // a 1.1 core's probe args
  CHECK(BP_STRUCT_HAS_FIELD(&args, BP_ProbeArgs, reason_size));
  CHECK_FALSE(BP_STRUCT_HAS_FIELD(&args, BP_ProbeArgs, priority));
  args.struct_size = sizeof(BP_ProbeArgs);
  CHECK(BP_STRUCT_HAS_FIELD(&args, BP_ProbeArgs, priority));
}
