// A PJRT plugin library as the adapter uses it: opened once per process with
// dlopen (RTLD_LOCAL) and never closed, its GetPjrtApi table checked (NULL,
// version, length, every call the adapter makes), Plugin_Initialize called
// once, Plugin_Attributes read; and PJRT errors turned into text and the
// ABI's codes.
//
// Versions: the adapter is built against the pjrt_c_api.h it was given
// (PJRT_API_MINOR of that header, 0.81 from xla-cpu-pjrt 0.0.1). A library of
// another 0.x minor is accepted from kMinimumMinor up: a newer one has a
// longer table (struct_size covers more), which is fine; argument structs
// are passed at the header's sizes, which PJRT accepts from older callers.
// Every call the adapter makes is listed in pjrt_library.cpp with the minor
// it arrived in; a library whose minor is older, whose table ends before the
// call, or whose pointer is NULL is refused at open, naming the call.
#ifndef BACKPLANE_PLUGINS_PJRT_PJRT_LIBRARY_HPP
#define BACKPLANE_PLUGINS_PJRT_PJRT_LIBRARY_HPP

#include <backplane/plugin_sdk.hpp>

#include <pjrt_c_api.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::pjrt {

namespace sdk = backplane::plugin_sdk;

// 0.69 implemented PJRT_Client_CreateUninitializedBuffer, which every
// allocation uses; the other calls arrived earlier (0.56 CopyRawToHost, 0.60
// the async host-to-device transfer manager, 0.57 the PJRT_Api layout read
// here).
inline constexpr int kMinimumMinor = 69;

using TextPairs = std::vector<std::pair<std::string, std::string>>;

// What a PJRT_Error said, once read and destroyed.
struct PjrtFailure {
  PJRT_Error_Code code = PJRT_Error_Code_UNKNOWN;
  std::string message;
};

// "FAILED_PRECONDITION"; "code 42" for a code the header does not name.
std::string code_name(PJRT_Error_Code code);
// The ABI code for a PJRT code (RESOURCE_EXHAUSTED -> OUT_OF_MEMORY, ...).
BP_ErrorCode abi_code(PJRT_Error_Code code);
// A named value as text: strings as they are, integers in decimal, lists
// comma-separated, floats shortest, booleans true/false.
std::string value_text(const PJRT_NamedValue& value);
TextPairs named_values_text(const PJRT_NamedValue* values, std::size_t count);

// How messages name the library at `path`: the core hands the adapter a
// /proc/self/fd/N of the file it judged (held open, so that the file loaded
// is that one), which names the file the descriptor leads to; any other
// path is itself.
std::string library_name(const std::string& path);

class Library {
 public:
  // The library at `path`, opened, checked and initialised (messages and
  // path() name it as library_name does); the same object
  // for every backend of this process that opens the same file. Throws
  // sdk::Failure whose message says what is wrong (no such file, not a PJRT
  // plugin, NULL table, future major, too old, short table, a call missing,
  // Plugin_Initialize failed). Never aborts; a library whose own code hangs or
  // crashes is the probe process's to catch (BP_CAPABILITY_PROBE_IN_CHILD).
  static const Library& open(const std::string& path);

  const PJRT_Api& api() const { return *api_; }
  const std::string& path() const { return path_; }
  int minor() const { return api_->pjrt_api_version.minor_version; }
  // "0.81"
  std::string version() const;
  // Plugin_Attributes, as text, in the library's order.
  const TextPairs& attributes() const { return attributes_; }
  // The attributes that tell this plugin apart from other XLA plugins: all
  // but xla_version and the stablehlo_* ones every XLA plugin reports
  // ("cuda_version 12090"); empty when there are none.
  std::string identifying_attributes() const;

  // Reads and destroys `error`; nullopt for NULL (success).
  std::optional<PjrtFailure> take(PJRT_Error* error) const;
  // Throws sdk::Failure(abi_code, "<what()>: <message> (<CODE>)") for an
  // error; returns for NULL. `what` runs only on failure.
  template <class What>
  void check(PJRT_Error* error, What&& what) const {
    if (error != nullptr) [[unlikely]]
      fail(error, what());
  }
  [[noreturn]] void fail(PJRT_Error* error, const std::string& what) const;

  Library(std::string path, const PJRT_Api* api) : path_(std::move(path)), api_(api) {}

 private:
  void initialise();

  std::string path_;
  const PJRT_Api* api_;
  TextPairs attributes_;
};

}  // namespace backplane::pjrt

#endif  // BACKPLANE_PLUGINS_PJRT_PJRT_LIBRARY_HPP
