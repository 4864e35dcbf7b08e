/* A PJRT device from C, on both data paths of the pjrt adapter over the CPU
 * PJRT plugin: device_put, take_windows, the batch stream, a safetensors
 * load and DLPack export, each equal to the same work on cpu:0. C11, -Wall
 * -Wextra -Werror -pedantic. Without the xla-cpu-pjrt wheel it prints why
 * and exits 77 (skipped). */
#define _POSIX_C_SOURCE 200809L /* popen */

#include <backplane/backplane.h>
#include <dlpack/dlpack.h>

#include "../c_api/c_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKENS 20000

static char library[4096];
static const char* data_path;
static bp_runtime* runtime;
static uint16_t tokens[TOKENS];

/* The CPU PJRT plugin that xla-cpu-pjrt installed for the python3 on PATH. */
static int find_library(void) {
  FILE* finder = popen("python3 '" BP_TEST_SOURCE_DIR "/plugins/pjrt/find_pjrt.py' --library xla-cpu-pjrt 2>&1", "r");
  char rest[4096];
  size_t length;
  if (finder == NULL) return 0;
  if (fgets(library, sizeof(library), finder) == NULL) library[0] = '\0';
  while (fgets(rest, sizeof(rest), finder) != NULL) {
  } /* the version line, read so the finder exits */
  length = strlen(library);
  if (length > 0 && library[length - 1] == '\n') library[length - 1] = '\0';
  return pclose(finder) == 0 && library[0] != '\0';
}

/* The C form of tests/pjrt/pjrt_support.hpp's one place a PJRT backend is
 * made: the library is the source "test" given in code, with its create
 * option, so the backend is pjrt_test; its data path comes from
 * [backend.pjrt_test] in a config file. */
static bp_runtime* pjrt_runtime(void) {
  const char* paths[] = {BP_TEST_PJRT_PLUGIN, BP_TEST_CPU_PLUGIN};
  const char* const create_keys[] = {"cpu_device_count"};
  const char* const create_values[] = {"int64:2"};
  char config[512];
  FILE* file;
  bp_plugin_source source;
  bp_runtime_options options;
  bp_runtime* made = NULL;
  size_t count = 0;
  snprintf(config, sizeof(config), "%s/test_c_pjrt-%s.toml", BP_TEST_OUTPUT_DIR, data_path);
  file = fopen(config, "w");
  if (file == NULL) exit(1);
  fprintf(file, "[backend.pjrt_test]\ndata_path = \"%s\"\n", data_path);
  fclose(file);
  memset(&source, 0, sizeof(source));
  source.struct_size = sizeof(source);
  source.kind = BP_PLUGIN_SOURCE_PJRT;
  source.name = "test";
  source.path = library;
  source.create_option_keys = create_keys;
  source.create_option_values = create_values;
  source.create_option_count = 1;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.plugin_paths = paths;
  options.plugin_path_count = 2;
  options.sources = &source;
  options.source_count = 1;
  options.config_file = config;
  options.ignore_environment = 1;
  options.skip_default_paths = 1;
  if (bp_runtime_create(&options, &made) != BP_OK || bp_backend_count(made, &count) != BP_OK) {
    fprintf(stderr, "runtime: %s\n", bp_last_error());
    exit(1);
  }
  remove(config);
  return made;
}

static bp_device device_of(const char* selector) {
  bp_device device;
  memset(&device, 0, sizeof(device));
  if (bp_device_resolve(runtime, selector, &device) != BP_OK) {
    fprintf(stderr, "bp_device_resolve(%s): %s\n", selector, bp_last_error());
    exit(1);
  }
  return device;
}

static bp_array* token_array(void) {
  const bp_device cpu = device_of("cpu:0");
  const int64_t shape[] = {TOKENS};
  bp_array* array = NULL;
  CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U16, shape, 1, tokens, sizeof(tokens), &array) == BP_OK);
  return array;
}

/* Every byte of `array`, malloc'd; *size set. */
static unsigned char* bytes_of(const bp_array* array, uint64_t* size) {
  unsigned char* bytes;
  CHECK(bp_array_nbytes(array, size) == BP_OK);
  bytes = malloc(*size + 1);
  CHECK(bp_array_copy_to_host(array, bytes, *size) == BP_OK);
  return bytes;
}

static int same_bytes(const bp_array* left, const bp_array* right) {
  uint64_t left_size = 0;
  uint64_t right_size = 0;
  unsigned char* a = bytes_of(left, &left_size);
  unsigned char* b = bytes_of(right, &right_size);
  const int same = left_size == right_size && memcmp(a, b, left_size) == 0;
  free(a);
  free(b);
  return same;
}

static void device_put_round_trips(void) {
  const bp_device pjrt = device_of("pjrt_test:1");
  const bp_device cpu = device_of("cpu:0");
  bp_array* host = token_array();
  bp_array* put = NULL;
  bp_array* back = NULL;
  CHECK(bp_array_device_put(runtime, host, &pjrt, NULL, NULL, &put) == BP_OK);
  CHECK(bp_array_device_put(runtime, put, &cpu, NULL, NULL, &back) == BP_OK);
  CHECK(same_bytes(back, host));
  bp_array_destroy(back);
  bp_array_destroy(put);
  bp_array_destroy(host);
}

