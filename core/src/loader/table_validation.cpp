#include "loader/table_validation.hpp"

#include "config/selector.hpp"
#include "loader/plugin_limits.hpp"
#include "util/dlpack_device.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace backplane::detail {
namespace {

constexpr std::size_t kVersionFieldsEnd = offsetof(BP_PluginApi, abi_minor) + sizeof(uint32_t);
// A plugin built against 1.0 stays valid when later minors append fields
// (which the core reads only with BP_STRUCT_HAS_FIELD).
constexpr std::size_t kTableSize_1_0 = BP_PLUGIN_API_SIZE_1_0;

// The calls that `capabilities` (the table's, or a probe's) promise, by
// name for the error message, which says who claims them.
void missing_optional_calls(const BP_PluginApi& table, BP_Capabilities capabilities, std::string_view claimant,
                            std::vector<std::string>& missing) {
  auto require = [&](const void* pointer, std::string_view name, std::string_view capability) {
    if (pointer == nullptr) missing.push_back(fmt::format("{} ({} claims {})", name, claimant, capability));
  };
  if ((capabilities & BP_CAPABILITY_CONVERT_INTEGERS) != 0) {
    require(reinterpret_cast<const void*>(table.convert_integers), "convert_integers",
            "BP_CAPABILITY_CONVERT_INTEGERS");
  }
  // A table too short for memory_wrap is reported by the caller itself.
  if ((capabilities & BP_CAPABILITY_WRAP_MEMORY) != 0 && BP_STRUCT_HAS_FIELD(&table, BP_PluginApi, memory_wrap)) {
    require(reinterpret_cast<const void*>(table.memory_wrap), "memory_wrap", "BP_CAPABILITY_WRAP_MEMORY");
  }
  if ((capabilities & BP_CAPABILITY_EVENT_TIMING) != 0 && BP_STRUCT_HAS_FIELD(&table, BP_PluginApi, event_timing)) {
    require(reinterpret_cast<const void*>(table.event_timing), "event_timing", "BP_CAPABILITY_EVENT_TIMING");
  }
}

// A capability whose call lies past the table's struct_size, if any.
// `claimant` and `whose` say who claims it and whose struct_size it is, in words.
std::optional<std::string> capability_past_table(const BP_PluginApi& table, BP_Capabilities capabilities,
                                                 std::string_view claimant, std::string_view whose) {
  if ((capabilities & BP_CAPABILITY_WRAP_MEMORY) != 0 && !BP_STRUCT_HAS_FIELD(&table, BP_PluginApi, memory_wrap)) {
    return fmt::format(
        "{} claims BP_CAPABILITY_WRAP_MEMORY, but {} struct_size {} (ABI {}) ends before memory_wrap, which "
        "arrived in ABI 1.1",
        claimant, whose, table.struct_size, abi_version_string(table));
  }
  if ((capabilities & BP_CAPABILITY_EVENT_TIMING) != 0 && !BP_STRUCT_HAS_FIELD(&table, BP_PluginApi, event_timing)) {
    return fmt::format(
        "{} claims BP_CAPABILITY_EVENT_TIMING, but {} struct_size {} (ABI {}) ends before event_timing, which "
        "arrived in ABI 1.3",
        claimant, whose, table.struct_size, abi_version_string(table));
  }
  return std::nullopt;
}

// The calls every 1.x plugin must provide, by name for the error message.
std::vector<std::string> missing_required_calls(const BP_PluginApi& table) {
  std::vector<std::string> missing;
  auto require = [&](const void* pointer, std::string_view name) {
    if (pointer == nullptr) missing.emplace_back(name);
  };
  require(reinterpret_cast<const void*>(table.backend_create), "backend_create");
  require(reinterpret_cast<const void*>(table.backend_destroy), "backend_destroy");
  require(reinterpret_cast<const void*>(table.probe), "probe");
  require(reinterpret_cast<const void*>(table.device_count), "device_count");
  require(reinterpret_cast<const void*>(table.device_info), "device_info");
  require(reinterpret_cast<const void*>(table.memory_allocate), "memory_allocate");
  require(reinterpret_cast<const void*>(table.memory_free), "memory_free");
  require(reinterpret_cast<const void*>(table.copy_to_device), "copy_to_device");
  require(reinterpret_cast<const void*>(table.copy_to_host), "copy_to_host");
  require(reinterpret_cast<const void*>(table.copy_device_to_device), "copy_device_to_device");
  require(reinterpret_cast<const void*>(table.copy_to_device_async), "copy_to_device_async");
  require(reinterpret_cast<const void*>(table.copy_to_host_async), "copy_to_host_async");
  require(reinterpret_cast<const void*>(table.copy_device_to_device_async), "copy_device_to_device_async");
  require(reinterpret_cast<const void*>(table.event_wait), "event_wait");
  require(reinterpret_cast<const void*>(table.event_query), "event_query");
  require(reinterpret_cast<const void*>(table.event_destroy), "event_destroy");
  missing_optional_calls(table, table.capabilities, "the table", missing);
  return missing;
}

}  // namespace

std::string abi_version_string(const BP_PluginApi& table) {
  return fmt::format("{}.{}", table.abi_major, table.abi_minor);
}

