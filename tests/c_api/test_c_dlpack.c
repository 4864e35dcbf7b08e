/* DLPack export and import through the C API: shared buffers, lifetimes,
 * and every refusal with its code and message. C11, -pedantic; this program
 * includes dlpack.h (test_c_api.c shows backplane.h does not need it). */
#include <backplane/backplane.h>
#include <dlpack/dlpack.h>

#include "c_runtime.h"
#include "c_test.h"

#include <stdint.h>
#include <string.h>

/* A producer of our own: a static buffer whose deleter counts its calls. */
static int foreign_deletes;
static float foreign_data[6] = {1, 2, 3, 4, 5, 6};
static int64_t foreign_shape[2] = {2, 3};
static int64_t foreign_strides[2] = {3, 1};

static void count_delete(DLManagedTensor* self) {
  (void)self;
  ++foreign_deletes;
}

static DLManagedTensor foreign_tensor(void) {
  DLManagedTensor tensor;
  memset(&tensor, 0, sizeof(tensor));
  tensor.dl_tensor.data = foreign_data;
  tensor.dl_tensor.device.device_type = kDLCPU;
  tensor.dl_tensor.ndim = 2;
  tensor.dl_tensor.dtype.code = kDLFloat;
  tensor.dl_tensor.dtype.bits = 32;
  tensor.dl_tensor.dtype.lanes = 1;
  tensor.dl_tensor.shape = foreign_shape;
  tensor.dl_tensor.strides = foreign_strides;
  tensor.deleter = count_delete;
  return tensor;
}

static void export_shares_the_buffer_and_keeps_it_alive(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  bp_device cpu = c_test_device(runtime, "cpu");
  const uint16_t values[4] = {10, 20, 30, 40};
  int64_t shape[2] = {2, 2};
  bp_array* array = NULL;
  bp_array* row = NULL;
  DLManagedTensor* tensor = NULL;
  void* address = NULL;
  CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U16, shape, 2, values, sizeof(values), &array) == BP_OK);
  CHECK(bp_array_slice(array, 1, 2, &row) == BP_OK);
  CHECK(bp_array_to_dlpack(row, &tensor) == BP_OK);
  CHECK(bp_array_native_address(row, &address) == BP_OK);
  CHECK(tensor->dl_tensor.data == address);
  CHECK(tensor->dl_tensor.device.device_type == kDLCPU && tensor->dl_tensor.device.device_id == 0);
  CHECK(tensor->dl_tensor.ndim == 2 && tensor->dl_tensor.shape[0] == 1 && tensor->dl_tensor.shape[1] == 2);
  CHECK(tensor->dl_tensor.dtype.code == kDLUInt && tensor->dl_tensor.dtype.bits == 16);
  CHECK(tensor->dl_tensor.dtype.lanes == 1);
  CHECK(tensor->dl_tensor.strides == NULL && tensor->dl_tensor.byte_offset == 0);
  /* The handles go first: the tensor keeps the data. */
  bp_array_destroy(array);
  bp_array_destroy(row);
  bp_runtime_destroy(runtime);
  {
    const uint16_t* data = (const uint16_t*)tensor->dl_tensor.data;
    CHECK(data[0] == 30 && data[1] == 40);
  }
  bp_dlpack_tensor_delete(tensor);
  bp_dlpack_tensor_delete(NULL);
}

/* The cpu plugin and one sim build: `sim` is BP_TEST_SIM_PLUGIN (declares
 * kDLExtDev) or BP_TEST_SIM_UNDECLARED_PLUGIN (declares nothing). */
static bp_runtime* cpu_and(const char* sim, const char* config_text) {
  const char* paths[2];
  paths[0] = BP_TEST_CPU_PLUGIN;
  paths[1] = sim;
  return c_test_runtime_on(paths, 2, config_text);
}

