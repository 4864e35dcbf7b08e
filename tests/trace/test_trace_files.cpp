// Where a trace is written and how: the same rules as saves (a new file
// renamed into place, links followed under the protected_symlinks rule, no
// special files), one writer per file, file names per process and rank, the
// path resolved when recording starts, and forked children.
#include "support/errors.hpp"
#include "support/fork_child.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_file.hpp"
#include "trace/trace.hpp"

#include <backplane/trace.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

namespace backplane::testing {
namespace {

namespace trace = detail::trace;
namespace fs = std::filesystem;
using nlohmann::json;

struct StopAtEnd {
  ~StopAtEnd() {
    try {
      trace_stop();
    } catch (const Error&) {
    }
  }
};

// The names of the instant events of category "test" in a trace file.
std::vector<std::string> test_instants(const fs::path& path) {
  std::vector<std::string> names;
  const json file = read_json(path);
  for (const json& event : file["traceEvents"]) {
    if (event["cat"] == "test") names.push_back(event["name"]);
  }
  return names;
}

std::string text_of(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_CASE("[trace] a FIFO as the trace file is refused at once, not waited on") {
  const StopAtEnd stop_at_end;
  TempDir directory;
  const fs::path fifo = directory.path() / "trace.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // In a child with a deadline: opening a FIFO for writing with nobody
  // reading blocks for ever, which is what this guards against.
  CHECK_CHILD_PASSED(run_forked(
      [&] {
        Checks checks;
        try {
          trace_start(fifo);
          checks.expect(false, "trace_start accepted a FIFO");
        } catch (const Error& error) {
          checks.expect(error.code() == ErrorCode::kInvalidArgument, "the code is kInvalidArgument");
          checks.expect(contains(error.what(), "trace.fifo: it is a FIFO (named pipe), not a regular file"),
                        std::string("the message names the FIFO: ") + error.what());
        }
        return checks.failures();
      },
      std::chrono::seconds(20)));
  CHECK(fs::is_fifo(fifo));  // left as it was
}

TEST_CASE("[trace] the file is replaced whole, never written into: another user's file keeps its data") {
  const StopAtEnd stop_at_end;
  TempDir directory;
  const fs::path path = directory.path() / "out.json";
  std::ofstream(path) << "someone else's data";
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  const bool other_owner = ::geteuid() == 0 && ::chown(path.c_str(), 65534, 65534) == 0;
  const fs::path kept = directory.path() / "kept";
  fs::create_hard_link(path, kept);  // the old file, whatever happens to its name

  trace_start(path);
  trace::instant({}, "test", "mine");
  trace_stop();
  CHECK(text_of(kept) == "someone else's data");  // fopen("w") would have truncated it
  CHECK(test_instants(path) == std::vector<std::string>{"mine"});
  struct stat written {};
  REQUIRE(::stat(path.c_str(), &written) == 0);
  CHECK(written.st_uid == ::geteuid());
  CHECK((written.st_mode & 0777) == 0600);  // as a save keeps a replaced file's mode
  if (!other_owner) MESSAGE("not root: the replaced file was our own");
}

TEST_CASE("[trace] a link planted by another user in a sticky world-writable directory is not followed") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root to give a link to another user");
    return;
  }
  const StopAtEnd stop_at_end;
  TempDir directory;
  const fs::path shared = directory.path() / "tmp";
  fs::create_directory(shared);
  ::chmod(shared.c_str(), 01777);
  const fs::path victim = directory.path() / "victim";
  std::ofstream(victim) << "root's secret";
  ::chmod(victim.c_str(), 0600);
  fs::create_symlink(victim, shared / "trace.json");
  REQUIRE(::lchown((shared / "trace.json").c_str(), 65534, 65534) == 0);
  const Error error = error_from([&] { trace_start(shared / "trace.json"); });
  CHECK(error.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(error.what(), "refusing to write the trace through the symlink"));
  CHECK(contains(error.what(), "uid 65534"));
  CHECK_FALSE(trace_active());
  CHECK(text_of(victim) == "root's secret");
}

TEST_CASE("[trace] file names: %p, %r, %h and %% expand; other sequences and NUL bytes are refused") {
  const trace::PathValues values{4242, "3", "node7"};
  CHECK(trace::expand_trace_path("t-%p-%r-%h-%%.json", values) == "t-4242-3-node7-%.json");
  CHECK(trace::expand_trace_path("plain.json", values) == "plain.json");
  for (const char* bad : {"t-%x.json", "t-%", "t-%d.json"}) {
    CAPTURE(bad);
    const Error error = error_from([&] { trace::expand_trace_path(bad, values); });
    CHECK(error.code() == ErrorCode::kInvalidArgument);
    CHECK(contains(error.what(), std::string("the path '") + bad + "'"));
  }
  const Error nul = error_from([&] { trace_start(fs::path(std::string("a\0b.json", 8))); });
  CHECK(nul.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(nul.what(), "the path 'a\\x00b.json' holds a NUL byte"));
  CHECK(error_from([&] { trace_start(""); }).code() == ErrorCode::kInvalidArgument);
  CHECK_FALSE(trace_active());
}

TEST_CASE("[trace] a file name longer than NAME_MAX is refused at start, not lost at stop") {
  TempDir dir;
  const fs::path fits = dir / (std::string(250, 'n') + ".json");  // 255 bytes
  trace_start(fits);
  trace_stop();
  CHECK(read_json(fits).contains("traceEvents"));
  const fs::path too_long = dir / (std::string(251, 'n') + ".json");  // 256 bytes
  const Error error = error_from([&] { trace_start(too_long); });
  CHECK(error.code() == ErrorCode::kInvalidArgument);
  CHECK(error.what() == "trace_start: cannot write the trace to " + too_long.string() +
                            ": its file name is 256 bytes, longer than the 255 bytes (NAME_MAX) its file system "
                            "allows in one name");
  CHECK_FALSE(trace_active());
  CHECK(std::distance(fs::directory_iterator(dir.path()), {}) == 1);  // nothing left but the first trace
}

TEST_CASE("[trace] %r is the launcher's local rank, read from the variables the default device reads") {
  const StopAtEnd stop_at_end;
  TempDir directory;
  CHECK_CHILD_PASSED(run_forked([&] {
    Checks checks;
    ::setenv("LOCAL_RANK", "", 1);  // empty counts as unset, as for the default device
    ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "5", 1);
    trace_start(directory.path() / "rank-%r-pid-%p.json");
    const auto written = trace_stop();
    const fs::path expected = directory.path() / ("rank-5-pid-" + std::to_string(::getpid()) + ".json");
    checks.expect(written == expected, "the rank and pid fill the name: " + written.value_or("").string());
    checks.expect(fs::exists(expected), "the file exists");
    ::setenv("LOCAL_RANK", "two", 1);
    try {
      trace_start(directory.path() / "rank-%r.json");
      checks.expect(false, "a malformed LOCAL_RANK was accepted");
    } catch (const Error& error) {
      checks.expect(contains(error.what(), "LOCAL_RANK='two' is not a non-negative integer"), error.what());
    }
    ::unsetenv("LOCAL_RANK");
    ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    ::unsetenv("SLURM_LOCALID");
    trace_start(directory.path() / "rank-%r.json");
    checks.expect(trace_stop() == directory.path() / "rank-0.json", "no launcher: rank 0");
    return checks.failures();
  }));
}

