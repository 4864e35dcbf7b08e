/* Runtimes for the C test programs: only the plugin directories given (by
 * default the build tree's plugins and the fixture plugins), no environment,
 * and optionally a config file's text. */
#ifndef BACKPLANE_TESTS_C_RUNTIME_H
#define BACKPLANE_TESTS_C_RUNTIME_H

#include <backplane/backplane.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each program defines its name, used for its temporary files. */
static const char* c_test_program;

/* A runtime over `paths` only. Writes `config_text` (when not NULL) to a
 * temporary config file used by the runtime: the sim plugin's fault
 * injection is configured that way. */
static bp_runtime* c_test_runtime_on(const char* const* paths, size_t path_count, const char* config_text) {
  bp_runtime_options options;
  char config_path[512];
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.plugin_paths = paths;
  options.plugin_path_count = path_count;
  options.ignore_environment = 1;
  options.skip_default_paths = 1;
  if (config_text != NULL) {
    static int counter;
    FILE* file;
    /* The build directory: unique per test program, no POSIX calls needed. */
    snprintf(config_path, sizeof(config_path), "%s/%s-%d.toml", BP_TEST_OUTPUT_DIR, c_test_program, ++counter);
    file = fopen(config_path, "w");
    if (file == NULL || fputs(config_text, file) < 0 || fclose(file) != 0) {
      fprintf(stderr, "cannot write %s\n", config_path);
      exit(1);
    }
    options.config_file = config_path;
  }
  bp_runtime* runtime = NULL;
  if (bp_runtime_create(&options, &runtime) != BP_OK) {
    fprintf(stderr, "bp_runtime_create: %s\n", bp_last_error());
    exit(1);
  }
  /* Discovery reads the config file: force it now, then remove the file. */
  size_t count = 0;
  if (bp_backend_count(runtime, &count) != BP_OK) {
    fprintf(stderr, "bp_backend_count: %s\n", bp_last_error());
    exit(1);
  }
  if (config_text != NULL) remove(config_path);
  return runtime;
}

/* The build tree's plugins and the fixture plugins. */
static bp_runtime* c_test_runtime(const char* config_text) {
  static const char* const paths[] = {BP_TEST_PLUGIN_DIR, BP_TEST_FIXTURE_DIR};
  return c_test_runtime_on(paths, 2, config_text);
}

static bp_device c_test_device(bp_runtime* runtime, const char* selector) {
  bp_device device;
  memset(&device, 0, sizeof(device));
  if (bp_device_resolve(runtime, selector, &device) != BP_OK) {
    fprintf(stderr, "bp_device_resolve(%s): %s\n", selector, bp_last_error());
    exit(1);
  }
  return device;
}

#endif
