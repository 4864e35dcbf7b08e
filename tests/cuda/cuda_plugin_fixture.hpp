// Shared by the cuda suite: opens backplane-cuda.so once and wraps its table.
//
// The plugin path is BP_TEST_CUDA_PLUGIN from the environment, else the path
// Meson compiled in, else ../../plugins/cuda/backplane-cuda.so next to this
// executable (a build carried to a GPU machine lives at another path). The
// plugin is never dlclosed: once a device is used it must stay mapped.
#ifndef BACKPLANE_TESTS_CUDA_CUDA_PLUGIN_FIXTURE_HPP
#define BACKPLANE_TESTS_CUDA_CUDA_PLUGIN_FIXTURE_HPP

#include "abi/plugin_client.hpp"

#include <backplane/plugin.h>
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

extern char** environ;

namespace backplane::testing {

inline std::filesystem::path executable_directory() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path();
}

inline std::string plugin_path() {
  const char* override_path = std::getenv("BP_TEST_CUDA_PLUGIN");
  if (override_path != nullptr && *override_path != '\0') return override_path;
  if (std::filesystem::exists(BP_TEST_CUDA_PLUGIN)) return BP_TEST_CUDA_PLUGIN;
  return executable_directory() / "../../plugins/cuda/backplane-cuda.so";
}

// The libcuda.so.1 stand-in built next to this executable (fake_driver/).
inline std::string fake_driver_directory() { return executable_directory() / "fake_driver"; }

// True inside a child started by run_in_child.
inline bool in_child() { return std::getenv("BP_TEST_CUDA_CHILD") != nullptr; }

// Runs the test cases matching `test_case` in a fresh process of this
// executable. `environment` entries "NAME=value" set a variable, "NAME" alone
// removes it. The driver reads its environment once per process, so scenarios
// that change it run this way. Returns the child's exit status (0: passed).
inline int run_in_child(const std::string& test_case, std::vector<std::string> settings) {
  settings.push_back("BP_TEST_CUDA_CHILD=1");
  settings.push_back("BP_TEST_CUDA_PLUGIN=" + plugin_path());
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string variable(*entry);
    const std::string name = variable.substr(0, variable.find('='));
    bool overridden = false;
    for (const std::string& setting : settings) {
      overridden = overridden || setting.substr(0, setting.find('=')) == name;
    }
    if (!overridden) environment.push_back(variable);
  }
  for (const std::string& setting : settings) {
    if (setting.find('=') != std::string::npos) environment.push_back(setting);
  }
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::string self = std::filesystem::read_symlink("/proc/self/exe");
  std::string filter = "--test-case=" + test_case;
  std::string quiet = "--minimal=true";
  char* argv[] = {self.data(), filter.data(), quiet.data(), nullptr};
  pid_t child = 0;
  if (posix_spawn(&child, self.c_str(), nullptr, nullptr, argv, envp.data()) != 0) return -1;
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// The libcuda.so.1 emulator, when it is the driver this process loaded.
inline bool on_emulator() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return driver != nullptr && dlsym(driver, "bp_fake_cuda_context_calls") != nullptr;
}

// In the parent: runs `test_case` again in a child process whose libcuda.so.1
// is the emulator in fake_driver/ (LD_LIBRARY_PATH is searched before the
// system's driver), once per entry of `runs` (its BP_FAKE_CUDA_* settings),
// and checks each child passed. Returns false there; true in the child, which
// then runs the case.
inline bool over_fake_driver_runs(const char* test_case, const std::vector<std::vector<std::string>>& runs) {
  if (in_child()) return true;
  const std::string directory = fake_driver_directory();
  REQUIRE_MESSAGE(std::filesystem::exists(directory + "/libcuda.so.1"),
                  "the fake driver is not built in " << directory);
  const char* search_path = std::getenv("LD_LIBRARY_PATH");
  for (std::vector<std::string> settings : runs) {
    std::string shown;
    for (const std::string& setting : settings) shown += " " + setting;
    settings.push_back("LD_LIBRARY_PATH=" + directory + (search_path != nullptr ? std::string(":") + search_path : ""));
    CHECK_MESSAGE(run_in_child(test_case, settings) == 0,
                  "the child process running '" << test_case << "' with" << shown << " failed (its output is above)");
  }
  return false;
}

inline bool over_fake_driver(const char* test_case, std::vector<std::string> settings) {
  return over_fake_driver_runs(test_case, {std::move(settings)});
}

inline BP_PluginEntryFn entry_function() {
  static BP_PluginEntryFn entry = [] {
    void* library = dlopen(plugin_path().c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE_MESSAGE(library != nullptr, "dlopen " << plugin_path() << ": " << dlerror());
    void* symbol = dlsym(library, BP_PLUGIN_ENTRY_SYMBOL);
    REQUIRE_MESSAGE(symbol != nullptr, "no " BP_PLUGIN_ENTRY_SYMBOL " in " << plugin_path());
    return reinterpret_cast<BP_PluginEntryFn>(symbol);
  }();
  return entry;
}

inline const BP_PluginApi& api() {
  static const BP_PluginApi* table = [] {
    const uint32_t majors[] = {BP_ABI_MAJOR};
    const BP_PluginEntryArgs args{sizeof(BP_PluginEntryArgs), majors, 1, BP_ABI_MINOR};
    const BP_PluginApi* result = entry_function()(&args);
    REQUIRE(result != nullptr);
    return result;
  }();
  return *table;
}

using detail::PluginClient;
using detail::PluginStatus;

// The error a raw call returned, copied and destroyed.
inline PluginStatus take(BP_Error* error) { return PluginStatus(error); }

// One backend instance, probed; destroyed with the object.
class Backend {
 public:
  Backend() : client_(api(), nullptr) {
    auto created = PluginClient::create(api(), nullptr, 0);
    REQUIRE_MESSAGE(created.ok(), created.message());
    client_ = PluginClient(api(), *created);
    auto probed = client_.probe();
    REQUIRE_MESSAGE(probed.ok(), probed.message());
    available_ = probed->available != 0;
    reason_.assign(probed->reason, probed->reason_size);
    auto count = client_.device_count();
    REQUIRE(count.ok());
    device_count_ = *count;
  }
  ~Backend() { client_.backend_destroy(); }
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  BP_Backend* handle() const { return client_.backend(); }
  const PluginClient& client() const { return client_; }
  bool available() const { return available_; }
  const std::string& reason() const { return reason_; }
  int device_count() const { return device_count_; }

 private:
  PluginClient client_;
  bool available_ = false;
  std::string reason_;
  int device_count_ = 0;
};

// Empty when libcuda.so.1 can be opened by this process, else dlerror's text.
inline std::string driver_open_error() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) return dlerror();
  return "";  // left open: the plugin may be using the same driver
}

}  // namespace backplane::testing

#endif  // BACKPLANE_TESTS_CUDA_CUDA_PLUGIN_FIXTURE_HPP
