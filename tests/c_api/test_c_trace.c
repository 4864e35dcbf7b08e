/* The timeline through the C API: the default capacity and what 0 means,
 * file names with %p, and the refusals, each with its code and message. */
#include <backplane/backplane.h>

#include "c_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char path[512];

static void trace_path(const char* name) {
  snprintf(path, sizeof(path), "%s/test_c_trace-%s", BP_TEST_OUTPUT_DIR, name);
}

/* The file's text, or "" (static buffer, enough for a trace of no events). */
static const char* text_of(const char* file_name) {
  static char text[65536];
  text[0] = '\0';
  FILE* file = fopen(file_name, "rb");
  if (file == NULL) return text;
  const size_t read = fread(text, 1, sizeof(text) - 1, file);
  text[read] = '\0';
  fclose(file);
  return text;
}

static void capacity_0_is_the_default(void) {
  CHECK(BP_TRACE_DEFAULT_CAPACITY == 1048576);
  trace_path("zero.json");
  bp_trace_options options = {sizeof(bp_trace_options), 0};
  CHECK(bp_trace_start(path, &options) == BP_OK);
  CHECK(bp_trace_stop() == BP_OK);
  CHECK_CONTAINS(text_of(path), "\"capacity\":1048576");
  options.capacity = 7;
  CHECK(bp_trace_start(path, &options) == BP_OK);
  CHECK(bp_trace_stop() == BP_OK);
  CHECK_CONTAINS(text_of(path), "\"capacity\":7");
  CHECK(bp_trace_start(path, NULL) == BP_OK);
  CHECK(bp_trace_stop() == BP_OK);
  CHECK_CONTAINS(text_of(path), "\"capacity\":1048576");
}

static void percent_p_names_the_file_by_process(void) {
  trace_path("pid-%p.json");
  CHECK(bp_trace_start(path, NULL) == BP_OK);
  CHECK(bp_trace_stop() == BP_OK);
  char expected[600];
  snprintf(expected, sizeof(expected), "%s/test_c_trace-pid-%ld.json", BP_TEST_OUTPUT_DIR, (long)getpid());
  CHECK(access(expected, F_OK) == 0);
  remove(expected);
}

static void refusals_name_the_path(void) {
  trace_path("bad-%q.json");
  CHECK(bp_trace_start(path, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "'%q'");
  CHECK(bp_trace_start("", NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "the path is empty");
  CHECK(bp_trace_start(NULL, NULL) == BP_STATUS_INVALID_ARGUMENT);
  trace_path("trace.fifo");
  remove(path);
  CHECK(mkfifo(path, 0600) == 0);
  CHECK(bp_trace_start(path, NULL) == BP_STATUS_INVALID_ARGUMENT); /* at once: nobody reads the FIFO */
  CHECK_CONTAINS(bp_last_error(), "is a FIFO (named pipe), not a regular file");
  remove(path);
  trace_path("missing/out.json");
  CHECK(bp_trace_start(path, NULL) == BP_STATUS_IO);
  CHECK_CONTAINS(bp_last_error(), "No such file or directory");
  CHECK(bp_trace_stop() == BP_OK); /* nothing was started: nothing to write */
}

int main(void) {
  RUN(capacity_0_is_the_default);
  RUN(percent_p_names_the_file_by_process);
  RUN(refusals_name_the_path);
  return c_test_summary();
}
