// Probe: the driver, its version and the devices, described without creating
// a context. See cuda_state.hpp (run_probe) and cuda_backend.hpp.
#include "cuda_state.hpp"

#include <backplane/plugin_support.hpp>

#include <cstdio>
#include <cstdlib>

namespace backplane::cuda {
namespace {

using plugin::Failure;

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
  check(driver, driver.cuDeviceGetName(name, sizeof(name) - 1, device->handle),
        "cuDeviceGetName" + on);
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
  check(driver, driver.cuDeviceGetPCIBusId(bus_id, sizeof(bus_id) - 1, device->handle),
        "cuDeviceGetPCIBusId" + on);
  CUuuid uuid = {};
  check(driver, driver.cuDeviceGetUuid(&uuid, device->handle), "cuDeviceGetUuid" + on);

  device->attribute_text = {
      "compute_capability", std::to_string(major) + "." + std::to_string(minor),
      "multiprocessor_count", std::to_string(multiprocessors),
      "pci_bus_id", bus_id,
      "uuid", format_uuid(uuid),
  };
  for (std::size_t index = 0; index + 1 < device->attribute_text.size(); index += 2) {
    const std::string& key = device->attribute_text[index];
    const std::string& value = device->attribute_text[index + 1];
    device->attributes.push_back(
        BP_KeyValue{sizeof(BP_KeyValue), key.data(), key.size(), value.data(), value.size()});
  }
  return device;
}

}  // namespace

void run_probe(BP_Backend& backend) {
  if (driver_forked()) {  // cuInit in a child of an initialised process must not run
    backend.reason = forked_driver_message();
    return;
  }
  const DriverLoad& load = load_driver();
  if (load.api == nullptr) {
    backend.reason = load.failure;
    return;
  }
  const DriverApi& driver = *load.api;
  const std::string driver_version = format_cuda_version(load.version);

  const CUresult init = driver.cuInit(0);
  if (init == CUDA_ERROR_NO_DEVICE) {
    backend.reason = no_devices_reason("cuInit: " + describe_result(driver, init));
    return;
  }
  // A forward-compatibility libcuda over a kernel driver too old for this GPU.
  if (init == CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE) {
    backend.reason = "NVIDIA driver too old: it supports CUDA " + driver_version +
                     ", this plugin needs CUDA " + format_cuda_version(kRequiredDriverVersion) +
                     " or newer (cuInit: " + describe_result(driver, init) + ")";
    return;
  }
  if (init != CUDA_SUCCESS) {
    backend.reason = "CUDA initialisation failed: cuInit: " + describe_result(driver, init);
    return;
  }
  note_driver_initialised();
  int count = 0;
  const CUresult counted = driver.cuDeviceGetCount(&count);
  if (counted != CUDA_SUCCESS) {
    backend.reason =
        "CUDA initialisation failed: cuDeviceGetCount: " + describe_result(driver, counted);
    return;
  }
  if (count <= 0) {
    backend.reason = no_devices_reason("");
    return;
  }
  std::vector<std::unique_ptr<Device>> devices;
  try {
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      devices.push_back(describe_device(driver, ordinal));
    }
  } catch (const Failure& failure) {
    backend.reason = std::string("CUDA initialisation failed: ") + failure.what();
    return;
  }
  backend.devices = std::move(devices);
  backend.driver = &driver;
  backend.available = true;
  backend.reason = std::to_string(count) + (count == 1 ? " CUDA device" : " CUDA devices") +
                   ", NVIDIA driver for CUDA " + driver_version;
}

}  // namespace backplane::cuda
