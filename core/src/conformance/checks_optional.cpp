// Optional capabilities, checked when the table advertises them and "n/a"
// otherwise: host-addressable device memory, pinned host memory for staging,
// convert_integers, and memory_wrap (ABI 1.1).
#include "conformance/checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace backplane::conformance {
namespace {

struct Widening {
  BP_IntegerType source;
  std::size_t source_bytes;
  BP_IntegerType destination;
  std::size_t destination_bytes;
  const char* name;
};

constexpr Widening kWidenings[] = {
    {BP_INTEGER_U8, 1, BP_INTEGER_U32, 4, "U8->U32"},
    {BP_INTEGER_U16, 2, BP_INTEGER_I64, 8, "U16->I64"},
    {BP_INTEGER_U32, 4, BP_INTEGER_I64, 8, "U32->I64"},
};

// Little-endian host assumed (as the whole project does).
std::uint64_t load_unsigned(const std::uint8_t* data, std::size_t bytes) {
  std::uint64_t value = 0;
  std::memcpy(&value, data, bytes);
  return value;
}

void convert(Context& context, const Widening& widening) {
  constexpr std::uint64_t kCount = 1003;
  constexpr std::uint64_t kElementOffset = 3;  // offsets that are element multiples, not zero
  const std::uint64_t source_offset = kElementOffset * widening.source_bytes;
  const std::uint64_t destination_offset = kElementOffset * widening.destination_bytes;
  Buffer source = context.allocate(0, source_offset + kCount * widening.source_bytes);
  Buffer destination = context.allocate(0, destination_offset + kCount * widening.destination_bytes);
  const auto data = context.random_bytes(static_cast<std::size_t>(kCount * widening.source_bytes));
  context.write(source, source_offset, data.data(), data.size());

  const std::string what = fmt::format("convert_integers {} of {} elements", widening.name, kCount);
  // UNSUPPORTED with a reason: the plugin converts in general but cannot on
  // this device (its kernel does not run here); callers widen on the host.
  // Anything else is the plugin failing.
  auto converted = context.client().convert_integers(source.get(), source_offset, widening.source, destination.get(),
                                                     destination_offset, widening.destination, kCount);
  if (!converted.ok()) {
    const PluginError& failure = converted.error();
    if (failure.plugin_code == BP_ERROR_UNSUPPORTED && !failure.message.empty()) {
      throw NotApplicable(fmt::format("{}: UNSUPPORTED on {}: {}", what, context.label(0), failure.message));
    }
    throw CheckFailure(fmt::format("{} failed: {}: {}", what, error_code_name(failure.plugin_code), failure.message));
  }
  context.finish(*converted, what);

  const auto widened = context.read(destination, destination_offset, kCount * widening.destination_bytes);
  for (std::uint64_t index = 0; index < kCount; ++index) {
    const std::uint64_t expected = load_unsigned(data.data() + index * widening.source_bytes, widening.source_bytes);
    const std::uint64_t actual =
        load_unsigned(widened.data() + index * widening.destination_bytes, widening.destination_bytes);
    if (actual != expected) {
      throw CheckFailure(fmt::format("{}: element {} is {}, expected {}", what, index, actual, expected));
    }
  }
}

// memory_wrap's args for `size` bytes at `address` on device 0.
BP_MemoryWrapArgs wrap_args(const Context& context, void* address, std::uint64_t size) {
  return detail::memory_wrap_args(context.backend, 0, address, size);
}

// The table's memory_wrap, for a plugin that advertises it (validated tables
// that claim the bit have the field and it is not NULL).
void require_memory_wrap(const Context& context) {
  if (!context.has_capability(BP_CAPABILITY_WRAP_MEMORY)) {
    throw NotApplicable("BP_CAPABILITY_WRAP_MEMORY not advertised");
  }
  if (!BP_TABLE_HAS_CALL(&context.api, memory_wrap)) {
    throw CheckFailure("BP_CAPABILITY_WRAP_MEMORY is advertised but the table has no memory_wrap");
  }
  context.require_devices();
}

// Device memory with an address to wrap, filled with `data`.
Buffer addressed_buffer(Context& context, const std::vector<std::uint8_t>& data) {
  Buffer buffer = context.allocate(0, data.size());
  if (buffer.address() == nullptr) {
    throw NotApplicable("memory_allocate gives device memory no address, so there is nothing to wrap");
  }
  context.write(buffer, 0, data.data(), data.size());
  return buffer;
}

void check_memory_wrap(Context& context) {
  context.check("optional: memory_wrap adopts allocated memory; memory_free releases only the handle", [&] {
    require_memory_wrap(context);
    constexpr std::uint64_t kSize = 64 * 1024;
    constexpr std::uint64_t kOffset = 4096 + 8;
    constexpr std::uint64_t kWindow = 8192 - 8;
    auto model = context.random_bytes(kSize);
    Buffer home = addressed_buffer(context, model);

    auto args = wrap_args(context, static_cast<std::uint8_t*>(home.address()) + kOffset, kWindow);
    context.require_ok(context.api.memory_wrap(&args), "memory_wrap of 8184 bytes inside an allocation");
    if (args.buffer == nullptr) throw CheckFailure("memory_wrap succeeded but returned no buffer");
    Buffer wrapped(&context, args.buffer, args.address, kWindow, 0);
    require_equal_bytes(context.read(wrapped, 0, kWindow),
                        std::vector<std::uint8_t>(model.begin() + kOffset, model.begin() + kOffset + kWindow),
                        "reading through the wrapped buffer");

    const auto update = context.random_bytes(1000);
    context.write(wrapped, 17, update.data(), update.size());
    std::copy(update.begin(), update.end(), model.begin() + kOffset + 17);
    wrapped.free_checked();
    require_equal_bytes(context.read(home, 0, kSize), model,
                        "the allocation after writing through the wrapped buffer and freeing it");
    home.free_checked();
    return std::string("read, write and free through a handle over bytes 4104..12288 of 64 KiB");
  });
  context.check("optional: memory_wrap refuses a range past the end of its allocation", [&] {
    require_memory_wrap(context);
    if (context.has_capability(BP_CAPABILITY_HOST_ADDRESSABLE)) {
      throw NotApplicable("host-addressable: any host memory may be wrapped, there are no allocations to check");
    }
    Buffer home = addressed_buffer(context, context.random_bytes(4096));
    auto args = wrap_args(context, static_cast<std::uint8_t*>(home.address()) + 4080, 32);
    BP_Error* error = context.api.memory_wrap(&args);
    if (error == nullptr) {
      Buffer wrapped(&context, args.buffer, nullptr, 32, 0);
      throw CheckFailure("memory_wrap of 32 bytes at 16 bytes before the end of a 4096-byte allocation succeeded");
    }
    context.require_error(error, "memory_wrap past the end of an allocation",
                          {BP_ERROR_OUT_OF_RANGE, BP_ERROR_INVALID_ARGUMENT});
    return std::string();
  });
  context.check("optional: memory_wrap of a NULL address is INVALID_ARGUMENT", [&] {
    require_memory_wrap(context);
    auto args = wrap_args(context, nullptr, 64);
    BP_Error* error = context.api.memory_wrap(&args);
    if (error == nullptr) {
      Buffer wrapped(&context, args.buffer, nullptr, 64, 0);
      throw CheckFailure("memory_wrap of 64 bytes at NULL succeeded");
    }
    context.require_error(error, "memory_wrap of a NULL address", {BP_ERROR_INVALID_ARGUMENT});
    return std::string();
  });
}

}  // namespace

