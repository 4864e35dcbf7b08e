/* Layouts through the C API (0.10): a stream laid out over a mesh hands out
 * its rank's piece (shape and tokens), fills stats.read_bytes (and leaves it
 * alone for a 0.9 stats struct), a 0.9 options struct still makes a plain
 * stream without reading the layout fields, and NULL names, a bad
 * sequence_order or layout fields without a mesh are refused naming the
 * field. C11, -Wall -Wextra -Werror -pedantic. The token array lives on
 * cpu:0; the pieces go to the default device. */
#include <backplane/backplane.h>
#include <backplane/struct_size.h>

#include "c_runtime.h"
#include "c_test.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TOKENS 20000
#define BATCH 3 /* per dp coordinate */
#define CONTEXT 16

/* One U16 source, token i = i: a piece's first token names its column. */
static bp_array* counting_tokens(bp_runtime* runtime) {
  bp_device cpu = c_test_device(runtime, "cpu:0");
  const int64_t count = TOKENS;
  uint16_t* tokens = malloc(TOKENS * sizeof(uint16_t));
  bp_array* array = NULL;
  int64_t index;
  if (tokens == NULL) exit(1);
  for (index = 0; index < count; ++index) tokens[index] = (uint16_t)index;
  if (bp_array_create(runtime, &cpu, BP_DTYPE_U16, &count, 1, tokens, TOKENS * sizeof(uint16_t), &array) != BP_OK) {
    fprintf(stderr, "bp_array_create: %s\n", bp_last_error());
    exit(1);
  }
  free(tokens);
  return array;
}

static const bp_mesh_axis kMesh[2] = {{"dp", 2}, {"cp", 2}};
static const char* const kBatchAxes[1] = {"dp"};
static const char* const kSequenceAxes[1] = {"cp"};
static const int64_t kRanks[1] = {3}; /* dp 1, cp 1: rows [3, 6), columns [8, 17) */

/* (dp=2, cp=2), ranks {3}, contiguous, I64 out. */
static bp_batch_stream_options layout_options(void) {
  bp_batch_stream_options options;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.batch_size = BATCH;
  options.context = CONTEXT;
  options.seed = 5;
  options.dtype = BP_DTYPE_I64;
  options.mesh = kMesh;
  options.mesh_axis_count = 2;
  options.batch_axes = kBatchAxes;
  options.batch_axis_count = 1;
  options.sequence_axes = kSequenceAxes;
  options.sequence_axis_count = 1;
  options.sequence_order = BP_SEQUENCE_CONTIGUOUS;
  options.mesh_ranks = kRanks;
  options.mesh_rank_count = 1;
  return options;
}

/* The one array of the next step, its shape into shape[0..2] (rank in *rank). */
static bp_array* next_array(bp_batch_stream* stream, int64_t* shape, size_t* rank) {
  bp_array* arrays[2] = {NULL, NULL};
  size_t count = 0;
  CHECK(bp_batch_stream_next(stream, arrays, 2, &count) == BP_OK);
  CHECK(count == 1);
  CHECK(bp_array_rank(arrays[0], rank) == BP_OK);
  CHECK(bp_array_shape(arrays[0], shape, 3) == BP_OK);
  return arrays[0];
}

static void a_layout_stream_hands_out_its_ranks_piece(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* source = counting_tokens(runtime);
  bp_batch_stream_options options = layout_options();
  bp_batch_stream* stream = NULL;
  bp_batch_stream_stats stats;
  int64_t step;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&source, 1, &options, &stream) == BP_OK);
  if (stream == NULL) {
    fprintf(stderr, "bp_batch_stream_create: %s\n", bp_last_error());
    return;
  }
  for (step = 0; step < 3; ++step) {
    int64_t shape[3] = {0, 0, 0};
    size_t rank = 0;
    int32_t sources[BATCH];
    int64_t starts[BATCH];
    int64_t values[BATCH * (CONTEXT / 2 + 1)];
    size_t windows = 0;
    int64_t row;
    int64_t column;
    int mismatches = 0;
    bp_array* array = next_array(stream, shape, &rank);
    CHECK(rank == 2);
    CHECK(shape[0] == BATCH && shape[1] == CONTEXT / 2 + 1);
    /* windows: the rows this process draws, here dp 1's block. */
    CHECK(bp_batch_stream_windows(stream, step, sources, starts, BATCH, &windows) == BP_OK);
    CHECK(windows == BATCH);
    CHECK(bp_array_copy_to_host(array, values, sizeof(values)) == BP_OK);
    for (row = 0; row < BATCH; ++row) {
      for (column = 0; column <= CONTEXT / 2; ++column) {
        if (values[row * (CONTEXT / 2 + 1) + column] != starts[row] + CONTEXT / 2 + column) ++mismatches;
      }
    }
    CHECK(mismatches == 0);
    bp_array_destroy(array);
  }
  /* read_bytes: whole steps of 3 rows x 9 U16 tokens, at least the 3 handed out. */
  memset(&stats, 0, sizeof(stats));
  stats.struct_size = sizeof(stats);
  CHECK(bp_batch_stream_stats_get(stream, &stats) == BP_OK);
  CHECK(stats.steps == 3);
  CHECK(stats.read_bytes >= 3u * BATCH * (CONTEXT / 2 + 1) * 2u);
  CHECK(stats.read_bytes % (BATCH * (CONTEXT / 2 + 1) * 2u) == 0);
  /* A 0.9 stats struct is filled without it: the field past its end stays. */
  memset(&stats, 0, sizeof(stats));
  stats.struct_size = BP_STRUCT_SIZE(bp_batch_stream_stats, data_stall_fraction);
  stats.read_bytes = 12345;
  CHECK(bp_batch_stream_stats_get(stream, &stats) == BP_OK);
  CHECK(stats.steps == 3);
  CHECK(stats.read_bytes == 12345);
  bp_batch_stream_destroy(stream);
  bp_array_destroy(source);
  bp_runtime_destroy(runtime);
}

