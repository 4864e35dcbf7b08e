// What every conformance check shares: the plugin's table and backend, the
// recorder, and helpers that call the plugin and turn what it returned into
// pass/fail.
//
// Error model inside the suite: a check body throws CheckFailure (the plugin
// misbehaved) or NotApplicable; Context::check catches both and records the
// verdict. No exception ever reaches the plugin: they are thrown only after a
// plugin call has returned.
#pragma once

#include "abi/plugin_client.hpp"

#include <backplane/plugin.h>
#include <backplane/conformance.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::conformance {

class CheckFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class NotApplicable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Checks read `plugin_code`: the code exactly as the plugin returned it.
using detail::PluginError;
using detail::PluginStatus;

// "BP_ERROR_OUT_OF_RANGE", or "code 42" for a code the ABI does not define.
std::string error_code_name(BP_ErrorCode code);

struct DeviceFacts {
  std::string name;
  std::uint64_t memory_total = 0;
  std::uint64_t memory_free = 0;  // as answered: BP_MEMORY_FREE_UNKNOWN when unknown
};

class Context;

// A plugin buffer freed when the owner goes out of scope (errors ignored, so a
// failing check is not masked by a second failure while unwinding).
class Buffer {
 public:
  Buffer() = default;
  Buffer(Context* context, BP_Buffer* handle, void* address, std::uint64_t size, int ordinal)
      : context_(context), handle_(handle), address_(address), size_(size), ordinal_(ordinal) {}
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  BP_Buffer* get() const noexcept { return handle_; }
  void* address() const noexcept { return address_; }
  std::uint64_t size() const noexcept { return size_; }
  int ordinal() const noexcept { return ordinal_; }
  // Frees now and requires success.
  void free_checked();
  void reset() noexcept;

 private:
  Context* context_ = nullptr;
  BP_Buffer* handle_ = nullptr;
  void* address_ = nullptr;
  std::uint64_t size_ = 0;
  int ordinal_ = 0;
};

// Every error a plugin returns passes through inspect(), so the final check
// sees the shape of all of them, whichever call returned it.
class Context final : private detail::ErrorInspector {
 public:
  Context(const BP_PluginApi& api, const Options& options, Report& report);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const BP_PluginApi& api;
  const Options& options;
  Report& report;
  BP_Backend* backend = nullptr;  // set once backend_create succeeded
  // What the probe stated for this backend (ABI 1.4: BP_ProbeArgs
  // capabilities), once probed; has_capability reads the table's until then.
  std::optional<BP_Capabilities> stated_capabilities;
  std::vector<DeviceFacts> devices;  // filled by the devices check; empty when it failed
  bool devices_failed = false;       // device_info failed: `devices` is not the real count
  // What device_count answered, when within bounds: the ordinals that exist
  // even where device_info failed or probe said unavailable.
  std::optional<int> counted_devices;
  std::mt19937_64 random;

  // Runs `body` and records its verdict under `name`: pass (with the detail
  // body returns), FAIL (CheckFailure or any other exception) or n/a.
  void check(const std::string& name, const std::function<std::string()>& body);
  void not_applicable(const std::string& name, const std::string& reason);
  void record(CheckResult result);

  // The calls to `backend`, each error noted for the final "errors are
  // well-formed" check. Safe from several threads.
  detail::PluginClient client() { return detail::PluginClient(api, backend, this); }
  // For a client of another backend instance, or backend_create.
  detail::ErrorInspector& inspector() { return *this; }
  // Copies and destroys the error a raw call returned, noting it as above.
  std::optional<PluginError> take(BP_Error* error) { return detail::take_error(error, this); }
  // Throws CheckFailure("<what> failed: CODE: message") when the call failed.
  void require_ok(const PluginStatus& status, std::string_view what);
  void require_ok(BP_Error* error, std::string_view what) { require_ok(PluginStatus(error, this), what); }
  // Throws CheckFailure when the call succeeded, or failed with a code not in
  // `allowed` (empty: any code).
  PluginError require_error(PluginStatus status, std::string_view what, std::span<const BP_ErrorCode> allowed = {});
  PluginError require_error(BP_Error* error, std::string_view what, std::span<const BP_ErrorCode> allowed = {}) {
    return require_error(PluginStatus(error, this), what, allowed);
  }
  PluginError require_error(PluginStatus status, std::string_view what, std::initializer_list<BP_ErrorCode> allowed) {
    return require_error(std::move(status), what, std::span<const BP_ErrorCode>(allowed.begin(), allowed.size()));
  }
  PluginError require_error(BP_Error* error, std::string_view what, std::initializer_list<BP_ErrorCode> allowed) {
    return require_error(error, what, std::span<const BP_ErrorCode>(allowed.begin(), allowed.size()));
  }
  // The shape problems found so far, and how many errors were inspected.
  std::vector<std::string> malformed_errors() const;
  std::size_t errors_seen() const;

  // The backend's capability: as its probe stated it (ABI 1.4) once probed,
  // else the table's; BP_CAPABILITY_PROBE_IN_CHILD is the table's alone.
  bool has_capability(BP_Capabilities bit) const noexcept {
    const BP_Capabilities table_only = api.capabilities & BP_CAPABILITY_PROBE_IN_CHILD;
    return ((stated_capabilities ? *stated_capabilities | table_only : api.capabilities) & bit) != 0;
  }
  int device_count() const noexcept { return static_cast<int>(devices.size()); }
  // Throws NotApplicable unless the backend is available with a device.
  void require_devices() const;
  // "cpu:0"
  std::string label(int ordinal) const;

  // Plugin calls that must succeed (CheckFailure otherwise).
  Buffer allocate(int ordinal, std::uint64_t size, BP_MemoryKind kind = BP_MEMORY_DEVICE);
  void write(const Buffer& buffer, std::uint64_t offset, const void* data, std::uint64_t size);
  std::vector<std::uint8_t> read(const Buffer& buffer, std::uint64_t offset, std::uint64_t size);
  void copy(const Buffer& source, std::uint64_t source_offset, const Buffer& destination,
            std::uint64_t destination_offset, std::uint64_t size);
  // Waits (requiring success) and destroys the event.
  void finish(BP_Event* event, std::string_view what);

  std::vector<std::uint8_t> random_bytes(std::size_t size);
  std::vector<std::uint8_t> random_bytes(std::size_t size, std::mt19937_64& generator);

 private:
  void inspect(const BP_Error& error) override;

  mutable std::mutex errors_mutex_;
  std::vector<std::string> malformed_;
  std::size_t errors_seen_ = 0;
};

// Throws CheckFailure naming the first differing byte when the two differ.
void require_equal_bytes(const std::vector<std::uint8_t>& actual, const std::vector<std::uint8_t>& expected,
                         std::string_view what);

}  // namespace backplane::conformance
