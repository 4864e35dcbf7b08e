// Device info sanity and allocation patterns.
#include "conformance/checks.hpp"

#include "loader/plugin_limits.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <vector>

namespace backplane::conformance {
using detail::kMaxDeviceAttributes;
using detail::kMaxPluginTextSize;
namespace {

constexpr std::uint64_t kLargeAllocation = std::uint64_t{64} << 20;  // 64 MiB
constexpr int kSmallAllocations = 200;
constexpr int kOrderedAllocations = 32;

std::string view_of(const char* data, std::size_t size) {
  return data == nullptr ? std::string() : std::string(data, size);
}

BP_DeviceInfoArgs query_info(Context& context, int ordinal) {
  auto info = context.client().device_info(ordinal);
  context.require_ok(info.status(), fmt::format("device_info of {}", context.label(ordinal)));
  return *info;
}

void check_attributes(Context& context, const BP_DeviceInfoArgs& info, int ordinal) {
  if (info.attributes == nullptr && info.attribute_count != 0) {
    throw CheckFailure(
        fmt::format("{}: attributes is NULL with attribute_count {}", context.label(ordinal), info.attribute_count));
  }
  // Bounded as the core bounds them, before anything is read or copied.
  if (info.attribute_count > kMaxDeviceAttributes) {
    throw CheckFailure(fmt::format("{}: attribute_count {} is more than {}; the core refuses the device",
                                   context.label(ordinal), info.attribute_count, kMaxDeviceAttributes));
  }
  std::set<std::string> keys;
  for (std::size_t index = 0; index < info.attribute_count; ++index) {
    const BP_KeyValue& pair = info.attributes[index];
    const std::string where = fmt::format("{}: attribute {}", context.label(ordinal), index);
    if (pair.struct_size < sizeof(BP_KeyValue)) {
      throw CheckFailure(fmt::format("{}: struct_size {} is smaller than BP_KeyValue ({})", where, pair.struct_size,
                                     sizeof(BP_KeyValue)));
    }
    if (pair.key_size > kMaxPluginTextSize || pair.value_size > kMaxPluginTextSize) {
      throw CheckFailure(fmt::format("{}: key_size {} or value_size {} is more than {}; the core refuses the device",
                                     where, pair.key_size, pair.value_size, kMaxPluginTextSize));
    }
    if (pair.key == nullptr || pair.key_size == 0) throw CheckFailure(where + ": the key is empty");
    if (pair.value == nullptr && pair.value_size != 0) {
      throw CheckFailure(fmt::format("{}: the value is NULL with value_size {}", where, pair.value_size));
    }
    const std::string key(pair.key, pair.key_size);
    if (key.find('\0') != std::string::npos) throw CheckFailure(where + ": the key holds a NUL byte");
    if (!keys.insert(key).second) throw CheckFailure(fmt::format("{}: key \"{}\" appears twice", where, key));
  }
}

}  // namespace

void check_devices(Context& context) {
  const int count = context.report.device_count;
  if (context.backend == nullptr || !context.report.available || count == 0) {
    const std::string reason = !context.report.probed      ? std::string("the probe failed")
                               : !context.report.available ? "backend unavailable: " + context.report.probe_reason
                                                           : std::string("the backend reports no devices");
    context.not_applicable("devices: device_info of every device is sane", reason);
    context.not_applicable("devices: attributes are well-formed key/value pairs", reason);
    context.not_applicable("devices: names stay valid until backend_destroy", reason);
    return;
  }

  std::vector<BP_DeviceInfoArgs> first(static_cast<std::size_t>(count));
  bool described = false;
  context.check("devices: device_info of every device is sane", [&] {
    std::vector<std::string> summary;
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      const BP_DeviceInfoArgs info = query_info(context, ordinal);
      const std::string label = context.label(ordinal);
      if (info.name == nullptr || info.name_size == 0) throw CheckFailure(label + ": the name is empty");
      if (info.name_size > kMaxPluginTextSize) {
        throw CheckFailure(fmt::format("{}: name_size {} is more than {}; the core refuses the device", label,
                                       info.name_size, kMaxPluginTextSize));
      }
      if (info.kind != BP_DEVICE_KIND_CPU && info.kind != BP_DEVICE_KIND_GPU &&
          info.kind != BP_DEVICE_KIND_ACCELERATOR) {
        throw CheckFailure(fmt::format("{}: kind {} is not a BP_DeviceKind", label, info.kind));
      }
      if (info.memory_total == 0) throw CheckFailure(label + ": memory_total is 0");
      if (info.memory_free != BP_MEMORY_FREE_UNKNOWN && info.memory_free > info.memory_total) {
        throw CheckFailure(
            fmt::format("{}: memory_free {} exceeds memory_total {}", label, info.memory_free, info.memory_total));
      }
      first[static_cast<std::size_t>(ordinal)] = info;
      context.devices.push_back({view_of(info.name, info.name_size), info.memory_total, info.memory_free});
      summary.push_back(fmt::format("{} \"{}\"", label, context.devices.back().name));
    }
    described = true;
    return fmt::format("{}", fmt::join(summary, ", "));
  });
  if (!described) {
    context.devices.clear();
    context.devices_failed = true;
    context.not_applicable("devices: attributes are well-formed key/value pairs", "device_info failed");
    context.not_applicable("devices: names stay valid until backend_destroy", "device_info failed");
    return;
  }
  context.check("devices: attributes are well-formed key/value pairs", [&] {
    std::size_t total = 0;
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      check_attributes(context, first[static_cast<std::size_t>(ordinal)], ordinal);
      total += first[static_cast<std::size_t>(ordinal)].attribute_count;
    }
    return fmt::format("{} attribute(s)", total);
  });
  context.check("devices: names stay valid until backend_destroy", [&] {
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      const BP_DeviceInfoArgs again = query_info(context, ordinal);
      const BP_DeviceInfoArgs& before = first[static_cast<std::size_t>(ordinal)];
      const std::string& name = context.devices[static_cast<std::size_t>(ordinal)].name;
      // The first answer's pointer must still hold the same text.
      if (view_of(before.name, before.name_size) != name || view_of(again.name, again.name_size) != name) {
        throw CheckFailure(
            fmt::format("{}: the name changed or its storage was reused between calls", context.label(ordinal)));
      }
    }
    return std::string();
  });
}