static void export_refuses_what_dlpack_cannot_describe(void) {
  bp_runtime* runtime = cpu_and(BP_TEST_SIM_UNDECLARED_PLUGIN, NULL);
  bp_device cpu = c_test_device(runtime, "cpu");
  int32_t type = -1;
  int32_t id = -1;
  const uint8_t bytes[4] = {0};
  int64_t shape[1] = {4};
  bp_array* array = NULL;
  bp_array* on_sim = NULL;
  DLManagedTensor* tensor = NULL;
  CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_F8_E4M3, shape, 1, bytes, 4, &array) == BP_OK);
  CHECK(bp_array_to_dlpack(array, &tensor) == BP_STATUS_UNSUPPORTED);
  CHECK_CONTAINS(bp_last_error(), "bp_array_to_dlpack: DLPack has no type code for F8_E4M3");
  bp_array_destroy(array);
  CHECK(bp_array_create(runtime, &cpu, BP_DTYPE_U8, shape, 1, bytes, 4, &array) == BP_OK);
  CHECK(bp_array_device_put(runtime, array, NULL, NULL, NULL, &on_sim) == BP_OK);
  CHECK(bp_array_to_dlpack(on_sim, &tensor) == BP_STATUS_UNSUPPORTED);
  CHECK_CONTAINS(bp_last_error(),
                 "bp_array_to_dlpack: sim:0 cannot be exported: backend 'sim' declares no DLPack "
                 "device type (the plugin's dlpack_device_type, backend ABI 1.2) and its memory is "
                 "not host memory");
  CHECK(bp_array_dlpack_device(on_sim, &type, &id) == BP_STATUS_UNSUPPORTED);
  CHECK_CONTAINS(bp_last_error(), "bp_array_dlpack_device: sim:0 cannot be exported: backend 'sim'");
  CHECK(type == -1 && id == -1);
  CHECK(bp_array_dlpack_device(array, &type, &id) == BP_OK && type == kDLCPU && id == 0);
  CHECK(bp_array_dlpack_device(array, NULL, &id) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_array_dlpack_device: device_type is NULL");
  CHECK(bp_array_to_dlpack(array, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_array_to_dlpack: out is NULL");
  CHECK(bp_array_to_dlpack(NULL, &tensor) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(tensor == NULL);
  bp_array_destroy(on_sim);
  bp_array_destroy(array);
  bp_runtime_destroy(runtime);
}

static void import_is_zero_copy_and_calls_the_deleter_once(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  DLManagedTensor tensor = foreign_tensor();
  bp_array* array = NULL;
  bp_array* row = NULL;
  bp_array* moved = NULL;
  bp_device device;
  void* address = NULL;
  float back[6];
  bp_dtype dtype = 0;
  foreign_deletes = 0;
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_OK);
  CHECK(bp_array_native_address(array, &address) == BP_OK && address == (void*)foreign_data);
  CHECK(bp_array_device(array, &device) == BP_OK && strcmp(device.backend, "cpu") == 0);
  CHECK(bp_array_dtype(array, &dtype) == BP_OK && dtype == BP_DTYPE_F32);
  foreign_data[0] = 100; /* the array sees the producer's memory */
  CHECK(bp_array_copy_to_host(array, back, sizeof(back)) == BP_OK && back[0] == 100 && back[5] == 6);
  CHECK(bp_array_slice(array, 1, 2, &row) == BP_OK);
  CHECK(bp_array_device_put(runtime, array, NULL, NULL, NULL, &moved) == BP_OK);
  bp_array_destroy(array);
  CHECK(foreign_deletes == 0); /* the view and the transfer still use it */
  CHECK(bp_array_wait(moved) == BP_OK);
  CHECK(bp_array_copy_to_host(row, back, 12) == BP_OK && back[0] == 4);
  bp_array_destroy(row);
  bp_array_destroy(moved);
  CHECK(foreign_deletes == 1);
  foreign_data[0] = 1;

  /* A tensor with a byte offset and no strides; a NULL deleter is allowed. */
  tensor = foreign_tensor();
  tensor.dl_tensor.strides = NULL;
  tensor.dl_tensor.byte_offset = 12;
  tensor.dl_tensor.shape = &foreign_shape[1];
  tensor.dl_tensor.ndim = 1;
  tensor.deleter = NULL;
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_OK);
  CHECK(bp_array_copy_to_host(array, back, 12) == BP_OK && back[0] == 4 && back[2] == 6);
  bp_array_destroy(array);

  /* Round trip: our export imported again shares our buffer. */
  {
    DLManagedTensor* exported = NULL;
    bp_array* again = NULL;
    tensor = foreign_tensor();
    CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_OK);
    CHECK(bp_array_to_dlpack(array, &exported) == BP_OK);
    CHECK(bp_array_from_dlpack(runtime, exported, &again) == BP_OK);
    CHECK(bp_array_native_address(again, &address) == BP_OK && address == (void*)foreign_data);
    bp_array_destroy(array);
    CHECK(foreign_deletes == 1);
    bp_array_destroy(again);
    CHECK(foreign_deletes == 2);
  }
  bp_runtime_destroy(runtime);
}

