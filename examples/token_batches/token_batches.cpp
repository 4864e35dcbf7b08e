// The user story, end to end: a token file in host RAM, batches on the
// fastest device.
//
//   1. list the backends and the default device (and what decided it);
//   2. load the tokens (one U16 tensor `tokens` in a safetensors file) onto
//      the CPU inside a DefaultDeviceScope: a zero-copy view of the mapped
//      file, while the default outside the scope stays the fastest device;
//   3. sample batches of B windows of T+1 tokens onto the default device
//      with a BatchStream: its threads gather and move the next steps while
//      the current one is used, so next() rarely waits; at the end, its
//      statistics say how often it did (the data stall). Each batch is
//      followed by a stand-in training step (--step-ms, default 2 ms, a
//      sleep where a model would run), so the stall is what a trainer of
//      that speed would see; --step-ms 0 measures how fast the stream alone
//      can go, where the stall is near 100% by construction.
//
// Without --tokens it generates a small random token file first. The same
// program runs unchanged on a GPU machine, where the default becomes cuda:0.
#include <backplane/array.hpp>
#include <backplane/backplane.hpp>
#include <backplane/batch_stream.hpp>
#include <backplane/safetensors.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

namespace st = backplane::safetensors;
using namespace backplane;

constexpr std::string_view kUsage =
    "usage: token_batches [--tokens FILE] [--generate-mib N] [--batch B] [--context T] [--steps N]\n"
    "                     [--step-ms MS] [--seed S] [--device SELECTOR]\n"
    "  --tokens FILE     a safetensors file with a 1-D U16 tensor `tokens` (default: generate one)\n"
    "  --generate-mib N  size of the generated token file (default 64)\n"
    "  --batch B         windows per batch (default 32)\n"
    "  --context T       tokens per window are T+1 (default 1024)\n"
    "  --steps N         batches to sample (default 200)\n"
    "  --step-ms MS      a stand-in training step after each batch (default 2; 0: none)\n"
    "  --seed S          seed of the generated tokens and of the sampling (default 1)\n"
    "  --device SELECTOR where batches go, e.g. cuda:0 (default: the runtime's default device)\n";

struct Settings {
  std::optional<std::filesystem::path> tokens;
  std::uint64_t generate_mib = 64;
  std::int64_t batch = 32;
  std::int64_t context = 1024;
  std::int64_t steps = 200;
  std::int64_t step_ms = 2;
  std::uint64_t seed = 1;
  std::optional<std::string> device;
};

template <class Integer>
bool parse_number(std::string_view text, Integer& value) {
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  return result.ec == std::errc{} && result.ptr == text.data() + text.size();
}

std::optional<Settings> parse(int argc, char** argv) {
  Settings settings;
  for (int index = 1; index < argc; ++index) {
    const std::string_view arg = argv[index];
    if (arg == "--help" || arg == "-h") {
      fmt::print("{}", kUsage);
      std::exit(0);
    }
    if (index + 1 >= argc) return std::nullopt;
    const std::string_view value = argv[++index];
    bool ok = true;
    if (arg == "--tokens") {
      settings.tokens = std::filesystem::path(value);
    } else if (arg == "--generate-mib") {
      ok = parse_number(value, settings.generate_mib) && settings.generate_mib > 0;
    } else if (arg == "--batch") {
      ok = parse_number(value, settings.batch) && settings.batch > 0;
    } else if (arg == "--context") {
      ok = parse_number(value, settings.context) && settings.context > 0;
    } else if (arg == "--steps") {
      ok = parse_number(value, settings.steps) && settings.steps > 0;
    } else if (arg == "--step-ms") {
      ok = parse_number(value, settings.step_ms) && settings.step_ms >= 0;
    } else if (arg == "--seed") {
      ok = parse_number(value, settings.seed);
    } else if (arg == "--device") {
      settings.device = std::string(value);
    } else {
      ok = false;
    }
    if (!ok) return std::nullopt;
  }
  return settings;
}

// Random GPT-2-sized vocabulary ids, written as the file a tokenizer would.
std::filesystem::path generate_tokens(std::uint64_t mib, std::uint64_t seed) {
  const auto path =
      std::filesystem::temp_directory_path() / fmt::format("backplane-token-batches-{}.safetensors", ::getpid());
  std::vector<std::uint16_t> tokens(static_cast<std::size_t>(mib << 20) / 2);
  std::mt19937_64 random(seed);
  for (std::size_t index = 0; index < tokens.size(); index += 4) {
    std::uint64_t bits = random();
    for (std::size_t lane = 0; lane < 4 && index + lane < tokens.size(); ++lane, bits >>= 16) {
      tokens[index + lane] = static_cast<std::uint16_t>((bits & 0xFFFF) % 50257);
    }
  }
  const std::vector<st::HostTensor> tensors{{{"tokens", "U16", {tokens.size()}}, std::as_bytes(std::span(tokens))}};
  st::save(path, tensors, st::Metadata{{"generated_by", "token_batches"}});
  fmt::print("generated {} ({} MiB, {} tokens)\n", path.string(), mib, tokens.size());
  return path;
}

