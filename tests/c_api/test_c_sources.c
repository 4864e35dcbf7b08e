/* Plugin sources from C (API 0.7): PJRT libraries given in code, Python
 * site directories, where each backend came from, memory kinds, and the
 * process-wide runtime's Python paths. The pjrt adapter is the test-only
 * stand-in of tests/plugins/pjrt, whose "library" is a text file. */
#define _POSIX_C_SOURCE 200809L
#include <backplane/backplane.h>
#include <backplane/struct_size.h>

#include "c_test.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char work_dir[512];

static void write_file(const char* path, const char* text) {
  FILE* file = fopen(path, "w");
  if (file == NULL || fputs(text, file) < 0 || fclose(file) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(1);
  }
}

static bp_runtime_options adapter_options(void) {
  static const char* const paths[] = {BP_TEST_FAKE_PJRT_DIR};
  bp_runtime_options options;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.plugin_paths = paths;
  options.plugin_path_count = 1;
  options.ignore_environment = 1;
  options.skip_default_paths = 1;
  return options;
}

static const bp_backend_info* find(bp_runtime* runtime, const char* name, bp_backend_info* info) {
  size_t count = 0;
  CHECK(bp_backend_count(runtime, &count) == BP_OK);
  for (size_t i = 0; i < count; ++i) {
    memset(info, 0, sizeof(*info));
    info->struct_size = sizeof(*info);
    CHECK(bp_backend_get(runtime, i, info) == BP_OK);
    if (strcmp(info->name, name) == 0) return info;
  }
  fprintf(stderr, "no backend %s\n", name);
  return NULL;
}

