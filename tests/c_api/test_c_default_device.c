/* The default device from C: scopes whose exits are checked by token, and
 * the description of what decided the device (the launcher's local rank).
 * meson runs this program with LOCAL_RANK=3 in its environment. */
#include <backplane/backplane.h>

#include "c_runtime.h"
#include "c_test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char* const kThreeCpus = "[backend.cpu]\ndevices = 3\n";

static int is_default(bp_runtime* runtime, const char* selector) {
  bp_device device;
  bp_device wanted = c_test_device(runtime, selector);
  if (bp_default_device(runtime, &device, NULL) != BP_OK) return 0;
  return strcmp(device.backend, wanted.backend) == 0 && device.ordinal == wanted.ordinal;
}

static void scopes_exit_in_order(void) {
  bp_runtime* runtime = c_test_runtime(kThreeCpus);
  uint64_t outer = 0;
  uint64_t inner = 0;
  CHECK(bp_default_device_push_scope(runtime, "cpu:1", &outer) == BP_OK);
  CHECK(bp_default_device_push_scope(runtime, "cpu:0", &inner) == BP_OK);
  CHECK(outer != 0 && inner > outer);
  CHECK(is_default(runtime, "cpu:0"));
  CHECK(bp_default_device_pop_scope(runtime, inner) == BP_OK);
  CHECK(is_default(runtime, "cpu:1"));
  CHECK(bp_default_device_pop_scope(runtime, outer) == BP_OK);
  CHECK(is_default(runtime, "sim:0"));
  bp_runtime_destroy(runtime);
}

static void a_scope_exited_out_of_order_is_an_error_naming_both_and_nothing_pops(void) {
  bp_runtime* runtime = c_test_runtime(kThreeCpus);
  uint64_t outer = 0;
  uint64_t inner = 0;
  char expected[256];
  CHECK(bp_default_device_push_scope(runtime, "cpu:1", &outer) == BP_OK);
  CHECK(bp_default_device_push_scope(runtime, "cpu:0", &inner) == BP_OK);
  CHECK(bp_default_device_pop_scope(runtime, outer) == BP_STATUS_INVALID_ARGUMENT);
  snprintf(expected, sizeof(expected),
           "bp_default_device_pop_scope: default-device scope cpu:1 (token %" PRIu64
           ") exited while scope cpu:0 (token %" PRIu64 "), entered later, is still open; exit scopes innermost first",
           outer, inner);
  CHECK_CONTAINS(bp_last_error(), expected);
  CHECK(is_default(runtime, "cpu:0"));
  CHECK(bp_default_device_pop_scope(runtime, inner) == BP_OK);
  CHECK(is_default(runtime, "cpu:1"));
  CHECK(bp_default_device_pop_scope(runtime, outer) == BP_OK);
  bp_runtime_destroy(runtime);
}