/* Each refusal leaves the tensor to the caller: the deleter is not called. */
static void import_refusals_name_the_problem(void) {
  bp_runtime* runtime = c_test_runtime(NULL);
  DLManagedTensor tensor;
  bp_array* array = NULL;
  int64_t strides[2] = {1, 2};
  int64_t negative[1] = {-2};
  foreign_deletes = 0;

  tensor = foreign_tensor();
  tensor.dl_tensor.device.device_type = kDLCUDA;
  {
    /* The real cuda plugin declares kDLCUDA: not built (no nvcc), unavailable
     * without a GPU; with one, host memory is not device memory. */
    const bp_status status = bp_array_from_dlpack(runtime, &tensor, &array);
    if (status == BP_STATUS_UNSUPPORTED) {
      CHECK_CONTAINS(bp_last_error(), "DLPack device type 2 (kDLCUDA) cannot be imported: no backend declares it");
    } else if (status == BP_STATUS_UNAVAILABLE) {
      CHECK_CONTAINS(bp_last_error(), "DLPack device type 2 (kDLCUDA) is the memory of cuda (unavailable: ");
    } else {
      CHECK(status == BP_STATUS_INVALID_ARGUMENT);
      CHECK_CONTAINS(bp_last_error(), "not memory the CUDA driver knows");
    }
  }
  tensor.dl_tensor.device.device_type = kDLCUDAManaged;
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_STATUS_UNSUPPORTED);
  CHECK_CONTAINS(bp_last_error(), "DLPack device type 13 (kDLCUDAManaged) cannot be imported: no backend declares it");
  tensor.dl_tensor.device.device_type = kDLVulkan; /* kDLOpenCL is the opencl plugin's */
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_STATUS_UNSUPPORTED);
  CHECK_CONTAINS(bp_last_error(),
                 "bp_array_from_dlpack: DLPack device type 7 (kDLVulkan) cannot be imported: no "
                 "backend declares it (declared: ");
  CHECK_CONTAINS(bp_last_error(), "sim 12 (kDLExtDev)");
  CHECK_CONTAINS(bp_last_error(), "cpu 1 (kDLCPU)");
  tensor.dl_tensor.device.device_type = (DLDeviceType)99;
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_STATUS_UNSUPPORTED);
  CHECK_CONTAINS(bp_last_error(), "DLPack device type 99 cannot be imported");

  tensor = foreign_tensor();
  tensor.dl_tensor.strides = strides;
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_STATUS_UNSUPPORTED);
  CHECK_CONTAINS(bp_last_error(), "strides [1, 2] of shape [2, 3] are not row-major contiguous");

  tensor = foreign_tensor();
  tensor.dl_tensor.dtype.lanes = 4;
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_STATUS_UNSUPPORTED);
  CHECK_CONTAINS(bp_last_error(), "vector types are not supported (code 2 with 32 bits and 4 lanes)");
  tensor = foreign_tensor();
  tensor.dl_tensor.dtype.code = kDLOpaqueHandle;
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_STATUS_UNSUPPORTED);
  CHECK_CONTAINS(bp_last_error(), "DLPack dtype code 3 with 32 bits and 1 lanes has no backplane dtype");
  tensor.dl_tensor.dtype.code = kDLFloat;
  tensor.dl_tensor.dtype.bits = 8;
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_STATUS_UNSUPPORTED);

  tensor = foreign_tensor();
  tensor.dl_tensor.shape = negative;
  tensor.dl_tensor.ndim = 1;
  tensor.dl_tensor.strides = NULL;
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "shape [-2] has a negative extent on axis 0");
  tensor = foreign_tensor();
  tensor.dl_tensor.data = NULL;
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "data is NULL for a non-empty tensor");
  tensor = foreign_tensor();
  tensor.dl_tensor.ndim = -1;
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "ndim is -1");

  tensor = foreign_tensor();
  CHECK(bp_array_from_dlpack(runtime, NULL, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_array_from_dlpack: tensor is NULL");
  CHECK(bp_array_from_dlpack(runtime, &tensor, NULL) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(bp_array_from_dlpack(NULL, &tensor, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK(array == NULL && foreign_deletes == 0);
  bp_runtime_destroy(runtime);

  /* Without a host-addressable backend there is nowhere to put host memory,
   * and without backends no device type is declared. */
  {
    static const char* const only_sim[] = {BP_TEST_SIM_PLUGIN};
    bp_runtime* sim_only = c_test_runtime_on(only_sim, 1, NULL);
    bp_runtime_options options;
    bp_runtime* empty = NULL;
    CHECK(bp_array_from_dlpack(sim_only, &tensor, &array) == BP_STATUS_UNAVAILABLE);
    CHECK_CONTAINS(bp_last_error(),
                   "bp_array_from_dlpack: DLPack device type 1 (kDLCPU) is host memory, which only "
                   "a host-addressable device can hold; the default device sim:0 is not one and no "
                   "other is available (sim (available))");
    bp_runtime_destroy(sim_only);
    memset(&options, 0, sizeof(options));
    options.struct_size = sizeof(options);
    options.ignore_environment = 1;
    options.skip_default_paths = 1;
    CHECK(bp_runtime_create(&options, &empty) == BP_OK);
    CHECK(bp_array_from_dlpack(empty, &tensor, &array) != BP_OK); /* no default device at all */
    tensor.dl_tensor.device.device_type = kDLCUDA;
    CHECK(bp_array_from_dlpack(empty, &tensor, &array) == BP_STATUS_UNSUPPORTED);
    CHECK_CONTAINS(bp_last_error(), "no backend declares it (declared: none;");
    CHECK(foreign_deletes == 0);
    bp_runtime_destroy(empty);
  }
}

/* Host memory lands on the default device when the CPU can address it, else
 * on the first available host-addressable device. */
static void host_import_follows_the_default_device(void) {
  bp_runtime* runtime = cpu_and(BP_TEST_SIM_PLUGIN, "[backend.cpu]\ndevices = 2\n");
  DLManagedTensor tensor;
  bp_array* array = NULL;
  bp_device device;
  uint64_t token = 0;
  int32_t type = -1;
  int32_t id = -1;
  foreign_deletes = 0;

  tensor = foreign_tensor(); /* the default is sim:0 (it outranks cpu): not host memory */
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_OK);
  CHECK(bp_array_device(array, &device) == BP_OK && strcmp(device.backend, "cpu") == 0 && device.ordinal == 0);
  bp_array_destroy(array);

  CHECK(bp_default_device_push_scope(runtime, "cpu:1", &token) == BP_OK);
  tensor = foreign_tensor();
  tensor.dl_tensor.device.device_type = kDLCUDAHost; /* pinned host memory is host memory too */
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_OK);
  CHECK(bp_array_device(array, &device) == BP_OK && strcmp(device.backend, "cpu") == 0 && device.ordinal == 1);
  /* Host memory exports as kDLCPU device 0 whichever cpu device holds it. */
  CHECK(bp_array_dlpack_device(array, &type, &id) == BP_OK && type == kDLCPU && id == 0);
  bp_array_destroy(array);
  CHECK(bp_default_device_pop_scope(runtime, token) == BP_OK);
  CHECK(foreign_deletes == 2);
  bp_runtime_destroy(runtime);
}

/* The simulated accelerator declares kDLExtDev: DLPack export and import of
 * device memory, with no backend named in the core. */
static bp_runtime* sim_runtime(void) { return cpu_and(BP_TEST_SIM_PLUGIN, "[backend.sim]\ndevices = 2\n"); }

static void device_import_adopts_device_memory(void) {
  bp_runtime* runtime = sim_runtime();
  bp_device sim = c_test_device(runtime, "sim:1");
  bp_device cpu = c_test_device(runtime, "cpu");
  const int32_t values[6] = {-1, 2, -3, 4, -5, 6};
  int64_t shape[2] = {2, 3};
  bp_array* original = NULL;
  bp_array* imported = NULL;
  bp_array* on_cpu = NULL;
  DLManagedTensor* exported = NULL;
  bp_device device;
  void* address = NULL;
  int32_t back[6];
  int32_t type = -1;
  int32_t id = -1;
  bp_memory_stats before;
  bp_memory_stats after;
  CHECK(bp_array_create(runtime, &sim, BP_DTYPE_I32, shape, 2, values, sizeof(values), &original) == BP_OK);
  CHECK(bp_array_native_address(original, &address) == BP_OK && address != NULL);
  CHECK(bp_array_dlpack_device(original, &type, &id) == BP_OK && type == kDLExtDev && id == 1);
  CHECK(bp_array_to_dlpack(original, &exported) == BP_OK);
  CHECK(exported->dl_tensor.device.device_type == kDLExtDev && exported->dl_tensor.device.device_id == 1);
  CHECK(exported->dl_tensor.data == address);
  bp_array_destroy(original); /* the exported tensor keeps the memory */

  memset(&before, 0, sizeof(before));
  memset(&after, 0, sizeof(after));
  before.struct_size = sizeof(before);
  after.struct_size = sizeof(after);
  CHECK(bp_memory_stats_get(runtime, &sim, &before) == BP_OK);
  CHECK(bp_array_from_dlpack(runtime, exported, &imported) == BP_OK);
  CHECK(bp_memory_stats_get(runtime, &sim, &after) == BP_OK);
  CHECK(after.backend_allocations == before.backend_allocations); /* no copy */
  CHECK(bp_array_device(imported, &device) == BP_OK && strcmp(device.backend, "sim") == 0 && device.ordinal == 1);
  {
    void* imported_address = NULL;
    CHECK(bp_array_native_address(imported, &imported_address) == BP_OK && imported_address == address);
  }
  CHECK(bp_array_copy_to_host(imported, back, sizeof(back)) == BP_OK && back[0] == -1 && back[5] == 6);
  CHECK(bp_array_device_put(runtime, imported, &cpu, NULL, NULL, &on_cpu) == BP_OK);
  bp_array_destroy(imported); /* the transfer still holds the tensor */
  memset(back, 0, sizeof(back));
  CHECK(bp_array_copy_to_host(on_cpu, back, sizeof(back)) == BP_OK && back[2] == -3 && back[4] == -5);
  bp_array_destroy(on_cpu);
  bp_runtime_destroy(runtime);
}

static void device_import_refusals_name_the_problem(void) {
  bp_runtime* runtime = sim_runtime();
  bp_device sim = c_test_device(runtime, "sim:0");
  /* 512 bytes: the allocator's granularity, so the allocation is exactly this. */
  const uint8_t bytes[512] = {0};
  int64_t shape[1] = {512};
  int64_t inside[1] = {32};
  bp_array* home = NULL;
  bp_array* array = NULL;
  DLManagedTensor tensor;
  void* address = NULL;
  foreign_deletes = 0;
  CHECK(bp_array_create(runtime, &sim, BP_DTYPE_U8, shape, 1, bytes, sizeof(bytes), &home) == BP_OK);
  CHECK(bp_array_native_address(home, &address) == BP_OK);

  tensor = foreign_tensor(); /* host memory, claimed to be on the device */
  tensor.dl_tensor.device.device_type = kDLExtDev;
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "sim:0: memory_wrap of 24 bytes at 0x");
  CHECK_CONTAINS(bp_last_error(), "not in a live device allocation");

  tensor = foreign_tensor();
  tensor.dl_tensor.device.device_type = kDLExtDev;
  tensor.dl_tensor.dtype.code = kDLUInt;
  tensor.dl_tensor.dtype.bits = 8;
  tensor.dl_tensor.ndim = 1;
  tensor.dl_tensor.shape = inside;
  tensor.dl_tensor.strides = NULL;
  tensor.dl_tensor.data = address;
  tensor.dl_tensor.byte_offset = 500; /* 32 bytes from 500 run past 512 */
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(), "runs past the end of its 512 bytes allocation (it starts 500 bytes in)");
  tensor.dl_tensor.byte_offset = 480; /* fits: accepted, and the deleter runs on destroy */
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_OK);
  bp_array_destroy(array);
  CHECK(foreign_deletes == 1);
  tensor.dl_tensor.device.device_id = 3;
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_STATUS_OUT_OF_RANGE);
  CHECK_CONTAINS(bp_last_error(),
                 "bp_array_from_dlpack: DLPack device type 12 (kDLExtDev) device_id 3 is out of "
                 "range: backend 'sim', which declares that type, has 2 device(s)");
  tensor.dl_tensor.device.device_id = -1;
  CHECK(bp_array_from_dlpack(runtime, &tensor, &array) == BP_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(bp_last_error(), "bp_array_from_dlpack: device_id is -1 for DLPack device type 12 (kDLExtDev)");
  CHECK(foreign_deletes == 1); /* refusals leave the tensor to the caller */
  bp_array_destroy(home);
  bp_runtime_destroy(runtime);
}

int main(void) {
  c_test_program = "test_c_dlpack";
  RUN(export_shares_the_buffer_and_keeps_it_alive);
  RUN(export_refuses_what_dlpack_cannot_describe);
  RUN(import_is_zero_copy_and_calls_the_deleter_once);
  RUN(import_refusals_name_the_problem);
  RUN(host_import_follows_the_default_device);
  RUN(device_import_adopts_device_memory);
  RUN(device_import_refusals_name_the_problem);
  return c_test_summary();
}
