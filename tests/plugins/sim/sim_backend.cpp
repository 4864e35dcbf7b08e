// The simulated accelerator's hooks. The SDK has checked every handle,
// ordinal, range and pointer before a hook runs.
//
// Every copy becomes a Transfer (two byte ranges plus what keeps them alive);
// sync copies run it on the caller's thread, async copies queue it on the
// device's CopyWorker and hand back an event that the worker completes.
#include "sim_backend.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <future>
#include <iterator>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace backplane::sim {
namespace {

constexpr std::uint64_t kMaxCopyDelayUs = 60'000'000;
constexpr std::int64_t kMaxPriority = 1000;
constexpr std::size_t kPinnedAlignment = 64;

[[noreturn]] void fail(BP_ErrorCode code, const std::string& message) { throw sdk::Failure(code, "sim: " + message); }

std::shared_ptr<std::byte> allocate_storage(std::uint64_t size) {
  const auto bytes = static_cast<std::size_t>(std::max<std::uint64_t>(size, 1));
  auto* data = static_cast<std::byte*>(::operator new (bytes, std::align_val_t{kPinnedAlignment}));
  return std::shared_ptr<std::byte>(
      data, [](std::byte* pointer) { ::operator delete (pointer, std::align_val_t{kPinnedAlignment}); });
}

std::string on_device(std::string_view call, std::uint64_t size, std::int32_t ordinal) {
  return std::string(call) + " of " + sdk::format_bytes(size) + " on sim:" + std::to_string(ordinal);
}

}  // namespace

// One copy, resolved and checked: `size` bytes from `from` to `to`.
struct SimBackend::Transfer {
  std::shared_ptr<std::byte> keep_source;       // device/pinned storage, if any
  std::shared_ptr<std::byte> keep_destination;  // idem
  const std::byte* from = nullptr;
  std::byte* to = nullptr;
  std::uint64_t size = 0;
  std::uint64_t number = 0;  // 1-based copy count of the backend
  bool inject_failure = false;

  std::string failure_message(std::uint64_t fail_copy_at) const {
    return "sim: copy #" + std::to_string(number) + " of " + std::to_string(size) +
           " bytes failed: injected device fault (fail_copy_at = " + std::to_string(fail_copy_at) + ")";
  }

  void move_bytes() const {
    if (size > 0) std::memmove(to, from, static_cast<std::size_t>(size));
  }
};

SimBackend::SimBackend(const Options& options)
    : options_(options),
      in_use_(static_cast<std::size_t>(options.devices)),
      engine_free_at_(static_cast<std::size_t>(options.devices)) {
  for (std::int32_t device = 0; device < options.devices; ++device) workers_.push_back(std::make_unique<CopyWorker>());
}

SimBackend::~SimBackend() {
  for (const auto& worker : workers_) worker->stop();
}

void SimBackend::throttle(std::int32_t engine, std::uint64_t size) {
  const std::uint64_t cap = options_.copy_bytes_per_second;
  if (cap == 0) return;
  using Clock = std::chrono::steady_clock;
  const auto takes = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(static_cast<double>(size) / static_cast<double>(cap)));
  Clock::time_point done;
  {
    const std::lock_guard lock(throttle_mutex_);
    Clock::time_point& free_at = engine_free_at_[static_cast<std::size_t>(engine)];
    free_at = std::max(free_at, Clock::now()) + takes;
    done = free_at;
  }
  std::this_thread::sleep_until(done);
}

std::unique_ptr<SimBackend> SimBackend::create(const sdk::Options& options) {
  options.allow_only({"devices", "memory_limit", "fail_alloc_at", "fail_copy_at", "copy_delay_us",
                      "copy_bytes_per_second", "probe_priority", "report_free", "no_device_to_device",
                      "stated_dlpack_device_type"});
  Options parsed;
  parsed.devices = static_cast<std::int32_t>(options.integer("devices", 1, 1, 64));
  parsed.memory_limit = options.unsigned_integer("memory_limit", parsed.memory_limit, 0, UINT64_MAX);
  parsed.fail_alloc_at = options.unsigned_integer("fail_alloc_at", 0, 0, UINT64_MAX);
  parsed.fail_copy_at = options.unsigned_integer("fail_copy_at", 0, 0, UINT64_MAX);
  parsed.copy_delay_us = options.unsigned_integer("copy_delay_us", 0, 0, kMaxCopyDelayUs);
  parsed.copy_bytes_per_second = options.unsigned_integer("copy_bytes_per_second", 0, 0, INT64_MAX);
  parsed.report_free = options.unsigned_integer("report_free", 1, 0, 1) != 0;
  parsed.no_device_to_device = options.unsigned_integer("no_device_to_device", 0, 0, 1) != 0;
  // Signed, unlike the SDK's integers: a wrong type is what this option is for.
  if (const std::string_view* text = options.find("stated_dlpack_device_type")) {
    std::int32_t value = 0;
    const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (error != std::errc{} || end != text->data() + text->size() || value < -1000 || value > 1000) {
      throw sdk::Failure(BP_ERROR_INVALID_ARGUMENT, "sim: option stated_dlpack_device_type = '" + std::string(*text) +
                                                        "' is invalid: expected an integer from -1000 to 1000");
    }
    parsed.dlpack_device_type = value;
  }
  if (options.find("probe_priority") != nullptr) {
    parsed.priority = static_cast<std::int32_t>(options.integer("probe_priority", 0, 0, kMaxPriority));
  }
  return std::make_unique<SimBackend>(parsed);
}

