/* The embedding API from a C11 program: every function, and every error path
 * with its code and message. Built with -std=c11 -Wall -Wextra -Werror -pedantic. */
#include <backplane/backplane.h>
#include <backplane/struct_size.h>

#include "c_test.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static bp_runtime* isolated_runtime(void) {
  const char* paths[] = {BP_TEST_PLUGIN_DIR, BP_TEST_FIXTURE_DIR};
  bp_runtime_options options;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.plugin_paths = paths;
  options.plugin_path_count = 2;
  options.ignore_environment = 1;
  options.skip_default_paths = 1;
  bp_runtime* runtime = NULL;
  if (bp_runtime_create(&options, &runtime) != BP_OK) {
    fprintf(stderr, "bp_runtime_create: %s\n", bp_last_error());
    exit(1);
  }
  return runtime;
}

static void version_and_status_names(void) {
  CHECK(strcmp(bp_version(), "0.1.0") == 0);
  CHECK(BP_API_VERSION_MAJOR == 0);
  CHECK(strcmp(bp_status_name(BP_OK), "ok") == 0);
  CHECK(strcmp(bp_status_name(BP_STATUS_OUT_OF_RANGE), "out of range") == 0);
  CHECK(strcmp(bp_status_name(9999), "unknown status") == 0);
  CHECK(strcmp(bp_device_source_name(BP_SOURCE_ENVIRONMENT), "BACKPLANE_DEFAULT_DEVICE") == 0);
  CHECK(strcmp(bp_device_source_name(-1), "unknown source") == 0);
}

static void backends_are_listed_with_status_and_reason(void) {
  bp_runtime* runtime = isolated_runtime();
  size_t count = 0;
  CHECK(bp_backend_count(runtime, &count) == BP_OK);
  CHECK(count >= 10);
  int found_cpu = 0, found_too_new = 0;
  for (size_t i = 0; i < count; ++i) {
    bp_backend_info info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    CHECK(bp_backend_get(runtime, i, &info) == BP_OK);
    if (strcmp(info.name, "cpu") == 0 && info.status == BP_BACKEND_AVAILABLE) {
      found_cpu = 1;
      CHECK(strcmp(info.status_name, "available") == 0);
      CHECK(strcmp(info.abi_version, "1.4") == 0);
      CHECK(info.priority == 10);
      CHECK(info.dlpack_device_type == 1); /* kDLCPU, as the plugin declares */
    }
    if (strcmp(info.name, "sim") == 0) CHECK(info.dlpack_device_type == 12); /* kDLExtDev */
    if (strcmp(info.name, "too_new") == 0) {
      found_too_new = 1;
      CHECK(info.status == BP_BACKEND_INCOMPATIBLE);
      CHECK_CONTAINS(info.reason, "plugin speaks ABI 2.0, this core speaks 1.x");
    }
  }
  CHECK(found_cpu && found_too_new);

  /* Availability is a value: no error for names that do not exist. */
  int32_t available = -1;
  CHECK(bp_backend_is_available(runtime, "cpu", &available) == BP_OK && available == 1);
  CHECK(bp_backend_is_available(runtime, "unavailable", &available) == BP_OK && available == 0);
  CHECK(bp_backend_is_available(runtime, "nope", &available) == BP_OK && available == 0);

  bp_backend_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  CHECK(bp_backend_get(runtime, count, &info) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "index");
  /* An API 0.3 caller's struct ends before dlpack_device_type: accepted, and
   * nothing is written past it. */
  info.struct_size = BP_STRUCT_SIZE(bp_backend_info, capabilities);
  info.dlpack_device_type = -5;
  CHECK(bp_backend_get(runtime, 0, &info) == BP_OK && info.dlpack_device_type == -5);
  info.struct_size = 4;
  CHECK(bp_backend_get(runtime, 0, &info) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "struct_size 4");
  bp_runtime_destroy(runtime);
}

static void devices_resolve_and_describe(void) {
  bp_runtime* runtime = isolated_runtime();
  bp_device device;
  CHECK(bp_device_resolve(runtime, "cpu", &device) == BP_OK);
  CHECK(strcmp(device.backend, "cpu") == 0 && device.ordinal == 0);
  char text[16];
  CHECK(bp_device_selector(&device, text, sizeof(text)) == BP_OK);
  CHECK(strcmp(text, "cpu:0") == 0);
  CHECK(bp_device_selector(&device, text, 3) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "needs 6 bytes");

  int32_t count = 0;
  CHECK(bp_device_count(runtime, "cpu", &count) == BP_OK && count == 1);
  CHECK(bp_device_count(runtime, "unavailable", &count) == BP_STATUS_UNAVAILABLE);
  CHECK_CONTAINS(bp_last_error(), "fixture: no such hardware");

  bp_device_info* info = NULL;
  CHECK(bp_device_info_create(runtime, &device, &info) == BP_OK);
  CHECK_CONTAINS(bp_device_info_name(info), "CPU 0");
  CHECK(bp_device_info_kind(info) == BP_DEVICE_CPU);
  CHECK(bp_device_info_memory_total(info) > 0);
  CHECK(bp_device_info_memory_free(info) <= bp_device_info_memory_total(info));
  CHECK(bp_device_info_attribute_count(info) > 0);
  const char* key = NULL;
  const char* value = NULL;
  CHECK(bp_device_info_attribute(info, 0, &key, &value) == BP_OK);
  CHECK(key != NULL && value != NULL && key[0] != '\0');
  CHECK(bp_device_info_attribute(info, 1000, &key, &value) == BP_STATUS_OUT_OF_RANGE);
  bp_device_info_destroy(info);
  bp_device_info_destroy(NULL);

  bp_device missing = device;
  missing.ordinal = 5;
  CHECK(bp_device_info_create(runtime, &missing, &info) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "has 1 device (cpu:0)");
  bp_runtime_destroy(runtime);
}

