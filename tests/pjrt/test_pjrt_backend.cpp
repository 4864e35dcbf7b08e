// The pjrt adapter through the raw ABI over the CPU PJRT plugin: what its
// probe states on each data path, device memories, the copy path's refills
// against a model of the bytes, events, allocations past the device, wrapping
// host memory, and a forked child. Each case says "skipped" without the wheel.
#include "pjrt_support.hpp"
#include "support/fork_child.hpp"
#include "support/plugin_harness.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

using namespace backplane;
using namespace backplane::testing;

namespace {

const BP_PluginApi& adapter() { return load_plugin(BP_TEST_PJRT_PLUGIN); }

Options options_for(const std::string& library, const std::string& data_path) {
  return {{"library", library}, {"create.cpu_device_count", "int64:2"}, {"data_path", data_path}};
}

// What the probe states for this backend (ABI 1.4), the table's preset as the core does.
BP_ProbeArgs probed(const testing::Backend& backend) {
  auto args = detail::probe_args(backend.handle(), backend.api().priority);
  args.capabilities = backend.api().capabilities;
  args.dlpack_device_type = backend.api().dlpack_device_type;
  BP_CHECK_OK(backend.api().probe(&args));
  return args;
}

std::string text(const char* data, std::size_t size) { return std::string(data, size); }

}  // namespace

TEST_CASE("[pjrt][abi] the table declares what holds on both data paths and probes in a child") {
  const BP_PluginApi& api = adapter();
  CHECK(text(api.name, api.name_size) == "pjrt");
  CHECK(api.abi_minor == BP_ABI_MINOR);
  CHECK(api.capabilities == (BP_CAPABILITY_PROBE_IN_CHILD | BP_CAPABILITY_NO_DEVICE_TO_DEVICE |
                             BP_CAPABILITY_PINNED_HOST | BP_CAPABILITY_WRAP_MEMORY));
  CHECK(api.dlpack_device_type == 0);
  CHECK(api.priority == 5);
}

TEST_CASE("[pjrt][abi] the probe states each data path's capabilities and DLPack type") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  testing::Backend host(adapter(), options_for(library, "host"));
  const BP_ProbeArgs host_probe = probed(host);
  CHECK(host_probe.available == 1);
  CHECK(host_probe.capabilities ==
        (BP_CAPABILITY_HOST_ADDRESSABLE | BP_CAPABILITY_WRAP_MEMORY | BP_CAPABILITY_PINNED_HOST));
  CHECK(host_probe.dlpack_device_type == 1);  // kDLCPU
  CHECK(host_probe.priority == 5);
  testing::Backend copy(adapter(), options_for(library, "copy"));
  const BP_ProbeArgs copy_probe = probed(copy);
  CHECK(copy_probe.capabilities ==
        (BP_CAPABILITY_ASYNC | BP_CAPABILITY_NO_DEVICE_TO_DEVICE | BP_CAPABILITY_PINNED_HOST));
  CHECK(copy_probe.dlpack_device_type == 0);
}

TEST_CASE("[pjrt][abi] every device lists its PJRT memories, the default first") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  testing::Backend backend(adapter(), options_for(library, "host"));
  REQUIRE(backend.device_count() == 2);
  for (std::int32_t ordinal = 0; ordinal < 2; ++ordinal) {
    CAPTURE(ordinal);
    const BP_DeviceInfoArgs info = backend.info(ordinal);
    REQUIRE(info.memory_count == 3);
    const char* kinds[] = {"device", "pinned_host", "unpinned_host"};
    const char* descriptions[] = {"CpuDeviceMemory(id=", "PinnedHostMemory(id=", "UnpinnedHostMemorySpace(id="};
    for (std::size_t index = 0; index < 3; ++index) {
      const BP_KeyValue& memory = info.memories[index];
      CHECK(text(memory.key, memory.key_size) == kinds[index]);
      CHECK(text(memory.value, memory.value_size).rfind(descriptions[index], 0) == 0);
    }
  }
}

TEST_CASE("[pjrt][abi] host-path memory is the PJRT buffer's host memory, aligned for the CPU plugin") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  testing::Backend backend(adapter(), options_for(library, "host"));
  for (const BP_MemoryKind kind : {BP_MEMORY_DEVICE, BP_MEMORY_PINNED_HOST}) {
    BP_Buffer* buffer = nullptr;
    void* address = nullptr;
    BP_REQUIRE_OK(backend.allocate(4097, &buffer, &address, 1, kind));
    REQUIRE(address != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(address) % 64 == 0);
    const auto bytes = random_bytes(4097, 3);
    std::memcpy(address, bytes.data(), bytes.size());
    std::vector<unsigned char> back(4097);
    BP_CHECK_OK(backend.to_host(buffer, 0, back.data(), back.size()));
    CHECK(back == bytes);
    BP_CHECK_OK(backend.free(buffer));
  }
}

