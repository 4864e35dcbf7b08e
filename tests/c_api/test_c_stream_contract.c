/* What API 0.7 gives the C face that Python once worked around: the stream's
 * step, the seed taken from a state, the prefetch limit and the last step as
 * constants, callers built against API 0.5 structs, and a pattern matching
 * nothing told apart by its count. C11, -Wall -Wextra -Werror -pedantic. */
#include <backplane/backplane.h>
#include <backplane/struct_size.h>

#include "c_runtime.h"
#include "c_test.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TOKENS 2000

static bp_array* counting_tokens(bp_runtime* runtime) {
  bp_device cpu = c_test_device(runtime, "cpu:0");
  static uint16_t tokens[TOKENS];
  int64_t count = TOKENS;
  bp_array* array = NULL;
  int64_t index;
  for (index = 0; index < TOKENS; ++index) tokens[index] = (uint16_t)index;
  if (bp_array_create(runtime, &cpu, BP_DTYPE_U16, &count, 1, tokens, sizeof(tokens), &array) != BP_OK) {
    fprintf(stderr, "bp_array_create: %s\n", bp_last_error());
    exit(1);
  }
  return array;
}

static bp_batch_stream_options stream_options(uint64_t seed) {
  bp_batch_stream_options options;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.batch_size = 4;
  options.context = 15;
  options.seed = seed;
  return options;
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

/* The first token of each of the step's 4 windows, read from the batch. */
static void first_tokens(bp_batch_stream* stream, int64_t* out) {
  bp_array* batch = NULL;
  size_t count = 0;
  uint16_t rows[4 * 16];
  int index;
  CHECK(bp_batch_stream_next(stream, &batch, 1, &count) == BP_OK);
  CHECK(bp_array_copy_to_host(batch, rows, sizeof(rows)) == BP_OK);
  for (index = 0; index < 4; ++index) out[index] = rows[index * 16];
  bp_array_destroy(batch);
}

static void the_step_and_the_seed_of_a_state(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* source = counting_tokens(runtime);
  bp_batch_stream_options options = stream_options(7);
  bp_batch_stream* first = NULL;
  bp_batch_stream* resumed = NULL;
  int64_t step = -1;
  int64_t expected[4];
  int64_t got[4];
  char* state;
  options.dtype = BP_DTYPE_U16;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&source, 1, &options, &first) == BP_OK);
  CHECK(bp_batch_stream_step(first, &step) == BP_OK && step == 0);
  first_tokens(first, got);
  first_tokens(first, got);
  CHECK(bp_batch_stream_step(first, &step) == BP_OK && step == 2);
  state = state_of(first);
  first_tokens(first, expected);

  /* seed_from_state: the state's seed (7), not the struct's 0. */
  options = stream_options(0);
  options.dtype = BP_DTYPE_U16;
  options.seed_from_state = 1;
  options.state = state;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&source, 1, &options, &resumed) == BP_OK);
  CHECK(bp_batch_stream_step(resumed, &step) == BP_OK && step == 2);
  first_tokens(resumed, got);
  CHECK(memcmp(got, expected, sizeof(got)) == 0);
  bp_batch_stream_destroy(resumed);

  /* Without it the seed is the struct's: 0 against the state's 7. */
  options.seed_from_state = 0;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&source, 1, &options, &resumed) ==
        BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "BatchStream: cannot resume: the state was saved with seed 7, this stream has 0");
  options.seed = 3;
  options.seed_from_state = 1;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&source, 1, &options, &resumed) ==
        BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(),
                 "bp_batch_stream_create: options->seed is 3 and options->seed_from_state asks for the state's seed");
  CHECK(bp_batch_stream_step(NULL, &step) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_batch_stream_step(first, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_batch_stream_step: out is NULL");
  free(state);
  bp_batch_stream_destroy(first);
  bp_array_destroy(source);
  bp_runtime_destroy(runtime);
}

static void an_api_0_5_options_struct_is_read_as_it_was(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* source = counting_tokens(runtime);
  bp_batch_stream_options options = stream_options(7);
  bp_batch_stream* stream = NULL;
  options.struct_size = BP_STRUCT_SIZE(bp_batch_stream_options, state);
  options.seed_from_state = 1; /* past the end of a 0.5 struct: never read */
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&source, 1, &options, &stream) == BP_OK);
  bp_batch_stream_destroy(stream);
  options.struct_size = sizeof(options) - 1; /* no version's size */
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&source, 1, &options, &stream) ==
        BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_batch_stream_create: options->struct_size");
  bp_array_destroy(source);
  bp_runtime_destroy(runtime);
}