static void bad_selectors_name_the_problem(void) {
  bp_runtime* runtime = isolated_runtime();
  bp_device device;
  CHECK(bp_device_resolve(runtime, "cdua", &device) == BP_STATUS_NOT_FOUND);
  CHECK_CONTAINS(bp_last_error(), "no backend 'cdua'");
  CHECK_CONTAINS(bp_last_error(), "cpu (available)");
  CHECK(bp_device_resolve(runtime, "cpu:x", &device) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "cpu:x");
  CHECK(bp_device_resolve(runtime, " cpu", &device) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_device_resolve(runtime, "unavailable", &device) == BP_STATUS_UNAVAILABLE);
  CHECK_CONTAINS(bp_last_error(), "fixture: no such hardware");
  CHECK(bp_device_resolve(runtime, "cpu:3", &device) == BP_STATUS_OUT_OF_RANGE);
  bp_runtime_destroy(runtime);
}

static void default_device_precedence_and_scopes(void) {
  bp_runtime* runtime = isolated_runtime();
  bp_device device;
  bp_device_source source = -1;
  CHECK(bp_default_device(runtime, &device, &source) == BP_OK);
  CHECK(strcmp(device.backend, "sim") == 0); /* the simulated accelerator outranks cpu */
  CHECK(source == BP_SOURCE_AUTOMATIC);

  CHECK(bp_default_device_set(runtime, "cpu") == BP_OK);
  CHECK(bp_default_device(runtime, &device, &source) == BP_OK);
  CHECK(strcmp(device.backend, "cpu") == 0 && source == BP_SOURCE_PROCESS_SETTING);

  CHECK(bp_default_device_push(runtime, "sim:0") == BP_OK);
  CHECK(bp_default_device(runtime, &device, &source) == BP_OK);
  CHECK(strcmp(device.backend, "sim") == 0 && source == BP_SOURCE_SCOPED_OVERRIDE);
  CHECK(bp_default_device_push(runtime, "cpu:0") == BP_OK);
  CHECK(bp_default_device(runtime, &device, NULL) == BP_OK && strcmp(device.backend, "cpu") == 0);
  CHECK(bp_default_device_pop(runtime) == BP_OK);
  CHECK(bp_default_device(runtime, &device, NULL) == BP_OK && strcmp(device.backend, "sim") == 0);
  CHECK(bp_default_device_pop(runtime) == BP_OK);
  CHECK(bp_default_device_pop(runtime) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "nothing was pushed");

  CHECK(bp_default_device_push(runtime, "nope") == BP_STATUS_NOT_FOUND);
  CHECK(bp_default_device_set(runtime, "sim:9") == BP_STATUS_OUT_OF_RANGE);
  CHECK(bp_default_device_set(runtime, NULL) == BP_OK);
  CHECK(bp_default_device(runtime, &device, &source) == BP_OK && source == BP_SOURCE_AUTOMATIC);
  bp_runtime_destroy(runtime);
}

static void null_and_destroyed_handles_are_errors(void) {
  size_t count = 0;
  CHECK(bp_backend_count(NULL, &count) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_backend_count: runtime is NULL");
  bp_runtime* runtime = isolated_runtime();
  CHECK(bp_backend_count(runtime, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "out is NULL");
  bp_runtime_destroy(runtime);
  CHECK(bp_backend_count(runtime, &count) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "not a live handle");
  bp_runtime_destroy(runtime); /* twice: ignored */
  bp_runtime_destroy(NULL);
  CHECK(bp_runtime_create(NULL, NULL) == BP_STATUS_INVALID_ARGUMENT);

  bp_runtime_options options;
  memset(&options, 0, sizeof(options));
  options.struct_size = 8;
  CHECK(bp_runtime_create(&options, &runtime) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "struct_size 8");
}

static void config_file_errors_carry_the_path(void) {
  bp_runtime_options options;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.config_file = "/nonexistent/backplane-config.toml";
  options.skip_default_paths = 1;
  bp_runtime* runtime = NULL;
  CHECK(bp_runtime_create(&options, &runtime) == BP_OK); /* discovery is lazy */
  size_t count = 0;
  CHECK(bp_backend_count(runtime, &count) == BP_STATUS_NOT_FOUND);
  CHECK_CONTAINS(bp_last_error(), "/nonexistent/backplane-config.toml");
  const char* path = NULL;
  CHECK(bp_runtime_config_path(runtime, &path) == BP_STATUS_NOT_FOUND);
  bp_runtime_destroy(runtime);

  runtime = isolated_runtime();
  CHECK(bp_runtime_config_path(runtime, &path) == BP_OK && path == NULL);
  bp_runtime_destroy(runtime);
}

static void the_default_runtime_is_shared_and_never_destroyed(void) {
  bp_runtime* first = NULL;
  bp_runtime* second = NULL;
  CHECK(bp_runtime_default(&first) == BP_OK);
  CHECK(bp_runtime_default(&second) == BP_OK);
  CHECK(first == second);
  bp_runtime_destroy(first); /* ignored */
  int32_t available = 0;
  CHECK(bp_backend_is_available(first, "cpu", &available) == BP_OK);
}

int main(void) {
  RUN(version_and_status_names);
  RUN(backends_are_listed_with_status_and_reason);
  RUN(devices_resolve_and_describe);
  RUN(bad_selectors_name_the_problem);
  RUN(default_device_precedence_and_scopes);
  RUN(null_and_destroyed_handles_are_errors);
  RUN(config_file_errors_carry_the_path);
  RUN(the_default_runtime_is_shared_and_never_destroyed);
  return c_test_summary();
}
