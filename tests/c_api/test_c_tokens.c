/* Token files through the C API: an llm.c shard, a NumPy file and raw
 * tokens as zero-copy arrays, the options, a pattern's files in bytewise
 * order with their paths, a Megatron-Core dataset's document starts, and
 * every error with its code and message. */
#include <backplane/backplane.h>

#include "c_runtime.h"
#include "c_test.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static char path[512];

static void token_path(const char* name) {
  snprintf(path, sizeof(path), "%s/test_c_tokens-%s", BP_TEST_OUTPUT_DIR, name);
}

/* Writes `size` bytes of `data` after `header_size` bytes of `header` (the
 * test machines are little-endian, as the formats are). */
static void write_file(const void* header, size_t header_size, const void* data, size_t size) {
  FILE* file = fopen(path, "wb");
  CHECK(file != NULL);
  if (file == NULL) return;
  CHECK(fwrite(header, 1, header_size, file) == header_size);
  CHECK(size == 0 || fwrite(data, 1, size, file) == size);
  CHECK(fclose(file) == 0);
}

static void write_llmc_shard(const uint16_t* tokens, uint32_t count, uint32_t claimed) {
  uint32_t header[256];
  memset(header, 0, sizeof(header));
  header[0] = 20240520;
  header[1] = 1;
  header[2] = claimed;
  write_file(header, sizeof(header), tokens, count * sizeof(uint16_t));
}

static void an_llmc_shard_is_a_cpu_array(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  const uint16_t tokens[5] = {50256, 1, 2, 3, 65535};
  uint16_t copy[5] = {0};
  bp_array* array = NULL;
  bp_dtype dtype = 0;
  size_t rank = 0;
  int64_t shape[1] = {0};
  bp_device device;
  void* address = NULL;
  token_path("shard.bin");
  write_llmc_shard(tokens, 5, 5);
  /* The default device is sim (it outranks cpu): token files stay on cpu. */
  CHECK(bp_tokens_load(runtime, path, NULL, &array) == BP_OK);
  CHECK(bp_array_dtype(array, &dtype) == BP_OK && dtype == BP_DTYPE_U16);
  CHECK(bp_array_rank(array, &rank) == BP_OK && rank == 1);
  CHECK(bp_array_shape(array, shape, 1) == BP_OK && shape[0] == 5);
  CHECK(bp_array_device(array, &device) == BP_OK && strcmp(device.backend, "cpu") == 0 && device.ordinal == 0);
  CHECK(bp_array_native_address(array, &address) == BP_OK && address != NULL);
  CHECK(bp_array_copy_to_host(array, copy, sizeof(copy)) == BP_OK && memcmp(copy, tokens, sizeof(tokens)) == 0);
  bp_array_destroy(array);
  remove(path);
  bp_runtime_destroy(runtime);
}

