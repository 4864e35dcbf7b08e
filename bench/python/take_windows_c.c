/* The baseline of bench_call_overhead.py: bp_take_windows called from C,
 * with the arguments the Python side passes (B windows of T+1 U16 tokens
 * widened to I64 on cpu:0, from an array of `tokens` in host memory). Prints
 * the median time per call of `rounds` rounds of `calls` calls, of
 * take_windows + bp_array_destroy (wall time, and the calling thread's CPU
 * time, which leaves out waiting for the library's threads) and of
 * bp_array_is_ready, in nanoseconds. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */

#include <backplane/backplane.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(clockid_t clock) {
  struct timespec time;
  clock_gettime(clock, &time);
  return (double)time.tv_sec * 1e9 + (double)time.tv_nsec;
}

static int by_value(const void* first, const void* second) {
  double a = *(const double*)first, b = *(const double*)second;
  return (a > b) - (a < b);
}

static int fail(const char* what) {
  fprintf(stderr, "take_windows_c: %s: %s\n", what, bp_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: take_windows_c TOKENS BATCH WINDOW CALLS ROUNDS\n");
    return 2;
  }
  const int64_t token_count = atoll(argv[1]), batch = atoll(argv[2]), window = atoll(argv[3]);
  const int calls = atoi(argv[4]), rounds = atoi(argv[5]);
  if (token_count <= window || batch < 1 || window < 1 || calls < 1 || rounds < 1 || rounds > 64) {
    fprintf(stderr, "take_windows_c: need TOKENS > WINDOW >= 1, BATCH >= 1, CALLS >= 1 and 1 <= ROUNDS <= 64\n");
    return 2;
  }
  bp_runtime* runtime = NULL;
  if (bp_runtime_create(NULL, &runtime) != BP_OK) return fail("bp_runtime_create");
  bp_device cpu;
  if (bp_device_resolve(runtime, "cpu", &cpu) != BP_OK) return fail("bp_device_resolve");
  uint16_t* values = malloc((size_t)token_count * sizeof(uint16_t));
  int64_t* offsets = malloc((size_t)batch * sizeof(int64_t));
  if (values == NULL || offsets == NULL) return 2;
  for (int64_t i = 0; i < token_count; ++i) values[i] = (uint16_t)(i * 2654435761u >> 16);
  /* The same offsets as the Python side's. */
  for (int64_t i = 0; i < batch; ++i) offsets[i] = (i * 7919 * window) % (token_count - window);
  const int64_t shape[1] = {token_count};
  bp_array* tokens = NULL;
  if (bp_array_create(runtime, &cpu, BP_DTYPE_U16, shape, 1, values, (uint64_t)token_count * 2, &tokens) != BP_OK)
    return fail("bp_array_create");
  double take[64], take_cpu[64], trivial[64];
  for (int round = 0; round < rounds; ++round) {
    double start = now_ns(CLOCK_MONOTONIC), start_cpu = now_ns(CLOCK_THREAD_CPUTIME_ID);
    for (int call = 0; call < calls; ++call) {
      bp_array* out = NULL;
      if (bp_take_windows(runtime, tokens, offsets, (size_t)batch, window, &cpu, BP_DTYPE_I64, &out) != BP_OK)
        return fail("bp_take_windows");
      bp_array_destroy(out);
    }
    take[round] = (now_ns(CLOCK_MONOTONIC) - start) / calls;
    take_cpu[round] = (now_ns(CLOCK_THREAD_CPUTIME_ID) - start_cpu) / calls;
    int32_t ready = 0;
    start = now_ns(CLOCK_MONOTONIC);
    for (int call = 0; call < calls; ++call) bp_array_is_ready(tokens, &ready);
    trivial[round] = (now_ns(CLOCK_MONOTONIC) - start) / calls;
  }
  qsort(take, (size_t)rounds, sizeof(double), by_value);
  qsort(take_cpu, (size_t)rounds, sizeof(double), by_value);
  qsort(trivial, (size_t)rounds, sizeof(double), by_value);
  printf("take_windows_ns %.1f\ntake_windows_cpu_ns %.1f\nis_ready_ns %.1f\n", take[rounds / 2], take_cpu[rounds / 2],
         trivial[rounds / 2]);
  bp_array_destroy(tokens);
  bp_runtime_destroy(runtime);
  free(values);
  free(offsets);
  return 0;
}