TEST_CASE("[trace] the path is resolved when recording starts: chdir() later changes nothing") {
  const StopAtEnd stop_at_end;
  TempDir first;
  TempDir second;
  const fs::path before = fs::current_path();
  fs::current_path(first.path());
  trace_start("relative.json");
  fs::current_path(second.path());
  CHECK(trace_active() == first.path() / "relative.json");
  trace::instant({}, "test", "after chdir");
  const auto written = trace_stop();
  fs::current_path(before);
  CHECK(written == first.path() / "relative.json");
  CHECK(test_instants(first.path() / "relative.json") == std::vector<std::string>{"after chdir"});
  CHECK(fs::is_empty(second.path()));
}

TEST_CASE("[trace] a relative path with no current directory to resolve it against is an error") {
  TempDir directory;
  CHECK_CHILD_PASSED(run_forked([&] {
    Checks checks;
    const fs::path gone = directory.path() / "gone";
    fs::create_directory(gone);
    fs::current_path(gone);
    fs::remove(gone);
    try {
      trace_start("relative.json");
      checks.expect(false, "trace_start resolved a path against a removed directory");
    } catch (const Error& error) {
      checks.expect(error.code() == ErrorCode::kIo, "the code is kIo");
      checks.expect(contains(error.what(), "cannot resolve relative.json against the current directory"), error.what());
    }
    return checks.failures();
  }));
}

