// backplane C++ API: discover backends, list devices, pick the default device.
//
// Thread-safety: a Runtime may be used from any number of threads at once.
// Discovery runs lazily, once, on first use.
//
// Error model: discovery and availability are values (BackendInfo::status);
// operations that cannot do what was asked throw backplane::Error.
#ifndef BACKPLANE_BACKPLANE_HPP
#define BACKPLANE_BACKPLANE_HPP

#include <backplane/api.h>

#include <backplane/error.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane {

#define BACKPLANE_VERSION_MAJOR 0
#define BACKPLANE_VERSION_MINOR 1
#define BACKPLANE_VERSION_PATCH 0

// The version of the library actually loaded, e.g. "0.1.0".
BACKPLANE_API std::string_view version() noexcept;

// Exactly one per plugin found; see docs/plugin-abi.md for each meaning.
enum class BackendStatus {
  kAvailable,     // loaded, probe said yes
  kUnavailable,   // loaded, probe said no (reason from the plugin)
  kIncompatible,  // speaks an ABI major this core does not
  kFailed,        // could not be loaded or broke the ABI contract
  kDisabled,      // switched off by BACKPLANE_BACKENDS or the config file
  kShadowed,      // a plugin of the same name was found earlier
};
BACKPLANE_API std::string_view to_string(BackendStatus status) noexcept;

// Where discovery first runs a plugin's code (docs/configuration.md).
enum class ProbeIsolation {
  kNone,     // in the calling process
  kProcess,  // first in a short-lived child process: a plugin that crashes,
             // exits or hangs there is `failed` and never loaded by the caller
};
BACKPLANE_API std::string_view to_string(ProbeIsolation isolation) noexcept;

// Where a plugin search path entry (or a PJRT library) came from, in search
// order. kPackage: an installed Python package (docs/configuration.md).
enum class SearchOrigin { kCode, kEnvironment, kConfig, kInstallDir, kCoreDir, kPackage };
BACKPLANE_API std::string_view to_string(SearchOrigin origin) noexcept;

struct BACKPLANE_API SearchPathEntry {
  std::filesystem::path path;
  SearchOrigin origin;
  // Which package put it there ("mydist 1.0 (entry point
  // backplane.plugins:mine)"); empty for the other origins.
  std::string origin_detail;
};

// A plugin path or a PJRT library given in code (Runtime::Options::sources),
// or found by the core (the config's [pjrt.NAME] tables,
// PJRT_NAMES_AND_LIBRARY_PATHS, installed Python packages).
struct BACKPLANE_API PluginSource {
  enum class Kind {
    kPluginPath,   // a backplane plugin file or directory, searched like plugin_paths
    kPjrtLibrary,  // a PJRT plugin library: the backend pjrt_<name> of the pjrt adapter
  };
  Kind kind = Kind::kPjrtLibrary;
  // A PJRT library's name: the backend is pjrt_<name>, <name> lowercased with
  // every character outside [a-z0-9_] made '_'. For a plugin path: the name
  // it is listed under when `problem` is set.
  std::string name;
  std::filesystem::path path;
  // kPackage ones are searched after the config's plugin_paths, the others
  // before BACKPLANE_PLUGIN_PATH (plugin paths), or first (PJRT libraries).
  SearchOrigin origin = SearchOrigin::kCode;
  std::string origin_detail;  // shown as BackendInfo::origin_detail
  // Non-empty: a broken source, listed `failed` with this reason.
  std::string problem;
  // PJRT create options (PJRT_NamedValue), each value "<type>:<value>" with
  // type int64, bool, float, string or int64_list (comma-separated):
  // {"cpu_device_count", "int64:2"}, {"preallocate", "bool:false"}.
  std::vector<std::pair<std::string, std::string>> create_options;
};

