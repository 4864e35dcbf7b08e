// `backplane conformance PLUGIN.so [--option KEY=VALUE ...] [--seed N] [--doctest-summary]`:
// runs the backend conformance suite (backplane/conformance.hpp) against one
// plugin file. A line naming each check as it starts ("....  NAME"), one with
// its verdict as it ends, then a summary; exit status 0 when no check failed,
// 1 when one did, 2 for a usage error. Lines are flushed as they are printed,
// so a plugin that crashes the process leaves the check it crashed in last.
#include "arguments.hpp"
#include "commands.hpp"

#include <backplane/conformance.hpp>

#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace backplane::tools {
namespace {

constexpr std::string_view kUsage =
    "usage: backplane conformance PLUGIN.so [--option KEY=VALUE ...] [--seed N] [--doctest-summary]\n"
    "  --option KEY=VALUE   plugin option passed to backend_create (repeatable), e.g. devices=2\n"
    "  --seed N             seed of the random data, sizes and orders (default 24301)\n"
    "  --doctest-summary    also print '[doctest] test cases: ...' so test scripts count the checks\n";

struct Parsed {
  std::string plugin;
  conformance::Options options;
  bool doctest_summary = false;
};

int usage_error(std::string_view message) {
  fmt::print(stderr, "backplane conformance: {}\n{}", message, kUsage);
  return 2;
}

void print_check(const conformance::CheckResult& check) {
  const std::string_view outcome = conformance::to_string(check.outcome);
  if (check.detail.empty()) {
    fmt::print("{:<4}  {}\n", outcome, check.name);
  } else {
    fmt::print("{:<4}  {}  [{}]\n", outcome, check.name, check.detail);
  }
  std::fflush(stdout);
}

// Printed before the check runs: if the plugin crashes the process, the last
// line names the check it crashed in.
void print_start(const std::string& name) {
  fmt::print("....  {}\n", name);
  std::fflush(stdout);
}

}  // namespace

int run_conformance(const Arguments& args) {
  const ParsedArguments arguments =
      parse_arguments(args, {{"--option", true}, {"--seed", true}, {"--doctest-summary", false}});
  if (arguments.help) {
    fmt::print("{}", kUsage);
    return 0;
  }
  if (!arguments.error.empty()) return usage_error(arguments.error);
  if (arguments.positional.size() > 1) return usage_error("give exactly one plugin file");
  if (arguments.positional.empty()) return usage_error("no plugin file given");
  Parsed parsed;
  parsed.plugin = std::string(arguments.positional.front());
  for (const auto& [name, value] : arguments.options) {
    if (name == "--seed") {
      const auto [end, status] = std::from_chars(value.data(), value.data() + value.size(), parsed.options.seed);
      if (status != std::errc{} || end != value.data() + value.size()) {
        return usage_error(fmt::format("--seed {} is not an unsigned integer", value));
      }
    } else if (name == "--option") {
      const auto equals = value.find('=');
      if (equals == std::string_view::npos || equals == 0) {
        return usage_error(fmt::format("--option {} is not KEY=VALUE", value));
      }
      parsed.options.plugin_options.emplace_back(std::string(value.substr(0, equals)),
                                                 std::string(value.substr(equals + 1)));
    } else {
      parsed.doctest_summary = true;
    }
  }

  fmt::print("conformance: {} (seed {})\n", parsed.plugin, parsed.options.seed);
  std::fflush(stdout);
  parsed.options.isolate = isolation_by_default();
  parsed.options.on_start = print_start;
  parsed.options.on_check = print_check;
  const conformance::Report report = conformance::run(parsed.plugin, parsed.options);

  const std::size_t passed = report.count(conformance::Outcome::kPass);
  const std::size_t failed = report.count(conformance::Outcome::kFail);
  const std::size_t not_applicable = report.count(conformance::Outcome::kNotApplicable);
  std::string backend = "not loaded";
  if (report.loaded) {
    std::string state;
    if (!report.created) {
      state = "no backend instance (backend_create failed)";
    } else if (!report.probed) {
      state = "probe failed";
    } else {
      state = fmt::format("{}, {} device(s)", report.available ? "available" : "unavailable", report.device_count);
    }
    backend = fmt::format("backend {} {} (ABI {}), {}", report.backend_name, report.plugin_version, report.abi_version,
                          state);
  }
  fmt::print("summary: {} checks: {} passed, {} failed, {} n/a; {}: {}\n", report.checks.size(), passed, failed,
             not_applicable, backend, report.passed() ? "CONFORMS" : "DOES NOT CONFORM");
  if (parsed.doctest_summary) {
    fmt::print("[doctest] test cases: {} | {} passed | {} failed | {} skipped\n", report.checks.size(), passed, failed,
               not_applicable);
  }
  return report.passed() ? 0 : 1;
}

}  // namespace backplane::tools