void show_backends(const Runtime& runtime) {
  std::size_t width = 0;
  for (const BackendInfo& backend : runtime.backends()) width = std::max(width, backend.name.size());
  fmt::print("backends:\n");
  for (const BackendInfo& backend : runtime.backends()) {
    fmt::print("  {:<{}}  {:<12} {}\n", backend.name, width, to_string(backend.status), backend.reason);
    if (backend.status != BackendStatus::kAvailable) continue;
    for (const DeviceInfo& device : runtime.devices(backend.name)) {
      fmt::print("  {:<{}}  {:<12} {}\n", "", width, device.selector(), device.name);
    }
  }
  const DefaultDevice chosen = runtime.default_device();
  fmt::print("default device: {} ({}){}\n", chosen.device.selector(), to_string(chosen.source),
             chosen.fallback_note.empty() ? "" : "; " + chosen.fallback_note);
}

int run(const Settings& settings) {
  Runtime& runtime = Runtime::process_default();
  show_backends(runtime);

  const bool generated = !settings.tokens;
  const std::filesystem::path path =
      generated ? generate_tokens(settings.generate_mib, settings.seed) : *settings.tokens;
  // A generated file goes away however this ends; once loaded, the mapping
  // keeps its pages until the tokens array is gone.
  struct RemoveGenerated {
    const std::filesystem::path* path;
    ~RemoveGenerated() {
      std::error_code ignored;
      if (path != nullptr) std::filesystem::remove(*path, ignored);
    }
  } remove_generated{generated ? &path : nullptr};
  // The token file lives in host RAM: load it inside a scope that makes the
  // CPU the default, as a trainer would around its data loader.
  const auto load_start = std::chrono::steady_clock::now();
  st::Loaded loaded = [&] {
    DefaultDeviceScope on_host(runtime, "cpu");
    return st::load(runtime, path);
  }();
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

  const auto found = loaded.tensors.find("tokens");
  if (found == loaded.tensors.end() || found->second.rank() != 1 || found->second.dtype() != DType::kU16) {
    fmt::print(stderr, "token_batches: {} has no 1-D U16 tensor 'tokens'\n", path.string());
    return 1;
  }
  const Array tokens = found->second;
  const std::int64_t length = settings.context + 1;
  const std::int64_t count = tokens.shape()[0];
  if (count < length) {
    fmt::print(stderr, "token_batches: {} tokens cannot hold a window of {}\n", count, length);
    return 1;
  }
  // Outside the scope: the fastest device again, unless one was asked for.
  const Device target = settings.device ? runtime.resolve(*settings.device) : runtime.default_device().device;
  fmt::print("tokens: {} on {} (loaded in {:.3f} s); batches go to {}\n", count, tokens.device().selector(),
             load_seconds, target.selector());

  BatchStreamOptions options;
  options.batch_size = settings.batch;
  options.context = settings.context;
  options.devices = {target};
  options.dtype = DType::kI64;
  options.seed = settings.seed;
  BatchStream stream(runtime, {tokens}, options);

  const auto* host_tokens = static_cast<const std::byte*>(tokens.host_data());
  std::vector<std::int64_t> row(static_cast<std::size_t>(length));
  std::uint64_t checksum = 0;
  const auto loop_start = std::chrono::steady_clock::now();
  for (std::int64_t step = 0; step < settings.steps; ++step) {
    const Window first = stream.windows(step).front();
    const std::vector<Array> batch = stream.next();  // one array per device: here one
    // "Use" the batch: read its first window back and check it against the
    // tokens it came from (a training step would run the model here).
    batch.front().slice(0, 1).copy_to_host(row.data(), row.size() * sizeof(std::int64_t));
    for (std::int64_t position = 0; position < length; ++position) {
      std::uint16_t expected = 0;
      std::memcpy(&expected, host_tokens + (first.start + position) * 2, 2);
      if (row[static_cast<std::size_t>(position)] != expected) {
        fmt::print(stderr, "token_batches: step {}: window 0 differs from the tokens at offset {}\n", step,
                   first.start + position);
        return 1;
      }
      checksum += static_cast<std::uint64_t>(row[static_cast<std::size_t>(position)]);
    }
    // Where a trainer runs its model: the stream gathers ahead meanwhile.
    std::this_thread::sleep_for(std::chrono::milliseconds(settings.step_ms));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count();
  const double bytes = static_cast<double>(settings.steps) * static_cast<double>(settings.batch) *
                       static_cast<double>(length) * sizeof(std::int64_t);
  fmt::print(
      "{} batches of [{}, {}] int64 onto {} in {:.3f} s, each followed by a {} ms stand-in training step "
      "(--step-ms): {:.1f} batches/s, {:.2f} GB/s (checksum {})\n",
      settings.steps, settings.batch, length, target.selector(), seconds, settings.step_ms,
      static_cast<double>(settings.steps) / seconds, bytes / seconds / 1e9, checksum);
  const BatchStreamStats stats = stream.stats();
  const double gather_rate = stats.gather_seconds > 0 ? static_cast<double>(stats.windows) / stats.gather_seconds : 0;
  fmt::print(
      "stream: {} steps, {:.0f} windows/s, data stall {:.1f}% (the loop waited {:.3f} s of {:.3f} s for "
      "data{}); gathering alone ran at {:.0f} windows/s\n",
      stats.steps, stats.windows_per_second, 100 * stats.data_stall_fraction, stats.wait_seconds, stats.elapsed_seconds,
      settings.step_ms == 0 ? "; with no training step it waits by construction" : "", gather_rate);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Settings> settings = parse(argc, argv);
  if (!settings) {
    fmt::print(stderr, "{}", kUsage);
    return 2;
  }
  try {
    return run(*settings);
  } catch (const Error& error) {
    fmt::print(stderr, "token_batches: error: {}\n", error.what());
    return 1;
  }
}
