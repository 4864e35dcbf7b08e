// The loader's table checks: what makes a table usable, and that a plugin of
// another 1.x minor is not refused for its table size.
#include "loader/table_validation.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>

using backplane::BackendStatus;
using backplane::detail::validate_table;

namespace {

BP_Error* unused_call(void*) { return nullptr; }

constexpr std::size_t kTableSize_1_0 = BP_PLUGIN_API_SIZE_1_0;

// A complete table of this core's minor named "ok"; every call is a
// placeholder never called.
BP_PluginApi complete_table() {
  BP_PluginApi table;
  std::memset(&table, 0, sizeof(table));
  table.struct_size = sizeof(table);
  table.abi_major = BP_ABI_MAJOR;
  table.abi_minor = BP_ABI_MINOR;
  table.name = "ok";
  table.name_size = 2;
  // Every function pointer field (all of them lie between backend_create and
  // memory_wrap) gets a non-NULL placeholder.
  auto* first = reinterpret_cast<unsigned char*>(&table.backend_create);
  auto* last = reinterpret_cast<unsigned char*>(&table.memory_wrap);
  auto placeholder = reinterpret_cast<void (*)()>(&unused_call);
  for (unsigned char* field = first; field <= last; field += sizeof(placeholder)) {
    std::memcpy(field, &placeholder, sizeof(placeholder));
  }
  return table;
}

}  // namespace

TEST_CASE("[table] a complete table is accepted") {
  BP_PluginApi table = complete_table();
  CHECK_FALSE(validate_table(&table, "ok").has_value());
}

TEST_CASE("[table] a 1.0 table (ending at convert_integers) is accepted") {
  BP_PluginApi table = complete_table();
  table.struct_size = kTableSize_1_0;
  table.abi_minor = 0;
  table.memory_wrap = nullptr;  // beyond struct_size: never read
  CHECK_FALSE(validate_table(&table, "ok").has_value());
}

TEST_CASE("[table] a 1.1 table (ending at memory_wrap) is accepted, whatever lies past it") {
  BP_PluginApi table = complete_table();
  table.struct_size = BP_PLUGIN_API_SIZE_1_1;
  table.abi_minor = 1;
  table.dlpack_device_type = -7;  // beyond struct_size: never read, so never refused
  CHECK_FALSE(validate_table(&table, "ok").has_value());
}

TEST_CASE("[table] a table of this ABI declaring a DLPack device type is accepted") {
  BP_PluginApi table = complete_table();
  CHECK(table.struct_size == sizeof(BP_PluginApi));
  CHECK(table.abi_minor == BP_ABI_MINOR);
  for (std::int32_t type : {0, 2, 4, 10, 12, 17, 99}) {
    CAPTURE(type);
    table.dlpack_device_type = type;
    CHECK_FALSE(validate_table(&table, "ok").has_value());
  }
  table.capabilities = BP_CAPABILITY_HOST_ADDRESSABLE;
  table.dlpack_device_type = 1;  // kDLCPU: host memory
  CHECK_FALSE(validate_table(&table, "ok").has_value());
}

TEST_CASE("[table] a negative dlpack_device_type, or kDLCPU for memory that is not host memory, is refused") {
  BP_PluginApi table = complete_table();
  table.dlpack_device_type = -1;
  auto problem = validate_table(&table, "ok");
  REQUIRE(problem.has_value());
  CHECK(problem->status == BackendStatus::kFailed);
  CHECK(problem->reason == "bad table: dlpack_device_type is -1; it must be 0 (not declared) or a DLPack device type");
  table.dlpack_device_type = 1;
  problem = validate_table(&table, "ok");
  REQUIRE(problem.has_value());
  CHECK(problem->reason ==
        "bad table: dlpack_device_type is 1 (kDLCPU), but the table does not claim "
        "BP_CAPABILITY_HOST_ADDRESSABLE: kDLCPU memory must be host memory");
}

