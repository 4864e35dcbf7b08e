#include "util/thread_name.hpp"

#include <pthread.h>

#include <algorithm>
#include <array>

namespace backplane::detail {
namespace {

constexpr std::size_t kSystemLimit = 15;  // pthread_setname_np: 16 bytes with the NUL
thread_local std::array<char, 128> t_given{};

}  // namespace

void name_this_thread(std::string_view name, std::string_view system_name) noexcept {
  const std::size_t kept = std::min(name.size(), t_given.size() - 1);
  std::copy_n(name.data(), kept, t_given.data());
  t_given[kept] = '\0';
  std::array<char, kSystemLimit + 1> system{};
  std::copy_n(system_name.data(), std::min(system_name.size(), kSystemLimit), system.data());
  ::pthread_setname_np(::pthread_self(), system.data());
}

std::string this_thread_name() {
  if (t_given[0] != '\0') return t_given.data();
  char name[64] = {};
  if (::pthread_getname_np(::pthread_self(), name, sizeof name) != 0 || name[0] == '\0') return "thread";
  return name;
}

}  // namespace backplane::detail
