/* API 0.9 from C: a schedule changes the batch size and the context at
 * given steps, a weight schedule changes the mixture, the state records both
 * and resumes inside them, and a caller built against the 0.8 struct still
 * creates a stream without them. C11, -Wall -Wextra -Werror -pedantic. */
#include <backplane/backplane.h>
#include <backplane/struct_size.h>

#include "c_runtime.h"
#include "c_test.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TOKENS 3000

/* Source `which` holds tokens which * 10000 + i, so a token names its place. */
static bp_array* counting_tokens(bp_runtime* runtime, int32_t which) {
  static int32_t tokens[2][TOKENS];
  bp_device cpu = c_test_device(runtime, "cpu:0");
  int64_t count = TOKENS;
  bp_array* array = NULL;
  int64_t index;
  for (index = 0; index < TOKENS; ++index) tokens[which][index] = which * 10000 + (int32_t)index;
  if (bp_array_create(runtime, &cpu, BP_DTYPE_I32, &count, 1, tokens[which], sizeof(tokens[which]), &array) != BP_OK) {
    fprintf(stderr, "bp_array_create: %s\n", bp_last_error());
    exit(1);
  }
  return array;
}

static const bp_schedule_entry kSchedule[] = {{0, 4, 15}, {3, 8, 15}, {5, 8, 31}};
static const int64_t kWeightSteps[] = {0, 4};
static const double kWeights[] = {0.75, 0.25, 0.25, 0.75}; /* two entries of two sources */

static bp_batch_stream_options scheduled_options(void) {
  bp_batch_stream_options options;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.seed = 3;
  options.schedule = kSchedule;
  options.schedule_count = 3;
  options.weights = kWeights;
  options.weight_count = 4;
  options.weight_steps = kWeightSteps;
  options.weight_step_count = 2;
  return options;
}

/* The step's batch, checked against the windows the stream reports for it:
 * its shape is the step's [B, T + 1], each row the window's tokens. */
static void check_step(bp_batch_stream* stream, int64_t step, int64_t batch_size, int64_t context) {
  int32_t sources[8];
  int64_t starts[8];
  int32_t rows[8 * 32];
  int64_t shape[2] = {0, 0};
  size_t count = 0;
  bp_array* batch = NULL;
  int64_t row;
  int64_t column;
  CHECK(bp_batch_stream_windows(stream, step, sources, starts, 8, &count) == BP_OK);
  CHECK(count == (size_t)batch_size);
  CHECK(bp_batch_stream_next(stream, &batch, 1, &count) == BP_OK);
  CHECK(bp_array_shape(batch, shape, 2) == BP_OK);
  CHECK(shape[0] == batch_size && shape[1] == context + 1);
  CHECK(bp_array_copy_to_host(batch, rows, (size_t)(batch_size * (context + 1)) * sizeof(int32_t)) == BP_OK);
  for (row = 0; row < batch_size; ++row) {
    for (column = 0; column <= context; ++column) {
      CHECK(rows[row * (context + 1) + column] == sources[row] * 10000 + starts[row] + column);
    }
  }
  bp_array_destroy(batch);
}

static char* state_of(bp_batch_stream* stream) {
  size_t length = 0;
  char* json;
  CHECK(bp_batch_stream_state(stream, NULL, 0, &length) == BP_STATUS_OUT_OF_RANGE);
  json = malloc(length + 1);
  if (json == NULL) exit(1);
  CHECK(bp_batch_stream_state(stream, json, length + 1, &length) == BP_OK);
  return json;
}

