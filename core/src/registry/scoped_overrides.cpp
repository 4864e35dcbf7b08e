// Default-device scopes (precedence level 1): a thread-local stack whose
// exits are checked, so that exiting scopes out of order never leaves code
// running on a device the caller did not choose.
#include "registry/scoped_overrides.hpp"

#include "registry/runtime_impl.hpp"
#include "util/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <vector>

namespace backplane {
using detail::LogLevel;
namespace {

// Innermost last. Each entry is tagged with its runtime's id (not its
// address, which a later runtime may reuse) so that independent runtimes
// never see each other's scopes, and with a token naming the entry itself.
struct ScopedOverride {
  std::uint64_t runtime_id;
  std::uint64_t token;
  Device device;
};
thread_local std::vector<ScopedOverride> scoped_overrides;

std::vector<ScopedOverride>::iterator find_token(std::uint64_t token) {
  return std::find_if(scoped_overrides.begin(), scoped_overrides.end(),
                      [&](const ScopedOverride& entry) { return entry.token == token; });
}

// The innermost scope of `runtime_id` opened after `entry`, or end().
std::vector<ScopedOverride>::iterator inner_scope(std::vector<ScopedOverride>::iterator entry) {
  for (auto later = scoped_overrides.end(); later != entry + 1;) {
    --later;
    if (later->runtime_id == entry->runtime_id) return later;
  }
  return scoped_overrides.end();
}

std::string out_of_order(const ScopedOverride& exited, const ScopedOverride& inner) {
  return fmt::format(
      "default-device scope {} (token {}) exited while scope {} (token {}), entered later, is still "
      "open; exit scopes innermost first",
      exited.device.selector(), exited.token, inner.device.selector(), inner.token);
}

}  // namespace

namespace detail {

std::uint64_t enter_scope(std::uint64_t runtime_id, Device device) {
  static std::atomic<std::uint64_t> last_token{0};
  const std::uint64_t token = ++last_token;
  scoped_overrides.push_back({runtime_id, token, std::move(device)});
  return token;
}

void check_scope_exit(std::uint64_t runtime_id, std::uint64_t token, std::string_view function) {
  auto entry = find_token(token);
  if (entry == scoped_overrides.end()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: no default-device scope with token {} is open on this thread (already exited, "
                            "entered on another thread, or never handed out)",
                            function, token));
  }
  if (entry->runtime_id != runtime_id) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: default-device scope {} (token {}) belongs to another runtime", function,
                            entry->device.selector(), token));
  }
  if (auto inner = inner_scope(entry); inner != scoped_overrides.end()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}", function, out_of_order(*entry, *inner)));
  }
}

bool remove_scope(std::uint64_t token) noexcept {
  auto entry = find_token(token);
  if (entry == scoped_overrides.end()) return false;
  scoped_overrides.erase(entry);
  return true;
}

}  // namespace detail

std::optional<Device> Runtime::current_scoped_device() const {
  for (auto entry = scoped_overrides.rbegin(); entry != scoped_overrides.rend(); ++entry) {
    if (entry->runtime_id == impl_->registry->id) return entry->device;
  }
  return std::nullopt;
}

DefaultDeviceScope::DefaultDeviceScope(const Runtime& runtime, std::string_view selector)
    : DefaultDeviceScope(runtime, runtime.resolve(selector)) {}

DefaultDeviceScope::DefaultDeviceScope(const Runtime& runtime, Device device)
    : runtime_id_(detail::RuntimeAccess::registry(runtime).id),
      token_(detail::enter_scope(runtime_id_, std::move(device))) {}

DefaultDeviceScope::DefaultDeviceScope(const Runtime& runtime, std::optional<Device> captured)
    : runtime_id_(detail::RuntimeAccess::registry(runtime).id) {
  if (captured) token_ = detail::enter_scope(runtime_id_, std::move(*captured));
}

// A destructor cannot report misuse by throwing, and popping the innermost
// entry would put the wrong scope's device in charge; so it logs and removes
// exactly its own entry.
DefaultDeviceScope::~DefaultDeviceScope() {
  if (token_ == 0) return;
  try {
    detail::check_scope_exit(runtime_id_, token_, "DefaultDeviceScope");
  } catch (const std::exception& error) {
    try {
      log(LogLevel::kError, "{}; removed only the exited scope, the inner one stays in effect", error.what());
    } catch (...) {  // out of memory while logging: the removal below matters more
    }
  }
  detail::remove_scope(token_);
}

}  // namespace backplane
