// Probe: the loader, the platforms and their devices, described without
// creating a context. See opencl_backend.hpp.
#include "opencl_backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

namespace backplane::opencl {
namespace {

using sdk::Failure;

std::string platform_text(const Api& api, cl_platform_id platform, cl_platform_info what, const char* name) {
  std::size_t size = 0;
  check(api.clGetPlatformInfo(platform, what, 0, nullptr, &size), std::string("clGetPlatformInfo(") + name + ")");
  std::string text(size, '\0');
  check(api.clGetPlatformInfo(platform, what, size, text.data(), nullptr),
        std::string("clGetPlatformInfo(") + name + ")");
  while (!text.empty() && (text.back() == '\0' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string device_text(const Api& api, cl_device_id device, cl_device_info what, const char* name) {
  std::size_t size = 0;
  check(api.clGetDeviceInfo(device, what, 0, nullptr, &size), std::string("clGetDeviceInfo(") + name + ")");
  std::string text(size, '\0');
  check(api.clGetDeviceInfo(device, what, size, text.data(), nullptr), std::string("clGetDeviceInfo(") + name + ")");
  while (!text.empty() && (text.back() == '\0' || text.back() == ' ')) text.pop_back();
  return text;
}

template <class Value>
Value device_value(const Api& api, cl_device_id device, cl_device_info what, const char* name) {
  Value value{};
  check(api.clGetDeviceInfo(device, what, sizeof(value), &value, nullptr),
        std::string("clGetDeviceInfo(") + name + ")");
  return value;
}

// "no OpenCL platforms: ... names where the loader looked for drivers.
std::string no_platforms_reason(const std::string& library, cl_int code) {
  std::string reason = "no OpenCL platforms: the ICD loader " + library +
                       " found no driver (clGetPlatformIDs: " + error_name(code) +
                       "); it loads the drivers named by the .icd files in ";
  const char* vendors = std::getenv("OCL_ICD_VENDORS");
  if (vendors != nullptr && *vendors != '\0') {
    reason += "OCL_ICD_VENDORS=\"" + std::string(vendors) + "\" (set, so instead of /etc/OpenCL/vendors)";
  } else {
    reason += "/etc/OpenCL/vendors (or the directory OCL_ICD_VENDORS names; it is not set)";
  }
  return reason + "; install a driver, e.g. pocl-opencl-icd for the CPU or the GPU vendor's";
}

struct Platform {
  cl_platform_id id = nullptr;
  std::size_t loader_index = 0;
  std::string name, vendor, version;
};

std::string join(const std::vector<std::string>& parts, const char* separator) {
  std::string text;
  for (const auto& part : parts) text += (text.empty() ? "" : separator) + part;
  return text;
}

}  // namespace

sdk::Probe OpenclBackend::probe() {
  // refusal() covers the probe call but not device_count, which probes too:
  // a child must not reach the driver through it either.
  if (forked()) return {false, forked_message(), {}};
  const LoaderLoad& load = load_loader(library_);
  if (load.api == nullptr) return {false, load.failure, {}};
  const Api& api = *load.api;

  cl_uint count = 0;
  cl_int result = api.clGetPlatformIDs(0, nullptr, &count);
  if (result == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (result == CL_SUCCESS && count == 0)) {
    return {false, no_platforms_reason(library_, result == CL_SUCCESS ? -1001 : result), {}};
  }
  if (result != CL_SUCCESS) {
    return {false, "OpenCL initialisation failed: clGetPlatformIDs: " + error_name(result), {}};
  }
  std::vector<cl_platform_id> ids(count);
  result = api.clGetPlatformIDs(count, ids.data(), &count);
  if (result != CL_SUCCESS) return {false, "OpenCL initialisation failed: clGetPlatformIDs: " + error_name(result), {}};
  ids.resize(count);
  note_initialised();

  std::vector<std::string> failed;  // platforms and devices that did not answer
  std::vector<std::string> empty;   // platforms with no devices
  std::vector<Platform> platforms;
  for (std::size_t index = 0; index < ids.size(); ++index) {
    Platform platform{ids[index], index, {}, {}, {}};
    try {
      platform.name = platform_text(api, ids[index], CL_PLATFORM_NAME, "CL_PLATFORM_NAME");
      platform.vendor = platform_text(api, ids[index], CL_PLATFORM_VENDOR, "CL_PLATFORM_VENDOR");
      platform.version = platform_text(api, ids[index], CL_PLATFORM_VERSION, "CL_PLATFORM_VERSION");
    } catch (const Failure& failure) {
      failed.push_back("platform #" + std::to_string(index) + " in the loader's list: " + failure.what());
      continue;
    }
    platforms.push_back(std::move(platform));
  }
  std::stable_sort(platforms.begin(), platforms.end(), [](const Platform& a, const Platform& b) {
    return std::tie(a.name, a.vendor, a.version) < std::tie(b.name, b.vendor, b.version);
  });

  std::vector<std::unique_ptr<Device>> devices;
  bool accelerator = false;
  std::vector<std::string> summaries;
  for (const Platform& platform : platforms) {
    const std::string called = "platform \"" + platform.name + "\" (" + platform.vendor + ")";
    cl_uint device_count = 0;
    result = api.clGetDeviceIDs(platform.id, CL_DEVICE_TYPE_ALL, 0, nullptr, &device_count);
    if (result == CL_DEVICE_NOT_FOUND || (result == CL_SUCCESS && device_count == 0)) {
      empty.push_back(called);
      continue;
    }
    std::vector<cl_device_id> device_ids(device_count);
    if (result == CL_SUCCESS)
      result = api.clGetDeviceIDs(platform.id, CL_DEVICE_TYPE_ALL, device_count, device_ids.data(), &device_count);
    if (result != CL_SUCCESS) {
      failed.push_back(called + ": clGetDeviceIDs failed: " + error_name(result));
      continue;
    }
    device_ids.resize(device_count);
    for (std::size_t index = 0; index < device_ids.size(); ++index) {
      auto device = std::make_unique<Device>();
      device->platform = platform.id;
      device->id = device_ids[index];
      device->platform_name = platform.name;
      try {
        device->name = device_text(api, device->id, CL_DEVICE_NAME, "CL_DEVICE_NAME");
        device->vendor = device_text(api, device->id, CL_DEVICE_VENDOR, "CL_DEVICE_VENDOR");
        device->opencl_version = device_text(api, device->id, CL_DEVICE_VERSION, "CL_DEVICE_VERSION");
        device->driver_version = device_text(api, device->id, CL_DRIVER_VERSION, "CL_DRIVER_VERSION");
        device->type = device_value<cl_device_type>(api, device->id, CL_DEVICE_TYPE, "CL_DEVICE_TYPE");
        device->global_memory =
            device_value<cl_ulong>(api, device->id, CL_DEVICE_GLOBAL_MEM_SIZE, "CL_DEVICE_GLOBAL_MEM_SIZE");
        device->max_allocation =
            device_value<cl_ulong>(api, device->id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, "CL_DEVICE_MAX_MEM_ALLOC_SIZE");
        device->compute_units =
            device_value<cl_uint>(api, device->id, CL_DEVICE_MAX_COMPUTE_UNITS, "CL_DEVICE_MAX_COMPUTE_UNITS");
        const auto available = device_value<cl_bool>(api, device->id, CL_DEVICE_AVAILABLE, "CL_DEVICE_AVAILABLE");
        if (available == CL_FALSE) {
          failed.push_back(called + " device #" + std::to_string(index) + " \"" + device->name + "\": not available");
          continue;
        }
      } catch (const Failure& failure) {
        failed.push_back(called + " device #" + std::to_string(index) + ": " + failure.what());
        continue;
      }
      if ((device->type & CL_DEVICE_TYPE_CPU) == 0) accelerator = true;
      device->ordinal = static_cast<std::int32_t>(devices.size());
      device->label = "opencl:" + std::to_string(device->ordinal);
      summaries.push_back(device->label + " " + device->name + " (" + platform.name + ")");
      devices.push_back(std::move(device));
    }
  }

  std::vector<std::string> notes;
  if (!failed.empty()) notes.push_back("skipped, failed to answer: " + join(failed, "; "));
  if (!empty.empty()) notes.push_back("no devices on " + join(empty, ", "));
  if (devices.empty()) {
    return {false,
            "no usable OpenCL devices on " + std::to_string(ids.size()) + " platform(s)" +
                (notes.empty() ? std::string() : " (" + join(notes, "; ") + ")"),
            {}};
  }
  api_ = &api;
  devices_.assign(std::move(devices));
  std::string reason = std::to_string(devices_.count()) + " OpenCL device(s): " + join(summaries, ", ");
  reason += accelerator ? "; a GPU or accelerator, so priority " + std::to_string(kAcceleratorPriority)
                        : "; CPU devices only, so priority " + std::to_string(kCpuOnlyPriority) + " (below cpu)";
  if (!notes.empty()) reason += " (" + join(notes, "; ") + ")";
  return {true, std::move(reason), accelerator ? kAcceleratorPriority : kCpuOnlyPriority};
}

}  // namespace backplane::opencl
