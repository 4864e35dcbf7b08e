// `backplane load`, run as a user would: output, progress, exit statuses.
#include "support/file_builder.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <random>
#include <string>

using namespace backplane::testing;
namespace st = backplane::safetensors;

namespace {

// The tool with a clean environment that finds the simulated accelerator.
std::string load(const std::string& arguments) {
  return std::string(
             "env -u BACKPLANE_CONFIG -u BACKPLANE_BACKENDS -u BACKPLANE_DEFAULT_DEVICE -u BACKPLANE_LOG "
             "XDG_CONFIG_HOME=/nonexistent BACKPLANE_PLUGIN_PATH=") +
         BP_TEST_FIXTURE_DIR + " " + BP_TEST_TOOL + " load " + arguments;
}

std::string write_file(const TempDir& dir, const std::string& name, const std::vector<std::byte>& bytes) {
  return dir.write(name, std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())).string();
}

std::string tokens_file(const TempDir& dir) {
  std::vector<std::byte> tokens(std::size_t{20} << 20);
  std::mt19937 random(5);
  for (auto& byte : tokens) byte = static_cast<std::byte>(random());
  std::vector<std::byte> small(6, std::byte{1});
  const std::vector<st::HostTensor> tensors{{{"tokens", "U16", {tokens.size() / 2}}, tokens},
                                            {{"bias", "U8", {6}}, small}};
  return write_file(dir, "tokens.safetensors", st::serialize(tensors));
}

bool has(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("[safetensors] backplane load onto cpu and sim reports tensors, bytes and GB/s") {
  TempDir dir;
  const std::string path = tokens_file(dir);
  auto cpu = run_command(load(path + " --device cpu 2>&1"));
  CHECK(cpu.exit_status == 0);
  CHECK(has(cpu.output, "loaded 2 tensors (20.0 MiB, 20971526 bytes)"));
  CHECK(has(cpu.output, "onto cpu:0"));
  CHECK(has(cpu.output, "GB/s"));
  CHECK(has(cpu.output, "zero-copy"));

  // Not a terminal: plain progress lines on stderr, ending at 100%.
  auto sim = run_command(load("--device sim:0 --names tokens " + path + " 2>&1"));
  CHECK(sim.exit_status == 0);
  CHECK(has(sim.output, "loaded 1 tensor (20.0 MiB, 20971520 bytes)"));
  CHECK(has(sim.output, "onto sim:0"));
  CHECK(has(sim.output, "progress: 100% (20.0 MiB of 20.0 MiB)"));
  CHECK(has(sim.output, "progress:  40% (8.0 MiB of 20.0 MiB)"));  // one line per 8 MiB chunk
  CHECK(has(sim.output, "GB/s"));
  CHECK_FALSE(has(sim.output, "\r"));
}

TEST_CASE("[safetensors] backplane load exit statuses name the file, the rule and the device") {
  TempDir dir;
  const std::string path = tokens_file(dir);
  const std::string bad =
      write_file(dir, "bad.safetensors", st_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,1]}})", "x"));
  auto invalid = run_command(load(bad + " --device cpu 2>&1"));
  CHECK(invalid.exit_status == 1);
  CHECK(has(invalid.output, bad));
  CHECK(has(invalid.output, "TensorInvalidInfo"));

  auto missing = run_command(load(dir.path().string() + "/missing.safetensors 2>&1"));
  CHECK(missing.exit_status == 1);
  CHECK(has(missing.output, "missing.safetensors"));

  auto unknown = run_command(load(path + " --names nope 2>&1"));
  CHECK(unknown.exit_status == 1);
  CHECK(has(unknown.output, "no tensor named 'nope'"));

  auto device = run_command(load(path + " --device cdua 2>&1"));
  CHECK(device.exit_status == 1);
  CHECK(has(device.output, "cdua"));

  CHECK(run_command(load("2>&1")).exit_status == 2);
  CHECK(run_command(load(path + " --device 2>&1")).exit_status == 2);
  CHECK(run_command(load(path + " --bogus 2>&1")).exit_status == 2);
  CHECK(run_command(load("--help")).exit_status == 0);
}

TEST_CASE("[safetensors] backplane load usage errors name the problem; --name=VALUE and -- work") {
  TempDir dir;
  const std::string path = tokens_file(dir);
  auto no_value = run_command(load(path + " --device 2>&1"));
  CHECK(no_value.exit_status == 2);
  CHECK(has(no_value.output, "backplane load: --device needs a value"));
  auto bogus = run_command(load(path + " --bogus 2>&1"));
  CHECK(bogus.exit_status == 2);
  CHECK(has(bogus.output, "backplane load: unknown option '--bogus'"));
  auto two = run_command(load(path + " " + path + " 2>&1"));
  CHECK(two.exit_status == 2);
  CHECK(has(two.output, "backplane load: one file at a time"));

  auto joined = run_command(load("--device=cpu --names=bias " + path + " 2>&1"));
  CHECK(joined.exit_status == 0);
  CHECK(has(joined.output, "loaded 1 tensor (6 B, 6 bytes)"));
  CHECK(has(joined.output, "onto cpu:0"));
  auto after_dashes = run_command(load("--device cpu -- " + path + " 2>&1"));
  CHECK(after_dashes.exit_status == 0);
  CHECK(has(after_dashes.output, "loaded 2 tensors"));
}

TEST_CASE("[safetensors] backplane load and inspect refuse a FIFO at once instead of waiting for a writer") {
  TempDir dir;
  const std::string fifo = (dir / "pipe.safetensors").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // `timeout`: without the check the tool blocks in open() forever (status 124 here).
  for (const std::string& command :
       {load(fifo + " --device cpu 2>&1"), std::string("timeout 20 ") + BP_TEST_TOOL + " inspect " + fifo + " 2>&1",
        std::string("timeout 20 ") + BP_TEST_TOOL + " inspect --json " + fifo + " 2>&1"}) {
    CAPTURE(command);
    auto result = run_command(command.starts_with("env ") ? "timeout 20 " + command : command);
    CHECK(result.exit_status == 1);
    CHECK(has(result.output, fifo + " is a FIFO (named pipe), not a regular file"));
  }
}
