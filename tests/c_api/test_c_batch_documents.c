/* Document-aligned batch streams through the C API (0.8): each step's
 * windows start at document starts, and bp_batch_stream_next_documents hands
 * out each device's pieces, which must equal a computation here from the
 * windows (bp_batch_stream_windows) and the document starts alone; a stream
 * without documents, a 0.7 struct_size and bad document options are refused
 * or read as before. C11, -Wall -Wextra -Werror -pedantic. */
#include <backplane/backplane.h>
#include <backplane/struct_size.h>

#include "c_runtime.h"
#include "c_test.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MARKER 7
#define MAX_STARTS 4096
#define MAX_ROWS 8
#define MAX_CONTEXT 32
#define MAX_PIECES (MAX_ROWS * MAX_CONTEXT)

/* Token i is 100 + i % 60000 (never the marker) except at document starts,
 * which a small linear congruential generator spaces 1 to 2 * mean apart. */
typedef struct documented {
  uint16_t* tokens;
  int64_t length;
  int64_t starts[MAX_STARTS]; /* where the marker is */
  size_t start_count;
} documented;

static void make_documented(documented* source, int64_t length, uint32_t seed, int64_t mean) {
  int64_t index;
  int64_t next = 0;
  uint32_t state = seed;
  source->tokens = malloc((size_t)length * sizeof(uint16_t));
  if (source->tokens == NULL) exit(1);
  source->length = length;
  source->start_count = 0;
  for (index = 0; index < length; ++index) {
    if (index == next && source->start_count < MAX_STARTS) {
      source->tokens[index] = MARKER;
      source->starts[source->start_count++] = index;
      state = state * 1664525u + 1013904223u;
      next = index + 1 + (int64_t)((state >> 8) % (uint32_t)(2 * mean - 1));
    } else {
      source->tokens[index] = (uint16_t)(100 + index % 60000);
    }
  }
}

static bp_array* source_array(bp_runtime* runtime, const documented* source) {
  bp_device cpu = c_test_device(runtime, "cpu:0");
  bp_array* array = NULL;
  if (bp_array_create(runtime, &cpu, BP_DTYPE_U16, &source->length, 1, source->tokens,
                      (uint64_t)source->length * sizeof(uint16_t), &array) != BP_OK) {
    fprintf(stderr, "bp_array_create: %s\n", bp_last_error());
    exit(1);
  }
  return array;
}

static bp_batch_stream_options stream_options(int64_t batch_size, int64_t context) {
  bp_batch_stream_options options;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.batch_size = batch_size;
  options.context = context;
  options.seed = 13;
  options.dtype = BP_DTYPE_I64;
  return options;
}

static int is_start(const documented* source, int64_t start) {
  size_t index;
  for (index = 0; index < source->start_count; ++index) {
    if (source->starts[index] == start) return 1;
  }
  return 0;
}

/* The pieces of `rows` windows of `context` tokens, by the guide's
 * definition: x flattened, cut at every row start and at every document
 * start inside a row; cu_seqlens padded to `limit` + 1 entries. Returns the
 * number of pieces (which may exceed `limit`: then cu_seqlens is not
 * written past it). */
static int64_t expected_pieces(const documented* const* sources, const int32_t* window_sources,
                               const int64_t* window_starts, int64_t rows, int64_t context, int64_t limit,
                               int32_t* cu_seqlens, int32_t* position_ids, int64_t* max_seqlen) {
  int64_t pieces = 0;
  int64_t row;
  int64_t index;
  *max_seqlen = 0;
  cu_seqlens[0] = 0;
  for (row = 0; row < rows; ++row) {
    const documented* source = sources[window_sources[row]];
    const int64_t start = window_starts[row];
    int64_t first = 0; /* the current piece's first token, within the row */
    int64_t column;
    for (column = 0; column < context; ++column) {
      const int cut = column + 1 == context || is_start(source, start + column + 1);
      position_ids[row * context + column] = (int32_t)(column - first);
      if (cut) {
        if (column + 1 - first > *max_seqlen) *max_seqlen = column + 1 - first;
        ++pieces;
        if (pieces <= limit) cu_seqlens[pieces] = (int32_t)(row * context + column + 1);
        first = column + 1;
      }
    }
  }
  for (index = pieces + 1; index <= limit; ++index) cu_seqlens[index] = (int32_t)(rows * context);
  return pieces;
}

