// Runs a test body in a child of fork() and waits for it with a deadline, so
// that a child that hangs fails the test ("child hung") instead of hanging CI.
//
// The child cannot report through doctest (its results stay in the child), so
// the body returns its failures as text; an empty text is a pass.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>

namespace backplane::testing {

struct ChildOutcome {
  bool hung = false;
  int exit_code = -1;  // -1: killed by a signal or not started
  std::string report;  // the failures the child wrote
};

// Collects failed expectations inside the child.
class Checks {
 public:
  void expect(bool ok, const std::string& what) {
    if (!ok) failures_ += what + "\n";
  }
  const std::string& failures() const { return failures_; }

 private:
  std::string failures_;
};

inline ChildOutcome run_forked(const std::function<std::string()>& body,
                               std::chrono::seconds limit = std::chrono::seconds(30)) {
  ChildOutcome outcome;
  int channel[2];
  if (pipe(channel) != 0) {
    outcome.report = "pipe() failed";
    return outcome;
  }
  const pid_t child = fork();
  if (child < 0) {
    outcome.report = "fork() failed";
    return outcome;
  }
  if (child == 0) {
    close(channel[0]);
    std::string report;
    try {
      report = body();
    } catch (const std::exception& error) {
      report = std::string("uncaught exception: ") + error.what();
    } catch (...) {
      report = "uncaught exception";
    }
    if (report.size() > 4096) report.resize(4096);  // fits the pipe: write never blocks
    if (!report.empty()) (void)!write(channel[1], report.data(), report.size());
    _exit(report.empty() ? 0 : 1);  // no atexit handlers: they belong to the parent's test run
  }
  close(channel[1]);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(child, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done == 0) {
    outcome.hung = true;
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
  } else if (done == child && WIFEXITED(status)) {
    outcome.exit_code = WEXITSTATUS(status);
  }
  char buffer[4096];
  ssize_t got = 0;
  while ((got = read(channel[0], buffer, sizeof(buffer))) > 0)
    outcome.report.append(buffer, static_cast<std::size_t>(got));
  close(channel[0]);
  return outcome;
}

}  // namespace backplane::testing

// The test fails with "child hung" or with what the child reported.
#define CHECK_CHILD_PASSED(outcome)                                                 \
  do {                                                                              \
    const auto& checked_outcome = (outcome);                                        \
    CHECK_MESSAGE(!checked_outcome.hung, "child hung (killed after the deadline)"); \
    CHECK_MESSAGE(checked_outcome.exit_code == 0, checked_outcome.report);          \
  } while (false)
