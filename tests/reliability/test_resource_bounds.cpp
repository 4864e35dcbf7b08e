// Inputs that claim more than they hold: huge safetensors sizes, shapes that
// overflow, many-megabyte config files, plugin directories with thousands of
// files. Each is refused (or finishes) without allocating what it claims.
// Under ASan an allocation of the claimed size would abort the test
// (allocation-size-too-big), so passing there also shows nothing was sized
// by the claim.
#include "support/temp_dir.hpp"

#include "config/config.hpp"
#include "util/environment.hpp"

#include <backplane/backplane.hpp>
#include <backplane/error.hpp>
#include <backplane/safetensors.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

using backplane::Error;
using backplane::ErrorCode;
using backplane::testing::TempDir;
namespace safetensors = backplane::safetensors;

namespace {

// The 8-byte little-endian length, then `json`, then `data_bytes` zero bytes.
std::string file_bytes(std::uint64_t claimed_length, const std::string& json, std::size_t data_bytes = 0) {
  std::string bytes(8, '\0');
  for (int index = 0; index < 8; ++index) bytes[index] = static_cast<char>((claimed_length >> (8 * index)) & 0xFF);
  return bytes + json + std::string(data_bytes, '\0');
}
std::string file_bytes(const std::string& json, std::size_t data_bytes = 0) {
  return file_bytes(json.size(), json, data_bytes);
}

safetensors::Rule rule_of(const std::string& bytes) {
  try {
    safetensors::parse_header({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, bytes.size(),
                              "claims.safetensors");
  } catch (const safetensors::FormatError& error) {
    return error.rule();
  }
  FAIL("the header was accepted");
  return safetensors::Rule::kHeaderTooSmall;
}

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("[bounds] a safetensors length field claiming huge sizes is refused before any allocation") {
  using safetensors::Rule;
  CHECK(rule_of(file_bytes(UINT64_MAX, "{}")) == Rule::kHeaderTooLarge);
  CHECK(rule_of(file_bytes(std::uint64_t{1} << 62, "{}")) == Rule::kHeaderTooLarge);
  CHECK(rule_of(file_bytes(safetensors::kMaxHeaderSize + 1, "{}")) == Rule::kHeaderTooLarge);
  // Within the limit but past the end of the file.
  CHECK(rule_of(file_bytes(safetensors::kMaxHeaderSize, "{}")) == Rule::kInvalidHeaderLength);

  // The same through read_header: only the 8 bytes are read.
  TempDir directory;
  const auto path = directory.write("huge.safetensors", file_bytes(safetensors::kMaxHeaderSize, "{}"));
  try {
    safetensors::read_header(path);
    FAIL("accepted");
  } catch (const safetensors::FormatError& error) {
    CHECK(error.rule() == Rule::kInvalidHeaderLength);
    CHECK(contains(error.what(), "huge.safetensors"));
  }
}

TEST_CASE("[bounds] tensor offsets and shapes claiming huge sizes are refused naming the tensor") {
  using safetensors::Rule;
  // Offsets far past the data section: the size disagrees with the shape.
  CHECK(rule_of(file_bytes(R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[0,18446744073709551615]}})", 4)) ==
        Rule::kTensorInvalidInfo);
  // Element counts that overflow 64 bits, and bit counts that do.
  CHECK(rule_of(file_bytes(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}})")) ==
        Rule::kValidationOverflow);
  CHECK(rule_of(file_bytes(R"({"t":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})")) ==
        Rule::kValidationOverflow);
  // A dimension past u64 is not a usize for the reference either.
  CHECK(rule_of(file_bytes(R"({"t":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,0]}})")) ==
        Rule::kInvalidHeaderDeserialization);
  // A consistent claim of 2^40 bytes in a file of a few bytes.
  CHECK(rule_of(file_bytes(R"({"t":{"dtype":"U8","shape":[1099511627776],"data_offsets":[0,1099511627776]}})")) ==
        Rule::kMetadataIncompleteBuffer);
  try {
    const std::string bytes =
        file_bytes(R"({"big":{"dtype":"I64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8);
    safetensors::parse_header({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, bytes.size(), "f");
    FAIL("accepted");
  } catch (const safetensors::FormatError& error) {
    REQUIRE(error.tensor().has_value());
    CHECK(*error.tensor() == "big");
  }
}

TEST_CASE("[bounds] a config file of many megabytes is refused by the 1 MiB bound, in memory and on disk") {
  const std::string comment_line = "# " + std::string(1000, 'x') + "\n";
  std::string text = "default_device = \"cpu\"\n";
  while (text.size() < (std::size_t{8} << 20)) text += comment_line;
  try {
    backplane::detail::parse_config(text, "/big/config.toml");
    FAIL("accepted");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kConfig);
    CHECK(contains(error.what(), "/big/config.toml"));
    CHECK(contains(error.what(), std::to_string(backplane::detail::kMaxConfigFileBytes)));
  }
  // Exactly at the bound is fine.
  const std::string at_bound = text.substr(0, backplane::detail::kMaxConfigFileBytes - 1) + "\n";
  CHECK(backplane::detail::parse_config(at_bound, "/big/config.toml").default_device == "cpu");

  TempDir directory;
  const auto path = directory.write("config.toml", text);
  const auto environment = backplane::detail::Environment::fixed({{"BACKPLANE_CONFIG", path.string()}});
  try {
    backplane::detail::load_config(environment, directory.path());
    FAIL("accepted");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kConfig);
    CHECK(contains(error.what(), path.string()));
  }
  // Through the runtime: the first call that needs discovery says so.
  backplane::Runtime::Options options;
  options.config_file = path;
  options.skip_default_paths = true;
  backplane::Runtime runtime(options);
  try {
    runtime.backends();
    FAIL("accepted");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kConfig);
  }
}

TEST_CASE("[bounds] a plugin directory with thousands of files: each candidate gets a status, the rest are skipped") {
  TempDir directory;
  for (int index = 0; index < 5000; ++index) {
    directory.write("not-a-plugin-" + std::to_string(index) + ".so", "x");
  }
  directory.write("backplane-.so", "empty name");
  directory.write("libbackplane-cpu.so", "wrong prefix");
  std::set<std::string> expected;
  for (int index = 0; index < 200; ++index) {
    const std::string name = "junk" + std::to_string(index);
    directory.write("backplane-" + name + ".so", index % 2 == 0 ? "" : "not an ELF file");
    expected.insert(name);
  }
  std::filesystem::create_directory(directory / "backplane-adirectory.so");
  expected.insert("adirectory");

  backplane::Runtime::Options options;
  options.plugin_paths = {directory.path()};
  options.ignore_environment = true;
  options.skip_default_paths = true;
  backplane::Runtime runtime(options);
  std::set<std::string> seen;
  for (const auto& info : runtime.backends()) {
    CAPTURE(info.name);
    CHECK(info.status == backplane::BackendStatus::kFailed);
    CHECK_FALSE(info.reason.empty());
    CHECK(seen.insert(info.name).second);
  }
  CHECK(seen == expected);
  CHECK(runtime.devices().empty());
}