std::optional<TableProblem> validate_table(const BP_PluginApi* table, std::string_view expected_name) {
  if (table == nullptr) {
    return TableProblem{BackendStatus::kFailed, "the entry function returned no table (NULL)"};
  }
  if (table->struct_size < kVersionFieldsEnd) {
    return TableProblem{
        BackendStatus::kFailed,
        fmt::format("bad table: struct_size {} is too small to hold the ABI version", table->struct_size)};
  }
  if (table->abi_major != BP_ABI_MAJOR) {
    return TableProblem{BackendStatus::kIncompatible, fmt::format("plugin speaks ABI {}, this core speaks {}.x",
                                                                  abi_version_string(*table), BP_ABI_MAJOR)};
  }
  if (table->struct_size < kTableSize_1_0) {
    return TableProblem{BackendStatus::kFailed,
                        fmt::format("bad table: struct_size {} is smaller than ABI {}.0's table ({} bytes)",
                                    table->struct_size, BP_ABI_MAJOR, kTableSize_1_0)};
  }
  if (table->name == nullptr || table->name_size == 0) {
    return TableProblem{BackendStatus::kFailed, "bad table: the backend name is empty"};
  }
  // Sizes are checked before a byte is read: the name must end where its
  // size says, and a size far past the string must not read beyond it.
  if (table->name_size > kMaxBackendNameSize) {
    return TableProblem{BackendStatus::kFailed, fmt::format("bad table: name_size {} is more than {} bytes",
                                                            table->name_size, kMaxBackendNameSize)};
  }
  const std::string_view name = plugin_text(table->name, table->name_size);
  if (name.size() != table->name_size) {
    return TableProblem{BackendStatus::kFailed,
                        fmt::format("bad table: name_size is {}, but the name '{}' ends after {} bytes",
                                    table->name_size, name, name.size())};
  }
  if (!is_valid_backend_name(name)) {
    return TableProblem{BackendStatus::kFailed,
                        fmt::format("bad table: backend name '{}' is not of the form [a-z0-9_]+", name)};
  }
  if (!expected_name.empty() && name != expected_name) {
    return TableProblem{
        BackendStatus::kFailed,
        fmt::format("file backplane-{}.so declares backend '{}'; the names must match", expected_name, name)};
  }
  if (table->version == nullptr && table->version_size != 0) {
    return TableProblem{BackendStatus::kFailed, "bad table: version is NULL with a non-zero size"};
  }
  if (table->version_size > kMaxPluginVersionSize) {
    return TableProblem{BackendStatus::kFailed, fmt::format("bad table: version_size {} is more than {} bytes",
                                                            table->version_size, kMaxPluginVersionSize)};
  }
  if (auto problem = capability_past_table(*table, table->capabilities, "it", "its")) {
    return TableProblem{BackendStatus::kFailed, "bad table: " + *problem};
  }
  if (BP_STRUCT_HAS_FIELD(table, BP_PluginApi, dlpack_device_type)) {
    if (table->dlpack_device_type < 0) {
      return TableProblem{BackendStatus::kFailed,
                          fmt::format("bad table: dlpack_device_type is {}; it must be 0 (not declared) or a "
                                      "DLPack device type",
                                      table->dlpack_device_type)};
    }
    // The core hands kDLCPU memory to consumers that dereference it.
    if (table->dlpack_device_type == kDLCPU && (table->capabilities & BP_CAPABILITY_HOST_ADDRESSABLE) == 0) {
      return TableProblem{BackendStatus::kFailed,
                          fmt::format("bad table: dlpack_device_type is {}, but the table does not claim "
                                      "BP_CAPABILITY_HOST_ADDRESSABLE: kDLCPU memory must be host memory",
                                      dlpack_device_type_name(kDLCPU))};
    }
  }
  if (auto missing = missing_required_calls(*table); !missing.empty()) {
    return TableProblem{BackendStatus::kFailed,
                        fmt::format("bad table: required calls are NULL: {}", fmt::join(missing, ", "))};
  }
  return std::nullopt;
}

std::optional<std::string> probe_statement_problem(const BP_PluginApi& table, BP_Capabilities capabilities,
                                                   std::int32_t dlpack_device_type) {
  constexpr std::string_view kClaimant = "the probe's BP_ProbeArgs.capabilities";
  if (dlpack_device_type < 0) {
    return fmt::format(
        "probe answered BP_ProbeArgs.dlpack_device_type {}; it must be 0 (not declared) or a DLPack device type",
        dlpack_device_type);
  }
  if (dlpack_device_type == kDLCPU && (capabilities & BP_CAPABILITY_HOST_ADDRESSABLE) == 0) {
    return fmt::format(
        "probe answered BP_ProbeArgs.dlpack_device_type {}, but its BP_ProbeArgs.capabilities (0x{:x}) lack "
        "BP_CAPABILITY_HOST_ADDRESSABLE: kDLCPU memory must be host memory",
        dlpack_device_type_name(kDLCPU), capabilities);
  }
  if (auto problem = capability_past_table(table, capabilities, kClaimant, "the table's")) return problem;
  std::vector<std::string> missing;
  missing_optional_calls(table, capabilities, kClaimant, missing);
  if (!missing.empty()) return fmt::format("the table's calls are NULL: {}", fmt::join(missing, ", "));
  return std::nullopt;
}

}  // namespace backplane::detail