// Random writes, reads and copies at odd offsets on both paths, checked
// against a host model: on the copy path each write refills part of a PJRT
// buffer and every read completes the refill from the bytes before it.
TEST_CASE("[pjrt][abi] writes, reads and copies at any offset keep every byte, on both data paths") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  for (const std::string path : {"host", "copy"}) {
    CAPTURE(path);
    testing::Backend backend(adapter(), options_for(library, path));
    constexpr std::size_t kSize = (std::size_t{1} << 20) + 13;
    BP_Buffer* buffers[2] = {backend.allocate_ok(kSize, 0), backend.allocate_ok(kSize, 1)};
    std::vector<unsigned char> model[2] = {random_bytes(kSize, 1), random_bytes(kSize, 2)};
    BP_CHECK_OK(backend.to_device(buffers[0], 0, model[0].data(), kSize));
    BP_CHECK_OK(backend.to_device(buffers[1], 0, model[1].data(), kSize));
    std::mt19937_64 random(9);
    const auto range = [&] {
      const std::size_t size = 1 + random() % (kSize / 3);
      return std::make_pair(static_cast<std::size_t>(random() % (kSize - size)), size);
    };
    for (int step = 0; step < 120; ++step) {
      CAPTURE(step);
      const int which = static_cast<int>(random() % 2);
      const auto [offset, size] = range();
      switch (random() % 5) {
        case 0:
        case 1: {  // a write, sometimes two that leave gaps and overlap
          const auto bytes = random_bytes(size, random());
          BP_REQUIRE_OK(backend.to_device(buffers[which], offset, bytes.data(), size));
          std::copy(bytes.begin(), bytes.end(), model[which].begin() + static_cast<std::ptrdiff_t>(offset));
          break;
        }
        case 2: {
          std::vector<unsigned char> back(size);
          BP_REQUIRE_OK(backend.to_host(buffers[which], offset, back.data(), size));
          CHECK(std::equal(back.begin(), back.end(), model[which].begin() + static_cast<std::ptrdiff_t>(offset)));
          break;
        }
        case 3: {  // between the devices, at other offsets
          const auto [target, ignored] = range();
          const std::size_t at = std::min(target, kSize - size);
          BP_REQUIRE_OK(backend.device_to_device(buffers[which], offset, buffers[1 - which], at, size));
          std::copy_n(model[which].begin() + static_cast<std::ptrdiff_t>(offset), size,
                      model[1 - which].begin() + static_cast<std::ptrdiff_t>(at));
          break;
        }
        default: {  // every byte, between the devices (PJRT's own CopyToMemory on the copy path)
          BP_REQUIRE_OK(backend.device_to_device(buffers[which], 0, buffers[1 - which], 0, kSize));
          model[1 - which] = model[which];
        }
      }
    }
    for (int which = 0; which < 2; ++which) {
      std::vector<unsigned char> back(kSize);
      BP_CHECK_OK(backend.to_host(buffers[which], 0, back.data(), kSize));
      CHECK(back == model[which]);
      BP_CHECK_OK(backend.free(buffers[which]));
    }
  }
}

TEST_CASE("[pjrt][abi] asynchronous copies hand out PJRT events that complete in any order") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  testing::Backend backend(adapter(), options_for(library, "copy"));
  constexpr std::size_t kChunk = 64 * 1024;
  constexpr int kChunks = 16;
  BP_Buffer* buffer = backend.allocate_ok(kChunk * kChunks);
  const auto bytes = random_bytes(kChunk * kChunks, 5);
  std::vector<BP_Event*> events;
  for (int chunk = 0; chunk < kChunks; ++chunk) {  // one refill, received in parts, the last completing it
    auto event = backend.client().copy_to_device_async(buffer, chunk * kChunk, bytes.data() + chunk * kChunk, kChunk);
    REQUIRE_MESSAGE(event.ok(), event.status().message());
    events.push_back(*event);
  }
  std::vector<unsigned char> back(bytes.size());
  auto download = backend.client().copy_to_host_async(buffer, 0, back.data(), back.size());
  REQUIRE(download.ok());
  BP_REQUIRE_OK(backend.wait(*download));
  CHECK(backend.query(*download) == 1);
  CHECK(back == bytes);
  for (auto event = events.rbegin(); event != events.rend(); ++event) {
    BP_CHECK_OK(backend.wait(*event));
    backend.api().event_destroy(backend.handle(), *event);
  }
  backend.api().event_destroy(backend.handle(), *download);
  BP_CHECK_OK(backend.free(buffer));
}

