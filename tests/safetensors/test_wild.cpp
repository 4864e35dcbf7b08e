// Files written by other implementations (BP_TEST_WILD_DIR, the team's shared
// test data; wild_main.cpp skips the program where it is absent): the same
// verdict as the reference reader, the same tensors, and each file runs
// cleanly through the fuzz target of the header parser.
#include "fuzz/targets.hpp"

#include <backplane/safetensors.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace st = backplane::safetensors;

namespace {

const std::filesystem::path kWildDir = BP_TEST_WILD_DIR;

}  // namespace

TEST_CASE("[safetensors] wild files: verdicts and tensors agree with the reference") {
  std::ifstream manifest_file(kWildDir / "MANIFEST.json");
  REQUIRE_MESSAGE(manifest_file.good(), "missing " << (kWildDir / "MANIFEST.json").string());
  auto manifest = nlohmann::json::parse(manifest_file);
  const auto& files = manifest.at("files");
  CHECK(files.size() == 24);
  int accepted = 0, rejected = 0;
  for (const auto& entry : files) {
    const std::string name = entry.at("file");
    CAPTURE(name);
    const auto path = kWildDir / name;
    if (entry.at("expected") == "reject") {
      ++rejected;
      try {
        st::read_header(path);
        FAIL("accepted a file the reference rejects");
      } catch (const st::FormatError& error) {
        CHECK(st::rule_name(error.rule()) == entry.at("error").get<std::string>());
      }
      continue;
    }
    ++accepted;
    st::Header header;
    try {
      header = st::read_header(path);
    } catch (const backplane::Error& error) {
      FAIL("rejected a file the reference accepts: " << error.what());
      continue;
    }
    CHECK(header.file_size == std::filesystem::file_size(path));
    const auto& tensors = entry.at("tensors");
    CHECK(header.tensors.size() == tensors.size());
    for (const auto& [tensor_name, expected] : tensors.items()) {
      CAPTURE(tensor_name);
      const st::TensorEntry* tensor = header.find(tensor_name);
      REQUIRE(tensor != nullptr);
      CHECK(tensor->dtype == expected.at("dtype").get<std::string>());
      CHECK(tensor->shape == expected.at("shape").get<std::vector<std::uint64_t>>());
      CHECK(tensor->byte_size() == expected.at("nbytes").get<std::uint64_t>());
    }
    // Offsets tile the data section in order (validation guarantees it; this
    // guards the reported values themselves).
    std::uint64_t next = 0;
    for (const auto& tensor : header.tensors) {
      CHECK(tensor.begin == next);
      next = tensor.end;
    }
    CHECK(header.data_offset + next == header.file_size);
    const auto& metadata = entry.at("metadata");
    if (metadata.is_null()) {
      CHECK_FALSE(header.metadata.has_value());
    } else {
      REQUIRE(header.metadata.has_value());
      CHECK(*header.metadata == metadata.get<st::Metadata>());
    }
  }
  CHECK(accepted == 23);
  CHECK(rejected == 1);
}

TEST_CASE("[fuzz] the safetensors files written by other implementations run cleanly through the header target") {
  const backplane::fuzz::Target& header_target = backplane::fuzz::kTargets[0];
  REQUIRE(std::string(header_target.name) == "safetensors_header");
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kWildDir)) {
    if (entry.path().extension() != ".safetensors") continue;
    CAPTURE(entry.path().string());
    std::ifstream stream(entry.path(), std::ios::binary);
    const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>()};
    CHECK_NOTHROW(header_target.run(bytes));
    ++count;
  }
  CHECK(count == 24);
}
