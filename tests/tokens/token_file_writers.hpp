// Token files for the tests, written byte by byte: llm.c shards, NumPy .npy
// files with the header numpy writes (or any other), and token bytes.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::testing {

static_assert(std::endian::native == std::endian::little, "the writers lay out tokens in host order");

template <class T>
std::string token_bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline std::string le32(std::uint32_t value) {
  std::string out(4, '\0');
  for (std::size_t i = 0; i < 4; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  return out;
}

// The 1024-byte header: magic, version, count, then 253 zero int32.
inline std::string llmc_header(std::uint32_t magic, std::uint32_t version, std::uint32_t count) {
  std::string header = le32(magic) + le32(version) + le32(count);
  header.resize(1024, '\0');
  return header;
}

inline std::string llmc_u16_shard(const std::vector<std::uint16_t>& tokens) {
  return llmc_header(20240520, 1, static_cast<std::uint32_t>(tokens.size())) + token_bytes(tokens);
}

// "\x93NUMPY", the version, the length field, `dict` padded with spaces and a
// newline as numpy pads it (the preamble and header a multiple of 64 bytes),
// then `data`.
inline std::string npy_file(std::string_view dict, std::string_view data, int major = 1) {
  const std::size_t preamble = major == 1 ? 10 : 12;
  std::string header(dict);
  const std::size_t unpadded = preamble + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string file("\x93NUMPY", 6);
  file += static_cast<char>(major);
  file += '\0';
  const std::string length = le32(static_cast<std::uint32_t>(header.size()));
  file += major == 1 ? length.substr(0, 2) : length;
  return file + header + std::string(data);
}

inline std::string npy_dict(std::string_view descr, std::string_view shape, bool fortran = false) {
  return "{'descr': '" + std::string(descr) + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + std::string(shape) + ", }";
}

}  // namespace backplane::testing