static void read_int32(bp_array* array, int32_t* values, int64_t count, int64_t rows) {
  int64_t shape[2] = {0, 0};
  size_t rank = 0;
  CHECK(bp_array_rank(array, &rank) == BP_OK);
  CHECK(bp_array_shape(array, shape, 2) == BP_OK);
  if (rows > 0) {
    CHECK(rank == 2 && shape[0] == rows && shape[0] * shape[1] == count);
  } else {
    CHECK(rank == 1 && shape[0] == count);
  }
  CHECK(bp_array_copy_to_host(array, values, (uint64_t)count * sizeof(int32_t)) == BP_OK);
}

/* Runs `steps` steps of a stream over `sources` with `options` (devices
 * included) and checks every device's windows and pieces. */
static void check_stream(bp_runtime* runtime, const documented* const* sources, size_t source_count,
                         bp_batch_stream_options* options, size_t devices, int64_t steps) {
  bp_array* arrays[2];
  bp_batch_stream* stream = NULL;
  const int64_t rows = options->batch_size / (int64_t)devices;
  const int64_t context = options->context;
  const int64_t limit = options->max_documents == 0 ? rows * context : options->max_documents;
  int64_t step;
  size_t index;
  for (index = 0; index < source_count; ++index) arrays[index] = source_array(runtime, sources[index]);
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)arrays, source_count, options, &stream) == BP_OK);
  if (stream == NULL) {
    fprintf(stderr, "bp_batch_stream_create: %s\n", bp_last_error());
    return;
  }
  for (step = 0; step < steps; ++step) {
    int32_t window_sources[MAX_ROWS * 2];
    int64_t window_starts[MAX_ROWS * 2];
    bp_array* out[2] = {NULL, NULL};
    bp_batch_pieces pieces[2];
    size_t count = 0;
    size_t device;
    CHECK(bp_batch_stream_windows(stream, step, window_sources, window_starts, MAX_ROWS * 2, &count) == BP_OK);
    if (bp_batch_stream_next_documents(stream, out, pieces, 2, &count) != BP_OK) {
      CHECK(!"bp_batch_stream_next_documents failed");
      fprintf(stderr, "  step %lld: %s\n", (long long)step, bp_last_error());
      break;
    }
    CHECK(count == devices);
    for (device = 0; device < count && device < devices; ++device) {
      static int32_t cu_seqlens[MAX_PIECES + 1];
      static int32_t position_ids[MAX_PIECES];
      static int32_t expected_cu[MAX_PIECES + 1];
      static int32_t expected_positions[MAX_PIECES];
      static int64_t tokens[MAX_ROWS * (MAX_CONTEXT + 1)];
      const int32_t* my_sources = window_sources + (int64_t)device * rows;
      const int64_t* my_starts = window_starts + (int64_t)device * rows;
      int64_t max_seqlen = 0;
      int64_t row;
      int64_t column;
      int mismatches = 0;
      const int64_t expected = expected_pieces(sources, my_sources, my_starts, rows, context, limit, expected_cu,
                                               expected_positions, &max_seqlen);
      CHECK(expected <= limit);
      CHECK(pieces[device].pieces == expected);
      CHECK(pieces[device].max_seqlen == max_seqlen);
      read_int32(pieces[device].cu_seqlens, cu_seqlens, limit + 1, 0);
      read_int32(pieces[device].position_ids, position_ids, rows * context, rows);
      CHECK(memcmp(cu_seqlens, expected_cu, (size_t)(limit + 1) * sizeof(int32_t)) == 0);
      CHECK(memcmp(position_ids, expected_positions, (size_t)(rows * context) * sizeof(int32_t)) == 0);
      CHECK(bp_array_copy_to_host(out[device], tokens, (uint64_t)(rows * (context + 1)) * sizeof(int64_t)) == BP_OK);
      for (row = 0; row < rows; ++row) {
        const documented* source = sources[my_sources[row]];
        if (!is_start(source, my_starts[row])) ++mismatches;
        for (column = 0; column <= context; ++column) {
          if (tokens[row * (context + 1) + column] != source->tokens[my_starts[row] + column]) ++mismatches;
        }
      }
      CHECK(mismatches == 0);
      bp_array_destroy(out[device]);
      bp_array_destroy(pieces[device].cu_seqlens);
      bp_array_destroy(pieces[device].position_ids);
    }
  }
  bp_batch_stream_destroy(stream);
  for (index = 0; index < source_count; ++index) bp_array_destroy(arrays[index]);
}

