// The cuda backend on any machine: negotiation, probe reasons, argument
// checks. None of these needs a GPU; on a driver-less machine they pin down
// the "no NVIDIA driver" answer.
#include "cuda_plugin_fixture.hpp"

#include <string>
#include <vector>

using backplane::testing::api;
using backplane::testing::Backend;
using backplane::testing::take;

TEST_CASE("[cuda] entry negotiates ABI 1 and describes the backend") {
  const BP_PluginApi& table = api();
  CHECK(table.struct_size == sizeof(BP_PluginApi));
  CHECK(table.abi_major == 1);
  CHECK(table.abi_minor == BP_ABI_MINOR);
  CHECK(std::string(table.name, table.name_size) == "cuda");
  CHECK(table.version_size > 0);
  CHECK(table.priority == 100);
  CHECK(table.capabilities == (BP_CAPABILITY_PINNED_HOST | BP_CAPABILITY_ASYNC | BP_CAPABILITY_CONVERT_INTEGERS |
                               BP_CAPABILITY_WRAP_MEMORY | BP_CAPABILITY_EVENT_TIMING));
  CHECK((table.capabilities & BP_CAPABILITY_HOST_ADDRESSABLE) == 0);
  const auto present = [](auto function) { return function != nullptr; };
  CHECK(present(table.backend_create));
  CHECK(present(table.backend_destroy));
  CHECK(present(table.probe));
  CHECK(present(table.device_count));
  CHECK(present(table.device_info));
  CHECK(present(table.memory_allocate));
  CHECK(present(table.memory_free));
  CHECK(present(table.copy_to_device));
  CHECK(present(table.copy_to_host));
  CHECK(present(table.copy_device_to_device));
  CHECK(present(table.copy_to_device_async));
  CHECK(present(table.copy_to_host_async));
  CHECK(present(table.copy_device_to_device_async));
  CHECK(present(table.event_wait));
  CHECK(present(table.event_query));
  CHECK(present(table.event_destroy));
  CHECK(present(table.convert_integers));
  CHECK(present(table.memory_wrap));

  SUBCASE("a core speaking only another major still gets the table, to name both") {
    const uint32_t majors[] = {2};
    const BP_PluginEntryArgs args{sizeof(args), majors, 1, 0};
    const BP_PluginApi* other = backplane::testing::entry_function()(&args);
    REQUIRE(other != nullptr);
    CHECK(other->abi_major == 1);
  }
}

TEST_CASE("[cuda] probe answers as a call, with a reason, and is stable") {
  Backend backend;
  CHECK_FALSE(backend.reason().empty());
  const std::string verdict = backend.available() ? "available: " : "unavailable: ";
  MESSAGE("cuda probe: " << verdict << backend.reason());
  if (!backend.available()) CHECK(backend.device_count() == 0);
  if (backend.available()) CHECK(backend.device_count() > 0);

  auto again = backplane::detail::probe_args(backend.handle());
  again.available = -1;
  REQUIRE(take(api().probe(&again)).ok());
  CHECK((again.available != 0) == backend.available());
  CHECK(std::string(again.reason, again.reason_size) == backend.reason());
}

TEST_CASE("[cuda] without libcuda.so.1 the backend says: no NVIDIA driver") {
  const std::string open_error = backplane::testing::driver_open_error();
  Backend backend;
  if (open_error.empty()) {
    MESSAGE("libcuda.so.1 opens in this process: the no-driver reason does not apply");
    CHECK(backend.reason().rfind("no NVIDIA driver", 0) != 0);
    return;
  }
  CHECK_FALSE(backend.available());
  CHECK(backend.reason() == "no NVIDIA driver: libcuda.so.1 not found (" + open_error + ")");
  CHECK(backend.device_count() == 0);
}

TEST_CASE("[cuda] an unavailable backend refuses work with its reason") {
  Backend backend;
  if (backend.available()) {
    MESSAGE("the cuda backend is available here: nothing to refuse");
    return;
  }
  auto allocate = backplane::detail::memory_allocate_args(backend.handle(), 0, BP_MEMORY_DEVICE, 1024);
  const auto refused = take(api().memory_allocate(&allocate));
  CHECK(refused.code() == backplane::ErrorCode::kUnavailable);
  CHECK(refused.message().find(backend.reason()) != std::string::npos);
  CHECK(allocate.buffer == nullptr);

  auto info = backplane::detail::device_info_args(backend.handle(), 0);
  const auto info_refused = take(api().device_info(&info));
  CHECK(info_refused.code() == backplane::ErrorCode::kUnavailable);
  CHECK(info_refused.message().find(backend.reason()) != std::string::npos);

  std::vector<char> host(16);
  auto copy = backplane::detail::copy_to_device_args(backend.handle(), nullptr, 0, host.data(), 16);
  CHECK(take(api().copy_to_device_async(&copy)).code() == backplane::ErrorCode::kUnavailable);
  CHECK(copy.event == nullptr);

  auto wrap = backplane::detail::memory_wrap_args(backend.handle(), 0, host.data(), 16);
  const auto wrap_refused = take(api().memory_wrap(&wrap));
  CHECK(wrap_refused.code() == backplane::ErrorCode::kUnavailable);
  CHECK(wrap_refused.message().find("memory_wrap: cuda is unavailable: ") != std::string::npos);
  CHECK(wrap.buffer == nullptr);
}

