// Entry point of backplane-cuda.so: the exported symbol and the static table.
// The backend itself lives in cuda_backend.cu, the driver binding in
// cuda_driver.cu, the device kernel in widen_kernel.cu.
#include "cuda_backend.hpp"

#include <backplane/plugin.h>

namespace {

constexpr char kName[] = "cuda";
constexpr char kVersion[] = BP_CUDA_PLUGIN_VERSION;

namespace cuda = backplane::cuda;

const BP_PluginApi kApi = {
    sizeof(BP_PluginApi),
    BP_ABI_MAJOR,
    BP_ABI_MINOR,
    kName,
    sizeof(kName) - 1,
    kVersion,
    sizeof(kVersion) - 1,
    100,  // priority: GPUs above the CPU's 10
    cuda::kCapabilities,
    &cuda::backend_create,
    &cuda::backend_destroy,
    &cuda::probe,
    &cuda::device_count,
    &cuda::device_info,
    &cuda::memory_allocate,
    &cuda::memory_free,
    &cuda::copy_to_device,
    &cuda::copy_to_host,
    &cuda::copy_device_to_device,
    &cuda::copy_to_device_async,
    &cuda::copy_to_host_async,
    &cuda::copy_device_to_device_async,
    &cuda::event_wait,
    &cuda::event_query,
    &cuda::event_destroy,
    &cuda::convert_integers,
    &cuda::memory_wrap,  // 1.1
    2,                   // 1.2: dlpack_device_type kDLCUDA
};

}  // namespace

// The core picks by major; this plugin speaks 1 only and always answers with
// its table, so an incompatible core can name both versions.
extern "C" BP_PLUGIN_EXPORT const BP_PluginApi* backplane_plugin_entry(
    const BP_PluginEntryArgs* /*args*/) {
  return &kApi;
}