struct BACKPLANE_API BackendInfo {
  std::string name;
  BackendStatus status;
  std::string reason;  // why this status, in words a user can act on
  std::filesystem::path plugin_path;
  SearchOrigin origin;
  std::string abi_version;     // "1.1"; empty when the table could not be read
  std::string plugin_version;  // the plugin's own version string
  // Higher wins the default device: the config's [backend.NAME] priority,
  // else what the probe reported (plugin ABI 1.2), else the table's.
  int priority = 0;
  std::uint64_t capabilities = 0;
  // The DLPack device type of the backend's memory (DLDeviceType: 1 kDLCPU,
  // 2 kDLCUDA, ...) as the plugin declares it (ABI 1.2) or, once probed, as
  // its probe stated it (ABI 1.4); 0 when it declares none. `capabilities`
  // likewise.
  std::int32_t dlpack_device_type = 0;
  // Where it came from in words: "config /etc/x.toml:12:1 [pjrt.cpu]",
  // "PJRT_NAMES_AND_LIBRARY_PATHS", "xla_cpu_pjrt 0.0.1 (entry point
  // xla_plugins:xla_cpu_pjrt)"; empty for a plugin of the search path that
  // no package put there.
  std::string origin_detail;
  // The PJRT library a pjrt_<name> backend drives; empty otherwise.
  std::filesystem::path library;
};

enum class DeviceKind { kCpu, kGpu, kAccelerator };
BACKPLANE_API std::string_view to_string(DeviceKind kind) noexcept;

struct BACKPLANE_API DeviceInfo {
  std::string backend;
  int ordinal = 0;
  std::string name;
  DeviceKind kind = DeviceKind::kCpu;
  std::uint64_t memory_total = 0;
  // Bytes a new allocation can get, when the backend can tell (see MemoryStats).
  std::optional<std::uint64_t> memory_free;
  std::vector<std::pair<std::string, std::string>> attributes;
  // The device's memory kinds, the default first: "host" (ordinary host
  // memory), "device", "pinned_host", "unpinned_host". As the plugin states
  // them (ABI 1.4), else derived from its capabilities (host-addressable:
  // "host"; otherwise "device", plus "pinned_host" with pinned host memory).
  std::vector<std::string> memory_kinds;

  std::string selector() const { return backend + ":" + std::to_string(ordinal); }
};

// A device picked by selector: backend name plus ordinal ("cuda:1").
struct BACKPLANE_API Device {
  std::string backend;
  int ordinal = 0;

  std::string selector() const { return backend + ":" + std::to_string(ordinal); }
  friend bool operator==(const Device&, const Device&) = default;
};

// Which precedence level decided the default device, highest first.
enum class DeviceSource {
  kScopedOverride,  // a DefaultDeviceScope on the current thread
  kProcessSetting,  // Runtime::set_default_device
  kEnvironment,     // BACKPLANE_DEFAULT_DEVICE
  kConfigFile,      // default_device in the config file
  kAutomatic,       // device 0 of the highest-priority available backend
  // Level 5 in a data-parallel job: the highest-priority available backend's
  // device local_rank % device_count, local_rank read from LOCAL_RANK,
  // OMPI_COMM_WORLD_LOCAL_RANK or SLURM_LOCALID (the first one set).
  kLocalRank,
};
BACKPLANE_API std::string_view to_string(DeviceSource source) noexcept;

struct BACKPLANE_API DefaultDevice {
  Device device;
  DeviceSource source;
  // For the automatic choice: why higher-priority backends were passed over
  // ("cuda (unavailable: no NVIDIA driver)"); empty otherwise.
  std::string fallback_note;
  // The source in words: to_string(source), except for kLocalRank, where it
  // names the variable and its value ("LOCAL_RANK=1").
  std::string description;
};

// The configuration file the runtime used (see docs/configuration.md).
struct BACKPLANE_API ConfigSummary {
  std::optional<std::filesystem::path> path;    // empty when none was found
  std::vector<std::filesystem::path> searched;  // where it looked, in order
  std::vector<std::string> warnings;            // e.g. unknown top-level keys
};

namespace detail {
struct RuntimeAccess;
}  // namespace detail

class BACKPLANE_API Runtime {
 public:
  struct Options {
    // Searched first, before BACKPLANE_PLUGIN_PATH: files or directories.
    std::vector<std::filesystem::path> plugin_paths;
    // Ignore every BACKPLANE_* variable (embedders, tests).
    bool ignore_environment = false;
    // When set, environment variables are read from this map instead of the
    // process environment (tests, embedders with their own settings).
    std::optional<std::map<std::string, std::string>> environment;
    // Skip the install directory and the directory next to the core library.
    bool skip_default_paths = false;
    // Plugin options per backend; they win over the config file's
    // [backend.NAME] keys of the same name.
    std::map<std::string, std::vector<std::pair<std::string, std::string>>> backend_options;
    // Use this config file instead of searching for one (it must exist).
    // With ignore_environment and no config_file, no config file is read.
    std::optional<std::filesystem::path> config_file;
    // Where plugins are first probed; when set, wins over
    // BACKPLANE_PROBE_ISOLATION and the config file's `probe_isolation`.
    std::optional<ProbeIsolation> probe_isolation;
    // Plugin paths and PJRT libraries, each listed with its origin. PJRT
    // libraries given here come before the config's, the environment's and
    // the packages'.
    std::vector<PluginSource> sources;
    // Site directories (a Python interpreter's sys.path) whose installed
    // packages are scanned, without running their code, for PJRT plugins
    // (entry points jax_plugins and xla_plugins, namespace packages under
    // jax_plugins/) and backplane plugins (entry point backplane.plugins).
    std::vector<std::filesystem::path> python_paths;
  };