void check_optional(Context& context) {
  context.check("optional: host-addressable memory is reachable through its address", [&] {
    if (!context.has_capability(BP_CAPABILITY_HOST_ADDRESSABLE)) {
      throw NotApplicable("BP_CAPABILITY_HOST_ADDRESSABLE not advertised");
    }
    context.require_devices();
    Buffer buffer = context.allocate(0, 4097);
    if (buffer.address() == nullptr) throw CheckFailure("memory_allocate returned no address");
    const auto written = context.random_bytes(4097);
    std::memcpy(buffer.address(), written.data(), written.size());
    require_equal_bytes(context.read(buffer, 0, 4097), written, "copy_to_host after writing through the address");
    const auto copied = context.random_bytes(4097);
    context.write(buffer, 0, copied.data(), copied.size());
    const auto* address = static_cast<const std::uint8_t*>(buffer.address());
    require_equal_bytes(std::vector<std::uint8_t>(address, address + 4097), copied, "the address after copy_to_device");
    return std::string();
  });
  context.check("optional: pinned host memory stages copies both ways", [&] {
    if (!context.has_capability(BP_CAPABILITY_PINNED_HOST)) {
      throw NotApplicable("BP_CAPABILITY_PINNED_HOST not advertised");
    }
    context.require_devices();
    constexpr std::uint64_t kSize = (std::uint64_t{1} << 20) + 5;
    Buffer pinned = context.allocate(0, kSize, BP_MEMORY_PINNED_HOST);
    if (pinned.address() == nullptr) throw CheckFailure("memory_allocate of pinned host memory returned no address");
    auto* host = static_cast<std::uint8_t*>(pinned.address());
    const auto data = context.random_bytes(kSize);
    std::memcpy(host, data.data(), kSize);
    Buffer device = context.allocate(0, kSize);

    const detail::PluginClient calls = context.client();
    auto upload = calls.copy_to_device_async(device.get(), 0, host, kSize);
    context.require_ok(upload.status(), "copy_to_device_async from pinned memory");
    context.finish(*upload, "copy_to_device_async from pinned memory");
    std::memset(host, 0, kSize);

    auto download = calls.copy_to_host_async(device.get(), 0, host, kSize);
    context.require_ok(download.status(), "copy_to_host_async into pinned memory");
    context.finish(*download, "copy_to_host_async into pinned memory");
    require_equal_bytes(std::vector<std::uint8_t>(host, host + kSize), data, "pinned memory after the round trip");
    pinned.free_checked();
    return std::string();
  });
  context.check("optional: convert_integers widens U8->U32, U16->I64, U32->I64", [&] {
    if (!context.has_capability(BP_CAPABILITY_CONVERT_INTEGERS)) {
      throw NotApplicable("BP_CAPABILITY_CONVERT_INTEGERS not advertised");
    }
    context.require_devices();
    for (const Widening& widening : kWidenings) convert(context, widening);
    return std::string();
  });
  context.check("optional: convert_integers refuses narrowing (I64->U8)", [&] {
    if (!context.has_capability(BP_CAPABILITY_CONVERT_INTEGERS)) {
      throw NotApplicable("BP_CAPABILITY_CONVERT_INTEGERS not advertised");
    }
    context.require_devices();
    Buffer source = context.allocate(0, 64);
    Buffer destination = context.allocate(0, 64);
    auto args = detail::convert_integers_args(context.backend, source.get(), 0, BP_INTEGER_I64, destination.get(), 0,
                                              BP_INTEGER_U8, 8);
    BP_Error* error = context.api.convert_integers(&args);
    if (error == nullptr) {
      context.finish(args.event, "convert_integers I64->U8");
      throw CheckFailure("convert_integers I64->U8 returned success; narrowing must be refused");
    }
    context.require_error(error, "convert_integers I64->U8", {BP_ERROR_INVALID_ARGUMENT, BP_ERROR_UNSUPPORTED});
    return std::string();
  });
  check_memory_wrap(context);
}

}  // namespace backplane::conformance
