// The CPU backend's hooks. The SDK has checked every handle, ordinal, range
// and pointer before a hook runs; what is left here is host memory.
#include "cpu_backend.hpp"

#include <backplane/plugin_sdk/host_memory.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace backplane::cpu {
namespace {

// The "model name" of the first processor in /proc/cpuinfo (x86), else its
// "Model"/"Hardware"/"cpu model" line (ARM, RISC-V, MIPS), else "unknown model".
std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::string fallback;
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    if (value.empty()) continue;
    if (key == "model name") return value;
    if (fallback.empty() && (key == "Model" || key == "Hardware" || key == "cpu model")) fallback = value;
  }
  return fallback.empty() ? "unknown model" : fallback;
}

std::string online_cores() {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return std::to_string(cores > 0 ? cores : 1);
}

}  // namespace

namespace {

// `owned`: the memory is freed with the buffer (false for wrapped memory).
std::unique_ptr<CpuBackend::Buffer> make_buffer(std::int32_t ordinal, BP_MemoryKind kind, std::uint64_t size,
                                                void* address, bool owned) {
  auto buffer = std::make_unique<CpuBackend::Buffer>();
  buffer->ordinal = ordinal;
  buffer->kind = kind;
  buffer->size = size;
  buffer->address = address;
  buffer->owned = owned;
  return buffer;
}

}  // namespace

CpuBackend::Buffer::~Buffer() {
  if (owned) std::free(address);
}

std::unique_ptr<CpuBackend> CpuBackend::create(const sdk::Options& options) {
  options.allow_only({"devices"});
  return std::make_unique<CpuBackend>(static_cast<std::int32_t>(options.integer("devices", 1, 1, kMaxDevices)));
}

sdk::Probe CpuBackend::probe() {
  return {.available = true,
          .reason = "host CPU " + cpu_model() + ", " + online_cores() + " core(s), exposed as " +
                    std::to_string(devices_) + " device(s)",
          .priority = {}};
}

sdk::DeviceDescription CpuBackend::describe(std::int32_t ordinal) {
  const std::string model = cpu_model();
  return {"CPU " + std::to_string(ordinal) + " (" + model + ")",
          BP_DEVICE_KIND_CPU,
          {{"model", model}, {"cores", online_cores()}, {"alignment", std::to_string(kAlignment)}}};
}

sdk::MemoryFigures CpuBackend::memory(std::int32_t /*ordinal*/) { return sdk::host_memory(); }

std::unique_ptr<CpuBackend::Buffer> CpuBackend::allocate(std::int32_t ordinal, BP_MemoryKind kind, std::uint64_t size) {
  // aligned_alloc wants a multiple of the alignment; 0 becomes one line.
  void* data = nullptr;
  if (size <= SIZE_MAX - kAlignment) {
    data = std::aligned_alloc(kAlignment, size == 0 ? kAlignment : (size + kAlignment - 1) / kAlignment * kAlignment);
  }
  if (data == nullptr) {
    const sdk::MemoryFigures memory = sdk::host_memory();
    throw sdk::Failure(BP_ERROR_OUT_OF_MEMORY, "memory_allocate of " + sdk::format_bytes(size) + " (" +
                                                   std::to_string(size) + " bytes) on cpu:" + std::to_string(ordinal) +
                                                   " failed: out of memory (" +
                                                   (memory.free ? sdk::format_bytes(*memory.free) : "unknown") +
                                                   " free of " + sdk::format_bytes(memory.total) + ")");
  }
  return make_buffer(ordinal, kind, size, data, true);
}

// Any host memory is memory of every cpu device; nothing more to check.
std::unique_ptr<CpuBackend::Buffer> CpuBackend::wrap(std::int32_t ordinal, void* address, std::uint64_t size) {
  return make_buffer(ordinal, BP_MEMORY_DEVICE, size, address, false);
}

std::unique_ptr<CpuBackend::Event> CpuBackend::copy_to_device(Buffer& destination, std::uint64_t offset,
                                                              const void* source, std::uint64_t size, sdk::Mode) {
  if (size != 0) std::memcpy(static_cast<std::byte*>(destination.address) + offset, source, size);
  return nullptr;
}

std::unique_ptr<CpuBackend::Event> CpuBackend::copy_to_host(Buffer& source, std::uint64_t offset, void* destination,
                                                            std::uint64_t size, sdk::Mode) {
  if (size != 0) std::memcpy(destination, static_cast<const std::byte*>(source.address) + offset, size);
  return nullptr;
}

// memmove: source and destination may be one buffer.
std::unique_ptr<CpuBackend::Event> CpuBackend::copy_device_to_device(Buffer& source, std::uint64_t source_offset,
                                                                     Buffer& destination,
                                                                     std::uint64_t destination_offset,
                                                                     std::uint64_t size, sdk::Mode) {
  if (size != 0) {
    std::memmove(static_cast<std::byte*>(destination.address) + destination_offset,
                 static_cast<const std::byte*>(source.address) + source_offset, size);
  }
  return nullptr;
}

}  // namespace backplane::cpu
