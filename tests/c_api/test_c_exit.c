/* A program that creates a runtime, uses it and destroys it, then creates a
 * second one and returns from main without destroying it (or its arrays)
 * must exit cleanly: the library leaves what is still live at exit alone
 * instead of calling into plugins whose own statics may already be gone.
 * The check is this program's exit status; it runs plain and under ASan. */
#include "c_runtime.h"
#include "c_test.h"

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

int main(void) {
  c_test_program = "test_c_exit";
  c_test_run("a runtime left live at exit after another was destroyed", create_use_destroy_then_leave_one);
  return c_test_summary();
}