static void a_token_of_another_runtime_or_unknown_is_an_error(void) {
  bp_runtime* first = c_test_runtime(kThreeCpus);
  bp_runtime* second = c_test_runtime(kThreeCpus);
  uint64_t token = 0;
  uint64_t other = 0;
  char expected[128];
  CHECK(bp_default_device_push_scope(first, "cpu:1", &token) == BP_OK);
  CHECK(bp_default_device_pop_scope(second, token) == BP_STATUS_INVALID_ARGUMENT);
  snprintf(expected, sizeof(expected), "scope cpu:1 (token %" PRIu64 ") belongs to another runtime", token);
  CHECK_CONTAINS(bp_last_error(), expected);
  CHECK(is_default(first, "cpu:1"));

  /* Scopes of different runtimes are independent: any order. */
  CHECK(bp_default_device_push_scope(second, "cpu:2", &other) == BP_OK);
  CHECK(bp_default_device_pop_scope(first, token) == BP_OK);
  CHECK(is_default(second, "cpu:2"));
  CHECK(bp_default_device_pop_scope(second, other) == BP_OK);

  CHECK(bp_default_device_pop_scope(first, token) == BP_STATUS_INVALID_ARGUMENT);
  snprintf(expected, sizeof(expected), "no default-device scope with token %" PRIu64 " is open on this thread", token);
  CHECK_CONTAINS(bp_last_error(), expected);
  CHECK(bp_default_device_pop_scope(first, 0) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "no default-device scope with token 0");

  CHECK(bp_default_device_push_scope(first, "cpu:1", NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_default_device_push_scope: token is NULL");
  CHECK(bp_default_device_push_scope(first, "cpu:9", &token) == BP_STATUS_OUT_OF_RANGE);
  CHECK(bp_default_device_pop_scope(NULL, 1) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_default_device_pop_scope: runtime is NULL");
  bp_runtime_destroy(second);
  bp_runtime_destroy(first);
}

static void the_untokened_pop_is_checked_against_token_scopes(void) {
  bp_runtime* runtime = c_test_runtime(kThreeCpus);
  uint64_t token = 0;
  CHECK(bp_default_device_push(runtime, "cpu:1") == BP_OK);
  CHECK(bp_default_device_push_scope(runtime, "cpu:2", &token) == BP_OK);
  CHECK(bp_default_device_pop(runtime) == BP_OK); /* the innermost: cpu:2 */
  CHECK(is_default(runtime, "cpu:1"));
  CHECK(bp_default_device_pop(runtime) == BP_OK);
  CHECK(bp_default_device_pop(runtime) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "nothing was pushed for this runtime on this thread");
  bp_runtime_destroy(runtime);
}

/* A runtime that reads the process environment (LOCAL_RANK=3, set by meson)
 * with two cpu devices and no other backend. */
static bp_runtime* runtime_reading_environment(void) {
  static const char* const paths[] = {BP_TEST_PLUGIN_DIR, BP_TEST_FIXTURE_DIR};
  char config_path[512];
  FILE* file;
  bp_runtime_options options;
  bp_runtime* runtime = NULL;
  snprintf(config_path, sizeof(config_path), "%s/test_c_default_device.toml", BP_TEST_OUTPUT_DIR);
  file = fopen(config_path, "w");
  if (file == NULL) return NULL;
  fputs("[backend.cpu]\ndevices = 2\n[backend.sim]\nenabled = false\n[backend.cuda]\nenabled = false\n", file);
  fclose(file);
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.plugin_paths = paths;
  options.plugin_path_count = 2;
  options.config_file = config_path;
  options.skip_default_paths = 1;
  if (bp_runtime_create(&options, &runtime) != BP_OK) return NULL;
  return runtime;
}

static void the_local_rank_picks_the_device_and_is_described(void) {
  bp_runtime* runtime = runtime_reading_environment();
  bp_device device;
  bp_device_source source = -1;
  const char* description = NULL;
  CHECK(runtime != NULL);
  if (runtime == NULL) return;
  CHECK(bp_default_device_describe(runtime, &device, &source, &description) == BP_OK);
  CHECK(strcmp(device.backend, "cpu") == 0 && device.ordinal == 1); /* 3 % 2 devices */
  CHECK(source == BP_SOURCE_LOCAL_RANK);
  CHECK(description != NULL && strcmp(description, "LOCAL_RANK=3") == 0);
  CHECK(strcmp(bp_device_source_name(BP_SOURCE_LOCAL_RANK), "local rank") == 0);

  CHECK(bp_default_device_set(runtime, "cpu:0") == BP_OK);
  CHECK(bp_default_device_describe(runtime, &device, NULL, &description) == BP_OK);
  CHECK(device.ordinal == 0 && strcmp(description, "set in code") == 0);
  CHECK(bp_default_device_describe(runtime, NULL, NULL, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_default_device_describe: out is NULL");
  bp_runtime_destroy(runtime);
}

int main(void) {
  c_test_program = "test_c_default_device";
  RUN(scopes_exit_in_order);
  RUN(a_scope_exited_out_of_order_is_an_error_naming_both_and_nothing_pops);
  RUN(a_token_of_another_runtime_or_unknown_is_an_error);
  RUN(the_untokened_pop_is_checked_against_token_scopes);
  RUN(the_local_rank_picks_the_device_and_is_described);
  return c_test_summary();
}