static void bos_pieces_on_two_devices_equal_the_computed_ones(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  static documented first;
  static documented second;
  const documented* sources[2];
  bp_device devices[2];
  bp_batch_stream_options options = stream_options(6, 24);
  make_documented(&first, 6000, 1, 20);
  make_documented(&second, 3000, 2, 6);
  sources[0] = &first;
  sources[1] = &second;
  devices[0] = c_test_device(runtime, "cpu:0");
  devices[1] = c_test_device(runtime, "sim:0");
  options.devices = devices;
  options.device_count = 2;
  options.documents = BP_DOCUMENTS_BOS;
  options.document_token = MARKER;
  check_stream(runtime, sources, 2, &options, 2, 6);
  free(first.tokens);
  free(second.tokens);
  bp_runtime_destroy(runtime);
}

static void given_starts_pad_cu_seqlens_to_max_documents(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  static documented source;
  const documented* sources[1];
  const int64_t* starts[1];
  size_t counts[1];
  bp_batch_stream_options options = stream_options(4, 16);
  /* The marker is only data here: the documents are the given starts. */
  make_documented(&source, 5000, 3, 30);
  sources[0] = &source;
  starts[0] = source.starts;
  counts[0] = source.start_count;
  options.documents = BP_DOCUMENTS_STARTS;
  options.document_starts = starts;
  options.document_start_counts = counts;
  options.max_documents = 40; /* more than 4 rows of 16 tokens in documents of ~30 can hold */
  check_stream(runtime, sources, 1, &options, 1, 5);
  free(source.tokens);
  bp_runtime_destroy(runtime);
}

static void eos_documents_start_after_the_marker(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  static documented source;
  const documented* sources[1];
  bp_batch_stream_options options = stream_options(4, 16);
  size_t index;
  make_documented(&source, 4000, 4, 12);
  /* As EOS, the marker ends a document: documents start at 0 and after it. */
  for (index = 0; index < source.start_count; ++index) source.starts[index] += 1;
  if (source.starts[source.start_count - 1] >= source.length) --source.start_count;
  memmove(source.starts + 1, source.starts, source.start_count * sizeof(int64_t));
  source.starts[0] = 0;
  ++source.start_count;
  sources[0] = &source;
  options.documents = BP_DOCUMENTS_EOS;
  options.document_token = MARKER;
  check_stream(runtime, sources, 1, &options, 1, 5);
  free(source.tokens);
  bp_runtime_destroy(runtime);
}

static void more_pieces_than_max_documents_fail_that_step(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  static documented source;
  bp_array* array;
  bp_batch_stream* stream = NULL;
  bp_batch_stream_options options = stream_options(2, 32);
  bp_array* out[1];
  bp_batch_pieces pieces[1];
  size_t count = 0;
  make_documented(&source, 3000, 5, 3); /* documents of 1 to 5 tokens: many a row */
  array = source_array(runtime, &source);
  options.documents = BP_DOCUMENTS_BOS;
  options.document_token = MARKER;
  options.max_documents = 3;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&array, 1, &options, &stream) == BP_OK);
  CHECK(bp_batch_stream_next_documents(stream, out, pieces, 1, &count) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "BatchStream: step 0 on ");
  CHECK_CONTAINS(bp_last_error(), "more than max_documents = 3");
  bp_batch_stream_destroy(stream);
  bp_array_destroy(array);
  free(source.tokens);
  bp_runtime_destroy(runtime);
}

