/* safetensors through the C API: save, inspect, load (zero-copy on cpu,
 * streamed to sim), and every error path with its code and message. */
#include <backplane/backplane.h>
#include <backplane/struct_size.h>

#include "c_runtime.h"
#include "c_test.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static char path[512];

static void tensor_path(const char* name) {
  snprintf(path, sizeof(path), "%s/test_c_safetensors-%s.safetensors", BP_TEST_OUTPUT_DIR, name);
}

/* Writes "weights" F32 [2, 3] (from sim) and "tokens" U16 [5] (from cpu). */
static void write_model(bp_runtime* runtime, int64_t metadata_count) {
  const float weights[6] = {0, 1, 2, 3, 4, 5};
  const uint16_t tokens[5] = {9, 8, 7, 6, 5};
  int64_t weight_shape[2] = {2, 3};
  int64_t token_shape[1] = {5};
  bp_device cpu = c_test_device(runtime, "cpu");
  bp_array* arrays[2] = {NULL, NULL};
  const char* names[2] = {"weights", "tokens"};
  const char* keys[1] = {"format"};
  const char* values[1] = {"pt"};
  CHECK(bp_array_create(runtime, NULL, BP_DTYPE_F32, weight_shape, 2, weights, sizeof(weights), &arrays[0]) == BP_OK);
  CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U16, token_shape, 1, tokens, sizeof(tokens), &arrays[1]) == BP_OK);
  CHECK(bp_safetensors_save(path, names, (const bp_array* const*)arrays, 2, keys, values, metadata_count) == BP_OK);
  bp_array_destroy(arrays[0]);
  bp_array_destroy(arrays[1]);
}