TEST_CASE("[table] a table from a newer 1.x minor (a larger struct) is accepted") {
  struct Newer {
    BP_PluginApi api;
    void* appended_in_a_later_minor;
  } newer{complete_table(), nullptr};
  newer.api.struct_size = sizeof(Newer);
  newer.api.abi_minor = BP_ABI_MINOR + 3;
  CHECK_FALSE(validate_table(&newer.api, "ok").has_value());
}

TEST_CASE("[table] a table shorter than 1.0's is refused, naming both sizes") {
  BP_PluginApi table = complete_table();
  table.struct_size = offsetof(BP_PluginApi, convert_integers);
  auto problem = validate_table(&table, "ok");
  REQUIRE(problem.has_value());
  CHECK(problem->status == BackendStatus::kFailed);
  CHECK(problem->reason == "bad table: struct_size " + std::to_string(table.struct_size) +
                               " is smaller than ABI 1.0's table (" + std::to_string(kTableSize_1_0) + " bytes)");
}

TEST_CASE("[table] another major is incompatible, naming both versions") {
  BP_PluginApi table = complete_table();
  table.abi_major = 3;
  table.abi_minor = 1;
  auto problem = validate_table(&table, "ok");
  REQUIRE(problem.has_value());
  CHECK(problem->status == BackendStatus::kIncompatible);
  CHECK(problem->reason == "plugin speaks ABI 3.1, this core speaks 1.x");
}

TEST_CASE("[table] a claimed capability needs its call") {
  BP_PluginApi table = complete_table();
  table.capabilities = BP_CAPABILITY_CONVERT_INTEGERS;
  table.convert_integers = nullptr;
  auto problem = validate_table(&table, "ok");
  REQUIRE(problem.has_value());
  CHECK(problem->reason.find("convert_integers (the table claims BP_CAPABILITY_CONVERT_INTEGERS)") !=
        std::string::npos);
}

TEST_CASE("[table] BP_CAPABILITY_WRAP_MEMORY needs memory_wrap") {
  BP_PluginApi table = complete_table();
  table.capabilities = BP_CAPABILITY_WRAP_MEMORY;
  table.memory_wrap = nullptr;
  auto problem = validate_table(&table, "ok");
  REQUIRE(problem.has_value());
  CHECK(problem->status == BackendStatus::kFailed);
  CHECK(problem->reason ==
        "bad table: required calls are NULL: memory_wrap (the table claims BP_CAPABILITY_WRAP_MEMORY)");
}

TEST_CASE("[table] a 1.0-sized table cannot claim BP_CAPABILITY_WRAP_MEMORY") {
  // The field lies past struct_size, so even a non-NULL value there is not read.
  BP_PluginApi table = complete_table();
  table.struct_size = kTableSize_1_0;
  table.abi_minor = 0;
  table.capabilities = BP_CAPABILITY_WRAP_MEMORY;
  auto problem = validate_table(&table, "ok");
  REQUIRE(problem.has_value());
  CHECK(problem->status == BackendStatus::kFailed);
  CHECK(problem->reason == "bad table: it claims BP_CAPABILITY_WRAP_MEMORY, but its struct_size " +
                               std::to_string(kTableSize_1_0) +
                               " (ABI 1.0) ends before memory_wrap, which arrived in ABI 1.1");
}

TEST_CASE("[table] BP_CAPABILITY_EVENT_TIMING needs event_timing") {
  BP_PluginApi table = complete_table();
  table.capabilities = BP_CAPABILITY_EVENT_TIMING;
  table.event_timing = nullptr;
  auto problem = validate_table(&table, "ok");
  REQUIRE(problem.has_value());
  CHECK(problem->status == BackendStatus::kFailed);
  CHECK(problem->reason ==
        "bad table: required calls are NULL: event_timing (the table claims BP_CAPABILITY_EVENT_TIMING)");
  table.event_timing = [](BP_EventTimingArgs*) -> BP_Error* { return nullptr; };
  CHECK_FALSE(validate_table(&table, "ok").has_value());
}

