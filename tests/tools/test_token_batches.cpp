// examples/token_batches: the user story as a user runs it, on tiny data.
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace backplane::testing;

namespace {

// The example with a clean environment; `plugins` adds a plugin path.
std::string example(const std::string& variables, const std::string& arguments) {
  return "env -u BACKPLANE_PLUGIN_PATH -u BACKPLANE_CONFIG -u BACKPLANE_BACKENDS -u BACKPLANE_DEFAULT_DEVICE "
         "-u BACKPLANE_LOG XDG_CONFIG_HOME=/nonexistent " +
         variables + " " + BP_TEST_EXAMPLE + " " + arguments + " 2>&1";
}

bool has(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

constexpr const char* kTiny = "--generate-mib 1 --batch 4 --context 32 --steps 10";

}  // namespace

TEST_CASE("[safetensors] token_batches keeps tokens on the cpu and sends batches to the fastest device") {
  // With the simulated accelerator installed it outranks the cpu, like cuda.
  auto result = run_command(example(std::string("BACKPLANE_PLUGIN_PATH=") + BP_TEST_FIXTURE_DIR, kTiny));
  INFO(result.output);
  CHECK(result.exit_status == 0);
  CHECK(has(result.output, "backends:"));
  CHECK(has(result.output, "default device: sim:0 (highest-priority available backend)"));
  CHECK(has(result.output, "tokens: 524288 on cpu:0"));
  CHECK(has(result.output, "batches go to sim:0"));
  CHECK(has(result.output, "10 batches of [4, 33] int64 onto sim:0"));
  CHECK(has(result.output, "batches/s"));
  CHECK(has(result.output, "GB/s"));
  CHECK(has(result.output, "stream: 10 steps, "));
  CHECK(has(result.output, "windows/s, data stall "));
  CHECK(has(result.output, "each followed by a 2 ms stand-in training step (--step-ms)"));
  CHECK(has(result.output, "gathering alone ran at "));
  const auto without_step = run_command(example("", std::string(kTiny) + " --step-ms 0"));
  CHECK(has(without_step.output, "with no training step it waits by construction"));
  CHECK(run_command(example("", std::string(kTiny) + " --step-ms -1")).exit_status != 0);
}

TEST_CASE("[safetensors] token_batches follows BACKPLANE_DEFAULT_DEVICE, cleans up, and names a missing file") {
  TempDir dir;
  auto result =
      run_command(example(std::string("TMPDIR=") + dir.path().string() + " BACKPLANE_DEFAULT_DEVICE=cpu:0", kTiny));
  INFO(result.output);
  CHECK(result.exit_status == 0);
  CHECK(has(result.output, "default device: cpu:0 (BACKPLANE_DEFAULT_DEVICE)"));
  CHECK(has(result.output, "onto cpu:0"));
  // The generated file was removed.
  CHECK(std::filesystem::is_empty(dir.path()));

  auto missing = run_command(example("", "--tokens " + dir.path().string() + "/none.safetensors"));
  CHECK(missing.exit_status == 1);
  CHECK(has(missing.output, "none.safetensors"));
  CHECK(run_command(example("", "--batch 0")).exit_status == 2);
}