sdk::Probe SimBackend::probe() {
  return {.available = true,
          .reason = "simulated accelerator: " + std::to_string(options_.devices) + " device(s) of " +
                    sdk::format_bytes(options_.memory_limit),
          .priority = options_.priority};
}

sdk::DeviceDescription SimBackend::describe(std::int32_t ordinal) {
  return {"Simulated accelerator " + std::to_string(ordinal),
          BP_DEVICE_KIND_ACCELERATOR,
          {{"simulated", "true"},
           {"memory_limit", std::to_string(options_.memory_limit)},
           {"copy_delay_us", std::to_string(options_.copy_delay_us)},
           {"copy_bytes_per_second", std::to_string(options_.copy_bytes_per_second)}}};
}

sdk::MemoryFigures SimBackend::memory(std::int32_t ordinal) {
  const std::lock_guard lock(mutex_);
  if (!options_.report_free) return {options_.memory_limit, std::nullopt};
  return {options_.memory_limit, options_.memory_limit - in_use_[static_cast<std::size_t>(ordinal)]};
}

// --------------------------------------------------------------- memory --

std::unique_ptr<SimBackend::Buffer> SimBackend::allocate(std::int32_t ordinal, BP_MemoryKind kind, std::uint64_t size) {
  const std::uint64_t number = ++allocations_made_;
  const std::string where = on_device("memory_allocate", size, ordinal);
  if (number == options_.fail_alloc_at) {
    fail(BP_ERROR_OUT_OF_MEMORY, where + " failed: injected out of memory at allocation #" + std::to_string(number) +
                                     " (fail_alloc_at = " + std::to_string(options_.fail_alloc_at) + ")");
  }
  const bool device = kind == BP_MEMORY_DEVICE;
  std::uint64_t& in_use = in_use_[static_cast<std::size_t>(ordinal)];
  if (device) {  // reserve first, so two threads cannot both take the last bytes
    const std::lock_guard lock(mutex_);
    const std::uint64_t free = options_.memory_limit - in_use;
    if (size > free) {
      fail(BP_ERROR_OUT_OF_MEMORY, where + " failed: out of memory (" + sdk::format_bytes(free) + " free of " +
                                       sdk::format_bytes(options_.memory_limit) + ")");
    }
    in_use += size;
  }
  try {
    std::shared_ptr<std::byte> storage = allocate_storage(size);
    void* address = storage.get();  // device memory: an address the core never dereferences
    std::unique_ptr<Buffer> buffer(new Buffer{{ordinal, kind, size, address}, this, std::move(storage), false});
    if (device) {
      const std::lock_guard lock(mutex_);
      allocations_.emplace(reinterpret_cast<std::uintptr_t>(buffer->address), Allocation{size, ordinal});
    }
    return buffer;
  } catch (...) {
    if (device) {
      const std::lock_guard lock(mutex_);
      in_use -= size;
    }
    throw;
  }
}

// Like cuPointerGetAttribute: the address must lie in a live device
// allocation of that device, and the range inside that allocation.
std::unique_ptr<SimBackend::Buffer> SimBackend::wrap(std::int32_t ordinal, void* address, std::uint64_t size) {
  std::unique_ptr<Buffer> buffer(new Buffer{{ordinal, BP_MEMORY_DEVICE, size, address}, this, nullptr, true});
  if (address == nullptr) return buffer;
  const std::string where = on_device("memory_wrap", size, ordinal);
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  const std::lock_guard lock(mutex_);
  auto home = allocations_.upper_bound(at);
  if (home == allocations_.begin() || at - std::prev(home)->first > std::prev(home)->second.size) {
    fail(BP_ERROR_INVALID_ARGUMENT, where + ": the address is not in a live device allocation of this backend");
  }
  --home;
  if (home->second.ordinal != ordinal) {
    fail(BP_ERROR_INVALID_ARGUMENT, where + ": the address is memory of sim:" + std::to_string(home->second.ordinal));
  }
  sdk::check_inside_allocation("sim: " + where, at - home->first, size, home->second.size);
  // Does not own the bytes, as a device would not: once their owner frees
  // them, a copy still using this handle reads freed memory (and the address
  // sanitizer says so). Freeing this handle waits for the queue instead.
  buffer->storage = std::shared_ptr<std::byte>(std::shared_ptr<std::byte>(), static_cast<std::byte*>(address));
  return buffer;
}

