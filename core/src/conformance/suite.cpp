// The conformance run: loading and negotiation, the backend's life cycle and
// probe here; the device, copy, optional and error checks in checks_*.cpp.
#include "conformance/checks.hpp"
#include "conformance/context.hpp"

#include "isolation/probe_process.hpp"
#include "loader/plugin_library.hpp"
#include "loader/plugin_limits.hpp"
#include "registry/probe_call.hpp"
#include "util/dlpack_device.hpp"
#include "util/environment.hpp"

#include <backplane/conformance.hpp>

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace backplane::conformance {
using detail::dlpack_device_type_name;
using detail::Environment;
using detail::is_dlpack_host_type;
using detail::is_known_dlpack_device_type;
using detail::kDLMAIACode;
using detail::open_plugin;
using detail::OpenedPlugin;
namespace isolation = detail::isolation;
using detail::kMaxPluginDevices;
using detail::kMaxPluginTextSize;
using detail::plugin_text;
using detail::probe_timeout_ms;
namespace {

constexpr char kUnknownOption[] = "conformance_no_such_option";
// The range a probe's priority is expected in (cpu 10, GPUs 100).
constexpr std::int32_t kPlausiblePriority = 1000;

// <name> of a file called backplane-<name>.so, else empty.
std::string name_from_file(const std::filesystem::path& file) {
  const std::string base = file.filename().string();
  constexpr std::string_view kPrefix = "backplane-";
  constexpr std::string_view kSuffix = ".so";
  if (base.size() <= kPrefix.size() + kSuffix.size() || !base.starts_with(kPrefix) || !base.ends_with(kSuffix)) {
    return {};
  }
  return base.substr(kPrefix.size(), base.size() - kPrefix.size() - kSuffix.size());
}

// The entry function of the already loaded file (RTLD_NOLOAD: no second load).
BP_PluginEntryFn find_entry(const std::filesystem::path& file) {
  void* handle = ::dlopen(std::filesystem::absolute(file).c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* symbol = ::dlsym(handle, BP_PLUGIN_ENTRY_SYMBOL);
  ::dlclose(handle);  // drops only the reference taken above
  return reinterpret_cast<BP_PluginEntryFn>(symbol);
}

// The capability bits each ABI 1.x minor defines (1.2 added none).
BP_Capabilities known_capabilities(std::uint32_t minor) {
  constexpr BP_Capabilities kKnown_1_0 =
      BP_CAPABILITY_HOST_ADDRESSABLE | BP_CAPABILITY_PINNED_HOST | BP_CAPABILITY_ASYNC | BP_CAPABILITY_CONVERT_INTEGERS;
  constexpr BP_Capabilities kKnown_1_1 = kKnown_1_0 | BP_CAPABILITY_WRAP_MEMORY;
  constexpr BP_Capabilities kKnown_1_2 = kKnown_1_1;
  constexpr BP_Capabilities kKnown_1_3 = kKnown_1_2 | BP_CAPABILITY_EVENT_TIMING;
  constexpr BP_Capabilities kKnown_1_4 = kKnown_1_3 | BP_CAPABILITY_PROBE_IN_CHILD | BP_CAPABILITY_NO_DEVICE_TO_DEVICE;
  switch (minor) {
    case 0: return kKnown_1_0;
    case 1: return kKnown_1_1;
    case 2: return kKnown_1_2;
    case 3: return kKnown_1_3;
    default: return kKnown_1_4;
  }
}

std::string table_summary(const BP_PluginApi& table) {
  return fmt::format("struct_size {}, ABI {}.{}", table.struct_size, table.abi_major, table.abi_minor);
}

void check_negotiation(Context& context, const std::filesystem::path& file) {
  const BP_PluginApi& api = context.api;
  context.check("negotiation: table size and ABI version", [&] {
    if (api.abi_major != BP_ABI_MAJOR || api.struct_size < BP_PLUGIN_API_SIZE_1_0) {
      throw CheckFailure(fmt::format("{}; this core needs ABI {}.x with struct_size >= {} (the 1.0 table)",
                                     table_summary(api), BP_ABI_MAJOR, BP_PLUGIN_API_SIZE_1_0));
    }
    return table_summary(api);
  });
  context.check("negotiation: capability bits are defined ones", [&] {
    const BP_Capabilities unknown = api.capabilities & ~known_capabilities(api.abi_minor);
    if (unknown != 0 && api.abi_minor <= BP_ABI_MINOR) {
      throw CheckFailure(fmt::format("capabilities 0x{:x} include bits 0x{:x} that ABI {}.{} does not define",
                                     api.capabilities, unknown, api.abi_major, api.abi_minor));
    }
    return fmt::format("capabilities 0x{:x}", api.capabilities);
  });
  context.check("negotiation: dlpack_device_type is 0 or a DLPack device type", [&] {
    if (!BP_STRUCT_HAS_FIELD(&api, BP_PluginApi, dlpack_device_type)) {
      throw NotApplicable(
          fmt::format("the table ({}) ends before dlpack_device_type (ABI 1.2); it reads as 0, "
                      "so only host memory is shared through DLPack",
                      table_summary(api)));
    }
    const std::int32_t type = api.dlpack_device_type;
    if (type == 0) {
      return std::string("0: not declared; DLPack shares this backend's memory only if it is host memory");
    }
    if (!is_known_dlpack_device_type(type)) {
      throw CheckFailure(fmt::format(
          "dlpack_device_type is {}, which is not a DLPack device type (DLDeviceType: {}, {}, {}, {}, "
          "... {})",
          type, dlpack_device_type_name(kDLCPU), dlpack_device_type_name(kDLCUDA), dlpack_device_type_name(kDLOpenCL),
          dlpack_device_type_name(kDLROCM), dlpack_device_type_name(kDLMAIACode)));
    }
    const bool host_type = is_dlpack_host_type(type);
    if (host_type && !context.has_capability(BP_CAPABILITY_HOST_ADDRESSABLE)) {
      throw CheckFailure(
          fmt::format("dlpack_device_type {} is host memory, but the table does not claim "
                      "BP_CAPABILITY_HOST_ADDRESSABLE",
                      type));
    }
    if (!host_type && !context.has_capability(BP_CAPABILITY_WRAP_MEMORY)) {
      return fmt::format("{}; without BP_CAPABILITY_WRAP_MEMORY its arrays export but imports are refused", type);
    }
    return std::to_string(type);
  });
  context.check("negotiation: backend name matches the file name", [&] {
    const std::string expected = name_from_file(file);
    if (expected.empty()) {
      throw NotApplicable(
          fmt::format("the file is not named backplane-<name>.so; in a plugin directory it "
                      "must be backplane-{}.so",
                      context.report.backend_name));
    }
    if (expected != context.report.backend_name) {
      throw CheckFailure(
          fmt::format("the file is backplane-{}.so but declares backend '{}': a plugin "
                      "directory would refuse it",
                      expected, context.report.backend_name));
    }
    return std::string();
  });

  const BP_PluginEntryFn entry = find_entry(file);
  context.check("negotiation: entry answers the same table when asked again", [&] {
    if (entry == nullptr) throw CheckFailure("the entry symbol could not be found again with dlsym");
    static constexpr std::array<uint32_t, 1> kMajors = {BP_ABI_MAJOR};
    const BP_PluginEntryArgs offer{sizeof(BP_PluginEntryArgs), kMajors.data(), kMajors.size(), BP_ABI_MINOR};
    const BP_PluginApi* again = entry(&offer);
    if (again == nullptr) throw CheckFailure("the second call returned NULL");
    if (again->abi_major != api.abi_major || again->struct_size != api.struct_size ||
        std::string_view(again->name, again->name_size) != context.report.backend_name) {
      throw CheckFailure(fmt::format("the second call returned a different table ({})", table_summary(*again)));
    }
    return std::string();
  });
  context.check("negotiation: an offer without the plugin's major still gets its table", [&] {
    if (entry == nullptr) throw CheckFailure("the entry symbol could not be found again with dlsym");
    // A future core speaking only a major the plugin does not know: the plugin
    // must still answer, so the core can name both versions.
    static constexpr std::array<uint32_t, 1> kFutureMajors = {BP_ABI_MAJOR + 100};
    const BP_PluginEntryArgs offer{sizeof(BP_PluginEntryArgs), kFutureMajors.data(), kFutureMajors.size(), 0};
    const BP_PluginApi* table = entry(&offer);
    if (table == nullptr) {
      throw CheckFailure(
          fmt::format("offered only ABI {}.x, the entry returned NULL; it must return its "
                      "own table so the core can report both versions",
                      BP_ABI_MAJOR + 100));
    }
    return fmt::format("answered ABI {}.{}", table->abi_major, table->abi_minor);
  });
}

// backend_create with the user's options; records the check and fills context.backend.
void create_backend(Context& context) {
  context.check("backend: backend_create with the given options", [&] {
    auto created = detail::PluginClient::create(context.api, context.options.plugin_options, &context.inspector());
    context.require_ok(created.status(), "backend_create");
    if (*created == nullptr) throw CheckFailure("backend_create returned success but no backend");
    context.backend = *created;
    context.report.created = true;
    std::vector<std::string> shown;
    for (const auto& [key, value] : context.options.plugin_options) shown.push_back(key + "=" + value);
    return shown.empty() ? std::string("no options") : fmt::format("options {}", fmt::join(shown, " "));
  });
}

void check_backend_lifecycle(Context& context) {
  const BP_PluginApi& api = context.api;
  context.check("backend: an unknown option is refused, naming the key", [&] {
    auto options = context.options.plugin_options;
    options.emplace_back(kUnknownOption, "1");
    auto created = detail::PluginClient::create(api, options, &context.inspector());
    if (created.ok()) {
      if (*created != nullptr) detail::PluginClient(api, *created).backend_destroy();
      throw CheckFailure(fmt::format("backend_create accepted the option {}=1", kUnknownOption));
    }
    const PluginError failure =
        context.require_error(created.status(), "backend_create with an unknown option", {BP_ERROR_INVALID_ARGUMENT});
    if (failure.message.find(kUnknownOption) == std::string::npos) {
      throw CheckFailure(fmt::format("the message does not name the key {}: \"{}\"", kUnknownOption, failure.message));
    }
    return std::string();
  });
  context.check("backend: a second instance lives alongside the first", [&] {
    // With the same options: a backend may need one (the pjrt adapter's library).
    auto created = detail::PluginClient::create(api, context.options.plugin_options, &context.inspector());
    context.require_ok(created.status(), "a second backend_create with the same options");
    if (*created == nullptr) throw CheckFailure("backend_create returned success but no backend");
    const detail::PluginClient second(api, *created, &context.inspector());
    if (second.backend() == context.backend) {
      second.backend_destroy();
      throw CheckFailure("the second instance has the same handle as the first");
    }
    const PluginStatus probed = second.probe().status();
    second.backend_destroy();
    if (!probed.ok()) {
      throw CheckFailure(fmt::format("probe of the second instance failed: {}: {}",
                                     error_code_name(probed.plugin_code()), probed.message()));
    }
    return std::string();
  });
}

void check_probe(Context& context) {
  const BP_PluginApi& api = context.api;
  Report& report = context.report;
  bool answered = false;
  context.check("probe: answers available or unavailable, with a reason when unavailable", [&] {
    auto args = detail::probe_args(context.backend);
    args.available = -1;  // a plugin that never sets it is caught
    // ABI 1.4, in/out: the table's, which a backend may restate for itself.
    args.capabilities = api.capabilities;
    args.dlpack_device_type = BP_STRUCT_HAS_FIELD(&api, BP_PluginApi, dlpack_device_type) ? api.dlpack_device_type : 0;
    context.require_ok(api.probe(&args), "probe");
    if (api.abi_minor >= 4) context.stated_capabilities = args.capabilities & ~BP_CAPABILITY_PROBE_IN_CHILD;
    if (args.available != 0 && args.available != 1) {
      throw CheckFailure(fmt::format("available is {}; it must be 0 or 1", args.available));
    }
    if (args.reason == nullptr && args.reason_size != 0) {
      throw CheckFailure(fmt::format("reason is NULL with reason_size {}", args.reason_size));
    }
    if (args.reason_size > kMaxPluginTextSize) {
      throw CheckFailure(fmt::format("reason_size is {}, more than {}", args.reason_size, kMaxPluginTextSize));
    }
    report.available = args.available == 1;
    report.probe_reason = std::string(plugin_text(args.reason, args.reason_size));
    report.probed = true;
    answered = true;
    if (!report.available && report.probe_reason.empty()) {
      throw CheckFailure("unavailable without a reason: say what is missing (\"no NVIDIA driver: ...\")");
    }
    return fmt::format("{}: {}", report.available ? "available" : "unavailable", report.probe_reason);
  });
  context.check("probe: a second probe gives the same answer", [&] {
    if (!answered) throw NotApplicable("the first probe failed");
    auto args = detail::probe_args(context.backend);
    context.require_ok(api.probe(&args), "the second probe");
    if ((args.available == 1) != report.available) {
      throw CheckFailure(fmt::format("the first probe said {}, the second {}",
                                     report.available ? "available" : "unavailable",
                                     args.available == 1 ? "available" : "unavailable"));
    }
    return std::string();
  });
  context.check("probe: the reported priority is sane", [&] {
    if (!answered) throw NotApplicable("the first probe failed");
    auto args = detail::probe_args(context.backend, api.priority);  // what the core fills in
    context.require_ok(api.probe(&args), "probe");
    if (api.abi_minor < 2 && args.priority != api.priority) {
      throw CheckFailure(
          fmt::format("an ABI {}.{} table's probe changed priority ({} -> {}), a field of ABI 1.2 "
                      "it cannot know: it writes past the struct it was built against",
                      api.abi_major, api.abi_minor, api.priority, args.priority));
    }
    if (args.priority < -kPlausiblePriority || args.priority > kPlausiblePriority) {
      throw CheckFailure(
          fmt::format("probe reported priority {} (the table says {}); priorities are expected "
                      "within -{}..{} (cpu 10, GPUs 100)",
                      args.priority, api.priority, kPlausiblePriority, kPlausiblePriority));
    }
    auto again = detail::probe_args(context.backend, api.priority);
    context.require_ok(api.probe(&again), "the second probe");
    if (again.priority != args.priority) {
      throw CheckFailure(
          fmt::format("the first probe reported priority {}, the second {}", args.priority, again.priority));
    }
    return args.priority == api.priority ? fmt::format("{}, the table's", args.priority)
                                         : fmt::format("{} (the table says {})", args.priority, api.priority);
  });
  context.check("probe: a caller's 1.1 struct, without priority, is accepted and not written past", [&] {
    if (!answered) throw NotApplicable("the first probe failed");
    // What a core of ABI 1.0 or 1.1 passes: the struct ends at reason_size.
    constexpr std::int32_t kCanary = 0x5a5a5a5a;
    auto args = detail::probe_args(context.backend, kCanary);
    args.struct_size = BP_PROBE_ARGS_SIZE_1_0;
    context.require_ok(api.probe(&args), fmt::format("probe with struct_size {}", args.struct_size));
    if (args.priority != kCanary) {
      throw CheckFailure(
          fmt::format("probe wrote priority ({}) although struct_size {} ends before it; write "
                      "it only when BP_STRUCT_HAS_FIELD says the caller's struct has it",
                      args.priority, args.struct_size));
    }
    return std::string();
  });
  context.check("probe: device_count agrees with probe", [&] {
    auto args = detail::device_count_args(context.backend);
    args.count = -1;
    context.require_ok(api.device_count(&args), "device_count");
    if (args.count < 0 || args.count > kMaxPluginDevices) {
      throw CheckFailure(fmt::format("device_count answered {}, outside 0..{}", args.count, kMaxPluginDevices));
    }
    context.counted_devices = args.count;
    // After a failed probe there is no answer to agree with.
    if (!answered) return fmt::format("{} device(s); not compared, the probe failed", args.count);
    if (!report.available && args.count != 0) {
      throw CheckFailure(fmt::format("probe said unavailable but device_count answered {}; it must be 0", args.count));
    }
    report.device_count = report.available ? args.count : 0;
    return fmt::format("{} device(s)", args.count);
  });
}

void run_checks(Context& context, const std::filesystem::path& file) {
  check_negotiation(context, file);
  create_backend(context);
  if (context.backend != nullptr) {
    check_backend_lifecycle(context);
    check_probe(context);
    check_devices(context);  // fills context.devices
    check_memory(context);
    check_copies(context);
    check_async(context);
    check_threads(context);
    check_optional(context);
    check_timing(context);
    check_device_errors(context);
  }
  check_argument_errors(context);
  check_error_objects(context);
  if (context.backend != nullptr) context.client().backend_destroy();
  context.backend = nullptr;
}

// Loads, creates and probes the plugin in the probe helper first. False when
// the plugin crashed, exited or hung there: it must not be loaded here.
bool survives_isolated_probe(const std::filesystem::path& plugin_file, const Options& options, Report& report) {
  const std::string check = "isolation: loads, creates and probes in a separate process";
  if (options.on_start) options.on_start(check);
  CheckResult result{check, Outcome::kPass, ""};
  const std::filesystem::path helper = isolation::helper_path();
  if (helper.empty()) {
    result = {check, Outcome::kNotApplicable, "no backplane-probe helper is installed next to the core library"};
  } else {
    const std::uint32_t timeout_ms = probe_timeout_ms(Environment::process().get("BACKPLANE_PROBE_TIMEOUT_MS"));
    auto verdict = isolation::probe_in_child(helper, plugin_file, "", "", options.plugin_options, timeout_ms);
    if (!verdict.started) {
      result = {check, Outcome::kNotApplicable, verdict.reason};
    } else if (!verdict.answered) {
      result = {check, Outcome::kFail, verdict.reason};
    } else {
      result.detail =
          fmt::format("{}{}{}", to_string(verdict.status), verdict.reason.empty() ? "" : ": ", verdict.reason);
    }
  }
  report.checks.push_back(result);
  if (options.on_check) options.on_check(report.checks.back());
  return result.outcome != Outcome::kFail;
}

}  // namespace

Report run(const std::filesystem::path& plugin_file, const Options& options) {
  Report report;
  report.plugin_file = plugin_file;
  if (options.isolate && !survives_isolated_probe(plugin_file, options, report)) return report;
  // Loaded like the core's loader (permission checks, negotiation, table
  // validation), but any file name is accepted: the name rule is a check.
  const std::string load_check = "negotiation: loads and answers the core's offer with a valid table";
  if (options.on_start) options.on_start(load_check);  // loading runs the plugin's static initialisers
  OpenedPlugin opened = open_plugin(plugin_file, "");
  if (opened.status != BackendStatus::kAvailable || !opened.library) {
    report.abi_version = opened.abi_version;
    report.checks.push_back(
        {load_check, Outcome::kFail, fmt::format("{}: {}", to_string(opened.status), opened.reason)});
    if (options.on_check) options.on_check(report.checks.back());
    return report;
  }
  // A device the suite used may have driver threads or atexit handlers that
  // reference the plugin's code: never unload it before exit.
  opened.library->keep_loaded();
  const BP_PluginApi& api = opened.library->api();
  report.loaded = true;
  report.backend_name = std::string(opened.library->name());
  report.plugin_version = opened.library->version();
  report.abi_version = opened.abi_version;

  Context context(api, options, report);
  context.record({load_check, Outcome::kPass, fmt::format("backend '{}'", report.backend_name)});
  run_checks(context, plugin_file);
  return report;
}

}  // namespace backplane::conformance
