#include "util/bytes.hpp"

#include <cstdio>
#include <iterator>

namespace backplane::detail {

std::string describe_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  char text[96];
  std::snprintf(text, sizeof(text), "%.1f %s (%llu bytes)", value, kUnits[unit],
                static_cast<unsigned long long>(bytes));
  return text;
}

}  // namespace backplane::detail
