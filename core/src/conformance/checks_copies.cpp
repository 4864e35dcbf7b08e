// Copies in every direction, synchronous and asynchronous, and concurrent use
// from several threads. Every check keeps a host-side model of each buffer and
// compares whole buffers, so a copy that lands at the wrong offset or spills
// past its range is caught, not only one that loses data.
#include "conformance/checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace backplane::conformance {
namespace {

constexpr std::uint64_t kBufferSize = (std::uint64_t{1} << 20) + 37;  // 1 MiB and an odd tail
constexpr int kInFlight = 16;
constexpr int kThreads = 4;
constexpr int kThreadIterations = 40;
constexpr auto kQueryTimeout = std::chrono::seconds(20);

struct Range {
  std::uint64_t offset;
  std::uint64_t size;
};

// Odd sizes at odd offsets, plus the edges: the first byte, the last bytes,
// the whole buffer.
std::vector<Range> odd_ranges(std::uint64_t buffer_size) {
  return {{0, 1},
          {1, 3},
          {7, 4093},
          {4099, 65537},
          {131071, 509},
          {buffer_size - 13, 13},
          {buffer_size - 1, 1},
          {3, buffer_size - 3}};
}

// A buffer on `ordinal` filled with random data, and its host-side model.
std::pair<Buffer, std::vector<std::uint8_t>> filled_buffer(Context& context, int ordinal, std::uint64_t size) {
  Buffer buffer = context.allocate(ordinal, size);
  std::vector<std::uint8_t> model = context.random_bytes(static_cast<std::size_t>(size));
  context.write(buffer, 0, model.data(), size);
  return {std::move(buffer), std::move(model)};
}

void splice(std::vector<std::uint8_t>& model, std::uint64_t offset, const std::uint8_t* data, std::uint64_t size) {
  std::memcpy(model.data() + offset, data, static_cast<std::size_t>(size));
}

std::string range_text(const Range& range) { return fmt::format("{} bytes at offset {}", range.size, range.offset); }

// A device-to-device check between `from` and `to` (ordinals, may be equal).
std::string device_to_device(Context& context, int from, int to) {
  auto [source, source_model] = filled_buffer(context, from, kBufferSize);
  auto [destination, destination_model] = filled_buffer(context, to, kBufferSize);
  for (const Range& range : odd_ranges(kBufferSize)) {
    // Read from a different place than where it lands, to catch a copy that ignores one offset.
    const std::uint64_t source_offset = (range.offset * 7 + 11) % (kBufferSize - range.size + 1);
    context.copy(source, source_offset, destination, range.offset, range.size);
    splice(destination_model, range.offset, source_model.data() + source_offset, range.size);
    require_equal_bytes(context.read(destination, 0, kBufferSize), destination_model,
                        fmt::format("destination on {} after copying {} from {} offset {}", context.label(to),
                                    range_text(range), context.label(from), source_offset));
  }
  require_equal_bytes(context.read(source, 0, kBufferSize), source_model,
                      "the source buffer after the copies (it must not change)");
  return std::string();
}

BP_EventArgs event_args(Context& context, BP_Event* event) { return detail::event_args(context.backend, event); }

// The full event protocol on one event: query, wait, wait again, query
// (done), destroy.
void drive_event(Context& context, BP_Event* event, std::string_view what) {
  if (event == nullptr) throw CheckFailure(fmt::format("{} returned success but no event", what));
  BP_EventArgs query = event_args(context, event);
  query.done = -1;
  if (auto failure = context.take(context.api.event_query(&query))) {
    context.client().event_destroy(event);
    throw CheckFailure(fmt::format("event_query after {} failed: {}", what, failure->message));
  }
  if (query.done != 0 && query.done != 1) {
    context.client().event_destroy(event);
    throw CheckFailure(fmt::format("event_query after {} set done to {}; it must be 0 or 1", what, query.done));
  }
  for (const char* attempt : {"event_wait", "a second event_wait"}) {
    BP_EventArgs wait = event_args(context, event);
    if (auto failure = context.take(context.api.event_wait(&wait))) {
      context.client().event_destroy(event);
      throw CheckFailure(fmt::format("{} after {} failed: {}: {}", attempt, what, error_code_name(failure->plugin_code),
                                     failure->message));
    }
  }
  query = event_args(context, event);
  auto failure = context.take(context.api.event_query(&query));
  context.client().event_destroy(event);
  if (failure) throw CheckFailure(fmt::format("event_query after the wait failed: {}", failure->message));
  if (query.done != 1) throw CheckFailure(fmt::format("event_query after event_wait says done = {}", query.done));
}

BP_Event* submit_to_device(Context& context, const Buffer& destination, std::uint64_t offset, const void* source,
                           std::uint64_t size) {
  auto submitted = context.client().copy_to_device_async(destination.get(), offset, source, size);
  context.require_ok(submitted.status(), fmt::format("copy_to_device_async of {} bytes at offset {}", size, offset));
  if (*submitted == nullptr) throw CheckFailure("copy_to_device_async returned success but no event");
  return *submitted;
}

BP_Event* submit_to_host(Context& context, const Buffer& source, std::uint64_t offset, void* destination,
                         std::uint64_t size) {
  auto submitted = context.client().copy_to_host_async(source.get(), offset, destination, size);
  context.require_ok(submitted.status(), fmt::format("copy_to_host_async of {} bytes at offset {}", size, offset));
  if (*submitted == nullptr) throw CheckFailure("copy_to_host_async returned success but no event");
  return *submitted;
}

}  // namespace

