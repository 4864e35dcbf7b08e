/* The batch stream through the C API: batches against the windows the stream
 * reports, resuming from a saved state (same world and elastic), statistics,
 * and every refused option with its code and message. C11, -Wall -Wextra
 * -Werror -pedantic. The isolated runtime's default device is sim:0 (the
 * simulated accelerator outranks cpu); the token arrays live on cpu:0. */
#include <backplane/backplane.h>

#include "c_runtime.h"
#include "c_test.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Token i of source k: checkable from (source, start) alone. */
#define TOKEN_MODULUS 65521
#define SOURCE_SHIFT 1000

static uint16_t token_at(int32_t source, int64_t index) {
  return (uint16_t)((index + (int64_t)source * SOURCE_SHIFT) % TOKEN_MODULUS);
}

/* A 1-D U16 array of `count` tokens of source `source` on cpu:0. */
static bp_array* token_array(bp_runtime* runtime, int32_t source, int64_t count) {
  bp_device cpu = c_test_device(runtime, "cpu:0");
  uint16_t* tokens = malloc((size_t)count * sizeof(uint16_t));
  bp_array* array = NULL;
  int64_t index;
  if (tokens == NULL) exit(1);
  for (index = 0; index < count; ++index) tokens[index] = token_at(source, index);
  if (bp_array_create(runtime, &cpu, BP_DTYPE_U16, &count, 1, tokens, (uint64_t)count * sizeof(uint16_t), &array) !=
      BP_OK) {
    fprintf(stderr, "bp_array_create: %s\n", bp_last_error());
    exit(1);
  }
  free(tokens);
  return array;
}

static bp_batch_stream_options stream_options(int64_t batch_size, int64_t context, uint64_t seed) {
  bp_batch_stream_options options;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.batch_size = batch_size;
  options.context = context;
  options.seed = seed;
  options.dtype = BP_DTYPE_I64;
  return options;
}

static bp_batch_stream* open_stream(bp_runtime* runtime, bp_array* const* sources, size_t source_count,
                                    const bp_batch_stream_options* options) {
  bp_batch_stream* stream = NULL;
  if (bp_batch_stream_create(runtime, (const bp_array* const*)sources, source_count, options, &stream) != BP_OK) {
    fprintf(stderr, "bp_batch_stream_create: %s\n", bp_last_error());
    exit(1);
  }
  return stream;
}

/* The rows of one handed-out array, as int64 on the host. */
static int64_t* read_rows(bp_array* array, int64_t rows, int64_t columns) {
  int64_t shape[2] = {0, 0};
  int64_t* values = malloc((size_t)(rows * columns) * sizeof(int64_t));
  if (values == NULL) exit(1);
  CHECK(bp_array_shape(array, shape, 2) == BP_OK);
  CHECK(shape[0] == rows && shape[1] == columns);
  CHECK(bp_array_copy_to_host(array, values, (uint64_t)(rows * columns) * sizeof(int64_t)) == BP_OK);
  return values;
}

/* Checks that `values` ([rows, context + 1]) are windows[first .. first + rows). */
static void check_rows(const int64_t* values, int64_t rows, int64_t context, const int32_t* sources,
                       const int64_t* starts, int64_t first) {
  int64_t row;
  int64_t column;
  int mismatches = 0;
  for (row = 0; row < rows; ++row) {
    for (column = 0; column <= context; ++column) {
      const int64_t expected = token_at(sources[first + row], starts[first + row] + column);
      if (values[row * (context + 1) + column] != expected) ++mismatches;
    }
  }
  CHECK(mismatches == 0);
}