static void a_stream_without_documents_has_no_pieces(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  static documented source;
  bp_array* array;
  bp_batch_stream* stream = NULL;
  bp_batch_stream_options options = stream_options(4, 16);
  bp_array* out[1] = {NULL};
  bp_batch_pieces pieces[1];
  size_t count = 0;
  int64_t step = -1;
  make_documented(&source, 3000, 6, 20);
  array = source_array(runtime, &source);
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&array, 1, &options, &stream) == BP_OK);
  CHECK(bp_batch_stream_next_documents(stream, out, pieces, 1, &count) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_batch_stream_next_documents: the stream was made without documents");
  CHECK_CONTAINS(bp_last_error(), "call bp_batch_stream_next");
  CHECK(bp_batch_stream_step(stream, &step) == BP_OK && step == 0); /* nothing consumed */
  CHECK(bp_batch_stream_next(stream, out, 1, &count) == BP_OK && count == 1);
  bp_array_destroy(out[0]);
  bp_batch_stream_destroy(stream);

  /* With documents: too small a capacity sets the count and consumes nothing. */
  options.documents = BP_DOCUMENTS_BOS;
  options.document_token = MARKER;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&array, 1, &options, &stream) == BP_OK);
  count = 99;
  CHECK(bp_batch_stream_next_documents(stream, NULL, NULL, 0, &count) == BP_STATUS_OUT_OF_RANGE && count == 1);
  CHECK_CONTAINS(bp_last_error(), "capacity 0 is too small: 1 array handles and pieces (one per device)");
  CHECK(bp_batch_stream_next_documents(stream, out, NULL, 1, &count) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_batch_stream_next_documents: pieces is NULL");
  CHECK(bp_batch_stream_step(stream, &step) == BP_OK && step == 0);
  bp_batch_stream_destroy(stream);
  CHECK(bp_batch_stream_next_documents(stream, out, pieces, 1, &count) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "stream is not a live handle");
  bp_array_destroy(array);
  free(source.tokens);
  bp_runtime_destroy(runtime);
}

static void a_0_7_struct_size_reads_no_document_fields(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  static documented source;
  bp_array* array;
  bp_batch_stream* stream = NULL;
  bp_batch_stream_options options = stream_options(4, 16);
  bp_array* out[1];
  bp_batch_pieces pieces[1];
  size_t count = 0;
  /* sizeof the 0.7 struct: it ended with seed_from_state. */
  const size_t size_0_7 = BP_STRUCT_SIZE(bp_batch_stream_options, seed_from_state);
  make_documented(&source, 3000, 7, 20);
  array = source_array(runtime, &source);
  options.struct_size = size_0_7;
  options.documents = 99; /* what an old caller's struct never had: not read */
  options.max_documents = -5;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&array, 1, &options, &stream) == BP_OK);
  CHECK(bp_batch_stream_next_documents(stream, out, pieces, 1, &count) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "made without documents");
  bp_batch_stream_destroy(stream);
  options.struct_size = size_0_7 + 8;
  stream = NULL;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&array, 1, &options, &stream) ==
        BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "options->struct_size");
  bp_array_destroy(array);
  free(source.tokens);
  bp_runtime_destroy(runtime);
}

static void document_options_c_alone_can_get_wrong_are_refused(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  static documented source;
  bp_array* array;
  bp_batch_stream* stream = NULL;
  bp_batch_stream_options options = stream_options(4, 16);
  const int64_t* starts[1] = {NULL};
  size_t counts[1] = {3};
  make_documented(&source, 3000, 8, 20);
  array = source_array(runtime, &source);
  options.documents = 99;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&array, 1, &options, &stream) ==
        BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_batch_stream_create: options->documents 99 is not a bp_documents_kind");
  options.documents = BP_DOCUMENTS_STARTS;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&array, 1, &options, &stream) ==
        BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_batch_stream_create: options->document_starts is NULL");
  options.document_starts = starts;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&array, 1, &options, &stream) ==
        BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_batch_stream_create: options->document_start_counts is NULL");
  options.document_start_counts = counts;
  CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&array, 1, &options, &stream) ==
        BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "options->document_starts[0] is NULL and its count is 3");
  CHECK(stream == NULL);
  bp_array_destroy(array);
  free(source.tokens);
  bp_runtime_destroy(runtime);
}

int main(void) {
  c_test_program = "test_c_batch_documents";
  RUN(bos_pieces_on_two_devices_equal_the_computed_ones);
  RUN(given_starts_pad_cu_seqlens_to_max_documents);
  RUN(eos_documents_start_after_the_marker);
  RUN(more_pieces_than_max_documents_fail_that_step);
  RUN(a_stream_without_documents_has_no_pieces);
  RUN(a_0_7_struct_size_reads_no_document_fields);
  RUN(document_options_c_alone_can_get_wrong_are_refused);
  return c_test_summary();
}
