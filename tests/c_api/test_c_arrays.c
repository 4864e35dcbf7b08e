/* Arrays, device_put, take_windows and memory statistics through the C API,
 * every error path with its code and message. C11, -Wall -Wextra -Werror
 * -pedantic. The isolated runtime's default device is sim:0 (the simulated
 * accelerator outranks cpu). */
#include <backplane/backplane.h>
#include <backplane/struct_size.h>

#include "c_runtime.h"
#include "c_test.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bp_array* f32_array(bp_runtime* runtime, const char* selector, const float* values, int64_t rows,
                           int64_t columns) {
  bp_device device = c_test_device(runtime, selector);
  int64_t shape[2];
  bp_array* array = NULL;
  shape[0] = rows;
  shape[1] = columns;
  if (bp_array_create(runtime, &device, BP_DTYPE_F32, shape, 2, values, (uint64_t)(rows * columns) * 4, &array) !=
      BP_OK) {
    fprintf(stderr, "bp_array_create: %s\n", bp_last_error());
    exit(1);
  }
  return array;
}

static void dtype_names_and_bits(void) {
  bp_dtype dtype = 0;
  CHECK(strcmp(bp_dtype_name(BP_DTYPE_U16), "U16") == 0);
  CHECK(strcmp(bp_dtype_name(BP_DTYPE_F8_E4M3FNUZ), "F8_E4M3FNUZ") == 0);
  CHECK(strcmp(bp_dtype_name(0), "") == 0);
  CHECK(strcmp(bp_dtype_name(99), "") == 0);
  CHECK(bp_dtype_from_name("BF16", &dtype) == BP_OK && dtype == BP_DTYPE_BF16);
  CHECK(bp_dtype_from_name("u16", &dtype) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "'u16' is not a dtype");
  CHECK(bp_dtype_from_name(NULL, &dtype) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_dtype_from_name: name is NULL");
  CHECK(bp_dtype_from_name("U8", NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_dtype_bits(BP_DTYPE_C64) == 64);
  CHECK(bp_dtype_bits(BP_DTYPE_F4) == 4);
  CHECK(bp_dtype_bits(BP_DTYPE_F6_E2M3) == 6);
  CHECK(bp_dtype_bits(0) == 0);
}

static void arrays_are_created_queried_and_copied_out(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  const float values[6] = {1, 2, 3, 4, 5, 6};
  bp_array* array = f32_array(runtime, "cpu", values, 2, 3);
  bp_dtype dtype = 0;
  size_t rank = 0;
  int64_t shape[3] = {0, 0, 0};
  uint64_t nbytes = 0;
  bp_device device;
  void* address = NULL;
  float back[6];
  CHECK(bp_array_dtype(array, &dtype) == BP_OK && dtype == BP_DTYPE_F32);
  CHECK(bp_array_rank(array, &rank) == BP_OK && rank == 2);
  CHECK(bp_array_shape(array, shape, 3) == BP_OK && shape[0] == 2 && shape[1] == 3);
  CHECK(bp_array_shape(array, shape, 1) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "bp_array_shape: the array has rank 2, capacity is 1");
  CHECK(bp_array_nbytes(array, &nbytes) == BP_OK && nbytes == 24);
  CHECK(bp_array_device(array, &device) == BP_OK && strcmp(device.backend, "cpu") == 0 && device.ordinal == 0);
  CHECK(bp_array_native_address(array, &address) == BP_OK && address != NULL);
  CHECK(bp_array_copy_to_host(array, back, sizeof(back)) == BP_OK && memcmp(back, values, sizeof(back)) == 0);
  CHECK(bp_array_copy_to_host(array, back, 8) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_array_copy_to_host: the array has 24 bytes, capacity is 8");
  CHECK(bp_array_copy_to_host(array, NULL, 24) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "destination is NULL");

  /* A scalar, on the default device (NULL). */
  {
    const int64_t scalar = -7;
    bp_array* one = NULL;
    int64_t read = 0;
    CHECK(bp_array_create(runtime, NULL, BP_DTYPE_I64, NULL, 0, &scalar, 8, &one) == BP_OK);
    CHECK(bp_array_device(one, &device) == BP_OK && strcmp(device.backend, "sim") == 0);
    CHECK(bp_array_rank(one, &rank) == BP_OK && rank == 0);
    CHECK(bp_array_shape(one, NULL, 0) == BP_OK);
    CHECK(bp_array_copy_to_host(one, &read, 8) == BP_OK && read == -7);
    bp_array_destroy(one);
  }
  bp_array_destroy(array);
  bp_runtime_destroy(runtime);
}

static void array_creation_errors_name_the_problem(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_device cpu = c_test_device(runtime, "cpu");
  bp_device missing;
  const uint8_t bytes[8] = {0};
  int64_t shape[1] = {8};
  int64_t negative[1] = {-1};
  bp_array* array = NULL;
  CHECK(bp_array_create(runtime, &cpu, 0, shape, 1, bytes, 8, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_array_create: 0 is not a bp_dtype (1..22)");
  CHECK(bp_array_create(runtime, &cpu, 99, shape, 1, bytes, 8, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "99 is not a bp_dtype");
  CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U16, shape, 1, bytes, 8, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "16");
  CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U8, negative, 1, bytes, 8, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "negative extent");
  CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U8, NULL, 1, bytes, 8, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_array_create: shape is NULL");
  CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U8, shape, 1, NULL, 8, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_array_create: data is NULL");
  CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U8, shape, 1, bytes, 8, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_array_create: out is NULL");
  CHECK(bp_array_create(NULL, &cpu, BP_DTYPE_U8, shape, 1, bytes, 8, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_array_create: runtime is NULL");
  missing = cpu;
  missing.ordinal = 3;
  CHECK(bp_array_create(runtime, &missing, BP_DTYPE_U8, shape, 1, bytes, 8, &array) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "cpu:3");
  strcpy(missing.backend, "tpu");
  CHECK(bp_array_create(runtime, &missing, BP_DTYPE_U8, shape, 1, bytes, 8, &array) == BP_STATUS_NOT_FOUND);
  CHECK_CONTAINS(bp_last_error(), "no backend 'tpu'");
  strcpy(missing.backend, "unavailable");
  CHECK(bp_array_create(runtime, &missing, BP_DTYPE_U8, shape, 1, bytes, 8, &array) == BP_STATUS_UNAVAILABLE);
  CHECK_CONTAINS(bp_last_error(), "fixture: no such hardware");
  CHECK(array == NULL); /* outputs are written only on success */
  bp_runtime_destroy(runtime);
}

static void slices_are_views_of_the_same_buffer(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  const float values[6] = {1, 2, 3, 4, 5, 6};
  bp_array* array = f32_array(runtime, "cpu", values, 3, 2);
  bp_array* row = NULL;
  int32_t shares = 0;
  float back[2];
  int64_t shape[2];
  CHECK(bp_array_slice(array, 1, 2, &row) == BP_OK);
  CHECK(bp_array_shares_buffer(array, row, &shares) == BP_OK && shares == 1);
  CHECK(bp_array_shape(row, shape, 2) == BP_OK && shape[0] == 1 && shape[1] == 2);
  bp_array_destroy(array); /* the view keeps the buffer */
  CHECK(bp_array_copy_to_host(row, back, sizeof(back)) == BP_OK && back[0] == 3 && back[1] == 4);
  CHECK(bp_array_slice(row, 0, 2, &array) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "0 <= begin <= end <= 1");
  CHECK(bp_array_slice(row, 0, 1, NULL) == BP_STATUS_INVALID_ARGUMENT);
  bp_array_destroy(row);

  {
    const int32_t scalar = 1;
    bp_array* one = NULL;
    bp_device cpu = c_test_device(runtime, "cpu");
    CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_I32, NULL, 0, &scalar, 4, &one) == BP_OK);
    CHECK(bp_array_slice(one, 0, 0, &row) == BP_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(bp_last_error(), "a scalar (rank 0) has no axis 0");
    bp_array_destroy(one);
  }
  bp_runtime_destroy(runtime);
}

static uint64_t progress_reports;
static uint64_t progress_total;
static void count_progress(uint64_t done, uint64_t total, void* user_data) {
  (void)done;
  ++progress_reports;
  progress_total = total;
  CHECK(user_data == &progress_reports);
}

static void device_put_is_asynchronous_with_wait(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  const float values[6] = {1, 2, 3, 4, 5, 6};
  bp_array* array = f32_array(runtime, "cpu", values, 2, 3);
  bp_array* moved = NULL;
  bp_array* same = NULL;
  bp_device device;
  bp_device cpu = c_test_device(runtime, "cpu");
  int32_t ready = -1, shares = -1;
  float back[6];
  CHECK(bp_array_device_put(runtime, array, NULL, NULL, NULL, &moved) == BP_OK); /* default: sim:0 */
  CHECK(bp_array_device(moved, &device) == BP_OK && strcmp(device.backend, "sim") == 0);
  CHECK(bp_array_wait(moved) == BP_OK);
  CHECK(bp_array_is_ready(moved, &ready) == BP_OK && ready == 1);
  CHECK(bp_array_copy_to_host(moved, back, sizeof(back)) == BP_OK && memcmp(back, values, sizeof(back)) == 0);

  /* Already there: the same data, no copy. */
  CHECK(bp_array_device_put(runtime, array, &cpu, NULL, NULL, &same) == BP_OK);
  CHECK(bp_array_shares_buffer(array, same, &shares) == BP_OK && shares == 1);
  CHECK(bp_array_shares_buffer(array, moved, &shares) == BP_OK && shares == 0);
  bp_array_destroy(same);

  /* Chunked transfers report progress: 17 MiB + 1 is three 8 MiB chunks. */
  {
    const size_t size = (17u << 20) + 1;
    uint8_t* bytes = calloc(size, 1);
    int64_t shape[1];
    bp_array* big = NULL;
    bp_array* big_moved = NULL;
    shape[0] = (int64_t)size;
    bytes[size - 1] = 42;
    CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U8, shape, 1, bytes, size, &big) == BP_OK);
    CHECK(bp_array_device_put(runtime, big, NULL, count_progress, &progress_reports, &big_moved) == BP_OK);
    CHECK(bp_array_wait(big_moved) == BP_OK);
    CHECK(progress_reports == 3 && progress_total == size);
    memset(bytes, 0, size);
    CHECK(bp_array_copy_to_host(big_moved, bytes, size) == BP_OK && bytes[size - 1] == 42);
    bp_array_destroy(big);
    bp_array_destroy(big_moved);
    free(bytes);
  }

  /* Errors. */
  {
    bp_device bad = cpu;
    bad.ordinal = 7;
    CHECK(bp_array_device_put(runtime, array, &bad, NULL, NULL, &same) == BP_STATUS_OUT_OF_RANGE);
    CHECK_CONTAINS(bp_last_error(), "cpu:7");
    CHECK(bp_array_device_put(NULL, array, NULL, NULL, NULL, &same) == BP_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(bp_last_error(), "bp_array_device_put: runtime is NULL");
    CHECK(bp_array_device_put(runtime, NULL, NULL, NULL, NULL, &same) == BP_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(bp_last_error(), "bp_array_device_put: array is NULL");
    CHECK(bp_array_device_put(runtime, array, NULL, NULL, NULL, NULL) == BP_STATUS_INVALID_ARGUMENT);
    CHECK(bp_array_is_ready(moved, NULL) == BP_STATUS_INVALID_ARGUMENT);
    CHECK(bp_array_wait(NULL) == BP_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(bp_last_error(), "bp_array_wait: array is NULL");
  }
  bp_array_destroy(moved);
  bp_array_destroy(array);
  bp_runtime_destroy(runtime);
}

static void a_failed_transfer_is_reported_by_wait(void) {
  /* The sim plugin fails its first copy; 2 MiB is beyond the inline size, so
   * the failure surfaces asynchronously. */
  bp_runtime* runtime = c_test_runtime("[backend.sim]\nfail_copy_at = 1\n");
  bp_device cpu = c_test_device(runtime, "cpu");
  const size_t size = 2u << 20;
  uint8_t* bytes = calloc(size, 1);
  int64_t shape[1];
  bp_array* source = NULL;
  bp_array* moved = NULL;
  int32_t ready = 0;
  bp_status status;
  shape[0] = (int64_t)size;
  CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U8, shape, 1, bytes, size, &source) == BP_OK);
  status = bp_array_device_put(runtime, source, NULL, NULL, NULL, &moved);
  CHECK(status == BP_OK);
  if (status == BP_OK) {
    CHECK(bp_array_wait(moved) == BP_STATUS_DEVICE);
    CHECK_CONTAINS(bp_last_error(), "injected device fault");
    CHECK_CONTAINS(bp_last_error(), "from cpu:0 to sim:0 failed");
    CHECK(bp_array_wait(moved) == BP_STATUS_DEVICE); /* every time */
    CHECK(bp_array_is_ready(moved, &ready) == BP_OK && ready == 1);
    CHECK(bp_array_copy_to_host(moved, bytes, size) == BP_STATUS_DEVICE);
    bp_array_destroy(moved);
  }
  bp_array_destroy(source);
  free(bytes);
  bp_runtime_destroy(runtime);
}

static void take_windows_gathers_batches(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_device cpu = c_test_device(runtime, "cpu");
  uint16_t tokens[100];
  int64_t shape[1] = {100};
  int64_t offsets[3] = {0, 10, 95};
  int64_t batch_shape[2];
  int64_t back[15];
  bp_array* source = NULL;
  bp_array* batch = NULL;
  bp_dtype dtype = 0;
  bp_device device;
  int i;
  for (i = 0; i < 100; ++i) tokens[i] = (uint16_t)(1000 + i);
  CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U16, shape, 1, tokens, sizeof(tokens), &source) == BP_OK);
  CHECK(bp_take_windows(runtime, source, offsets, 3, 5, NULL, BP_DTYPE_I64, &batch) == BP_OK);
  CHECK(bp_array_wait(batch) == BP_OK);
  CHECK(bp_array_dtype(batch, &dtype) == BP_OK && dtype == BP_DTYPE_I64);
  CHECK(bp_array_shape(batch, batch_shape, 2) == BP_OK && batch_shape[0] == 3 && batch_shape[1] == 5);
  CHECK(bp_array_device(batch, &device) == BP_OK && strcmp(device.backend, "sim") == 0);
  CHECK(bp_array_copy_to_host(batch, back, sizeof(back)) == BP_OK);
  CHECK(back[0] == 1000 && back[5] == 1010 && back[14] == 1099);
  bp_array_destroy(batch);

  /* Same dtype (output 0), onto the CPU. */
  CHECK(bp_take_windows(runtime, source, offsets, 2, 2, &cpu, 0, &batch) == BP_OK);
  CHECK(bp_array_dtype(batch, &dtype) == BP_OK && dtype == BP_DTYPE_U16);
  bp_array_destroy(batch);

  offsets[2] = 96;
  CHECK(bp_take_windows(runtime, source, offsets, 3, 5, NULL, 0, &batch) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "96");
  CHECK(bp_take_windows(runtime, source, offsets, 1, 5, NULL, 77, &batch) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_take_windows: 77 is not a bp_dtype");
  CHECK(bp_take_windows(runtime, source, NULL, 1, 5, NULL, 0, &batch) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_take_windows: offsets is NULL");
  CHECK(bp_take_windows(runtime, source, offsets, 1, 5, NULL, BP_DTYPE_F32, &batch) == BP_STATUS_UNSUPPORTED);
  {
    bp_array* on_sim = NULL;
    CHECK(bp_array_device_put(runtime, source, NULL, NULL, NULL, &on_sim) == BP_OK);
    CHECK(bp_take_windows(runtime, on_sim, offsets, 1, 5, NULL, 0, &batch) == BP_STATUS_UNSUPPORTED);
    CHECK_CONTAINS(bp_last_error(), "sim:0");
    bp_array_destroy(on_sim);
  }
  bp_array_destroy(source);
  bp_runtime_destroy(runtime);
}

static void memory_stats_and_empty_cache(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  const float values[6] = {1, 2, 3, 4, 5, 6};
  bp_array* array = f32_array(runtime, "sim", values, 2, 3);
  bp_memory_stats stats;
  memset(&stats, 0, sizeof(stats));
  stats.struct_size = sizeof(stats);
  CHECK(bp_memory_stats_get(runtime, NULL, &stats) == BP_OK);
  CHECK(stats.in_use > 0 && stats.backend_allocations >= 1 && stats.peak >= stats.in_use);
  bp_array_destroy(array);
  CHECK(bp_memory_stats_get(runtime, NULL, &stats) == BP_OK && stats.in_use == 0 && stats.cached > 0);
  CHECK(bp_empty_cache(runtime, NULL) == BP_OK);
  CHECK(bp_memory_stats_get(runtime, NULL, &stats) == BP_OK && stats.cached == 0);
  stats.struct_size = 8;
  CHECK(bp_memory_stats_get(runtime, NULL, &stats) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "struct_size 8");
  CHECK(bp_memory_stats_get(runtime, NULL, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_empty_cache(NULL, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_empty_cache: runtime is NULL");
  {
    bp_device bad = c_test_device(runtime, "cpu");
    bad.ordinal = 5;
    CHECK(bp_empty_cache(runtime, &bad) == BP_STATUS_OUT_OF_RANGE);
  }
  bp_runtime_destroy(runtime);
}

static bp_array* u8_array(bp_runtime* runtime, const char* selector, size_t size) {
  bp_device device = c_test_device(runtime, selector);
  uint8_t* bytes = calloc(size, 1);
  int64_t shape[1];
  bp_array* array = NULL;
  shape[0] = (int64_t)size;
  if (bytes == NULL || bp_array_create(runtime, &device, BP_DTYPE_U8, shape, 1, bytes, size, &array) != BP_OK ||
      bp_array_wait(array) != BP_OK) {
    fprintf(stderr, "u8_array: %s\n", bp_last_error());
    exit(1);
  }
  free(bytes);
  return array;
}

static bp_memory_stats stats_of(bp_runtime* runtime, const bp_device* device) {
  bp_memory_stats stats;
  memset(&stats, 0, sizeof(stats));
  stats.struct_size = sizeof(stats);
  if (bp_memory_stats_get(runtime, device, &stats) != BP_OK) {
    fprintf(stderr, "bp_memory_stats_get: %s\n", bp_last_error());
    exit(1);
  }
  return stats;
}

static void reset_peak_starts_a_new_phase(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_array* kept = u8_array(runtime, "sim", 4096);
  bp_array* phase = u8_array(runtime, "sim", 65536);
  bp_array* next = NULL;
  bp_array_destroy(phase);
  CHECK(stats_of(runtime, NULL).peak == 4096 + 65536);
  CHECK(bp_memory_reset_peak(runtime, NULL) == BP_OK);
  CHECK(stats_of(runtime, NULL).peak == 4096);
  CHECK(stats_of(runtime, NULL).in_use == 4096);
  next = u8_array(runtime, "sim", 8192);
  CHECK(stats_of(runtime, NULL).peak == 4096 + 8192);
  bp_array_destroy(next);
  bp_array_destroy(kept);
  CHECK(bp_memory_reset_peak(runtime, NULL) == BP_OK);
  CHECK(stats_of(runtime, NULL).peak == 0);
  CHECK(bp_memory_reset_peak(NULL, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_memory_reset_peak: runtime is NULL");
  {
    bp_device bad = c_test_device(runtime, "sim");
    bp_memory_stats stats;
    bad.ordinal = 5;
    CHECK(bp_memory_reset_peak(runtime, &bad) == BP_STATUS_OUT_OF_RANGE);
    CHECK_CONTAINS(bp_last_error(), "sim:5");
    memset(&stats, 0, sizeof(stats));
    stats.struct_size = sizeof(stats);
    CHECK(bp_memory_stats_get(runtime, &bad, &stats) == BP_STATUS_OUT_OF_RANGE);
    CHECK_CONTAINS(bp_last_error(), "sim:5");
  }
  bp_runtime_destroy(runtime);
}

/* /proc/meminfo's MemTotal in bytes, 0 where it cannot be read. */
static uint64_t meminfo_total(void) {
  FILE* file = fopen("/proc/meminfo", "r");
  char line[256];
  unsigned long long kib = 0;
  if (file == NULL) return 0;
  while (fgets(line, sizeof(line), file) != NULL) {
    if (sscanf(line, "MemTotal: %llu kB", &kib) == 1) break;
  }
  fclose(file);
  return (uint64_t)kib * 1024;
}

static void memory_stats_report_the_device_memory(void) {
  bp_runtime* runtime = c_test_runtime("[backend.sim]\nmemory_limit = 1048576\n");
  bp_device cpu = c_test_device(runtime, "cpu");
  bp_array* array = u8_array(runtime, "sim", 4096);
  bp_memory_stats stats = stats_of(runtime, NULL);
  CHECK(stats.memory_total == 1048576);
  CHECK(stats.memory_free == 1048576 - 4096);
  bp_array_destroy(array);
  CHECK(bp_empty_cache(runtime, NULL) == BP_OK);
  CHECK(stats_of(runtime, NULL).memory_free == 1048576);

  stats = stats_of(runtime, &cpu);
  if (meminfo_total() != 0) CHECK(stats.memory_total == meminfo_total());
  CHECK(stats.memory_free != BP_MEMORY_UNKNOWN && stats.memory_free > 0 && stats.memory_free <= stats.memory_total);

  /* A caller built against API 0.5: the fields past its struct are not written. */
  memset(&stats, 0, sizeof(stats));
  stats.struct_size = BP_STRUCT_SIZE(bp_memory_stats, pinned_backend_allocations);
  stats.memory_total = 12345;
  stats.memory_free = 12345;
  CHECK(bp_memory_stats_get(runtime, NULL, &stats) == BP_OK);
  CHECK(stats.memory_total == 12345 && stats.memory_free == 12345);
  bp_runtime_destroy(runtime);
}

static void an_unknown_free_figure_reads_as_unknown(void) {
  bp_runtime* runtime = c_test_runtime("[backend.sim]\nreport_free = 0\nmemory_limit = 65536\n");
  bp_device sim = c_test_device(runtime, "sim");
  bp_device_info* info = NULL;
  bp_memory_stats stats = stats_of(runtime, &sim);
  CHECK(stats.memory_total == 65536);
  CHECK(stats.memory_free == BP_MEMORY_UNKNOWN);
  CHECK(bp_device_info_create(runtime, &sim, &info) == BP_OK);
  CHECK(bp_device_info_memory_total(info) == 65536);
  CHECK(bp_device_info_memory_free(info) == BP_MEMORY_UNKNOWN);
  bp_device_info_destroy(info);
  bp_runtime_destroy(runtime);
}

static void null_and_destroyed_arrays_are_errors(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  const float values[6] = {1, 2, 3, 4, 5, 6};
  bp_array* array = f32_array(runtime, "cpu", values, 2, 3);
  bp_array* copy = NULL;
  size_t rank = 0;
  bp_dtype dtype = 0;
  uint64_t nbytes = 0;
  bp_device device;
  void* address = NULL;
  int32_t flag = 0;
  CHECK(bp_array_rank(NULL, &rank) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_array_rank: array is NULL");
  CHECK(bp_array_rank(array, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_dtype(array, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_nbytes(array, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_device(array, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_native_address(array, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_shares_buffer(array, NULL, &flag) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_shares_buffer(array, array, NULL) == BP_STATUS_INVALID_ARGUMENT);

  /* The array outlives its runtime for reading; placing needs the runtime. */
  bp_runtime_destroy(runtime);
  CHECK(bp_array_nbytes(array, &nbytes) == BP_OK && nbytes == 24);
  CHECK(bp_array_device_put(runtime, array, NULL, NULL, NULL, &copy) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "runtime is not a live handle");

  bp_array_destroy(array);
  CHECK(bp_array_rank(array, &rank) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_array_rank: array is not a live handle (destroyed?)");
  CHECK(bp_array_dtype(array, &dtype) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_nbytes(array, &nbytes) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_device(array, &device) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_native_address(array, &address) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_is_ready(array, &flag) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_wait(array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_slice(array, 0, 1, &copy) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_shape(array, NULL, 0) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_copy_to_host(array, NULL, 0) == BP_STATUS_INVALID_ARGUMENT);
  bp_array_destroy(array); /* twice: ignored */
  bp_array_destroy(NULL);
}

int main(void) {
  c_test_program = "test_c_arrays";
  RUN(dtype_names_and_bits);
  RUN(arrays_are_created_queried_and_copied_out);
  RUN(array_creation_errors_name_the_problem);
  RUN(slices_are_views_of_the_same_buffer);
  RUN(device_put_is_asynchronous_with_wait);
  RUN(a_failed_transfer_is_reported_by_wait);
  RUN(take_windows_gathers_batches);
  RUN(memory_stats_and_empty_cache);
  RUN(reset_peak_starts_a_new_phase);
  RUN(memory_stats_report_the_device_memory);
  RUN(an_unknown_free_figure_reads_as_unknown);
  RUN(null_and_destroyed_arrays_are_errors);
  return c_test_summary();
}