void check_copies(Context& context) {
  context.check("copies: host->device->host, odd sizes at odd offsets", [&] {
    context.require_devices();
    auto [buffer, model] = filled_buffer(context, 0, kBufferSize);
    require_equal_bytes(context.read(buffer, 0, kBufferSize), model, "the whole buffer after the first write");
    for (const Range& range : odd_ranges(kBufferSize)) {
      const auto data = context.random_bytes(static_cast<std::size_t>(range.size));
      context.write(buffer, range.offset, data.data(), range.size);
      splice(model, range.offset, data.data(), range.size);
      require_equal_bytes(context.read(buffer, 0, kBufferSize), model,
                          fmt::format("the whole buffer after writing {}", range_text(range)));
      const std::uint64_t read_offset = (range.offset * 5 + 3) % (kBufferSize - range.size + 1);
      std::vector<std::uint8_t> expected(model.begin() + static_cast<std::ptrdiff_t>(read_offset),
                                         model.begin() + static_cast<std::ptrdiff_t>(read_offset + range.size));
      require_equal_bytes(context.read(buffer, read_offset, range.size), expected,
                          fmt::format("copy_to_host of {} bytes at offset {}", range.size, read_offset));
    }
    return fmt::format("{} ranges in a {}-byte buffer", odd_ranges(kBufferSize).size(), kBufferSize);
  });
  context.check("copies: device->device on one device, odd sizes at odd offsets", [&] {
    context.require_devices();
    return device_to_device(context, 0, 0);
  });
  context.check("copies: device->device within one buffer, disjoint ranges", [&] {
    context.require_devices();
    auto [buffer, model] = filled_buffer(context, 0, 8192 + 5);
    context.copy(buffer, 3, buffer, 4100, 4001);
    splice(model, 4100, std::vector<std::uint8_t>(model.begin() + 3, model.begin() + 4004).data(), 4001);
    require_equal_bytes(context.read(buffer, 0, buffer.size()), model, "the buffer after copying 4001 bytes 3 -> 4100");
    return std::string();
  });
  context.check("copies: device->device between devices", [&] {
    context.require_devices();
    if (context.device_count() < 2) throw NotApplicable("the backend has one device");
    const int last = context.device_count() - 1;
    device_to_device(context, 0, last);
    device_to_device(context, last, 0);
    return fmt::format("{} <-> {}", context.label(0), context.label(last));
  });
  context.check("copies: a caller's 1.2 structs, without `timed`, are accepted", [&] {
    context.require_devices();
    // What a core of ABI 1.0 to 1.2 passes: each copy struct ends at `event`.
    // A plugin that checks struct_size against sizeof() of a newer header
    // refuses every copy of that core.
    auto [buffer, model] = filled_buffer(context, 0, 64);
    const auto data = context.random_bytes(16);
    auto write = detail::copy_to_device_args(context.backend, buffer.get(), 8, data.data(), 16);
    write.struct_size = BP_COPY_TO_DEVICE_ARGS_SIZE_1_0;
    context.require_ok(context.api.copy_to_device(&write),
                       fmt::format("copy_to_device with struct_size {}", write.struct_size));
    splice(model, 8, data.data(), 16);
    std::vector<std::uint8_t> back(64);
    auto read = detail::copy_to_host_args(context.backend, buffer.get(), 0, back.data(), 64);
    read.struct_size = BP_COPY_TO_HOST_ARGS_SIZE_1_0;
    context.require_ok(context.api.copy_to_host(&read),
                       fmt::format("copy_to_host with struct_size {}", read.struct_size));
    require_equal_bytes(back, model, "the buffer written and read with 1.2 structs");
    auto copy = detail::copy_device_to_device_args(context.backend, buffer.get(), 0, buffer.get(), 32, 16);
    copy.struct_size = BP_COPY_DEVICE_TO_DEVICE_ARGS_SIZE_1_0;
    context.require_ok(context.api.copy_device_to_device(&copy),
                       fmt::format("copy_device_to_device with struct_size {}", copy.struct_size));
    return std::string();
  });
  context.check("copies: ranges ending exactly at the buffer end, size 0 at the end", [&] {
    context.require_devices();
    auto [buffer, model] = filled_buffer(context, 0, 1000);
    const auto data = context.random_bytes(17);
    context.write(buffer, 1000 - 17, data.data(), 17);
    splice(model, 1000 - 17, data.data(), 17);
    context.write(buffer, 1000, data.data(), 0);
    context.read(buffer, 1000, 0);
    context.copy(buffer, 1000, buffer, 0, 0);
    require_equal_bytes(context.read(buffer, 0, 1000), model, "the buffer after writes at its end");
    return std::string();
  });
}