  // The process-wide runtime, created on first use; lives until exit.
  static Runtime& process_default();
  // The site directories the process-wide runtime scans for installed Python
  // packages (Options::python_paths); none unless set. Only before it is
  // first made: afterwards throws Error(kInvalidArgument) saying its
  // discovery already ran (or may be running).
  static void set_process_default_python_paths(std::vector<std::filesystem::path> paths);

  Runtime();
  explicit Runtime(Options options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The plugin search path, in order, after deduplication.
  std::vector<SearchPathEntry> search_path() const;
  // Every plugin found, in search order, each with its status.
  const std::vector<BackendInfo>& backends() const;
  // The first (winning) entry with this backend name, or nullptr.
  const BackendInfo* find_backend(std::string_view name) const;
  bool is_available(std::string_view name) const;

  // Devices of one available backend; throws Error(kUnavailable/kNotFound)
  // naming the backend's status and reason otherwise.
  std::vector<DeviceInfo> devices(std::string_view backend) const;
  // Devices of every available backend, highest priority first.
  std::vector<DeviceInfo> devices() const;

  // The config file in use. Throws Error(kConfig/kNotFound) when it is
  // malformed or BACKPLANE_CONFIG names a missing file (as do all calls that
  // need discovery).
  ConfigSummary config() const;

  // Resolves "cpu", "cpu:0", "cuda:1". Throws Error naming the problem and
  // the backends that exist: kInvalidArgument (syntax), kNotFound (no such
  // backend), kUnavailable (with the backend's reason), kOutOfRange (ordinal).
  Device resolve(std::string_view selector) const;

  // The default device and the precedence level that decided it. A device
  // the user named (scope, code, environment, config) that cannot be used is
  // an error carrying the reason, never a silent move to another device.
  DefaultDevice default_device() const;

  // The process-wide setting (level 2). Validated at once; nullopt clears it.
  void set_default_device(std::optional<std::string_view> selector);

  // The current thread's scoped override, to re-enter on another thread.
  std::optional<Device> current_scoped_device() const;

 private:
  struct Impl;
  friend struct detail::RuntimeAccess;
  std::unique_ptr<Impl> impl_;
};

// Makes `device` the default on the current thread until destroyed. Nestable;
// restored on unwind; other threads are unaffected. Not movable: it must be
// destroyed on the thread that created it, in reverse order of creation.
//
// A scope destroyed while a later scope of the same runtime is still open on
// this thread (a misuse a destructor cannot throw for) logs an error naming
// both scopes and removes only its own entry: the inner scope keeps deciding
// the default until it is destroyed, so code never runs on a device that no
// open scope chose.
class BACKPLANE_API DefaultDeviceScope {
 public:
  // Resolves the selector first (throws as Runtime::resolve).
  DefaultDeviceScope(const Runtime& runtime, std::string_view selector);
  DefaultDeviceScope(const Runtime& runtime, Device device);
  // Re-enters a choice captured on another thread with
  // Runtime::current_scoped_device(); nullopt enters nothing.
  DefaultDeviceScope(const Runtime& runtime, std::optional<Device> captured);
  ~DefaultDeviceScope();
  DefaultDeviceScope(const DefaultDeviceScope&) = delete;
  DefaultDeviceScope& operator=(const DefaultDeviceScope&) = delete;

  // Unique in the process (the C API hands the same tokens out); 0 when a
  // nullopt capture entered nothing.
  std::uint64_t token() const noexcept { return token_; }

 private:
  std::uint64_t runtime_id_ = 0;
  std::uint64_t token_ = 0;
};

}  // namespace backplane

#endif  // BACKPLANE_BACKPLANE_HPP