TEST_CASE("[pjrt][abi] an allocation larger than the device fails OUT_OF_MEMORY naming the size and the device") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  for (const std::string path : {"host", "copy"}) {
    CAPTURE(path);
    testing::Backend backend(adapter(), options_for(library, path));
    const BP_DeviceInfoArgs info = backend.info(1);
    BP_Buffer* buffer = nullptr;
    const PluginStatus refused = backend.allocate(info.memory_total + 1, &buffer, nullptr, 1);
    CHECK(refused.plugin_code() == BP_ERROR_OUT_OF_MEMORY);
    CHECK(refused.message().find("memory_allocate of ") != std::string::npos);
    CHECK(refused.message().find("(" + std::to_string(info.memory_total + 1) +
                                 " bytes) on pjrt:1 "
                                 "(CpuDevice(id=1)) failed: larger than the device's") != std::string::npos);
    CHECK(buffer == nullptr);
    BP_Buffer* usable = backend.allocate_ok(64, 1);  // the device stays usable
    BP_CHECK_OK(backend.free(usable));
  }
}

TEST_CASE("[pjrt][abi] memory_wrap on the host path adopts host memory, aligned or not") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  testing::Backend backend(adapter(), options_for(library, "host"));
  std::unique_ptr<unsigned char, decltype(&std::free)> memory(static_cast<unsigned char*>(std::aligned_alloc(64, 8192)),
                                                              &std::free);
  // 64-aligned: a PJRT view, destroyed with a callback (a NULL one would
  // abort this process); 8 bytes in: PJRT refuses a view, the adapter still
  // addresses the memory.
  for (const std::size_t offset : {std::size_t{0}, std::size_t{8}}) {
    CAPTURE(offset);
    std::memset(memory.get(), 0, 8192);
    BP_Buffer* wrapped = nullptr;
    BP_REQUIRE_OK(backend.wrap(memory.get() + offset, 4000, &wrapped));
    const auto bytes = random_bytes(1000, 4);
    BP_CHECK_OK(backend.to_device(wrapped, 17, bytes.data(), bytes.size()));
    CHECK(std::equal(bytes.begin(), bytes.end(), memory.get() + offset + 17));
    BP_CHECK_OK(backend.free(wrapped));
    CHECK(std::equal(bytes.begin(), bytes.end(), memory.get() + offset + 17));  // the memory stays the caller's
  }
  testing::Backend copy(adapter(), options_for(library, "copy"));
  BP_Buffer* refused = nullptr;
  const PluginStatus status = copy.wrap(memory.get(), 64, &refused);
  CHECK(status.plugin_code() == BP_ERROR_UNSUPPORTED);
  CHECK(status.message().find("pjrt:0 is on the copy data path") != std::string::npos);
}

TEST_CASE("[pjrt][abi] two backends over one PJRT library live side by side") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  testing::Backend first(adapter(), options_for(library, "host"));
  testing::Backend second(adapter(), options_for(library, "copy"));
  BP_Buffer* a = first.allocate_ok(100);
  BP_Buffer* b = second.allocate_ok(100);
  const auto bytes = random_bytes(100, 8);
  BP_CHECK_OK(first.to_device(a, 0, bytes.data(), 100));
  BP_CHECK_OK(second.to_device(b, 0, bytes.data(), 100));
  std::vector<unsigned char> back(100);
  BP_CHECK_OK(second.to_host(b, 0, back.data(), 100));
  CHECK(back == bytes);
  CHECK_FALSE(first.to_host(b, 0, back.data(), 100).ok());  // not this backend's buffer
  BP_CHECK_OK(first.free(a));
  BP_CHECK_OK(second.free(b));
}

// PJRT plugins do not survive fork(): in a child of the process that made
// the client every device call is refused, naming why, and nothing reaches PJRT.
TEST_CASE("[pjrt][abi] a forked child is refused every device call, naming the parent") {
  const std::string library = cpu_pjrt_library();
  if (library.empty()) return;
  testing::Backend backend(adapter(), options_for(library, "copy"));
  BP_Buffer* buffer = backend.allocate_ok(64);
  const pid_t parent = getpid();
  const ChildOutcome outcome = run_forked([&] {
    Checks checks;
    std::vector<unsigned char> host(64);
    const PluginStatus refused = backend.to_host(buffer, 0, host.data(), 64);
    checks.expect(refused.plugin_code() == BP_ERROR_UNAVAILABLE, "copy_to_host: " + refused.message());
    checks.expect(refused.message().find("was initialised in process " + std::to_string(parent) + " before fork()") !=
                      std::string::npos,
                  "the refusal names the parent: " + refused.message());
    BP_Buffer* other = nullptr;
    checks.expect(backend.allocate(64, &other).plugin_code() == BP_ERROR_UNAVAILABLE, "memory_allocate");
    auto args = detail::probe_args(backend.handle());
    BP_Error* error = backend.api().probe(&args);
    checks.expect(error == nullptr && args.available == 0, "probe answers unavailable");
    if (error != nullptr) error->destroy(error);
    checks.expect(backend.free(buffer).plugin_code() == BP_ERROR_UNAVAILABLE, "memory_free");
    return checks.failures();
  });
  CHECK_FALSE(outcome.hung);
  CHECK_MESSAGE(outcome.exit_code == 0, outcome.report);
  BP_CHECK_OK(backend.free(buffer));  // the parent's buffer is untouched
}