void check_async(Context& context) {
  context.check("async: copy_to_device_async with event query/wait/destroy", [&] {
    context.require_devices();
    auto [buffer, model] = filled_buffer(context, 0, kBufferSize);
    const auto data = context.random_bytes(65537);
    drive_event(context, submit_to_device(context, buffer, 4097, data.data(), data.size()), "copy_to_device_async");
    splice(model, 4097, data.data(), data.size());
    require_equal_bytes(context.read(buffer, 0, kBufferSize), model, "the buffer after the async write");
    return std::string();
  });
  context.check("async: copy_to_host_async with event query/wait/destroy", [&] {
    context.require_devices();
    auto [buffer, model] = filled_buffer(context, 0, kBufferSize);
    std::vector<std::uint8_t> host(65539, 0);
    drive_event(context, submit_to_host(context, buffer, 12345, host.data(), host.size()), "copy_to_host_async");
    require_equal_bytes(host, std::vector<std::uint8_t>(model.begin() + 12345, model.begin() + 12345 + 65539),
                        "the host memory after the async read");
    return std::string();
  });
  context.check("async: copy_device_to_device_async with event query/wait/destroy", [&] {
    context.require_devices();
    const int last = context.device_count() - 1;
    auto [source, source_model] = filled_buffer(context, 0, kBufferSize);
    auto [destination, destination_model] = filled_buffer(context, last, kBufferSize);
    auto submitted = context.client().copy_device_to_device_async(source.get(), 101, destination.get(), 7, 100003);
    context.require_ok(submitted.status(), "copy_device_to_device_async");
    drive_event(context, *submitted, "copy_device_to_device_async");
    splice(destination_model, 7, source_model.data() + 101, 100003);
    require_equal_bytes(context.read(destination, 0, kBufferSize), destination_model,
                        fmt::format("the destination on {} after the async copy", context.label(last)));
    return fmt::format("{} -> {}", context.label(0), context.label(last));
  });
  context.check("async: 16 copies in flight, waited in reverse order", [&] {
    context.require_devices();
    auto [buffer, model] = filled_buffer(context, 0, kBufferSize);
    const std::uint64_t slice = kBufferSize / kInFlight;
    std::vector<std::vector<std::uint8_t>> pieces;
    std::vector<BP_Event*> events;
    for (int index = 0; index < kInFlight; ++index) {
      pieces.push_back(context.random_bytes(static_cast<std::size_t>(slice - 3)));
      const std::uint64_t offset = slice * static_cast<std::uint64_t>(index) + 1;
      splice(model, offset, pieces.back().data(), pieces.back().size());
      try {
        events.push_back(submit_to_device(context, buffer, offset, pieces.back().data(), pieces.back().size()));
      } catch (...) {
        for (BP_Event* event : events) context.client().event_destroy(event);
        throw;
      }
    }
    std::string failure;
    for (auto event = events.rbegin(); event != events.rend(); ++event) {
      try {
        context.finish(*event, "copy_to_device_async");
      } catch (const CheckFailure& error) {
        if (failure.empty()) failure = error.what();
      }
    }
    if (!failure.empty()) throw CheckFailure(failure);
    require_equal_bytes(context.read(buffer, 0, kBufferSize), model, "the buffer after 16 async writes");
    return std::string();
  });
  context.check("async: event_query reaches done without event_wait", [&] {
    context.require_devices();
    Buffer buffer = context.allocate(0, 1 << 16);
    const auto data = context.random_bytes(1 << 16);
    BP_Event* event = submit_to_device(context, buffer, 0, data.data(), data.size());
    const auto start = std::chrono::steady_clock::now();
    int polls = 0;
    for (;;) {
      BP_EventArgs query = event_args(context, event);
      if (auto failure = context.take(context.api.event_query(&query))) {
        context.client().event_destroy(event);
        throw CheckFailure(fmt::format("event_query failed: {}", failure->message));
      }
      ++polls;
      if (query.done == 1) break;
      if (std::chrono::steady_clock::now() - start > kQueryTimeout) {
        context.client().event_destroy(event);
        throw CheckFailure("event_query still says not done after 20 s: the copy must progress without event_wait");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    context.client().event_destroy(event);
    require_equal_bytes(context.read(buffer, 0, data.size()), data, "the buffer once the event is done");
    return fmt::format("done after {} poll(s)", polls);
  });
  context.check("async: event_destroy waits for the copy to complete", [&] {
    context.require_devices();
    auto [buffer, model] = filled_buffer(context, 0, kBufferSize);
    std::vector<std::uint8_t> host(static_cast<std::size_t>(kBufferSize), 0);
    context.client().event_destroy(submit_to_host(context, buffer, 0, host.data(), host.size()));
    require_equal_bytes(host, model, "the host memory right after event_destroy (no event_wait)");
    return std::string();
  });
}

void check_threads(Context& context) {
  context.check("threads: 4 threads allocating and copying at once", [&] {
    context.require_devices();
    std::mutex mutex;
    std::string first_failure;
    std::vector<std::thread> threads;
    for (int thread = 0; thread < kThreads; ++thread) {
      threads.emplace_back([&, thread] {
        std::mt19937_64 generator(context.options.seed + static_cast<std::uint64_t>(thread) + 1);
        try {
          for (int iteration = 0; iteration < kThreadIterations; ++iteration) {
            const int ordinal = (thread + iteration) % context.device_count();
            const std::uint64_t size = 1 + generator() % 20000;
            Buffer buffer = context.allocate(ordinal, size);
            const auto data = context.random_bytes(static_cast<std::size_t>(size), generator);
            context.write(buffer, 0, data.data(), size);
            require_equal_bytes(context.read(buffer, 0, size), data,
                                fmt::format("thread {} iteration {}: {} bytes read back", thread, iteration, size));
            buffer.free_checked();
          }
        } catch (const std::exception& error) {
          const std::lock_guard lock(mutex);
          if (first_failure.empty()) first_failure = error.what();
        }
      });
    }
    for (auto& thread : threads) thread.join();
    if (!first_failure.empty()) throw CheckFailure(first_failure);
    return fmt::format("{} threads x {} round trips", kThreads, kThreadIterations);
  });
}

}  // namespace backplane::conformance