TEST_CASE("[cuda] bad arguments are INVALID_ARGUMENT, never a crash") {
  Backend backend;
  const BP_PluginApi& table = api();
  // Only compared, never dereferenced by the plugin.
  alignas(64) static char not_a_handle[64];
  auto* bogus_backend = reinterpret_cast<BP_Backend*>(not_a_handle);
  auto* bogus_buffer = reinterpret_cast<BP_Buffer*>(not_a_handle);
  auto* bogus_event = reinterpret_cast<BP_Event*>(not_a_handle);

  SUBCASE("NULL args") {
    CHECK(take(table.backend_create(nullptr)).code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(take(table.probe(nullptr)).code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(take(table.device_count(nullptr)).code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(take(table.device_info(nullptr)).code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(take(table.memory_allocate(nullptr)).code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(take(table.memory_free(nullptr)).code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(take(table.copy_to_device(nullptr)).code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(take(table.copy_to_host_async(nullptr)).code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(take(table.copy_device_to_device(nullptr)).code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(take(table.event_wait(nullptr)).code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(take(table.event_query(nullptr)).code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(take(table.convert_integers(nullptr)).code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(take(table.memory_wrap(nullptr)).code() == backplane::ErrorCode::kInvalidArgument);
  }
  SUBCASE("an args struct older than the plugin's") {
    BP_ProbeArgs probe{offsetof(BP_ProbeArgs, reason), backend.handle(), 0, nullptr, 0, 0, 0, 0};
    const auto outcome = take(table.probe(&probe));
    CHECK(outcome.code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(outcome.message().find("struct_size") != std::string::npos);
  }
  SUBCASE("backends the plugin did not create") {
    auto probe = backplane::detail::probe_args(nullptr);
    CHECK(take(table.probe(&probe)).code() == backplane::ErrorCode::kInvalidArgument);
    probe.backend = bogus_backend;
    CHECK(take(table.probe(&probe)).code() == backplane::ErrorCode::kInvalidArgument);
    auto count = backplane::detail::device_count_args(bogus_backend);
    CHECK(take(table.device_count(&count)).code() == backplane::ErrorCode::kInvalidArgument);
    table.backend_destroy(nullptr);
    table.backend_destroy(bogus_backend);
    table.event_destroy(bogus_backend, bogus_event);
  }
  SUBCASE("buffers and events the backend did not hand out") {
    auto free_args = backplane::detail::memory_free_args(backend.handle(), nullptr);
    CHECK(take(table.memory_free(&free_args)).ok());  // NULL buffer: no-op
    free_args.buffer = bogus_buffer;
    const auto outcome = take(table.memory_free(&free_args));
    CHECK(outcome.code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(outcome.message() ==
          "memory_free: buffer handle is not a live buffer of this cuda backend (already freed, or from another "
          "backend)");

    auto event = backplane::detail::event_args(backend.handle(), bogus_event);
    CHECK(take(table.event_wait(&event)).code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(take(table.event_query(&event)).code() == backplane::ErrorCode::kInvalidArgument);
    event.event = nullptr;
    CHECK(take(table.event_wait(&event)).code() == backplane::ErrorCode::kInvalidArgument);
    table.event_destroy(backend.handle(), bogus_event);
    table.event_destroy(backend.handle(), nullptr);
  }
  SUBCASE("options: the cuda backend takes none") {
    const char key[] = "devices";
    const char value[] = "4";
    const BP_KeyValue option{sizeof(option), key, 7, value, 1};
    auto create = backplane::detail::backend_create_args(&option, 1);
    const auto outcome = take(table.backend_create(&create));
    CHECK(outcome.code() == backplane::ErrorCode::kInvalidArgument);
    CHECK(outcome.message() == "cuda: unknown option \"devices\" = \"4\" (known options: none)");
    CHECK(create.backend == nullptr);
  }
}

// CUDA_VISIBLE_DEVICES is read by the driver once per process, so this case
// runs itself again in a child process with every device hidden. With the
// real driver; test_cuda_probe_reasons.cpp covers the same with a fake one.
TEST_CASE("[cuda] CUDA_VISIBLE_DEVICES hiding every real device gives: no CUDA devices") {
  if (backplane::testing::in_child()) {
    Backend backend;
    CHECK_FALSE(backend.available());
    CHECK(backend.device_count() == 0);
    CHECK(backend.reason().rfind("no CUDA devices", 0) == 0);
    CHECK(backend.reason().find("CUDA_VISIBLE_DEVICES=\"\"") != std::string::npos);
    return;
  }
  if (!backplane::testing::driver_open_error().empty()) {
    MESSAGE("skipped: no NVIDIA driver, so no devices to hide");
    return;
  }
  CHECK(backplane::testing::run_in_child("*hiding every real device*", {"CUDA_VISIBLE_DEVICES="}) == 0);
}