static void a_stream_follows_its_schedule_and_resumes_inside_it(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* sources[2];
  bp_batch_stream_options options = scheduled_options();
  bp_batch_stream* stream = NULL;
  bp_batch_stream* resumed = NULL;
  int32_t expected_sources[8];
  int64_t expected_starts[8];
  int32_t got_sources[8];
  int64_t got_starts[8];
  size_t count = 0;
  char* state;
  int64_t step;
  int index;
  sources[0] = counting_tokens(runtime, 0);
  sources[1] = counting_tokens(runtime, 1);
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)sources, 2, &options, &stream) == BP_OK);
  for (step = 0; step < 7; ++step) check_step(stream, step, step < 3 ? 4 : 8, step < 5 ? 15 : 31);
  state = state_of(stream);
  CHECK_CONTAINS(state, "\"version\":3");
  CHECK_CONTAINS(state, "\"schedule\":[[3,8,15],[5,8,31]]");
  CHECK_CONTAINS(state, "\"weight_schedule\":[[4,[0.25,0.75]]]");
  CHECK_CONTAINS(state, "\"mixture\":\"interleaved\"");
  options.state = state;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)sources, 2, &options, &resumed) == BP_OK);
  for (step = 7; step < 12; ++step) {
    CHECK(bp_batch_stream_windows(stream, step, expected_sources, expected_starts, 8, &count) == BP_OK);
    CHECK(bp_batch_stream_windows(resumed, step, got_sources, got_starts, 8, &count) == BP_OK);
    for (index = 0; index < 8; ++index) {
      CHECK(got_sources[index] == expected_sources[index] && got_starts[index] == expected_starts[index]);
    }
  }
  check_step(resumed, 7, 8, 31);
  free(state);
  bp_batch_stream_destroy(resumed);
  bp_batch_stream_destroy(stream);
  bp_array_destroy(sources[1]);
  bp_array_destroy(sources[0]);
  bp_runtime_destroy(runtime);
}

static void bad_schedule_arrays_are_refused_naming_the_field(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* sources[2];
  bp_batch_stream_options options = scheduled_options();
  bp_batch_stream* stream = NULL;
  sources[0] = counting_tokens(runtime, 0);
  sources[1] = counting_tokens(runtime, 1);
  options.weight_count = 3;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)sources, 2, &options, &stream) ==
        BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(),
                 "bp_batch_stream_create: options->weight_count 3 is not weight_step_count 2 x 2 "
                 "sources");
  options = scheduled_options();
  options.weight_step_count = ((size_t)1 << (sizeof(size_t) * 8 - 1)) + 1; /* x 2 sources wraps to 2 */
  options.weight_count = 2;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)sources, 2, &options, &stream) ==
        BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "options->weight_count 2 is not weight_step_count");
  options = scheduled_options();
  options.schedule = NULL;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)sources, 2, &options, &stream) ==
        BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "options->schedule");
  options = scheduled_options();
  options.weight_steps = NULL;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)sources, 2, &options, &stream) ==
        BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "options->weight_steps");
  bp_array_destroy(sources[1]);
  bp_array_destroy(sources[0]);
  bp_runtime_destroy(runtime);
}

static void an_api_0_8_options_struct_has_no_schedules(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* sources[2];
  bp_batch_stream_options options = scheduled_options();
  bp_batch_stream* stream = NULL;
  sources[0] = counting_tokens(runtime, 0);
  sources[1] = counting_tokens(runtime, 1);
  options.struct_size = BP_STRUCT_SIZE(bp_batch_stream_options, max_documents);
  options.batch_size = 4;
  options.context = 15;
  options.weight_count = 2; /* the first entry's weights, as a 0.8 caller gives them */
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)sources, 2, &options, &stream) == BP_OK);
  check_step(stream, 0, 4, 15);
  check_step(stream, 1, 4, 15);
  check_step(stream, 2, 4, 15); /* the entries at steps 3 and 5 were never read */
  check_step(stream, 3, 4, 15);
  bp_batch_stream_destroy(stream);
  bp_array_destroy(sources[1]);
  bp_array_destroy(sources[0]);
  bp_runtime_destroy(runtime);
}

int main(void) {
  c_test_program = "test_c_schedules";
  RUN(a_stream_follows_its_schedule_and_resumes_inside_it);
  RUN(bad_schedule_arrays_are_refused_naming_the_field);
  RUN(an_api_0_8_options_struct_has_no_schedules);
  return c_test_summary();
}