static void save_then_inspect(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_safetensors_header* header = NULL;
  bp_safetensors_tensor_info info;
  size_t count = 0, i;
  int64_t metadata = 0;
  uint64_t header_size = 0, data_offset = 0, file_size = 0;
  const char* key = NULL;
  const char* value = NULL;
  int found = 0;
  tensor_path("inspect");
  write_model(runtime, 1);
  CHECK(bp_safetensors_inspect(path, &header) == BP_OK);
  CHECK(bp_safetensors_header_tensor_count(header, &count) == BP_OK && count == 2);
  CHECK(bp_safetensors_header_sizes(header, &header_size, &data_offset, &file_size) == BP_OK);
  CHECK(data_offset == 8 + header_size && file_size == data_offset + 24 + 10);
  CHECK(bp_safetensors_header_sizes(header, NULL, NULL, NULL) == BP_OK);
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  for (i = 0; i < count; ++i) {
    CHECK(bp_safetensors_header_tensor(header, i, &info) == BP_OK);
    if (strcmp(info.name, "weights") == 0) {
      found |= 1;
      CHECK(strcmp(info.dtype_name, "F32") == 0 && info.dtype == BP_DTYPE_F32);
      CHECK(info.rank == 2 && info.shape[0] == 2 && info.shape[1] == 3 && info.end - info.begin == 24);
    } else if (strcmp(info.name, "tokens") == 0) {
      found |= 2;
      CHECK(info.dtype == BP_DTYPE_U16 && info.rank == 1 && info.shape[0] == 5);
    }
  }
  CHECK(found == 3);
  CHECK(bp_safetensors_header_tensor(header, 2, &info) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "index 2 is out of range: 2 tensors");
  info.struct_size = 4;
  CHECK(bp_safetensors_header_tensor(header, 0, &info) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "struct_size 4");
  CHECK(bp_safetensors_header_metadata_count(header, &metadata) == BP_OK && metadata == 1);
  CHECK(bp_safetensors_header_metadata(header, 0, &key, &value) == BP_OK);
  CHECK(strcmp(key, "format") == 0 && strcmp(value, "pt") == 0);
  CHECK(bp_safetensors_header_metadata(header, 1, &key, &value) == BP_STATUS_OUT_OF_RANGE);
  CHECK(bp_safetensors_header_tensor_count(header, NULL) == BP_STATUS_INVALID_ARGUMENT);
  bp_safetensors_header_destroy(header);
  bp_safetensors_header_destroy(NULL);
  CHECK(bp_safetensors_header_tensor_count(NULL, &count) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_safetensors_header_tensor_count: header is NULL or destroyed");

  /* No metadata at all (-1) versus an empty object (0). */
  write_model(runtime, -1);
  CHECK(bp_safetensors_inspect(path, &header) == BP_OK);
  CHECK(bp_safetensors_header_metadata_count(header, &metadata) == BP_OK && metadata == -1);
  CHECK(bp_safetensors_header_metadata(header, 0, &key, &value) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "the file has no __metadata__");
  bp_safetensors_header_destroy(header);
  write_model(runtime, 0);
  CHECK(bp_safetensors_inspect(path, &header) == BP_OK);
  CHECK(bp_safetensors_header_metadata_count(header, &metadata) == BP_OK && metadata == 0);
  bp_safetensors_header_destroy(header);
  remove(path);
  bp_runtime_destroy(runtime);
}

static uint64_t load_reports, load_total;
static void count_load_progress(uint64_t done, uint64_t total, void* user_data) {
  (void)done;
  CHECK(user_data == &load_reports);
  ++load_reports;
  load_total = total;
}

static void load_onto_devices(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_device cpu = c_test_device(runtime, "cpu");
  bp_tensor_map* map = NULL;
  bp_array* tokens = NULL;
  bp_array* weights = NULL;
  bp_device device;
  const char* name = NULL;
  const char* key = NULL;
  const char* value = NULL;
  const char* selected[1] = {"weights"};
  bp_safetensors_load_options options;
  size_t count = 0;
  int64_t metadata = 0;
  uint16_t token_values[5];
  float weight_values[6];
  tensor_path("load");
  write_model(runtime, 1);

  CHECK(bp_safetensors_load(runtime, path, &cpu, NULL, &map) == BP_OK);
  CHECK(bp_tensor_map_count(map, &count) == BP_OK && count == 2);
  CHECK(bp_tensor_map_name(map, 0, &name) == BP_OK && strcmp(name, "tokens") == 0); /* bytewise order */
  CHECK(bp_tensor_map_name(map, 2, &name) == BP_STATUS_OUT_OF_RANGE);
  CHECK(bp_tensor_map_get(map, "tokens", &tokens) == BP_OK);
  CHECK(bp_tensor_map_get(map, "nope", &weights) == BP_STATUS_NOT_FOUND);
  CHECK_CONTAINS(bp_last_error(), "no tensor 'nope' among the 2 loaded");
  CHECK(bp_tensor_map_metadata_count(map, &metadata) == BP_OK && metadata == 1);
  CHECK(bp_tensor_map_metadata(map, 0, &key, &value) == BP_OK && strcmp(value, "pt") == 0);
  CHECK(bp_tensor_map_metadata(map, 5, &key, &value) == BP_STATUS_OUT_OF_RANGE);
  bp_tensor_map_destroy(map); /* the arrays handed out live on */
  bp_tensor_map_destroy(NULL);
  CHECK(bp_tensor_map_count(map, &count) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_tensor_map_count: map is NULL or destroyed");
  CHECK(bp_array_device(tokens, &device) == BP_OK && strcmp(device.backend, "cpu") == 0);
  CHECK(bp_array_copy_to_host(tokens, token_values, sizeof(token_values)) == BP_OK);
  CHECK(token_values[0] == 9 && token_values[4] == 5);
  bp_array_destroy(tokens);

  /* The default device (sim), one tensor, with progress. */
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.names = selected;
  options.name_count = 1;
  options.progress = count_load_progress;
  options.user_data = &load_reports;
  CHECK(bp_safetensors_load(runtime, path, NULL, &options, &map) == BP_OK);
  CHECK(bp_tensor_map_count(map, &count) == BP_OK && count == 1);
  CHECK(bp_tensor_map_get(map, "weights", &weights) == BP_OK);
  CHECK(bp_array_device(weights, &device) == BP_OK && strcmp(device.backend, "sim") == 0);
  CHECK(bp_array_copy_to_host(weights, weight_values, sizeof(weight_values)) == BP_OK && weight_values[5] == 5);
  CHECK(load_reports >= 1 && load_total == 24);
  bp_array_destroy(weights);
  bp_tensor_map_destroy(map);

  /* Errors. */
  selected[0] = "missing";
  CHECK(bp_safetensors_load(runtime, path, NULL, &options, &map) == BP_STATUS_NOT_FOUND);
  CHECK_CONTAINS(bp_last_error(), "missing");
  options.struct_size = 8;
  CHECK(bp_safetensors_load(runtime, path, NULL, &options, &map) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "options->struct_size 8");
  options.struct_size = sizeof(options);
  options.names = NULL;
  CHECK(bp_safetensors_load(runtime, path, NULL, &options, &map) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "options->names is NULL");
  CHECK(bp_safetensors_load(NULL, path, NULL, NULL, &map) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_safetensors_load(runtime, NULL, NULL, NULL, &map) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_safetensors_load(runtime, path, NULL, NULL, NULL) == BP_STATUS_INVALID_ARGUMENT);
  remove(path);
  CHECK(bp_safetensors_load(runtime, path, NULL, NULL, &map) == BP_STATUS_NOT_FOUND);
  CHECK_CONTAINS(bp_last_error(), "test_c_safetensors-load.safetensors");
  bp_runtime_destroy(runtime);
}

static void broken_files_and_bad_saves_are_errors(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_safetensors_header* header = NULL;
  bp_array* array = NULL;
  const bp_array* arrays[2];
  const char* names[2] = {"a", "a"};
  const char* keys[1] = {"k"};
  const uint8_t byte = 1;
  int64_t shape[1] = {1};
  FILE* file;
  tensor_path("broken");
  file = fopen(path, "wb");
  CHECK(file != NULL);
  if (file != NULL) {
    fwrite("\x02\0\0\0\0\0\0\0{}x", 1, 11, file);
    fclose(file);
  }
  CHECK(bp_safetensors_inspect(path, &header) == BP_STATUS_INVALID_FILE);
  CHECK_CONTAINS(bp_last_error(), "test_c_safetensors-broken.safetensors");
  CHECK_CONTAINS(bp_last_error(), "MetadataIncompleteBuffer");
  remove(path);
  CHECK(bp_safetensors_inspect(path, &header) == BP_STATUS_NOT_FOUND);
  CHECK(bp_safetensors_inspect(NULL, &header) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_safetensors_inspect(path, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(header == NULL);

  CHECK(bp_array_create(runtime, NULL, BP_DTYPE_U8, shape, 1, &byte, 1, &array) == BP_OK);
  arrays[0] = array;
  arrays[1] = array;
  tensor_path("save");
  CHECK(bp_safetensors_save(path, names, arrays, 2, NULL, NULL, -1) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "tensor 'a' is named twice");
  names[0] = "__metadata__";
  CHECK(bp_safetensors_save(path, names, arrays, 1, NULL, NULL, -1) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "__metadata__");
  names[0] = "a";
  CHECK(bp_safetensors_save(path, names, arrays, 1, keys, NULL, 1) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "metadata_values is NULL");
  CHECK(bp_safetensors_save(path, names, arrays, 1, NULL, NULL, -2) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "metadata_count -2");
  CHECK(bp_safetensors_save(path, NULL, arrays, 1, NULL, NULL, -1) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_safetensors_save("/nonexistent-dir/x.safetensors", names, arrays, 1, NULL, NULL, -1) != BP_OK);
  CHECK_CONTAINS(bp_last_error(), "/nonexistent-dir");
  bp_array_destroy(array);
  CHECK(bp_safetensors_save(path, names, arrays, 1, NULL, NULL, -1) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "not a live handle");
  bp_runtime_destroy(runtime);
}

static int cancel_calls;
static int32_t cancel_at_first_report(uint64_t done, uint64_t total, void* user_data) {
  (void)done;
  (void)total;
  CHECK(user_data == &cancel_calls);
  ++cancel_calls;
  return 1;
}

/* API 0.2's cancellable_progress stops a load; an API 0.1 caller's smaller
 * struct still loads. */
static void a_progress_callback_cancels_a_load(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_tensor_map* map = NULL;
  bp_safetensors_load_options options;
  tensor_path("cancel");
  write_model(runtime, 1);
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.cancellable_progress = cancel_at_first_report;
  options.user_data = &cancel_calls;
  CHECK(bp_safetensors_load(runtime, path, NULL, &options, &map) == BP_STATUS_CANCELLED); /* sim: streamed */
  CHECK_CONTAINS(bp_last_error(), "load cancelled by the progress callback");
  CHECK_CONTAINS(bp_last_error(), "test_c_safetensors-cancel.safetensors");
  CHECK(strcmp(bp_status_name(BP_STATUS_CANCELLED), "cancelled") == 0);
  CHECK(map == NULL && cancel_calls == 1);

  options.struct_size = BP_STRUCT_SIZE(bp_safetensors_load_options, user_data); /* an API 0.1 caller */
  CHECK(bp_safetensors_load(runtime, path, NULL, &options, &map) == BP_OK);     /* the field is not read */
  CHECK(cancel_calls == 1);
  bp_tensor_map_destroy(map);
  remove(path);
  bp_runtime_destroy(runtime);
}

/* safetensors allows NUL bytes in names and metadata ("\u0000" in the JSON):
 * tensors "a\0b", "a\0c" and "a" are three tensors, carried whole by the _n
 * functions, and the NUL-terminated functions refuse such text, naming it,
 * instead of returning it cut at the NUL. */
static void names_with_nul_bytes_are_kept_whole(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_device cpu = c_test_device(runtime, "cpu");
  const uint8_t data[3][2] = {{1, 2}, {3, 4}, {5, 6}};
  int64_t shape[1] = {2};
  bp_array* arrays[3] = {NULL, NULL, NULL};
  const char* names[3] = {"a\0b", "a\0c", "a"};
  const size_t name_sizes[3] = {3, 3, 1};
  const char* keys[2] = {"k\0x", "plain"};
  const size_t key_sizes[2] = {3, 5};
  const char* values[2] = {"v", "w\0y"};
  const size_t value_sizes[2] = {1, 3};
  bp_safetensors_header* header = NULL;
  bp_safetensors_tensor_info info;
  bp_tensor_map* map = NULL;
  bp_array* array = NULL;
  const char* name = NULL;
  const char* key = NULL;
  const char* value = NULL;
  size_t size = 0, key_size = 0, value_size = 0, count = 0, i;
  uint8_t bytes[2] = {0, 0};
  char json[256] = {0};
  FILE* file;
  tensor_path("nul-names");
  for (i = 0; i < 3; ++i) {
    CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U8, shape, 1, data[i], 2, &arrays[i]) == BP_OK);
  }
  CHECK(bp_safetensors_save_n(path, names, name_sizes, (const bp_array* const*)arrays, 3, keys, key_sizes, values,
                              value_sizes, 2) == BP_OK);
  /* The file spells the NUL as the reference writer does. */
  file = fopen(path, "rb");
  CHECK(file != NULL);
  if (file != NULL) {
    CHECK(fread(json, 1, sizeof(json) - 1, file) > 8);
    fclose(file);
  }
  CHECK_CONTAINS(json + 8, "\"a\\u0000b\":{");
  CHECK_CONTAINS(json + 8, "\"k\\u0000x\":\"v\"");

  CHECK(bp_safetensors_inspect(path, &header) == BP_OK);
  CHECK(bp_safetensors_header_tensor_count(header, &count) == BP_OK && count == 3);
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  { /* Data order; each of the three once, whole. */
    int seen[3] = {0, 0, 0};
    size_t with_nul = 0, plain = 0;
    for (i = 0; i < 3; ++i) {
      size_t n;
      info.struct_size = sizeof(info);
      CHECK(bp_safetensors_header_tensor(header, i, &info) == BP_OK);
      for (n = 0; n < 3; ++n) {
        if (info.name_size == name_sizes[n] && memcmp(info.name, names[n], name_sizes[n] + 1) == 0) seen[n] += 1;
      }
      if (info.name_size == 3)
        with_nul = i;
      else
        plain = i;
      /* An API 0.2 caller has no name_size: refused, never cut to "a". */
      info.struct_size = BP_STRUCT_SIZE(bp_safetensors_tensor_info, end);
      info.name = NULL;
      if (info.name_size == 3) {
        CHECK(bp_safetensors_header_tensor(header, with_nul, &info) == BP_STATUS_INVALID_ARGUMENT && !info.name);
        CHECK_CONTAINS(bp_last_error(), "bp_safetensors_header_tensor: tensor 'a\\u0000");
        CHECK_CONTAINS(bp_last_error(), "has a NUL byte in its name");
      } else {
        CHECK(bp_safetensors_header_tensor(header, plain, &info) == BP_OK && strcmp(info.name, "a") == 0);
      }
    }
    CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
  }
  CHECK(bp_safetensors_header_metadata_n(header, 0, &key, &key_size, &value, &value_size) == BP_OK);
  CHECK(key_size == 3 && memcmp(key, "k\0x", 3) == 0 && value_size == 1 && strcmp(value, "v") == 0);
  CHECK(bp_safetensors_header_metadata(header, 0, &key, &value) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_safetensors_header_metadata: metadata key 'k\\u0000x' has a NUL byte in its key");
  CHECK_CONTAINS(bp_last_error(), "(use bp_safetensors_header_metadata_n)");
  bp_safetensors_header_destroy(header);

  CHECK(bp_safetensors_load(runtime, path, &cpu, NULL, &map) == BP_OK);
  CHECK(bp_tensor_map_count(map, &count) == BP_OK && count == 3);
  /* Bytewise order: "a" < "a\0b" < "a\0c". */
  CHECK(bp_tensor_map_name_n(map, 0, &name, &size) == BP_OK && size == 1 && strcmp(name, "a") == 0);
  CHECK(bp_tensor_map_name_n(map, 1, &name, &size) == BP_OK && size == 3 && memcmp(name, "a\0b", 3) == 0);
  CHECK(bp_tensor_map_name_n(map, 2, &name, &size) == BP_OK && size == 3 && memcmp(name, "a\0c", 3) == 0);
  CHECK(bp_tensor_map_name(map, 0, &name) == BP_OK && strcmp(name, "a") == 0);
  CHECK(bp_tensor_map_name(map, 2, &name) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(strcmp(bp_last_error(),
               "bp_tensor_map_name: tensor 'a\\u0000c' has a NUL byte in its name, which a "
               "NUL-terminated string cannot carry (use bp_tensor_map_name_n)") == 0);
  for (i = 0; i < 3; ++i) {
    CHECK(bp_tensor_map_get_n(map, names[i], name_sizes[i], &array) == BP_OK);
    CHECK(bp_array_copy_to_host(array, bytes, 2) == BP_OK && bytes[0] == data[i][0] && bytes[1] == data[i][1]);
    bp_array_destroy(array);
  }
  CHECK(bp_tensor_map_get(map, "a", &array) == BP_OK);
  CHECK(bp_array_copy_to_host(array, bytes, 2) == BP_OK && bytes[0] == 5);
  bp_array_destroy(array);
  CHECK(bp_tensor_map_get_n(map, "a\0d", 3, &array) == BP_STATUS_NOT_FOUND);
  CHECK_CONTAINS(bp_last_error(), "bp_tensor_map_get_n: no tensor 'a\\u0000d' among the 3 loaded");
  CHECK(bp_tensor_map_metadata_n(map, 1, &key, &key_size, &value, &value_size) == BP_OK);
  CHECK(key_size == 5 && strcmp(key, "plain") == 0 && value_size == 3 && memcmp(value, "w\0y", 3) == 0);
  CHECK(bp_tensor_map_metadata(map, 1, &key, &value) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "metadata key 'plain' has a NUL byte in its value");
  bp_tensor_map_destroy(map);

  { /* Selecting one of them by name and size loads that one only. */
    bp_safetensors_load_options options;
    memset(&options, 0, sizeof(options));
    options.struct_size = sizeof(options);
    options.names = &names[1];
    options.name_sizes = &name_sizes[1];
    options.name_count = 1;
    CHECK(bp_safetensors_load(runtime, path, &cpu, &options, &map) == BP_OK);
    CHECK(bp_tensor_map_count(map, &count) == BP_OK && count == 1);
    CHECK(bp_tensor_map_name_n(map, 0, &name, &size) == BP_OK && size == 3 && memcmp(name, "a\0c", 3) == 0);
    bp_tensor_map_destroy(map);
  }
  /* A duplicate that only differs after the NUL is not a duplicate; the same
   * bytes twice are, named with the NUL escaped. */
  {
    const char* twice[2] = {"a\0b", "a\0b"};
    CHECK(bp_safetensors_save_n(path, twice, name_sizes, (const bp_array* const*)arrays, 2, NULL, NULL, NULL, NULL,
                                -1) == BP_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(bp_last_error(), "bp_safetensors_save_n: tensor 'a\\u0000b' is named twice");
  }
  for (i = 0; i < 3; ++i) bp_array_destroy(arrays[i]);
  bp_runtime_destroy(runtime);
}

/* API 0.7: bp_safetensors_save_with writes the same file with or without
 * the flushes to disk, and refuses an options struct too small to read. */
static void a_save_that_is_not_durable_writes_the_same_file(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  const uint16_t tokens[4] = {4, 3, 2, 1};
  int64_t shape[1] = {4};
  bp_device cpu = c_test_device(runtime, "cpu");
  bp_array* array = NULL;
  const char* names[1] = {"tokens"};
  bp_save_options options;
  bp_tensor_map* loaded = NULL;
  bp_array* got = NULL;
  uint16_t back[4] = {0, 0, 0, 0};
  CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U16, shape, 1, tokens, sizeof(tokens), &array) == BP_OK);
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.durable = 0;
  tensor_path("scratch");
  CHECK(bp_safetensors_save_with(path, names, NULL, (const bp_array* const*)&array, 1, NULL, NULL, NULL, NULL, -1,
                                 &options) == BP_OK);
  CHECK(bp_safetensors_load(runtime, path, &cpu, NULL, &loaded) == BP_OK);
  CHECK(bp_tensor_map_get(loaded, "tokens", &got) == BP_OK);
  CHECK(bp_array_copy_to_host(got, back, sizeof(back)) == BP_OK);
  CHECK(memcmp(back, tokens, sizeof(tokens)) == 0);
  bp_array_destroy(got);
  bp_tensor_map_destroy(loaded);
  CHECK(bp_safetensors_save_with(path, names, NULL, (const bp_array* const*)&array, 1, NULL, NULL, NULL, NULL, -1,
                                 NULL) == BP_OK); /* NULL options: durable */
  options.struct_size = 4;
  CHECK(bp_safetensors_save_with(path, names, NULL, (const bp_array* const*)&array, 1, NULL, NULL, NULL, NULL, -1,
                                 &options) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_safetensors_save_with: options->struct_size 4 is too small");
  bp_array_destroy(array);
  bp_runtime_destroy(runtime);
}

int main(void) {
  c_test_program = "test_c_safetensors";
  RUN(save_then_inspect);
  RUN(load_onto_devices);
  RUN(a_progress_callback_cancels_a_load);
  RUN(broken_files_and_bad_saves_are_errors);
  RUN(names_with_nul_bytes_are_kept_whole);
  RUN(a_save_that_is_not_durable_writes_the_same_file);
  return c_test_summary();
}
