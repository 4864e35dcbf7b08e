/* A program that creates a runtime, uses it and destroys it, then creates a
 * second one and returns from main without destroying it (or its arrays)
 * must exit cleanly, and so must one that leaves a batch stream running or
 * a pattern's token files loaded: the library leaves what is still live at
 * exit alone
 * instead of calling into plugins whose own statics may already be gone.
 * The check is this program's exit status; it runs plain and under ASan. */
#include "c_runtime.h"
#include "c_test.h"

#include <stdint.h>
#include <string.h>

/* An array on each device; opencl:0 only where an OpenCL device is. */
static void use(bp_runtime* runtime, bp_array** arrays) {
  const unsigned char bytes[64] = {1, 2, 3};
  const int64_t shape[] = {64};
  bp_device devices[3];
  size_t count = 0;
  devices[count++] = c_test_device(runtime, "cpu:0");
  devices[count++] = c_test_device(runtime, "sim:0");
  if (bp_device_resolve(runtime, "opencl:0", &devices[count]) == BP_OK) ++count;
  for (size_t index = 0; index < 3; ++index) arrays[index] = NULL;
  for (size_t index = 0; index < count; ++index) {
    bp_device device = devices[index];
    CHECK(bp_array_create(runtime, &device, BP_DTYPE_U8, shape, 1, bytes, sizeof(bytes), &arrays[index]) == BP_OK);
  }
}

static void create_use_destroy_then_leave_one(void) {
  bp_array* arrays[3];
  bp_runtime* first = c_test_runtime(NULL);
  use(first, arrays);
  for (size_t index = 0; index < 3; ++index) bp_array_destroy(arrays[index]);
  bp_runtime_destroy(first);

  bp_runtime* second = c_test_runtime(NULL);
  use(second, arrays);
  /* `second` and its arrays stay live: main returns with them. */
}

/* A batch stream left live at exit, its threads running, with batches on
 * cpu:0 and sim:0 (the default device) handed out and never destroyed. */
static void leave_a_stream_running(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_device cpu = c_test_device(runtime, "cpu:0");
  uint16_t tokens[4096];
  const int64_t shape[] = {4096};
  bp_array* source = NULL;
  bp_batch_stream* streams[2] = {NULL, NULL};
  bp_batch_stream_options options;
  for (size_t index = 0; index < 4096; ++index) tokens[index] = (uint16_t)index;
  CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U16, shape, 1, tokens, sizeof(tokens), &source) == BP_OK);
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.batch_size = 4;
  options.context = 31;
  options.prefetch = 8;
  for (size_t index = 0; index < 2; ++index) {
    bp_array* batch = NULL;
    size_t count = 0;
    options.devices = index == 0 ? &cpu : NULL;
    options.device_count = index == 0 ? 1 : 0;
    CHECK(bp_batch_stream_create(runtime, (const bp_array* const*)&source, 1, &options, &streams[index]) == BP_OK);
    CHECK(bp_batch_stream_next(streams[index], &batch, 1, &count) == BP_OK);
  }
}

/* A pattern's token files left loaded at exit, their list never destroyed:
 * the list's registry, like every other, outlives the plugins. */
static void leave_token_files_loaded(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  const uint16_t tokens[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  char path[512];
  char pattern[512];
  bp_tokens_options options;
  bp_token_files* files = NULL;
  size_t count = 0;
  FILE* file = NULL;
  snprintf(path, sizeof(path), "%s/test_c_exit-tokens.u16", BP_TEST_OUTPUT_DIR);
  snprintf(pattern, sizeof(pattern), "%s/test_c_exit-tokens.u1[6]", BP_TEST_OUTPUT_DIR);
  file = fopen(path, "wb");
  CHECK(file != NULL && fwrite(tokens, sizeof(tokens), 1, file) == 1 && fclose(file) == 0);
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.dtype = BP_DTYPE_U16;
  CHECK(bp_tokens_load_files(runtime, pattern, &options, &files) == BP_OK);
  CHECK(bp_token_files_count(files, &count) == BP_OK && count == 1);
  remove(path); /* the mapping keeps the tokens */
}

int main(void) {
  c_test_program = "test_c_exit";
  c_test_run("a runtime left live at exit after another was destroyed", create_use_destroy_then_leave_one);
  c_test_run("a batch stream left running at exit", leave_a_stream_running);
  c_test_run("token files left loaded at exit", leave_token_files_loaded);
  return c_test_summary();
}