static void a_numpy_file_and_raw_tokens_with_options(void) {
  bp_runtime* runtime = c_test_runtime("[backend.cpu]\ndevices = 2\n");
  /* numpy.save of numpy.array([7, 8, 9], dtype='<i4'): 128 bytes of header. */
  char npy[128];
  const char dict[] = "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }";
  const int32_t values[3] = {7, 8, 9};
  int32_t copy[3] = {0};
  bp_array* array = NULL;
  bp_tokens_options options;
  bp_device cpu1 = c_test_device(runtime, "cpu:1");
  bp_device device;
  memset(npy, ' ', sizeof(npy));
  memcpy(npy, "\x93NUMPY\x01\x00\x76\x00", 10);
  memcpy(npy + 10, dict, sizeof(dict) - 1);
  npy[127] = '\n';
  token_path("values.npy");
  write_file(npy, sizeof(npy), values, sizeof(values));
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.dtype = BP_DTYPE_I32;
  options.device = &cpu1;
  CHECK(bp_tokens_load(runtime, path, &options, &array) == BP_OK);
  CHECK(bp_array_device(array, &device) == BP_OK && device.ordinal == 1);
  CHECK(bp_array_copy_to_host(array, copy, sizeof(copy)) == BP_OK && memcmp(copy, values, sizeof(values)) == 0);
  bp_array_destroy(array);
  options.dtype = BP_DTYPE_U32;
  CHECK(bp_tokens_load(runtime, path, &options, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "dtype U32 was asked for, but the NumPy .npy header says I32");
  remove(path);

  token_path("values.i32");
  write_file(values, sizeof(values), NULL, 0);
  CHECK(bp_tokens_load(runtime, path, NULL, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "test_c_tokens-values.i32: a raw token file");
  CHECK_CONTAINS(bp_last_error(), "needs a dtype");
  options.dtype = BP_DTYPE_I32;
  options.device = NULL;
  CHECK(bp_tokens_load(runtime, path, &options, &array) == BP_OK);
  CHECK(bp_array_copy_to_host(array, copy, sizeof(copy)) == BP_OK && memcmp(copy, values, sizeof(values)) == 0);
  bp_array_destroy(array);
  remove(path);
  bp_runtime_destroy(runtime);
}

static void bad_files_and_arguments_are_errors(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  const uint16_t tokens[4] = {1, 2, 3, 4};
  bp_array* array = NULL;
  bp_tokens_options options;
  bp_device sim = c_test_device(runtime, "sim");
  token_path("lying.bin");
  write_llmc_shard(tokens, 4, 1000);
  CHECK(bp_tokens_load(runtime, path, NULL, &array) == BP_STATUS_INVALID_FILE);
  CHECK_CONTAINS(bp_last_error(),
                 "test_c_tokens-lying.bin: llm.c shard header says 1000 tokens (3024 bytes with the header) but the "
                 "file is 1032 bytes");
  CHECK(array == NULL);
  write_llmc_shard(tokens, 4, 4);
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options) - 1;
  CHECK(bp_tokens_load(runtime, path, &options, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_tokens_load: options->struct_size");
  options.struct_size = sizeof(options);
  options.dtype = 99;
  CHECK(bp_tokens_load(runtime, path, &options, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "99 is not a bp_dtype");
  options.dtype = 0;
  options.device = &sim;
  CHECK(bp_tokens_load(runtime, path, &options, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "sim:0 is not host-addressable");
  options.device = NULL;
  options.name = "tokens";
  CHECK(bp_tokens_load(runtime, path, &options, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "safetensors files only");
  remove(path);
  CHECK(bp_tokens_load(runtime, path, NULL, &array) == BP_STATUS_NOT_FOUND);
  CHECK_CONTAINS(bp_last_error(), "test_c_tokens-lying.bin");
  CHECK(bp_tokens_load(runtime, BP_TEST_OUTPUT_DIR, NULL, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "is a directory, not a regular file");
  CHECK(bp_tokens_load(runtime, NULL, NULL, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_tokens_load: path is NULL");
  CHECK(bp_tokens_load(runtime, path, NULL, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_tokens_load(NULL, path, NULL, &array) == BP_STATUS_INVALID_ARGUMENT);
  bp_runtime_destroy(runtime);
}

static void a_pattern_loads_its_files_in_bytewise_order(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  const uint16_t first[2] = {1, 2};
  const uint16_t second[3] = {3, 4, 5};
  char pattern[512];
  bp_token_files* files = NULL;
  bp_array* array = NULL;
  size_t count = 0;
  const char* name = NULL;
  uint64_t bytes = 0;
  token_path("shard-b.bin");
  write_llmc_shard(second, 3, 3);
  token_path("shard-a.bin");
  write_llmc_shard(first, 2, 2);
  snprintf(pattern, sizeof(pattern), "%s/test_c_tokens-shard-*.bin", BP_TEST_OUTPUT_DIR);
  CHECK(bp_tokens_load_files(runtime, pattern, NULL, &files) == BP_OK);
  CHECK(bp_token_files_count(files, &count) == BP_OK && count == 2);
  CHECK(bp_token_files_path(files, 0, &name) == BP_OK);
  CHECK(strcmp(name, path) == 0);
  CHECK(bp_token_files_path(files, 1, &name) == BP_OK);
  CHECK_CONTAINS(name, "test_c_tokens-shard-b.bin");
  CHECK(bp_token_files_get(files, 1, &array) == BP_OK);
  bp_token_files_destroy(files); /* the array handed out lives on */
  CHECK(bp_array_nbytes(array, &bytes) == BP_OK && bytes == sizeof(second));
  bp_array_destroy(array);

  CHECK(bp_tokens_load_files(runtime, pattern, NULL, &files) == BP_OK);
  CHECK(bp_token_files_get(files, 2, &array) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "bp_token_files_get: index 2 is out of range: 2 files");
  CHECK(bp_token_files_path(files, 5, &name) == BP_STATUS_OUT_OF_RANGE);
  bp_token_files_destroy(files);
  bp_token_files_destroy(files); /* twice: ignored */
  bp_token_files_destroy(NULL);
  CHECK(bp_token_files_count(files, &count) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_token_files_count: files is NULL or destroyed");

  remove(path);
  token_path("shard-b.bin");
  remove(path);
  files = NULL;
  CHECK(bp_tokens_load_files(runtime, pattern, NULL, &files) == BP_STATUS_NOT_FOUND);
  CHECK_CONTAINS(bp_last_error(), "no file matches");
  CHECK_CONTAINS(bp_last_error(), "test_c_tokens-shard-*.bin");
  CHECK(files == NULL);
  bp_runtime_destroy(runtime);
}

static void a_megatron_dataset_gives_its_document_starts(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  /* The first token of each document of tests/tokens/megatron/gpt2_uint16,
   * from the sequence lengths and document indices in its expected.json. */
  const int64_t expected[12] = {0, 40, 65, 104, 184, 221, 232, 259, 299, 331, 344, 375};
  const uint16_t tokens[3] = {1, 2, 3};
  char prefix[512];
  bp_token_files* files = NULL;
  const int64_t* starts = NULL;
  size_t count = 0;
  snprintf(prefix, sizeof(prefix), "%s/tests/tokens/megatron/gpt2_uint16", BP_TEST_SOURCE_DIR);
  /* The prefix, as bp_tokens_load takes it, matches itself. */
  CHECK(bp_tokens_load_files(runtime, prefix, NULL, &files) == BP_OK);
  CHECK(bp_token_files_count(files, &count) == BP_OK && count == 1);
  CHECK(bp_token_files_document_starts(files, 0, &starts, &count) == BP_OK);
  CHECK(count == 12 && memcmp(starts, expected, sizeof(expected)) == 0);
  CHECK(bp_token_files_document_starts(files, 1, &starts, &count) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "bp_token_files_document_starts: index 1 is out of range: 1 files");
  CHECK(bp_token_files_document_starts(files, 0, NULL, &count) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_token_files_document_starts: starts is NULL");
  CHECK(bp_token_files_document_starts(files, 0, &starts, NULL) == BP_STATUS_INVALID_ARGUMENT);
  bp_token_files_destroy(files);
  CHECK(bp_token_files_document_starts(files, 0, &starts, &count) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "files is NULL or destroyed");

  /* An llm.c shard records no documents. */
  token_path("no-documents.bin");
  write_llmc_shard(tokens, 3, 3);
  CHECK(bp_tokens_load_files(runtime, path, NULL, &files) == BP_OK);
  starts = NULL;
  count = 7;
  CHECK(bp_token_files_document_starts(files, 0, &starts, &count) == BP_STATUS_NOT_FOUND);
  CHECK_CONTAINS(bp_last_error(), "test_c_tokens-no-documents.bin: its format records no documents");
  CHECK(starts == NULL && count == 7); /* outputs are written only on success */
  bp_token_files_destroy(files);
  remove(path);
  bp_runtime_destroy(runtime);
}

int main(void) {
  c_test_program = "test_c_tokens";
  RUN(an_llmc_shard_is_a_cpu_array);
  RUN(a_numpy_file_and_raw_tokens_with_options);
  RUN(bad_files_and_arguments_are_errors);
  RUN(a_pattern_loads_its_files_in_bytewise_order);
  RUN(a_megatron_dataset_gives_its_document_starts);
  return c_test_summary();
}