SimBackend::Buffer::~Buffer() {
  if (wrapped) {
    // Wrapped memory goes back to its owner once the handle is gone: nothing
    // queued may still use it then.
    backend->drain_all();
    return;
  }
  if (kind != BP_MEMORY_DEVICE) return;
  const std::lock_guard lock(backend->mutex_);
  backend->in_use_[static_cast<std::size_t>(ordinal)] -= size;
  backend->allocations_.erase(reinterpret_cast<std::uintptr_t>(address));
}  // our own storage lives on while a queued copy holds it

// --------------------------------------------------------------- copies --

std::unique_ptr<SimBackend::Event> SimBackend::copy_to_device(Buffer& destination, std::uint64_t offset,
                                                              const void* source, std::uint64_t size, sdk::Mode mode) {
  return run(
      {nullptr, destination.storage, static_cast<const std::byte*>(source), destination.storage.get() + offset, size},
      destination.ordinal, mode, destination.ordinal);
}

std::unique_ptr<SimBackend::Event> SimBackend::copy_to_host(Buffer& source, std::uint64_t offset, void* destination,
                                                            std::uint64_t size, sdk::Mode mode) {
  return run({source.storage, nullptr, source.storage.get() + offset, static_cast<std::byte*>(destination), size},
             source.ordinal, mode, source.ordinal);
}

std::unique_ptr<SimBackend::Event> SimBackend::copy_device_to_device(Buffer& source, std::uint64_t source_offset,
                                                                     Buffer& destination,
                                                                     std::uint64_t destination_offset,
                                                                     std::uint64_t size, sdk::Mode mode) {
  if (options_.no_device_to_device) {
    throw sdk::Failure(BP_ERROR_UNSUPPORTED,
                       "sim: copy_device_to_device called, but the probe stated BP_CAPABILITY_NO_DEVICE_TO_DEVICE");
  }
  return run({source.storage, destination.storage, source.storage.get() + source_offset,
              destination.storage.get() + destination_offset, size},
             destination.ordinal, mode, source.ordinal);
}

std::unique_ptr<SimBackend::Event> SimBackend::run(Transfer transfer, std::int32_t engine, sdk::Mode mode,
                                                   std::int32_t also_after) {
  transfer.number = ++copies_;
  transfer.inject_failure = transfer.number == options_.fail_copy_at;
  if (mode == sdk::Mode::kBlocking) {
    if (transfer.inject_failure) throw sdk::Failure(BP_ERROR_DEVICE, transfer.failure_message(options_.fail_copy_at));
    throttle(engine, transfer.size);
    transfer.move_bytes();
    return nullptr;
  }
  auto event = std::make_unique<Event>();
  event->backend = this;
  event->completion = std::make_shared<Completion>();
  // A copy between two devices runs on the destination's engine once the
  // source's engine has run what was queued there before it: every copy
  // stays after those submitted earlier on either device, as with one queue.
  std::shared_future<void> source_done;
  if (also_after != engine) {
    auto fence = std::make_shared<std::promise<void>>();
    source_done = fence->get_future().share();
    workers_[static_cast<std::size_t>(also_after)]->submit([fence] { fence->set_value(); });
  }
  try {
    workers_[static_cast<std::size_t>(engine)]->submit(
        [this, engine, source_done, completion = event->completion, transfer = std::move(transfer)] {
          if (source_done.valid()) source_done.wait();
          throttle(engine, transfer.size);
          complete(*completion, transfer);
        });
  } catch (...) {
    event->completion->done = true;  // never queued: nothing for ~Event to wait for
    throw;
  }
  return event;
}

void SimBackend::complete(Completion& completion, const Transfer& transfer) noexcept {
  if (options_.copy_delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(options_.copy_delay_us));
  BP_ErrorCode code = 0;
  std::string message;
  if (transfer.inject_failure) {
    code = BP_ERROR_DEVICE;
    try {
      message = transfer.failure_message(options_.fail_copy_at);
    } catch (...) {
      message.clear();  // the code alone still reports the failure
    }
  } else {
    transfer.move_bytes();
  }
  {
    const std::lock_guard lock(mutex_);
    completion.done = true;
    completion.code = code;
    completion.message = std::move(message);
  }
  completed_.notify_all();
}

// --------------------------------------------------------------- events --

void SimBackend::wait_until_done(const Completion& completion) {
  std::unique_lock lock(mutex_);
  completed_.wait(lock, [&] { return completion.done; });
}

void SimBackend::wait(Event& event) {
  wait_until_done(*event.completion);
  if (event.completion->code != 0) throw sdk::Failure(event.completion->code, event.completion->message);
}

bool SimBackend::query(Event& event) {
  const std::lock_guard lock(mutex_);
  return event.completion->done;
}

SimBackend::Event::~Event() { backend->wait_until_done(*completion); }

}  // namespace backplane::sim