static void head_tail_pieces_are_three_dimensional(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* source = counting_tokens(runtime);
  bp_batch_stream_options options = layout_options();
  bp_batch_stream* stream = NULL;
  int64_t shape[3] = {0, 0, 0};
  size_t rank = 0;
  options.sequence_order = BP_SEQUENCE_HEAD_TAIL;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&source, 1, &options, &stream) == BP_OK);
  if (stream != NULL) {
    int32_t sources[BATCH];
    int64_t starts[BATCH];
    int64_t values[BATCH * 2 * (CONTEXT / 4 + 1)];
    size_t windows = 0;
    bp_array* array = next_array(stream, shape, &rank);
    CHECK(rank == 3);
    CHECK(shape[0] == BATCH && shape[1] == 2 && shape[2] == CONTEXT / 4 + 1);
    CHECK(bp_batch_stream_windows(stream, 0, sources, starts, BATCH, &windows) == BP_OK);
    CHECK(bp_array_copy_to_host(array, values, sizeof(values)) == BP_OK);
    /* cp 1 of 2: chunks 1 and 2 of four (Tc = 4), each row's one after the other. */
    CHECK(values[0] == starts[0] + 4);
    CHECK(values[CONTEXT / 4 + 1] == starts[0] + 8);
    CHECK(values[2 * (CONTEXT / 4 + 1)] == starts[1] + 4);
    bp_array_destroy(array);
  }
  bp_batch_stream_destroy(stream);
  bp_array_destroy(source);
  bp_runtime_destroy(runtime);
}

static void an_api_0_9_options_struct_has_no_layout(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* source = counting_tokens(runtime);
  bp_batch_stream_options options = layout_options();
  bp_batch_stream* stream = NULL;
  int64_t shape[3] = {0, 0, 0};
  size_t rank = 0;
  /* The layout fields are set but lie past a 0.9 struct: never read. */
  options.struct_size = BP_STRUCT_SIZE(bp_batch_stream_options, weight_step_count);
  options.sequence_order = 99;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&source, 1, &options, &stream) == BP_OK);
  if (stream != NULL) {
    bp_array* array = next_array(stream, shape, &rank);
    CHECK(rank == 2);
    CHECK(shape[0] == BATCH && shape[1] == CONTEXT + 1);
    bp_array_destroy(array);
  }
  bp_batch_stream_destroy(stream);
  bp_array_destroy(source);
  bp_runtime_destroy(runtime);
}

/* Creating with `options` fails with INVALID_ARGUMENT, and bp_last_error() holds `part`. */
static void check_refused(bp_runtime* runtime, bp_array* source, const bp_batch_stream_options* options,
                          const char* part) {
  bp_batch_stream* stream = NULL;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&source, 1, options, &stream) ==
        BP_STATUS_INVALID_ARGUMENT);
  CHECK(stream == NULL);
  CHECK_CONTAINS(bp_last_error(), part);
}

static void bad_layout_fields_are_refused_naming_the_field(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* source = counting_tokens(runtime);
  bp_batch_stream_options options = layout_options();
  bp_mesh_axis unnamed[2] = {{"dp", 2}, {NULL, 2}};
  const char* const null_axis[1] = {NULL};
  const int64_t outside[1] = {4};
  options.mesh = unnamed;
  check_refused(runtime, source, &options, "bp_batch_stream_create: options->mesh[1].name is NULL");
  options = layout_options();
  options.sequence_order = 7;
  check_refused(runtime, source, &options, "options->sequence_order 7 is not a bp_sequence_order");
  options = layout_options();
  options.batch_axes = null_axis;
  check_refused(runtime, source, &options, "options->batch_axes[0] is NULL");
  options = layout_options();
  options.sequence_axes = NULL;
  check_refused(runtime, source, &options, "options->sequence_axes");
  options = layout_options();
  options.mesh_ranks = NULL;
  check_refused(runtime, source, &options, "options->mesh_ranks");
  options = layout_options();
  options.mesh_axis_count = 0;
  check_refused(runtime, source, &options, "given without a mesh (options->mesh_axis_count is 0)");
  /* What the layout means is the core's to check, in its words. */
  options = layout_options();
  options.mesh_ranks = outside;
  check_refused(runtime, source, &options, "BatchStream: layout: rank 4 is not in [0, 4)");
  bp_array_destroy(source);
  bp_runtime_destroy(runtime);
}

int main(void) {
  c_test_program = "test_c_layouts";
  RUN(a_layout_stream_hands_out_its_ranks_piece);
  RUN(head_tail_pieces_are_three_dimensional);
  RUN(an_api_0_9_options_struct_has_no_layout);
  RUN(bad_layout_fields_are_refused_naming_the_field);
  return c_test_summary();
}