TEST_CASE("[table] a 1.2-sized table cannot claim BP_CAPABILITY_EVENT_TIMING") {
  BP_PluginApi table = complete_table();
  table.struct_size = BP_PLUGIN_API_SIZE_1_2;
  table.abi_minor = 2;
  table.capabilities = BP_CAPABILITY_EVENT_TIMING;
  table.event_timing = [](BP_EventTimingArgs*) -> BP_Error* { return nullptr; };  // past struct_size: never read
  auto problem = validate_table(&table, "ok");
  REQUIRE(problem.has_value());
  CHECK(problem->status == BackendStatus::kFailed);
  CHECK(problem->reason == "bad table: it claims BP_CAPABILITY_EVENT_TIMING, but its struct_size " +
                               std::to_string(BP_PLUGIN_API_SIZE_1_2) +
                               " (ABI 1.2) ends before event_timing, which arrived in ABI 1.3");
}

TEST_CASE("[loader] name and version sizes are bounded before a byte is read") {
  constexpr std::size_t kHuge = std::size_t{1} << 40;
  auto reason_for = [](const BP_PluginApi& table) {
    auto problem = validate_table(&table, "");
    REQUIRE(problem.has_value());
    CHECK(problem->status == BackendStatus::kFailed);
    return problem->reason;
  };
  BP_PluginApi table = complete_table();
  table.name_size = kHuge;
  CHECK(reason_for(table) == "bad table: name_size 1099511627776 is more than 64 bytes");
  table.name_size = 10;  // "ok" and its NUL: reading 10 bytes would pass the end of the string
  CHECK(reason_for(table) == "bad table: name_size is 10, but the name 'ok' ends after 2 bytes");
  table = complete_table();
  table.version = "1.0";
  table.version_size = kHuge;
  CHECK(reason_for(table) == "bad table: version_size 1099511627776 is more than 256 bytes");
  table.version_size = 3;
  CHECK_FALSE(validate_table(&table, "").has_value());
}

TEST_CASE("[table] what a probe states (ABI 1.4) keeps the table's rules, and the reason names the field") {
  using backplane::detail::probe_statement_problem;
  BP_PluginApi table = complete_table();
  CHECK_FALSE(probe_statement_problem(table, BP_CAPABILITY_HOST_ADDRESSABLE, 1).has_value());
  CHECK_FALSE(probe_statement_problem(table, BP_CAPABILITY_NO_DEVICE_TO_DEVICE | BP_CAPABILITY_ASYNC, 2).has_value());
  CHECK(probe_statement_problem(table, 0, -4) ==
        "probe answered BP_ProbeArgs.dlpack_device_type -4; it must be 0 (not declared) or a DLPack device type");
  CHECK(probe_statement_problem(table, BP_CAPABILITY_ASYNC, 1) ==
        "probe answered BP_ProbeArgs.dlpack_device_type 1 (kDLCPU), but its BP_ProbeArgs.capabilities (0x4) lack "
        "BP_CAPABILITY_HOST_ADDRESSABLE: kDLCPU memory must be host memory");
  table.convert_integers = nullptr;
  CHECK(probe_statement_problem(table, BP_CAPABILITY_CONVERT_INTEGERS, 0) ==
        "the table's calls are NULL: convert_integers (the probe's BP_ProbeArgs.capabilities claims "
        "BP_CAPABILITY_CONVERT_INTEGERS)");
  table = complete_table();
  table.struct_size = BP_PLUGIN_API_SIZE_1_2;
  CHECK(probe_statement_problem(table, BP_CAPABILITY_EVENT_TIMING, 0) ==
        "the probe's BP_ProbeArgs.capabilities claims BP_CAPABILITY_EVENT_TIMING, but the table's struct_size " +
            std::to_string(BP_PLUGIN_API_SIZE_1_2) + " (ABI 1.4) ends before event_timing, which arrived in ABI 1.3");
}

TEST_CASE("[table] a 1.4 table declaring the probe-in-child and no-device-to-device bits is accepted") {
  BP_PluginApi table = complete_table();
  CHECK(table.abi_minor == 4);
  table.capabilities = BP_CAPABILITY_PROBE_IN_CHILD | BP_CAPABILITY_NO_DEVICE_TO_DEVICE;
  CHECK_FALSE(validate_table(&table, "ok").has_value());
}
