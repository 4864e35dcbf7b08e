// Opening one plugin file: permission checks, dlopen through Boost.DLL, the
// entry-point negotiation and table validation.
//
// Every failure is a value (a status with a reason), never an exception: the
// loader's exceptions are caught here, at the boundary, and keep dlerror's text.
#pragma once

#include <backplane/plugin.h>
#include <backplane/backplane.hpp>

#include <boost/dll/shared_library.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::detail {

// The options a plugin's backend_create receives: key = value pairs, in order.
using PluginOptions = std::vector<std::pair<std::string, std::string>>;

// A loaded plugin file and its validated table. The table lives as long as
// the library, which stays loaded as long as this object (see keep_loaded).
class PluginLibrary {
 public:
  PluginLibrary(boost::dll::shared_library library, const BP_PluginApi* api)
      : library_(std::move(library)), api_(api) {}
  ~PluginLibrary();

  const BP_PluginApi& api() const { return *api_; }
  std::string_view name() const { return {api_->name, api_->name_size}; }
  std::string version() const;
  // The DLPack device type the table declares (ABI 1.2); 0 when it declares
  // none or the table is older than 1.2.
  std::int32_t dlpack_device_type() const {
    return BP_STRUCT_HAS_FIELD(api_, BP_PluginApi, dlpack_device_type) ? api_->dlpack_device_type : 0;
  }

  // Once a device was used, unloading could pull code from under driver
  // threads or atexit handlers: the library then stays mapped until exit.
  void keep_loaded() { keep_loaded_ = true; }

 private:
  boost::dll::shared_library library_;
  const BP_PluginApi* api_;
  bool keep_loaded_ = false;
};

struct OpenedPlugin {
  std::shared_ptr<PluginLibrary> library;  // set only when status is kAvailable
  // A library that was loaded and then refused (no entry symbol, a table
  // that fails validation): dropping the last copy unloads it, so a caller
  // that loads plugins on several threads can choose when (see discovery.cpp).
  std::shared_ptr<boost::dll::shared_library> refused_library;
  BackendStatus status = BackendStatus::kFailed;
  std::string reason;
  std::string abi_version;  // as the table declared it, when it could be read
};

// Why `file` must not be opened (see util/trust.hpp), if so.
std::optional<std::string> unsafe_permissions(const std::filesystem::path& file);

// Opens, negotiates and validates. On success status is kAvailable, meaning
// only "the table is usable": probing is the caller's next step.
// `expected_name` as for validate_table.
OpenedPlugin open_plugin(const std::filesystem::path& file, std::string_view expected_name);

}  // namespace backplane::detail
