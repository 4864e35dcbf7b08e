// Probe: the driver, its version and the devices, described without creating
// a context. See cuda_state.hpp (run_probe) and cuda_backend.hpp.
#include "cuda_state.hpp"

#include <cstdio>
#include <cstdlib>

namespace backplane::cuda {
namespace {

std::string no_devices_reason(const std::string& detail) {
  std::string reason = "no CUDA devices";
  std::vector<std::string> notes;
  if (!detail.empty()) notes.push_back(detail);
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    notes.push_back(std::string("CUDA_VISIBLE_DEVICES=\"") + visible + "\"");
  }
  for (std::size_t index = 0; index < notes.size(); ++index) {
    reason += (index == 0 ? " (" : "; ") + notes[index];
  }
  return notes.empty() ? reason : reason + ")";
}

std::string format_uuid(const CUuuid& uuid) {
  std::string text = "GPU-";
  char digits[3];
  for (int index = 0; index < 16; ++index) {
    if (index == 4 || index == 6 || index == 8 || index == 10) text += '-';
    std::snprintf(digits, sizeof(digits), "%02x", static_cast<unsigned char>(uuid.bytes[index]));
    text += digits;
  }
  return text;
}

// Reads what the driver tells about one device without creating a context.
std::unique_ptr<Device> describe_device(const DriverApi& driver, int ordinal) {
  auto device = std::make_unique<Device>();
  device->ordinal = ordinal;
  device->label = "cuda:" + std::to_string(ordinal);
  const std::string on = " on " + device->label;
  check(driver, driver.cuDeviceGet(&device->handle, ordinal), "cuDeviceGet" + on);

  char name[256] = {};
  check(driver, driver.cuDeviceGetName(name, sizeof(name) - 1, device->handle), "cuDeviceGetName" + on);
  device->name = name;
  std::size_t total = 0;
  check(driver, driver.cuDeviceTotalMem(&total, device->handle), "cuDeviceTotalMem" + on);
  device->memory_total = total;

  auto attribute = [&](CUdevice_attribute which, const char* what) {
    int value = 0;
    check(driver, driver.cuDeviceGetAttribute(&value, which, device->handle),
          std::string("cuDeviceGetAttribute(") + what + ")" + on);
    return value;
  };
  const int major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability");
  const int minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability");
  const int multiprocessors = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count");
  char bus_id[64] = {};
  check(driver, driver.cuDeviceGetPCIBusId(bus_id, sizeof(bus_id) - 1, device->handle), "cuDeviceGetPCIBusId" + on);
  CUuuid uuid = {};
  check(driver, driver.cuDeviceGetUuid(&uuid, device->handle), "cuDeviceGetUuid" + on);

  device->attributes = {
      {"compute_capability", std::to_string(major) + "." + std::to_string(minor)},
      {"multiprocessor_count", std::to_string(multiprocessors)},
      {"pci_bus_id", bus_id},
      {"uuid", format_uuid(uuid)},
  };
  return device;
}

}  // namespace

ProbeResult run_probe() {
  ProbeResult result;
  std::string& reason = result.probe.reason;
  if (driver_forked()) {  // cuInit in a child of an initialised process must not run
    reason = forked_driver_message();
    return result;
  }
  const DriverLoad& load = load_driver();
  if (load.api == nullptr) {
    reason = load.failure;
    return result;
  }
  const DriverApi& driver = *load.api;
  const std::string driver_version = format_cuda_version(load.version);

  const CUresult init = driver.cuInit(0);
  if (init == CUDA_ERROR_NO_DEVICE) {
    reason = no_devices_reason("cuInit: " + describe_result(driver, init));
    return result;
  }
  // A forward-compatibility libcuda over a kernel driver too old for this GPU.
  if (init == CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE) {
    reason = "NVIDIA driver too old: it supports CUDA " + driver_version + ", this plugin needs CUDA " +
             format_cuda_version(kRequiredDriverVersion) + " or newer (cuInit: " + describe_result(driver, init) + ")";
    return result;
  }
  if (init != CUDA_SUCCESS) {
    reason = "CUDA initialisation failed: cuInit: " + describe_result(driver, init);
    return result;
  }
  note_driver_initialised();
  int count = 0;
  const CUresult counted = driver.cuDeviceGetCount(&count);
  if (counted != CUDA_SUCCESS) {
    reason = "CUDA initialisation failed: cuDeviceGetCount: " + describe_result(driver, counted);
    return result;
  }
  if (count <= 0) {
    reason = no_devices_reason("");
    return result;
  }
  std::vector<std::unique_ptr<Device>> devices;
  try {
    for (int ordinal = 0; ordinal < count; ++ordinal) devices.push_back(describe_device(driver, ordinal));
  } catch (const sdk::Failure& failure) {
    reason = std::string("CUDA initialisation failed: ") + failure.what();
    return result;
  }
  result.devices = std::move(devices);
  result.driver = &driver;
  result.probe.available = true;
  reason = std::to_string(count) + (count == 1 ? " CUDA device" : " CUDA devices") + ", NVIDIA driver for CUDA " +
           driver_version;
  return result;
}

}  // namespace backplane::cuda