void check_memory(Context& context) {
  context.check("memory: size 0 allocates, takes size-0 copies and frees", [&] {
    context.require_devices();
    Buffer empty = context.allocate(0, 0);
    context.write(empty, 0, nullptr, 0);
    context.read(empty, 0, 0);
    empty.free_checked();
    return std::string();
  });
  context.check("memory: a large allocation is usable at both ends", [&] {
    context.require_devices();
    // A quarter of what is free, or of the total when free is unknown.
    const DeviceFacts& device = context.devices[0];
    const std::uint64_t room = device.memory_free == BP_MEMORY_FREE_UNKNOWN ? device.memory_total : device.memory_free;
    const std::uint64_t size = std::max<std::uint64_t>(std::min(kLargeAllocation, room / 4), 4096);
    Buffer large = context.allocate(0, size);
    const auto head = context.random_bytes(4096);
    const auto tail = context.random_bytes(4093);
    context.write(large, 0, head.data(), head.size());
    context.write(large, size - tail.size(), tail.data(), tail.size());
    require_equal_bytes(context.read(large, 0, head.size()), head, "the first 4096 bytes read back");
    require_equal_bytes(context.read(large, size - tail.size(), tail.size()), tail, "the last 4093 bytes read back");
    large.free_checked();
    return fmt::format("{} bytes", size);
  });
  context.check("memory: many small allocations of odd sizes keep their own data", [&] {
    context.require_devices();
    std::vector<Buffer> buffers;
    std::vector<std::vector<std::uint8_t>> contents;
    for (int index = 0; index < kSmallAllocations; ++index) {
      const std::uint64_t size = 1 + context.random() % 1021;
      const int ordinal = index % context.device_count();
      buffers.push_back(context.allocate(ordinal, size));
      contents.push_back(context.random_bytes(size));
      context.write(buffers.back(), 0, contents.back().data(), size);
    }
    for (std::size_t index = 0; index < buffers.size(); ++index) {
      require_equal_bytes(
          context.read(buffers[index], 0, buffers[index].size()), contents[index],
          fmt::format("small buffer {} ({} bytes) read back after all were written", index, buffers[index].size()));
    }
    // Free in a shuffled order.
    std::vector<std::size_t> order(buffers.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::shuffle(order.begin(), order.end(), context.random);
    for (std::size_t index : order) buffers[index].free_checked();
    return fmt::format("{} buffers", kSmallAllocations);
  });
  context.check("memory: frees in allocation, reverse and interleaved order", [&] {
    context.require_devices();
    for (const char* order : {"allocation", "reverse", "interleaved"}) {
      std::vector<Buffer> buffers;
      for (int index = 0; index < kOrderedAllocations; ++index) {
        buffers.push_back(context.allocate(0, 64 + static_cast<std::uint64_t>(index) * 13));
      }
      const std::string_view which = order;
      if (which == "allocation") {
        for (auto& buffer : buffers) buffer.free_checked();
      } else if (which == "reverse") {
        for (auto buffer = buffers.rbegin(); buffer != buffers.rend(); ++buffer) buffer->free_checked();
      } else {
        for (std::size_t index = 1; index < buffers.size(); index += 2) buffers[index].free_checked();
        for (std::size_t index = 0; index < buffers.size(); index += 2) buffers[index].free_checked();
      }
    }
    // Still usable afterwards.
    Buffer after = context.allocate(0, 333);
    const auto data = context.random_bytes(333);
    context.write(after, 0, data.data(), data.size());
    require_equal_bytes(context.read(after, 0, data.size()), data, "a buffer allocated after the frees");
    return std::string();
  });
  context.check("memory: memory_free of a NULL buffer is a no-op", [&] {
    if (context.backend == nullptr) throw NotApplicable("no backend instance");
    context.require_ok(context.client().memory_free(nullptr), "memory_free with buffer NULL");
    return std::string();
  });
  context.check("memory: every device allocates and round-trips data", [&] {
    context.require_devices();
    for (int ordinal = 0; ordinal < context.device_count(); ++ordinal) {
      Buffer buffer = context.allocate(ordinal, 4099);
      const auto data = context.random_bytes(4099);
      context.write(buffer, 0, data.data(), data.size());
      require_equal_bytes(context.read(buffer, 0, data.size()), data,
                          fmt::format("4099 bytes on {} read back", context.label(ordinal)));
      buffer.free_checked();
    }
    return fmt::format("{} device(s)", context.device_count());
  });
}

}  // namespace backplane::conformance