static void take_windows_equals_cpu(void) {
  const bp_device pjrt = device_of("pjrt_test:0");
  const bp_device cpu = device_of("cpu:0");
  const int64_t offsets[] = {0, 17, 19000, 4000};
  bp_array* host = token_array();
  bp_array* on_pjrt = NULL;
  bp_array* on_cpu = NULL;
  CHECK(bp_take_windows(runtime, host, offsets, 4, 129, &pjrt, BP_DTYPE_I64, &on_pjrt) == BP_OK);
  CHECK(bp_take_windows(runtime, host, offsets, 4, 129, &cpu, BP_DTYPE_I64, &on_cpu) == BP_OK);
  CHECK(same_bytes(on_pjrt, on_cpu));
  bp_array_destroy(on_cpu);
  bp_array_destroy(on_pjrt);
  bp_array_destroy(host);
}

static bp_batch_stream* stream_onto(const bp_array* source, const bp_device* device) {
  bp_batch_stream_options options;
  bp_batch_stream* stream = NULL;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.batch_size = 4;
  options.context = 64;
  options.devices = device;
  options.device_count = 1;
  options.dtype = BP_DTYPE_I32;
  options.seed = 3;
  CHECK(bp_batch_stream_create(runtime, &source, 1, &options, &stream) == BP_OK);
  return stream;
}

static void batches_equal_cpu(void) {
  const bp_device pjrt = device_of("pjrt_test:1");
  const bp_device cpu = device_of("cpu:0");
  bp_array* host = token_array();
  bp_batch_stream* onto_pjrt = stream_onto(host, &pjrt);
  bp_batch_stream* onto_cpu = stream_onto(host, &cpu);
  int step;
  for (step = 0; step < 10 && onto_pjrt != NULL && onto_cpu != NULL; ++step) {
    bp_array* got = NULL;
    bp_array* expected = NULL;
    size_t count = 0;
    CHECK(bp_batch_stream_next(onto_pjrt, &got, 1, &count) == BP_OK);
    CHECK(bp_batch_stream_next(onto_cpu, &expected, 1, &count) == BP_OK);
    CHECK(same_bytes(got, expected));
    bp_array_destroy(got);
    bp_array_destroy(expected);
  }
  bp_batch_stream_destroy(onto_pjrt);
  bp_batch_stream_destroy(onto_cpu);
  bp_array_destroy(host);
}

static void safetensors_load_equals_cpu(void) {
  const bp_device pjrt = device_of("pjrt_test:0");
  const bp_device cpu = device_of("cpu:0");
  const char* names[] = {"tokens"};
  char path[512];
  bp_array* host = token_array();
  bp_tensor_map* on_pjrt = NULL;
  bp_tensor_map* on_cpu = NULL;
  bp_array* got = NULL;
  bp_array* expected = NULL;
  snprintf(path, sizeof(path), "%s/test_c_pjrt-%s.safetensors", BP_TEST_OUTPUT_DIR, data_path);
  CHECK(bp_safetensors_save(path, names, (const bp_array* const*)&host, 1, NULL, NULL, -1) == BP_OK);
  CHECK(bp_safetensors_load(runtime, path, &pjrt, NULL, &on_pjrt) == BP_OK);
  CHECK(bp_safetensors_load(runtime, path, &cpu, NULL, &on_cpu) == BP_OK);
  CHECK(bp_tensor_map_get(on_pjrt, "tokens", &got) == BP_OK);
  CHECK(bp_tensor_map_get(on_cpu, "tokens", &expected) == BP_OK);
  CHECK(same_bytes(got, expected));
  bp_array_destroy(got);
  bp_array_destroy(expected);
  bp_tensor_map_destroy(on_pjrt);
  bp_tensor_map_destroy(on_cpu);
  bp_array_destroy(host);
  remove(path);
}

static void dlpack_exports_host_path(void) {
  const bp_device pjrt = device_of("pjrt_test:1");
  bp_array* host = token_array();
  bp_array* put = NULL;
  DLManagedTensor* tensor = NULL;
  bp_status status;
  CHECK(bp_array_device_put(runtime, host, &pjrt, NULL, NULL, &put) == BP_OK);
  status = bp_array_to_dlpack(put, &tensor);
  if (strcmp(data_path, "host") == 0) {
    CHECK(status == BP_OK);
    if (tensor != NULL) {
      CHECK(tensor->dl_tensor.device.device_type == kDLCPU);
      CHECK(tensor->dl_tensor.device.device_id == 0);
      CHECK(memcmp(tensor->dl_tensor.data, tokens, sizeof(tokens)) == 0);
      tensor->deleter(tensor);
    }
  } else {
    CHECK(status == BP_STATUS_UNSUPPORTED);
    CHECK_CONTAINS(bp_last_error(), "pjrt_test:1 cannot be exported");
  }
  bp_array_destroy(put);
  bp_array_destroy(host);
}

int main(void) {
  static const char* const paths[] = {"host", "copy"};
  size_t index;
  if (!find_library()) {
    printf("skipped: %s (scripts/pip-test-packages installs xla-cpu-pjrt)\n", library);
    return 77;
  }
  for (index = 0; index < TOKENS; ++index) tokens[index] = (uint16_t)(1 + (index * 7919) % 65535);
  for (index = 0; index < 2; ++index) {
    data_path = paths[index];
    runtime = pjrt_runtime();
    RUN(device_put_round_trips);
    RUN(take_windows_equals_cpu);
    RUN(batches_equal_cpu);
    RUN(safetensors_load_equals_cpu);
    RUN(dlpack_exports_host_path);
    bp_runtime_destroy(runtime);
  }
  return c_test_summary();
}