TEST_CASE("[trace] a trace started on the same path while trace_stop() writes waits, and is not lost") {
  const StopAtEnd stop_at_end;
  TempDir directory;
  const fs::path path = directory.path() / "same.json";
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    trace_start(path);
    // Enough events that writing them takes a while (tens of megabytes).
    for (int index = 0; index < 200000; ++index) {
      trace::instant({}, "filler", "filler event with a longish name", {{"index", index}});
    }
    std::thread stopper([] { trace_stop(); });
    // Start the next trace as soon as the first one's session is closed.
    for (;;) {
      try {
        trace_start(path);
        break;
      } catch (const Error& error) {
        REQUIRE(contains(error.what(), "already being recorded"));
        std::this_thread::yield();
      }
    }
    // The start waited for the write: the first trace is on disk, whole. (A
    // flag the stopper set after trace_stop() returned could still be unset
    // here, which made an earlier form of this check fail under load.)
    const std::string first = text_of(path);
    std::size_t fillers = 0;
    for (std::size_t at = first.find("filler event with a longish name"); at != std::string::npos;
         at = first.find("filler event with a longish name", at + 1)) {
      ++fillers;
    }
    CHECK(fillers == 200000);
    trace::instant({}, "test", "second");
    trace_stop();
    stopper.join();
    CHECK(test_instants(path) == std::vector<std::string>{"second"});  // valid JSON, the second trace alone
  }
}

TEST_CASE("[trace] processes tracing to one file each leave a whole trace; %p gives each its own") {
  TempDir directory;
  const fs::path shared = directory.path() / "shared.json";
  std::vector<pid_t> children;
  for (int child = 0; child < 4; ++child) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int failed = 0;
      for (const fs::path& pattern : {shared, directory.path() / "own-%p.json"}) {
        try {
          trace_start(pattern, TraceOptions{});
          for (int index = 0; index < 50000; ++index) trace::instant({}, "filler", "event", {{"index", index}});
          trace::instant({}, "test", "child " + std::to_string(child));
          trace_stop();
        } catch (...) {
          failed = 1;
        }
      }
      ::_exit(failed);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  const std::vector<std::string> last = test_instants(shared);  // parses: one writer's whole file
  REQUIRE(last.size() == 1);
  CHECK(last[0].starts_with("child "));
  for (const pid_t pid : children) {
    const fs::path own = directory.path() / ("own-" + std::to_string(pid) + ".json");
    CHECK(test_instants(own).size() == 1);
  }
}

TEST_CASE("[trace] a child forked while recording starts its own trace empty") {
  const StopAtEnd stop_at_end;
  TempDir directory;
  trace_start(directory.path() / "parent.json");
  trace::instant({}, "test", "parent before fork");
  CHECK_CHILD_PASSED(run_forked([&] {
    Checks checks;
    checks.expect(!trace_active(), "the parent's trace is not the child's");
    trace::instant({}, "test", "child, not recording");
    trace_start(directory.path() / "child.json");
    trace::instant({}, "test", "child");
    trace_stop();
    const std::vector<std::string> names = test_instants(directory.path() / "child.json");
    checks.expect(names == std::vector<std::string>{"child"},
                  "the child's trace holds only its own event, got " + std::to_string(names.size()));
    return checks.failures();
  }));
  trace::instant({}, "test", "parent after fork");
  trace_stop();
  CHECK(test_instants(directory.path() / "parent.json") ==
        std::vector<std::string>{"parent before fork", "parent after fork"});
}

}  // namespace
}  // namespace backplane::testing