/* One step's arrays read back into one [B, T + 1] block, in batch order. */
static int64_t* next_batch(bp_batch_stream* stream, int64_t batch_size, int64_t context, size_t devices) {
  bp_array* arrays[4] = {NULL, NULL, NULL, NULL};
  size_t count = 0;
  size_t index;
  const int64_t share = batch_size / (int64_t)devices;
  int64_t* block = malloc((size_t)(batch_size * (context + 1)) * sizeof(int64_t));
  if (block == NULL) exit(1);
  memset(block, 0, (size_t)(batch_size * (context + 1)) * sizeof(int64_t));
  CHECK(bp_batch_stream_next(stream, arrays, 4, &count) == BP_OK);
  CHECK(count == devices);
  for (index = 0; index < count && index < devices; ++index) {
    int64_t* rows = read_rows(arrays[index], share, context + 1);
    memcpy(block + (int64_t)index * share * (context + 1), rows, (size_t)(share * (context + 1)) * sizeof(int64_t));
    free(rows);
    bp_array_destroy(arrays[index]);
  }
  return block;
}

static void batches_hold_the_windows_the_stream_reports(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* sources[2];
  bp_device devices[2];
  bp_batch_stream_options options = stream_options(6, 16, 11);
  bp_batch_stream* stream;
  int32_t window_sources[6];
  int64_t window_starts[6];
  size_t count = 0;
  int64_t step;
  int used[2] = {0, 0};
  sources[0] = token_array(runtime, 0, 70000);
  sources[1] = token_array(runtime, 1, 3000);
  /* Split over a host device and the simulated accelerator's memory. */
  devices[0] = c_test_device(runtime, "cpu:0");
  devices[1] = c_test_device(runtime, "sim:0");
  options.devices = devices;
  options.device_count = 2;
  stream = open_stream(runtime, sources, 2, &options);
  for (step = 0; step < 8; ++step) {
    int64_t* block;
    int64_t index;
    CHECK(bp_batch_stream_windows(stream, step, window_sources, window_starts, 6, &count) == BP_OK);
    CHECK(count == 6);
    for (index = 0; index < 6; ++index) {
      const int32_t source = window_sources[index];
      CHECK(source == 0 || source == 1);
      if (source != 0 && source != 1) continue;
      used[source] = 1;
      CHECK(window_starts[index] >= 0 && window_starts[index] + 17 <= (source == 0 ? 70000 : 3000));
    }
    block = next_batch(stream, 6, 16, 2);
    check_rows(block, 6, 16, window_sources, window_starts, 0);
    free(block);
  }
  CHECK(used[0]); /* unweighted: in proportion to window starts, so mostly the long source */
  /* The windows of a step are the same whenever asked, and distinct. */
  {
    int32_t again_sources[6];
    int64_t again_starts[6];
    int64_t i;
    int64_t j;
    int distinct = 1;
    CHECK(bp_batch_stream_windows(stream, 3, window_sources, window_starts, 6, &count) == BP_OK);
    CHECK(bp_batch_stream_windows(stream, 3, again_sources, again_starts, 6, &count) == BP_OK);
    CHECK(memcmp(window_sources, again_sources, sizeof(again_sources)) == 0);
    CHECK(memcmp(window_starts, again_starts, sizeof(again_starts)) == 0);
    for (i = 0; i < 6; ++i) {
      for (j = i + 1; j < 6; ++j) {
        if (window_sources[i] == window_sources[j] && window_starts[i] == window_starts[j]) distinct = 0;
      }
    }
    CHECK(distinct);
    /* Only the starts, or only the count. */
    CHECK(bp_batch_stream_windows(stream, 3, NULL, again_starts, 6, &count) == BP_OK);
    CHECK(memcmp(window_starts, again_starts, sizeof(again_starts)) == 0);
    CHECK(bp_batch_stream_windows(stream, 3, NULL, NULL, 0, &count) == BP_STATUS_OUT_OF_RANGE && count == 6);
    CHECK_CONTAINS(bp_last_error(), "bp_batch_stream_windows: capacity 0 is too small: 6 windows needed");
    CHECK(bp_batch_stream_windows(stream, -1, NULL, NULL, 6, &count) == BP_STATUS_OUT_OF_RANGE);
    CHECK_CONTAINS(bp_last_error(), "step -1 is negative");
    CHECK(bp_batch_stream_windows(stream, 3, NULL, NULL, 6, NULL) == BP_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(bp_last_error(), "bp_batch_stream_windows: count is NULL");
  }
  bp_batch_stream_destroy(stream);
  bp_array_destroy(sources[0]);
  bp_array_destroy(sources[1]);
  bp_runtime_destroy(runtime);
}

static void a_short_capacity_consumes_no_step(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* source = token_array(runtime, 0, 5000);
  bp_batch_stream_options options = stream_options(4, 8, 3);
  bp_batch_stream* stream = open_stream(runtime, &source, 1, &options); /* one device: the default, sim:0 */
  int32_t window_sources[4];
  int64_t window_starts[4];
  size_t count = 99;
  int64_t* block;
  CHECK(bp_batch_stream_next(stream, NULL, 0, &count) == BP_STATUS_OUT_OF_RANGE);
  CHECK(count == 1);
  CHECK_CONTAINS(bp_last_error(), "bp_batch_stream_next: capacity 0 is too small: 1 array handles (one per device)");
  CHECK(bp_batch_stream_next(stream, NULL, 1, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_batch_stream_next: count is NULL");
  /* Still step 0. */
  CHECK(bp_batch_stream_windows(stream, 0, window_sources, window_starts, 4, &count) == BP_OK);
  block = next_batch(stream, 4, 8, 1);
  check_rows(block, 4, 8, window_sources, window_starts, 0);
  free(block);
  {
    bp_array* batch = NULL;
    bp_device device;
    CHECK(bp_batch_stream_next(stream, &batch, 1, &count) == BP_OK);
    CHECK(bp_array_device(batch, &device) == BP_OK && strcmp(device.backend, "sim") == 0);
    bp_array_destroy(batch);
  }
  bp_batch_stream_destroy(stream);
  bp_array_destroy(source);
  bp_runtime_destroy(runtime);
}

/* The stream's state JSON (malloc'ed), checking the sizing protocol on the way. */
static char* state_after(bp_batch_stream* stream) {
  size_t length = 0;
  char* json;
  CHECK(bp_batch_stream_state(stream, NULL, 0, &length) == BP_STATUS_OUT_OF_RANGE);
  CHECK(length > 0);
  json = malloc(length + 1);
  if (json == NULL) exit(1);
  CHECK(bp_batch_stream_state(stream, json, length, &length) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "bytes (its JSON and a NUL)");
  CHECK(bp_batch_stream_state(stream, json, length + 1, &length) == BP_OK);
  CHECK(strlen(json) == length);
  return json;
}

static void a_saved_state_resumes_with_identical_batches(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* sources[2];
  bp_batch_stream_options options = stream_options(4, 12, 21);
  bp_batch_stream* first;
  bp_batch_stream* resumed;
  const double weights[2] = {3, 1};
  char* state;
  int64_t* expected[5];
  int step;
  bp_device cpu = c_test_device(runtime, "cpu:0");
  sources[0] = token_array(runtime, 0, 4000);
  sources[1] = token_array(runtime, 1, 9000);
  options.devices = &cpu;
  options.device_count = 1;
  options.weights = weights;
  options.weight_count = 2;
  first = open_stream(runtime, sources, 2, &options);
  for (step = 0; step < 3; ++step) free(next_batch(first, 4, 12, 1));
  state = state_after(first);
  CHECK_CONTAINS(state, "\"step\":3");
  for (step = 0; step < 5; ++step) expected[step] = next_batch(first, 4, 12, 1);

  options.state = state;
  resumed = open_stream(runtime, sources, 2, &options);
  for (step = 0; step < 5; ++step) {
    int64_t* batch = next_batch(resumed, 4, 12, 1);
    CHECK(memcmp(batch, expected[step], 4 * 13 * sizeof(int64_t)) == 0);
    free(batch);
  }

  /* Elastic: two ranks of two windows each cover the same four windows. */
  {
    bp_batch_stream* ranks[2];
    int rank;
    options.batch_size = 2;
    options.world_size = 2;
    for (rank = 0; rank < 2; ++rank) {
      options.rank = rank;
      ranks[rank] = open_stream(runtime, sources, 2, &options);
    }
    for (step = 0; step < 5; ++step) {
      int64_t* zero = next_batch(ranks[0], 2, 12, 1);
      int64_t* one = next_batch(ranks[1], 2, 12, 1);
      CHECK(memcmp(zero, expected[step], 2 * 13 * sizeof(int64_t)) == 0);
      CHECK(memcmp(one, expected[step] + 2 * 13, 2 * 13 * sizeof(int64_t)) == 0);
      free(zero);
      free(one);
    }
    bp_batch_stream_destroy(ranks[0]);
    bp_batch_stream_destroy(ranks[1]);
  }
  for (step = 0; step < 5; ++step) free(expected[step]);
  free(state);
  bp_batch_stream_destroy(resumed);
  bp_batch_stream_destroy(first);
  bp_array_destroy(sources[0]);
  bp_array_destroy(sources[1]);
  bp_runtime_destroy(runtime);
}

static void stats_count_what_was_handed_out(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* source = token_array(runtime, 0, 20000);
  bp_batch_stream_options options = stream_options(8, 32, 1);
  bp_batch_stream* stream;
  bp_batch_stream_stats stats;
  int step;
  stream = open_stream(runtime, &source, 1, &options);
  for (step = 0; step < 6; ++step) free(next_batch(stream, 8, 32, 1));
  memset(&stats, 0, sizeof(stats));
  stats.struct_size = sizeof(stats);
  CHECK(bp_batch_stream_stats_get(stream, &stats) == BP_OK);
  CHECK(stats.steps == 6);
  CHECK(stats.windows == 48);
  CHECK(stats.bytes == 6u * 8u * 33u * 8u);
  CHECK(stats.elapsed_seconds > 0);
  CHECK(stats.wait_seconds >= 0 && stats.wait_seconds <= stats.elapsed_seconds);
  CHECK(stats.data_stall_fraction >= 0 && stats.data_stall_fraction <= 1);
  CHECK(stats.windows_per_second > 0);
  stats.struct_size = 8;
  CHECK(bp_batch_stream_stats_get(stream, &stats) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_batch_stream_stats_get: out->struct_size 8 is smaller than");
  bp_batch_stream_destroy(stream);
  bp_array_destroy(source);
  bp_runtime_destroy(runtime);
}

/* 48 tokens at T = 8: 40 window starts, 8 a step, so an epoch is 5 steps. */
static void stats_name_the_step_and_its_epoch(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* source = token_array(runtime, 0, 48);
  bp_batch_stream_options options = stream_options(8, 8, 1);
  bp_batch_stream* stream;
  bp_batch_stream_stats stats;
  int step;
  stream = open_stream(runtime, &source, 1, &options);
  memset(&stats, 0, sizeof(stats));
  stats.struct_size = sizeof(stats);
  CHECK(bp_batch_stream_stats_get(stream, &stats) == BP_OK);
  CHECK(stats.step == -1 && stats.epoch == 0); /* nothing handed out yet */
  for (step = 0; step < 5; ++step) free(next_batch(stream, 8, 8, 1));
  CHECK(bp_batch_stream_stats_get(stream, &stats) == BP_OK);
  CHECK(stats.step == 4 && stats.epoch == 0);
  free(next_batch(stream, 8, 8, 1));
  CHECK(bp_batch_stream_stats_get(stream, &stats) == BP_OK);
  CHECK(stats.step == 5 && stats.epoch == 1);
  /* A 0.10 stats struct is filled without them: the fields past its end stay. */
  memset(&stats, 0, sizeof(stats));
  stats.struct_size = offsetof(bp_batch_stream_stats, step);
  stats.step = 77;
  stats.epoch = 88;
  CHECK(bp_batch_stream_stats_get(stream, &stats) == BP_OK);
  CHECK(stats.steps == 6);
  CHECK(stats.read_bytes > 0);
  CHECK(stats.step == 77 && stats.epoch == 88);
  bp_batch_stream_destroy(stream);
  bp_array_destroy(source);
  bp_runtime_destroy(runtime);
}

/* Creating with `options` fails with `status` and a message containing `words`. */
static void check_refused(bp_runtime* runtime, bp_array* const* sources, size_t source_count,
                          const bp_batch_stream_options* options, bp_status status, const char* words) {
  bp_batch_stream* stream = NULL;
  const bp_status got =
      bp_batch_stream_create(runtime, (const bp_array* const*)sources, source_count, options, &stream);
  CHECK(got == status);
  if (got != status)
    fprintf(stderr, "  status %d (%s), expected %d, for \"%s\"\n", got, bp_last_error(), status, words);
  CHECK_CONTAINS(bp_last_error(), words);
  CHECK(stream == NULL);
  if (stream != NULL) bp_batch_stream_destroy(stream);
}

static void bad_options_are_refused_naming_the_problem(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* sources[2];
  bp_batch_stream_options options;
  const double weights[2] = {0.8, 0.2};
  const double negative[2] = {1.0, -0.5};
  const double zeros[2] = {0, 0};
  sources[0] = token_array(runtime, 0, 5000);
  sources[1] = token_array(runtime, 1, 5000);

  options = stream_options(0, 16, 0);
  check_refused(runtime, sources, 1, &options, BP_STATUS_INVALID_ARGUMENT, "batch_size must be at least 1, got 0");
  options = stream_options(4, 0, 0);
  check_refused(runtime, sources, 1, &options, BP_STATUS_INVALID_ARGUMENT, "context must be at least 1, got 0");
  options = stream_options(4, 16, 0);
  options.rank = 2;
  options.world_size = 2;
  check_refused(runtime, sources, 1, &options, BP_STATUS_INVALID_ARGUMENT, "rank 2 is not in [0, world_size = 2)");
  options = stream_options(4, 16, 0);
  options.prefetch = 65;
  check_refused(runtime, sources, 1, &options, BP_STATUS_INVALID_ARGUMENT, "prefetch must be in [1, 64], got 65");
  options = stream_options(4, 16, 0);
  options.weights = weights;
  options.weight_count = 2;
  check_refused(runtime, sources, 1, &options, BP_STATUS_INVALID_ARGUMENT, "2 weights for 1 sources");
  options.weights = negative;
  check_refused(runtime, sources, 2, &options, BP_STATUS_INVALID_ARGUMENT,
                "weight -0.5 (of source 1) is not a finite number >= 0");
  options.weights = zeros;
  check_refused(runtime, sources, 2, &options, BP_STATUS_INVALID_ARGUMENT, "the weights are all zero");
  options.weights = NULL;
  check_refused(runtime, sources, 2, &options, BP_STATUS_INVALID_ARGUMENT,
                "bp_batch_stream_create: options->weights is NULL");
  options = stream_options(4, 16, 0);
  options.state = "this is not JSON";
  check_refused(runtime, sources, 1, &options, BP_STATUS_INVALID_FILE, "batch stream state: not valid JSON");
  options.state = "{\"version\": 1}";
  check_refused(runtime, sources, 1, &options, BP_STATUS_INVALID_FILE, "batch stream state: no field");
  options = stream_options(4, 16, 0);
  options.struct_size = 16;
  check_refused(runtime, sources, 1, &options, BP_STATUS_INVALID_ARGUMENT,
                "bp_batch_stream_create: options->struct_size 16 is smaller than");
  options = stream_options(4, 16, 0);
  options.dtype = 99;
  check_refused(runtime, sources, 1, &options, BP_STATUS_INVALID_ARGUMENT, "99 is not a bp_dtype");
  options.dtype = BP_DTYPE_I64;
  options.device_count = 1;
  check_refused(runtime, sources, 1, &options, BP_STATUS_INVALID_ARGUMENT, "options->devices is NULL");
  check_refused(runtime, NULL, 1, &options, BP_STATUS_INVALID_ARGUMENT, "bp_batch_stream_create: sources is NULL");
  check_refused(runtime, sources, 1, NULL, BP_STATUS_INVALID_ARGUMENT, "bp_batch_stream_create: options is NULL");

  /* Tokens in device memory. */
  {
    bp_device sim = c_test_device(runtime, "sim:0");
    bp_array* on_device = NULL;
    CHECK(bp_array_device_put(runtime, sources[0], &sim, NULL, NULL, &on_device) == BP_OK);
    options = stream_options(4, 16, 0);
    check_refused(runtime, &on_device, 1, &options, BP_STATUS_UNSUPPORTED, "source 0 lives on sim:0");
    bp_array_destroy(on_device);
  }

  /* A state of another stream: the seed differs. */
  {
    bp_batch_stream* stream;
    char* state;
    options = stream_options(4, 16, 5);
    stream = open_stream(runtime, sources, 1, &options);
    state = state_after(stream);
    bp_batch_stream_destroy(stream);
    options.seed = 6;
    options.state = state;
    check_refused(runtime, sources, 1, &options, BP_STATUS_INVALID_ARGUMENT,
                  "the state was saved with seed 5, this stream has 6");
    options.seed = 5;
    options.context = 8;
    check_refused(runtime, sources, 1, &options, BP_STATUS_INVALID_ARGUMENT,
                  "the state was saved with context 16, this stream has 8");
    free(state);
  }

  /* A destroyed stream is reported, never used. */
  {
    bp_batch_stream* stream;
    bp_array* batch = NULL;
    size_t count = 0;
    bp_batch_stream_stats stats;
    options = stream_options(4, 16, 0);
    stream = open_stream(runtime, sources, 1, &options);
    bp_batch_stream_destroy(stream);
    bp_batch_stream_destroy(stream); /* twice: ignored */
    bp_batch_stream_destroy(NULL);
    CHECK(bp_batch_stream_next(stream, &batch, 1, &count) == BP_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(bp_last_error(), "bp_batch_stream_next: stream is not a live handle (destroyed?)");
    memset(&stats, 0, sizeof(stats));
    stats.struct_size = sizeof(stats);
    CHECK(bp_batch_stream_stats_get(stream, &stats) == BP_STATUS_INVALID_ARGUMENT);
    CHECK(bp_batch_stream_state(NULL, NULL, 0, &count) == BP_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(bp_last_error(), "bp_batch_stream_state: stream is NULL");
  }
  bp_array_destroy(sources[0]);
  bp_array_destroy(sources[1]);
  bp_runtime_destroy(runtime);
}

static void the_stream_outlives_its_runtime_handle_and_sources(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* source = token_array(runtime, 0, 5000);
  bp_batch_stream_options options = stream_options(4, 8, 9);
  bp_batch_stream* stream = open_stream(runtime, &source, 1, &options);
  int32_t window_sources[4];
  int64_t window_starts[4];
  size_t count = 0;
  int64_t* block;
  bp_array_destroy(source);
  bp_runtime_destroy(runtime);
  CHECK(bp_batch_stream_windows(stream, 0, window_sources, window_starts, 4, &count) == BP_OK);
  block = next_batch(stream, 4, 8, 1);
  check_rows(block, 4, 8, window_sources, window_starts, 0);
  free(block);
  bp_batch_stream_destroy(stream);
}

int main(void) {
  c_test_program = "test_c_batch_stream";
  RUN(batches_hold_the_windows_the_stream_reports);
  RUN(a_short_capacity_consumes_no_step);
  RUN(a_saved_state_resumes_with_identical_batches);
  RUN(stats_count_what_was_handed_out);
  RUN(stats_name_the_step_and_its_epoch);
  RUN(bad_options_are_refused_naming_the_problem);
  RUN(the_stream_outlives_its_runtime_handle_and_sources);
  return c_test_summary();
}
