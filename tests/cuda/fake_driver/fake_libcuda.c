/*
 * A stand-in for libcuda.so.1, for testing the cuda plugin's probe on
 * machines with or without a GPU: a test process puts this directory on
 * LD_LIBRARY_PATH and the plugin's dlopen("libcuda.so.1") finds it first.
 *
 * It defines every entry point the plugin resolves, with cuda.h's ABI (enums
 * are int, CUdevice is int, CUdeviceptr is unsigned long long). Behaviour
 * comes from the environment:
 *   BP_FAKE_CUDA_VERSION  cuDriverGetVersion's answer (default 13000)
 *   BP_FAKE_CUDA_INIT     cuInit's result code (default 0)
 *   BP_FAKE_CUDA_DEVICES  cuDeviceGetCount's answer (default 0)
 * Devices describe themselves (no context); everything that would need a
 * context answers CUDA_ERROR_NOT_SUPPORTED and is counted
 * (bp_fake_cuda_context_calls).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum {
  kSuccess = 0,
  kOutOfMemory = 2,
  kNoDevice = 100,
  kInvalidDevice = 101,
  kNotSupported = 801,
  kUnknown = 999,
};

static int env_int(const char* name, int fallback) {
  const char* text = getenv(name);
  return text != NULL && *text != '\0' ? atoi(text) : fallback;
}

static int device_count(void) { return env_int("BP_FAKE_CUDA_DEVICES", 0); }

EXPORT int cuGetErrorName(int error, const char** name) {
  switch (error) {
    case kSuccess: *name = "CUDA_SUCCESS"; return kSuccess;
    case kOutOfMemory: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return kSuccess;
    case kNoDevice: *name = "CUDA_ERROR_NO_DEVICE"; return kSuccess;
    case kInvalidDevice: *name = "CUDA_ERROR_INVALID_DEVICE"; return kSuccess;
    case kNotSupported: *name = "CUDA_ERROR_NOT_SUPPORTED"; return kSuccess;
    case kUnknown: *name = "CUDA_ERROR_UNKNOWN"; return kSuccess;
    default: *name = NULL; return 1; /* CUDA_ERROR_INVALID_VALUE */
  }
}

EXPORT int cuGetErrorString(int error, const char** text) {
  switch (error) {
    case kSuccess: *text = "no error"; return kSuccess;
    case kOutOfMemory: *text = "out of memory"; return kSuccess;
    case kNoDevice: *text = "no CUDA-capable device is detected"; return kSuccess;
    case kInvalidDevice: *text = "invalid device ordinal"; return kSuccess;
    case kNotSupported: *text = "operation not supported"; return kSuccess;
    case kUnknown: *text = "unknown error"; return kSuccess;
    default: *text = NULL; return 1;
  }
}

EXPORT int cuDriverGetVersion(int* version) {
  *version = env_int("BP_FAKE_CUDA_VERSION", 13000);
  return kSuccess;
}

EXPORT int cuInit(unsigned flags) {
  (void)flags;
  return env_int("BP_FAKE_CUDA_INIT", kSuccess);
}

EXPORT int cuDeviceGetCount(int* count) {
  *count = device_count();
  return kSuccess;
}

EXPORT int cuDeviceGet(int* device, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count()) return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}

EXPORT int cuDeviceGetName(char* name, int size, int device) {
  snprintf(name, (size_t)size, "Fake GPU %d", device);
  return kSuccess;
}

EXPORT int cuDeviceTotalMem_v2(size_t* bytes, int device) {
  *bytes = ((size_t)24 << 30) + (size_t)device;
  return kSuccess;
}

EXPORT int cuDeviceGetAttribute(int* value, int attribute, int device) {
  (void)device;
  switch (attribute) {
    case 16: *value = 132; return kSuccess; /* multiprocessor count */
    case 75: *value = 9; return kSuccess;   /* compute capability major */
    case 76: *value = 0; return kSuccess;   /* compute capability minor */
    default: return kNotSupported;
  }
}

EXPORT int cuDeviceGetUuid_v2(unsigned char* uuid, int device) {
  for (int index = 0; index < 16; ++index) uuid[index] = (unsigned char)(index + 16 * device);
  return kSuccess;
}

EXPORT int cuDeviceGetPCIBusId(char* bus_id, int size, int device) {
  snprintf(bus_id, (size_t)size, "00000000:%02X:00.0", 0x65 + device);
  return kSuccess;
}

EXPORT int cuDeviceCanAccessPeer(int* can, int device, int peer) {
  *can = device != peer;
  return kSuccess;
}

EXPORT int cuDevicePrimaryCtxGetState(int device, unsigned* flags, int* active) {
  (void)device;
  *flags = 0;
  *active = 0;
  return kSuccess;
}

/* Everything below needs a context the fake cannot give; each call is
 * counted, so a test can check that probe and device_info made none. */
static int context_calls = 0;

EXPORT int bp_fake_cuda_context_calls(void) { return context_calls; }

#define UNSUPPORTED(signature) \
  EXPORT int signature {       \
    ++context_calls;           \
    return kNotSupported;      \
  }

UNSUPPORTED(cuDevicePrimaryCtxRetain(void** context, int device))
UNSUPPORTED(cuDevicePrimaryCtxRelease_v2(int device))
UNSUPPORTED(cuCtxPushCurrent_v2(void* context))
UNSUPPORTED(cuCtxPopCurrent_v2(void** context))
UNSUPPORTED(cuCtxEnablePeerAccess(void* peer, unsigned flags))
UNSUPPORTED(cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes))
UNSUPPORTED(cuMemAlloc_v2(unsigned long long* address, size_t size))
UNSUPPORTED(cuMemFree_v2(unsigned long long address))
UNSUPPORTED(cuMemHostAlloc(void** address, size_t size, unsigned flags))
UNSUPPORTED(cuMemFreeHost(void* address))
UNSUPPORTED(cuPointerGetAttribute(void* data, int attribute, unsigned long long pointer))
UNSUPPORTED(cuMemcpyAsync(unsigned long long to, unsigned long long from, size_t size, void* stream))
UNSUPPORTED(cuMemcpyPeerAsync(unsigned long long to, void* to_context, unsigned long long from,
                              void* from_context, size_t size, void* stream))
UNSUPPORTED(cuStreamCreate(void** stream, unsigned flags))
UNSUPPORTED(cuStreamDestroy_v2(void* stream))
UNSUPPORTED(cuStreamSynchronize(void* stream))
UNSUPPORTED(cuStreamWaitEvent(void* stream, void* event, unsigned flags))
UNSUPPORTED(cuEventCreate(void** event, unsigned flags))
UNSUPPORTED(cuEventRecord(void* event, void* stream))
UNSUPPORTED(cuEventSynchronize(void* event))
UNSUPPORTED(cuEventQuery(void* event))
UNSUPPORTED(cuEventDestroy_v2(void* event))