static void the_last_step_is_handed_out_then_the_stream_stops(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* source = counting_tokens(runtime);
  bp_batch_stream_options options = stream_options(7);
  bp_batch_stream* stream = NULL;
  char* state;
  char* at_last;
  char* step_field;
  char text[32];
  int64_t step = 0;
  int64_t tokens[4];
  bp_array* batch = NULL;
  size_t count = 0;
  CHECK(BP_BATCH_STREAM_MAX_PREFETCH == 64);
  CHECK(BP_BATCH_STREAM_LAST_STEP == INT64_MAX - 128);
  options.prefetch = BP_BATCH_STREAM_MAX_PREFETCH;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&source, 1, &options, &stream) == BP_OK);
  state = state_of(stream);
  bp_batch_stream_destroy(stream);
  /* "step":0 becomes "step":<the last step>. */
  step_field = strstr(state, "\"step\":0");
  CHECK(step_field != NULL);
  if (step_field == NULL) exit(1);
  snprintf(text, sizeof(text), "\"step\":%lld", (long long)BP_BATCH_STREAM_LAST_STEP);
  at_last = malloc(strlen(state) + sizeof(text));
  if (at_last == NULL) exit(1);
  memcpy(at_last, state, (size_t)(step_field - state));
  strcpy(at_last + (step_field - state), text);
  strcat(at_last, step_field + strlen("\"step\":0"));
  options.state = at_last;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&source, 1, &options, &stream) == BP_OK);
  CHECK(bp_batch_stream_step(stream, &step) == BP_OK && step == BP_BATCH_STREAM_LAST_STEP);
  first_tokens(stream, tokens);
  CHECK(bp_batch_stream_next(stream, &batch, 1, &count) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "BatchStream: step 9223372036854775679 was the last a stream hands out");
  CHECK(bp_batch_stream_step(stream, &step) == BP_OK && step == BP_BATCH_STREAM_LAST_STEP + 1);
  bp_batch_stream_destroy(stream);
  free(at_last);
  free(state);
  bp_array_destroy(source);
  bp_runtime_destroy(runtime);
}

static void a_pattern_matching_nothing_is_an_empty_set_when_asked(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  char pattern[512];
  bp_tokens_options options;
  bp_token_files* files = NULL;
  size_t count = 7;
  snprintf(pattern, sizeof(pattern), "%s/test_c_stream_contract-none-*.bin", BP_TEST_OUTPUT_DIR);
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.allow_empty_match = 1;
  CHECK(bp_tokens_load_files(runtime, pattern, &options, &files) == BP_OK);
  CHECK(bp_token_files_count(files, &count) == BP_OK && count == 0);
  bp_token_files_destroy(files);
  files = NULL;
  options.allow_empty_match = 0;
  CHECK(bp_tokens_load_files(runtime, pattern, &options, &files) == BP_STATUS_NOT_FOUND);
  CHECK_CONTAINS(bp_last_error(), "no file matches");
  /* An API 0.5 struct ends before the flag: it is never read. */
  options.struct_size = BP_STRUCT_SIZE(bp_tokens_options, device);
  options.allow_empty_match = 1;
  CHECK(bp_tokens_load_files(runtime, pattern, &options, &files) == BP_STATUS_NOT_FOUND);
  CHECK(files == NULL);
  bp_runtime_destroy(runtime);
}

int main(void) {
  c_test_program = "test_c_stream_contract";
  RUN(the_step_and_the_seed_of_a_state);
  RUN(an_api_0_5_options_struct_is_read_as_it_was);
  RUN(the_last_step_is_handed_out_then_the_stream_stops);
  RUN(a_pattern_matching_nothing_is_an_empty_set_when_asked);
  return c_test_summary();
}
