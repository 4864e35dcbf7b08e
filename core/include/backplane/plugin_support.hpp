// Header-only helpers for backend plugins written in C++.
//
// Optional: a plugin needs only plugin.h. These helpers make the ABI rules
// easy to keep: errors are heap objects with their own destroy function, and
// every exported body runs inside `guarded`, so no exception crosses the ABI.
// They belong to the plugin SDK's namespace, backplane::plugin_sdk; the
// older name backplane::plugin is an alias kept for plugins written against
// it (deprecated, see docs/plugin-authors.md).
#ifndef BACKPLANE_PLUGIN_SUPPORT_HPP
#define BACKPLANE_PLUGIN_SUPPORT_HPP

#include <backplane/plugin.h>

#include <cstddef>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace backplane::plugin_sdk {

// The most bytes of text the core takes from a plugin in one probe reason or
// error message: it refuses a longer reason (the plugin is failed) and cuts a
// longer message. The SDK hands out nothing longer (fitted_text).
inline constexpr std::size_t kMaxTextSize = 64 * 1024;

// `text` whole when it fits kMaxTextSize; else its beginning, cut where no
// UTF-8 character is split, followed by a note that says it was cut and how
// long it was. Messages from a library the plugin wraps (a PJRT plugin's, a
// driver's) can be megabytes long, and their beginning says what failed.
inline std::string fitted_text(std::string text) {
  if (text.size() <= kMaxTextSize) return text;
  const std::string note = " [cut: " + std::to_string(text.size()) + " bytes, more than the " +
                           std::to_string(kMaxTextSize) + " a plugin may answer; this is the beginning]";
  std::size_t keep = kMaxTextSize - note.size();
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  text.resize(keep);
  text += note;
  return text;
}

namespace detail {

struct OwnedError {
  BP_Error error;  // first member: a BP_Error* is an OwnedError*
  std::string text;
};

inline void destroy_owned_error(BP_Error* error) { delete reinterpret_cast<OwnedError*>(error); }

inline void destroy_static_error(BP_Error*) {}

// Returned when allocating an error itself fails, so reporting OOM never throws.
inline BP_Error* out_of_memory_error() {
  static constexpr char kText[] = "out of host memory";
  static BP_Error error{sizeof(BP_Error), BP_ERROR_OUT_OF_MEMORY, kText, sizeof(kText) - 1, &destroy_static_error};
  return &error;
}

}  // namespace detail

// A new error the caller of the ABI function owns, its message cut to
// kMaxTextSize (fitted_text). Never throws.
inline BP_Error* make_error(BP_ErrorCode code, std::string_view message) noexcept {
  auto* owned = new (std::nothrow) detail::OwnedError{};
  if (owned == nullptr) return detail::out_of_memory_error();
  try {
    owned->text = fitted_text(std::string(message));
  } catch (...) {  // only std::bad_alloc can come from assign
    delete owned;
    return detail::out_of_memory_error();
  }
  owned->error = BP_Error{sizeof(BP_Error), code, owned->text.data(), owned->text.size(), &detail::destroy_owned_error};
  return &owned->error;
}

// An exception a backend may throw internally to return a specific code.
class Failure : public std::runtime_error {
 public:
  Failure(BP_ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  BP_ErrorCode code() const noexcept { return code_; }

 private:
  BP_ErrorCode code_;
};

// Runs `body` (returning BP_Error*) and turns any exception into an error.
template <class Body>
BP_Error* guarded(Body&& body) noexcept {
  try {
    return std::forward<Body>(body)();
  } catch (const Failure& failure) {
    return make_error(failure.code(), failure.what());
  } catch (const std::bad_alloc&) {
    return make_error(BP_ERROR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& error) {
    return make_error(BP_ERROR_INTERNAL, error.what());
  } catch (...) {
    return make_error(BP_ERROR_INTERNAL, "unknown exception inside the plugin");
  }
}

namespace detail {

[[noreturn, gnu::cold, gnu::noinline]] inline void throw_bad_args(const char* call, bool null, std::size_t got,
                                                                  std::size_t want) {
  if (null) throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": args is NULL");
  throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": args.struct_size " + std::to_string(got) +
                                               " is smaller than " + std::to_string(want));
}

}  // namespace detail

// The smallest struct_size a caller may pass for Args by default: the whole
// struct, except where a later minor appended an optional field that an
// older caller leaves out (BP_ProbeArgs.priority, ABI 1.2: write it only when
// BP_STRUCT_HAS_FIELD says the caller's struct has it).
template <class Args>
constexpr std::size_t minimum_args_size() {
  if constexpr (std::is_same_v<Args, BP_ProbeArgs>) {
    return BP_PROBE_ARGS_SIZE_1_0;
  } else if constexpr (std::is_same_v<Args, BP_DeviceInfoArgs>) {  // 1.4 appended `memories`
    return BP_DEVICE_INFO_ARGS_SIZE_1_0;
  } else if constexpr (std::is_same_v<Args, BP_CopyToDeviceArgs>) {  // 1.3 appended `timed`
    return BP_COPY_TO_DEVICE_ARGS_SIZE_1_0;
  } else if constexpr (std::is_same_v<Args, BP_CopyToHostArgs>) {
    return BP_COPY_TO_HOST_ARGS_SIZE_1_0;
  } else if constexpr (std::is_same_v<Args, BP_CopyDeviceToDeviceArgs>) {
    return BP_COPY_DEVICE_TO_DEVICE_ARGS_SIZE_1_0;
  } else if constexpr (std::is_same_v<Args, BP_ConvertIntegersArgs>) {
    return BP_CONVERT_INTEGERS_ARGS_SIZE_1_0;
  } else {
    return sizeof(Args);
  }
}

// Checks the args pointer and that the caller's struct holds every field the
// plugin reads: all of the version it was built against, or at least
// `minimum` bytes for a struct that grew in a later minor (the plugin then
// checks BP_STRUCT_HAS_FIELD before touching the newer fields). The failure
// path is out of line: this runs on every call.
template <class Args>
inline void require_args(const Args* args, const char* call, std::size_t minimum = minimum_args_size<Args>()) {
  if (args == nullptr || args->struct_size < minimum) [[unlikely]] {
    detail::throw_bad_args(call, args == nullptr, args == nullptr ? 0 : args->struct_size, minimum);
  }
}

}  // namespace backplane::plugin_sdk

namespace backplane {
// Deprecated: the name these helpers had before the SDK had one namespace.
namespace plugin = plugin_sdk;
}  // namespace backplane

#endif  // BACKPLANE_PLUGIN_SUPPORT_HPP