static void pjrt_library_given_in_code(void) {
  char library[600];
  snprintf(library, sizeof(library), "%s/cpu.so", work_dir);
  write_file(library, "reason=from C\ndevices=2\nmemories=device,pinned_host\n");
  const char* keys[] = {"cpu_device_count"};
  const char* values[] = {"int64:2"};
  bp_plugin_source source;
  memset(&source, 0, sizeof(source));
  source.struct_size = sizeof(source);
  source.kind = BP_PLUGIN_SOURCE_PJRT;
  source.name = "Cpu";
  source.path = library;
  source.origin = BP_ORIGIN_CODE;
  source.origin_detail = "my embedder";
  source.create_option_keys = keys;
  source.create_option_values = values;
  source.create_option_count = 1;
  bp_runtime_options options = adapter_options();
  options.sources = &source;
  options.source_count = 1;
  bp_runtime* runtime = NULL;
  CHECK(bp_runtime_create(&options, &runtime) == BP_OK);
  bp_backend_info info;
  const bp_backend_info* cpu = find(runtime, "pjrt_cpu", &info);
  CHECK(cpu != NULL);
  if (cpu != NULL) {
    CHECK(cpu->status == BP_BACKEND_AVAILABLE);
    CHECK_CONTAINS(cpu->reason, "create options: cpu_device_count=int64:2");
    CHECK(strcmp(cpu->origin_detail, "my embedder") == 0);
    CHECK(strcmp(cpu->library, library) == 0);
  }
  bp_device device;
  CHECK(bp_device_resolve(runtime, "pjrt_cpu:1", &device) == BP_OK);
  bp_device_info* described = NULL;
  CHECK(bp_device_info_create(runtime, &device, &described) == BP_OK);
  CHECK(bp_device_info_memory_kind_count(described) == 2);
  const char* kind = NULL;
  CHECK(bp_device_info_memory_kind(described, 0, &kind) == BP_OK && strcmp(kind, "device") == 0);
  CHECK(bp_device_info_memory_kind(described, 1, &kind) == BP_OK && strcmp(kind, "pinned_host") == 0);
  CHECK(bp_device_info_memory_kind(described, 2, &kind) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "bp_device_info_memory_kind: index 2 is out of range: 2 memory kinds");
  CHECK(bp_device_info_memory_kind(described, 0, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_device_info_memory_kind(NULL, 0, &kind) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_device_info_memory_kind_count(NULL) == 0);
  bp_device_info_destroy(described);
  bp_runtime_destroy(runtime);
}

static void bad_sources_are_refused_by_name(void) {
  bp_plugin_source source;
  memset(&source, 0, sizeof(source));
  source.struct_size = sizeof(source);
  source.kind = 7;
  bp_runtime_options options = adapter_options();
  options.sources = &source;
  options.source_count = 1;
  bp_runtime* runtime = NULL;
  CHECK(bp_runtime_create(&options, &runtime) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "sources[0].kind 7 is neither BP_PLUGIN_SOURCE_PATH nor BP_PLUGIN_SOURCE_PJRT");
  source.kind = BP_PLUGIN_SOURCE_PJRT;
  source.create_option_count = 1;
  CHECK(bp_runtime_create(&options, &runtime) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "sources[0].create_option_keys is NULL");
  options.sources = NULL;
  CHECK(bp_runtime_create(&options, &runtime) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_runtime_create: sources is NULL");
  /* An API 0.6 struct, ending at skip_default_paths, is still accepted. */
  options = adapter_options();
  options.struct_size = BP_STRUCT_SIZE(bp_runtime_options, skip_default_paths);
  options.sources = &source; /* past its struct_size: never read */
  options.source_count = 99;
  CHECK(bp_runtime_create(&options, &runtime) == BP_OK);
  bp_runtime_destroy(runtime);
  options.struct_size = sizeof(size_t);
  CHECK(bp_runtime_create(&options, &runtime) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), ", API 0.6's (set it to sizeof)");
}

static void python_site_directories_are_scanned(void) {
  char path[700];
  snprintf(path, sizeof(path), "%s/site", work_dir);
  mkdir(path, 0755);
  snprintf(path, sizeof(path), "%s/site/jax_plugins", work_dir);
  mkdir(path, 0755);
  snprintf(path, sizeof(path), "%s/site/jax_plugins/loose", work_dir);
  mkdir(path, 0755);
  snprintf(path, sizeof(path), "%s/site/jax_plugins/loose/loose_plugin.so", work_dir);
  write_file(path, "reason=a namespace package\n");
  char site[600];
  snprintf(site, sizeof(site), "%s/site", work_dir);
  const char* sites[] = {site};
  bp_runtime_options options = adapter_options();
  options.python_paths = sites;
  options.python_path_count = 1;
  bp_runtime* runtime = NULL;
  CHECK(bp_runtime_create(&options, &runtime) == BP_OK);
  bp_backend_info info;
  const bp_backend_info* loose = find(runtime, "pjrt_loose", &info);
  CHECK(loose != NULL);
  if (loose != NULL) {
    CHECK(loose->status == BP_BACKEND_AVAILABLE);
    CHECK_CONTAINS(loose->origin_detail, "namespace package jax_plugins.loose in ");
    CHECK_CONTAINS(loose->library, "loose_plugin.so");
  }
  /* An API 0.4 caller's bp_backend_info ends before origin_detail: nothing
   * is written past it. */
  bp_backend_info old;
  memset(&old, 0, sizeof(old));
  old.struct_size = BP_STRUCT_SIZE(bp_backend_info, dlpack_device_type);
  old.library = "untouched";
  CHECK(bp_backend_get(runtime, 0, &old) == BP_OK);
  CHECK(strcmp(old.library, "untouched") == 0);
  bp_runtime_destroy(runtime);
}

static void the_default_runtime_takes_python_paths_only_before_it_is_made(void) {
  const char* sites[] = {work_dir};
  CHECK(bp_runtime_default_set_python_paths(sites, 1) == BP_OK);
  CHECK(bp_runtime_default_set_python_paths(NULL, 1) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_runtime_default_set_python_paths: paths is NULL");
  bp_runtime* runtime = NULL;
  CHECK(bp_runtime_default(&runtime) == BP_OK);
  CHECK(bp_runtime_default_set_python_paths(sites, 1) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "its discovery already ran");
}

int main(void) {
  snprintf(work_dir, sizeof(work_dir), "%s/test_c_sources.d", BP_TEST_OUTPUT_DIR);
  mkdir(work_dir, 0755);
  RUN(pjrt_library_given_in_code);
  RUN(bad_sources_are_refused_by_name);
  RUN(python_site_directories_are_scanned);
  RUN(the_default_runtime_takes_python_paths_only_before_it_is_made);
  return c_test_summary();
}
