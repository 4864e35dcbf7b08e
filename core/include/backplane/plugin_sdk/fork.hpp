// Drivers that do not survive fork() (CUDA, most OpenCL ICDs): a child of the
// process that initialised one must not call it, since it fails or hangs
// there. A backend notes the process whose driver initialisation succeeded;
// in any other process its refusal() hook (backend.hpp) returns message().
#ifndef BACKPLANE_PLUGIN_SDK_FORK_HPP
#define BACKPLANE_PLUGIN_SDK_FORK_HPP

#include <unistd.h>

#include <atomic>
#include <string>
#include <string_view>

namespace backplane::plugin_sdk {

class ForkGuard {
 public:
  // The first successful initialisation wins; later calls change nothing.
  void note_initialised() noexcept {
    pid_t expected = 0;
    initialised_in_.compare_exchange_strong(expected, getpid());
  }

  // True in a child of the process that initialised the driver.
  bool forked() const noexcept {
    const pid_t pid = initialised_in_.load();
    return pid != 0 && pid != getpid();
  }

  // "<driver> was initialised in process 1234 before fork(); <why>: use the
  // <backend> backend only in the parent, or start workers with the 'spawn' method"
  std::string message(std::string_view driver, std::string_view why, std::string_view backend) const {
    return std::string(driver) + " was initialised in process " + std::to_string(initialised_in_.load()) +
           " before fork(); " + std::string(why) + ": use the " + std::string(backend) +
           " backend only in the parent, or start workers with the 'spawn' method";
  }

 private:
  std::atomic<pid_t> initialised_in_{0};  // 0: not initialised yet
};

}  // namespace backplane::plugin_sdk

#endif  // BACKPLANE_PLUGIN_SDK_FORK_HPP
