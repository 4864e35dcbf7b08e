// Helpers for the load/save tests: files on disk, and where an address is
// mapped from (/proc/self/maps), to prove that a CPU load is a view of the file.
#pragma once

#include "support/file_builder.hpp"
#include "support/placement_fixture.hpp"
#include "support/temp_dir.hpp"

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace backplane::testing {

inline std::filesystem::path write_bytes(const TempDir& dir, const std::string& name,
                                         const std::vector<std::byte>& bytes) {
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

inline std::vector<std::byte> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* data = reinterpret_cast<const std::byte*>(chars.data());
  return {data, data + chars.size()};
}

inline std::vector<std::byte> as_bytes_vector(const std::vector<std::uint8_t>& values) {
  const auto* data = reinterpret_cast<const std::byte*>(values.data());
  return {data, data + values.size()};
}

// The file and the file offset that `address` is mapped from, or nullopt when
// it is not in a file mapping.
struct MappedFrom {
  std::filesystem::path path;
  std::uint64_t offset;
};
inline std::optional<MappedFrom> mapped_from(const void* address) {
  const auto target = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::uintptr_t start = 0;
    std::uintptr_t end = 0;
    std::uint64_t offset = 0;
    char perms[8] = {};
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %7s %" SCNx64 " %*s %*s %n", &start, &end, perms, &offset,
                    &path_at) < 4) {
      continue;
    }
    if (target < start || target >= end || path_at == 0) continue;
    std::string path = line.substr(static_cast<std::size_t>(path_at));
    if (path.empty() || path.front() != '/') return std::nullopt;
    return MappedFrom{path, offset + (target - start)};
  }
  return std::nullopt;
}

inline bool is_mapped(const std::filesystem::path& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const std::string name = path.string();
  while (std::getline(maps, line)) {
    if (line.size() >= name.size() && line.compare(line.size() - name.size(), name.size(), name) == 0) return true;
  }
  return false;
}

}  // namespace backplane::testing
