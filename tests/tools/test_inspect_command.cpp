// `backplane inspect`: output, JSON shape and exit statuses, run as a user would.
#include "support/file_builder.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <string>

using namespace backplane::testing;

namespace {

std::string inspect(const std::string& arguments) { return std::string(BP_TEST_TOOL) + " inspect " + arguments; }

std::string write_file(const TempDir& dir, const std::string& name, const std::vector<std::byte>& bytes) {
  return dir.write(name, std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())).string();
}

}  // namespace

TEST_CASE("[safetensors] inspect lists tensors, offsets and metadata; exit 0") {
  TempDir dir;
  auto path = write_file(
      dir, "ok.safetensors",
      st_file(
          R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[],"data_offsets":[8,9]}})",
          "123456789"));
  auto text = run_command(inspect(path));
  CHECK(text.exit_status == 0);
  CHECK(text.output.find("format = pt") != std::string::npos);
  CHECK(text.output.find("[2, 1]") != std::string::npos);
  CHECK(text.output.find("verdict    valid") != std::string::npos);

  auto result = run_command(inspect("--json " + path));
  CHECK(result.exit_status == 0);
  auto json = nlohmann::json::parse(result.output);
  CHECK(json["valid"] == true);
  CHECK(json["metadata"]["format"] == "pt");
  CHECK(json["file_size"] == 8 + json["header_size"].get<int>() + 9);
  REQUIRE(json["tensors"].size() == 2);
  CHECK(json["tensors"][0]["name"] == "w");
  CHECK(json["tensors"][1]["name"] == "b");
  CHECK(json["tensors"][1]["shape"] == nlohmann::json::array());
  CHECK(json["tensors"][1]["data_offsets"] == nlohmann::json({8, 9}));
  CHECK(json["tensors"][1]["file_offsets"][0] == json["data_offset"].get<int>() + 8);
}

TEST_CASE("[safetensors] inspect --json streams exactly what the JSON library would print") {
  // Names with quotes, backslashes, control characters and non-ASCII; a
  // scalar, metadata with newlines, and a file with no tensor.
  TempDir dir;
  const std::string odd = R"(q\"b\\s\u0001c\n\t é)";
  auto path = write_file(
      dir, "odd.safetensors",
      st_file(
          R"({"__metadata__":{"k":"a\nb"},")" + odd +
              R"(":{"dtype":"U8","shape":[2,1],"data_offsets":[0,2]},"s":{"dtype":"I8","shape":[],"data_offsets":[2,3]}})",
          "abc"));
  auto empty = write_file(dir, "empty.safetensors", st_file("{}", ""));
  for (const std::string& file : {path, empty}) {
    CAPTURE(file);
    auto result = run_command(inspect("--json " + file));
    REQUIRE(result.exit_status == 0);
    const auto parsed = nlohmann::ordered_json::parse(result.output);
    CHECK(result.output == parsed.dump(2) + "\n");
  }
  const auto parsed = nlohmann::json::parse(run_command(inspect("--json " + path)).output);
  CHECK(parsed["tensors"][0]["name"] ==
        "q\"b\\s\x01"
        "c\n\t \xC3\xA9");
}

TEST_CASE("[safetensors] inspect on an invalid file: exit 1, rule and tensor") {
  TempDir dir;
  auto path =
      write_file(dir, "bad.safetensors", one_tensor(R"({"dtype":"U8","shape":[2],"data_offsets":[1,3]})", "abc"));
  auto text = run_command(inspect(path) + " 2>&1");
  CHECK(text.exit_status == 1);
  CHECK(text.output.find("InvalidOffset") != std::string::npos);
  CHECK(text.output.find(path) != std::string::npos);

  auto result = run_command(inspect(path + " --json 2>/dev/null"));
  CHECK(result.exit_status == 1);
  auto json = nlohmann::json::parse(result.output);
  CHECK(json["valid"] == false);
  CHECK(json["error"]["rule"] == "InvalidOffset");
  CHECK(json["error"]["tensor"] == "t");

  auto missing = run_command(inspect("--json " + (dir / "missing.safetensors").string() + " 2>/dev/null"));
  CHECK(missing.exit_status == 1);
  CHECK(nlohmann::json::parse(missing.output)["error"]["code"] == "not found");
}

TEST_CASE("[safetensors] inspect usage errors exit 2") {
  CHECK(run_command(inspect("2>/dev/null")).exit_status == 2);
  CHECK(run_command(inspect("a b 2>/dev/null")).exit_status == 2);
  CHECK(run_command(inspect("--bogus f 2>/dev/null")).exit_status == 2);
  CHECK(run_command(inspect("--help")).exit_status == 0);
  // The message names the problem.
  CHECK(run_command(inspect("--bogus f 2>&1")).output.find("backplane inspect: unknown option '--bogus'") !=
        std::string::npos);
  CHECK(run_command(inspect("a b 2>&1")).output.find("backplane inspect: one file at a time") != std::string::npos);
  // A flag takes no value.
  CHECK(run_command(inspect("--json=yes f 2>&1")).output.find("unknown option '--json=yes'") != std::string::npos);
}

TEST_CASE("[safetensors] inspect of a token file of another format names it and the call that reads it") {
  TempDir dir;
  // An llm.c shard of 3 U16 tokens: the magic, version 1, the count, then
  // 253 more int32 of header.
  std::string shard(1024, '\0');
  const std::uint32_t header[] = {20240520, 1, 3};
  std::memcpy(shard.data(), header, sizeof(header));
  shard += std::string("\x01\x00\x02\x00\x03\x00", 6);
  const std::string path = dir.write("train_000.bin", shard).string();
  const auto text = run_command(inspect(path) + " 2>&1");
  CHECK(text.exit_status == 1);
  CHECK(text.output.find("verdict    not safetensors: llm.c shard of 3 U16 tokens") != std::string::npos);
  CHECK(text.output.find(path + " is a token file, not a safetensors file: llm.c shard of 3 U16 tokens; read it "
                                "with load_tokens (Python: backplane.load_tokens)") != std::string::npos);
  const auto result = run_command(inspect("--json " + path));
  CHECK(result.exit_status == 1);
  const auto json = nlohmann::json::parse(result.output);
  CHECK(json["valid"] == false);
  CHECK(json["token_file"]["format"] == "llm.c shard");
  CHECK(json["token_file"]["count"] == 3);
  CHECK(json["token_file"]["data_file"] == path);
  // A Megatron-Core dataset by its prefix: the data file is the .bin.
  const std::string megatron = std::string(BP_TEST_SOURCE_DIR) + "/tests/tokens/megatron/gpt2_uint16";
  const auto dataset = nlohmann::json::parse(run_command(inspect("--json " + megatron)).output);
  CHECK(dataset["token_file"]["format"] == "Megatron-Core indexed dataset");
  CHECK(dataset["token_file"]["data_file"] == megatron + ".bin");
}
