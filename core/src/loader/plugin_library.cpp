#include "loader/plugin_library.hpp"

#include "loader/plugin_limits.hpp"
#include "loader/table_validation.hpp"
#include "util/file_type.hpp"
#include "util/log.hpp"
#include "util/trust.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <vector>

namespace backplane::detail {
namespace {

// Libraries that must stay mapped until exit (see keep_loaded). Never
// destroyed, so no dlclose runs even during static destruction; reachable,
// so LeakSanitizer does not report them.
std::mutex kept_libraries_mutex;
std::vector<boost::dll::shared_library>* kept_libraries = new std::vector<boost::dll::shared_library>();

}  // namespace

PluginLibrary::~PluginLibrary() {
  if (keep_loaded_) {
    std::lock_guard lock(kept_libraries_mutex);
    kept_libraries->push_back(std::move(library_));
  }
}

std::string PluginLibrary::version() const {
  // validate_table bounded version_size; a shorter string ends at its NUL.
  return std::string(plugin_text(api_->version, api_->version_size));
}

std::optional<std::string> unsafe_permissions(const std::filesystem::path& file) { return untrusted_path(file); }

OpenedPlugin open_plugin(const std::filesystem::path& file, std::string_view expected_name) {
  OpenedPlugin opened;
  if (auto unsafe = unsafe_permissions(file)) {
    opened.reason = *unsafe;
    return opened;
  }

  // dlopen() of a FIFO blocks until a writer appears, and of a device reads
  // whatever it yields: only a regular file is loaded. The type could change
  // between this stat and dlopen only through its directory, which
  // unsafe_permissions has just checked is not open to others.
  struct stat status {};
  if (::stat(file.c_str(), &status) != 0) {
    opened.reason = fmt::format("cannot load: {}: {}", file.string(), std::strerror(errno));
    return opened;
  }
  if (!S_ISREG(status.st_mode)) {
    opened.reason = fmt::format("refused: {} is {}, not a regular file (a plugin is a shared library)", file.string(),
                                file_type_name(status.st_mode));
    return opened;
  }

  boost::dll::shared_library library;
  try {
    // Absolute path: Boost.DLL resolves a bare name against the working directory.
    library.load(std::filesystem::absolute(file), boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& error) {
    // The throwing overload keeps dlerror's text; the error_code one does not.
    opened.reason = fmt::format("cannot load: {}", error.what());
    return opened;
  }
  if (!library.has(BP_PLUGIN_ENTRY_SYMBOL)) {
    opened.reason = fmt::format("no entry symbol '{}': not a backplane plugin", BP_PLUGIN_ENTRY_SYMBOL);
    opened.refused_library = std::make_shared<boost::dll::shared_library>(std::move(library));
    return opened;
  }

  static constexpr std::array<uint32_t, 1> kCoreMajors = {BP_ABI_MAJOR};
  const BP_PluginEntryArgs offer{sizeof(BP_PluginEntryArgs), kCoreMajors.data(), kCoreMajors.size(), BP_ABI_MINOR};
  auto& entry = library.get<const BP_PluginApi*(const BP_PluginEntryArgs*)>(BP_PLUGIN_ENTRY_SYMBOL);
  const BP_PluginApi* table = entry(&offer);

  if (auto problem = validate_table(table, expected_name)) {
    opened.status = problem->status;
    opened.reason = std::move(problem->reason);
    if (table != nullptr && problem->status == BackendStatus::kIncompatible) {
      opened.abi_version = abi_version_string(*table);
    }
    opened.refused_library = std::make_shared<boost::dll::shared_library>(std::move(library));
    return opened;
  }
  opened.abi_version = abi_version_string(*table);
  opened.status = BackendStatus::kAvailable;
  opened.library = std::make_shared<PluginLibrary>(std::move(library), table);
  return opened;
}

}  // namespace backplane::detail
