#include "conformance/context.hpp"

#include "loader/plugin_limits.hpp"
#include "util/caught_error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <utility>

namespace backplane::conformance {
using detail::caught_error;
using detail::kMaxPluginTextSize;
using detail::plugin_text;
namespace {

constexpr std::size_t kMalformedKept = 4;

}  // namespace

std::string_view to_string(Outcome outcome) noexcept {
  switch (outcome) {
    case Outcome::kPass: return "pass";
    case Outcome::kFail: return "FAIL";
    case Outcome::kNotApplicable: return "n/a";
  }
  return "?";
}

std::size_t Report::count(Outcome outcome) const noexcept {
  return static_cast<std::size_t>(
      std::count_if(checks.begin(), checks.end(), [&](const CheckResult& check) { return check.outcome == outcome; }));
}

std::string error_code_name(BP_ErrorCode code) {
  switch (code) {
    case BP_ERROR_INVALID_ARGUMENT: return "BP_ERROR_INVALID_ARGUMENT";
    case BP_ERROR_OUT_OF_MEMORY: return "BP_ERROR_OUT_OF_MEMORY";
    case BP_ERROR_UNAVAILABLE: return "BP_ERROR_UNAVAILABLE";
    case BP_ERROR_UNSUPPORTED: return "BP_ERROR_UNSUPPORTED";
    case BP_ERROR_DEVICE: return "BP_ERROR_DEVICE";
    case BP_ERROR_INTERNAL: return "BP_ERROR_INTERNAL";
    case BP_ERROR_OUT_OF_RANGE: return "BP_ERROR_OUT_OF_RANGE";
    default: return fmt::format("code {}", code);
  }
}

// ---------------------------------------------------------------- Buffer --

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    context_ = std::exchange(other.context_, nullptr);
    handle_ = std::exchange(other.handle_, nullptr);
    address_ = std::exchange(other.address_, nullptr);
    size_ = other.size_;
    ordinal_ = other.ordinal_;
  }
  return *this;
}

void Buffer::reset() noexcept {
  if (context_ == nullptr || handle_ == nullptr) return;
  try {
    (void)context_->client().memory_free(std::exchange(handle_, nullptr));
  } catch (...) {  // only bad_alloc while copying a message: nothing to do in a destructor
  }
}

void Buffer::free_checked() {
  if (context_ == nullptr || handle_ == nullptr) return;
  context_->require_ok(context_->client().memory_free(std::exchange(handle_, nullptr)),
                       fmt::format("memory_free of a {}-byte buffer on {}", size_, context_->label(ordinal_)));
}

// --------------------------------------------------------------- Context --

Context::Context(const BP_PluginApi& api_table, const Options& run_options, Report& run_report)
    : api(api_table), options(run_options), report(run_report), random(run_options.seed) {}

void Context::record(CheckResult result) {
  report.checks.push_back(result);
  if (options.on_check) options.on_check(report.checks.back());
}

void Context::check(const std::string& name, const std::function<std::string()>& body) {
  if (options.on_start) options.on_start(name);
  CheckResult result{name, Outcome::kPass, {}};
  try {
    result.detail = body();
  } catch (const NotApplicable& reason) {
    result.outcome = Outcome::kNotApplicable;
    result.detail = reason.what();
  } catch (const CheckFailure& failure) {
    result.outcome = Outcome::kFail;
    result.detail = failure.what();
  } catch (const std::bad_alloc&) {
    throw;
  } catch (...) {
    result.outcome = Outcome::kFail;
    result.detail = fmt::format("the suite hit an unexpected error: {}", caught_error().message);
  }
  record(std::move(result));
}

void Context::not_applicable(const std::string& name, const std::string& reason) {
  record({name, Outcome::kNotApplicable, reason});
}

void Context::inspect(const BP_Error& error) {
  std::vector<std::string> problems;
  if (error.struct_size < sizeof(BP_Error)) {
    problems.push_back(
        fmt::format("struct_size {} is smaller than BP_Error ({})", error.struct_size, sizeof(BP_Error)));
  }
  std::string_view message;
  if (error.message_size > kMaxPluginTextSize) {
    // Read only up to the bound (and a NUL): the size is not to be trusted.
    problems.push_back(fmt::format("message_size {} is more than {}", error.message_size, kMaxPluginTextSize));
    message = plugin_text(error.message, kMaxPluginTextSize);
  } else {
    message = plugin_text(error.message, error.message_size);
  }
  if (error.code < BP_ERROR_INVALID_ARGUMENT || (error.code > BP_ERROR_OUT_OF_RANGE && api.abi_minor <= BP_ABI_MINOR)) {
    problems.push_back(fmt::format("code {} is not a BP_ErrorCode", error.code));
  }
  if (error.message == nullptr && error.message_size != 0) {
    problems.push_back(fmt::format("message is NULL with message_size {}", error.message_size));
  } else if (message.empty()) {
    problems.push_back("the message is empty");
  }
  if (error.destroy == nullptr) problems.push_back("destroy is NULL (the error cannot be released)");
  const std::lock_guard lock(errors_mutex_);
  ++errors_seen_;
  if (!problems.empty() && malformed_.size() < kMalformedKept) {
    malformed_.push_back(fmt::format("error \"{}\": {}", message.substr(0, 80), fmt::join(problems, ", ")));
  }
}

void Context::require_ok(const PluginStatus& status, std::string_view what) {
  if (!status.ok()) {
    throw CheckFailure(fmt::format("{} failed: {}: {}", what, error_code_name(status.plugin_code()), status.message()));
  }
}

PluginError Context::require_error(PluginStatus status, std::string_view what, std::span<const BP_ErrorCode> allowed) {
  if (status.ok()) throw CheckFailure(fmt::format("{} returned success; it must return an error", what));
  PluginError failure = std::move(status).error();
  if (allowed.size() != 0 && std::find(allowed.begin(), allowed.end(), failure.plugin_code) == allowed.end()) {
    std::vector<std::string> names;
    for (BP_ErrorCode code : allowed) names.push_back(error_code_name(code));
    throw CheckFailure(fmt::format("{} failed with {} (\"{}\"); expected {}", what,
                                   error_code_name(failure.plugin_code), failure.message, fmt::join(names, " or ")));
  }
  return failure;
}

std::vector<std::string> Context::malformed_errors() const {
  const std::lock_guard lock(errors_mutex_);
  return malformed_;
}

std::size_t Context::errors_seen() const {
  const std::lock_guard lock(errors_mutex_);
  return errors_seen_;
}

void Context::require_devices() const {
  if (backend == nullptr) throw NotApplicable("no backend instance (backend_create failed)");
  if (!report.probed) throw NotApplicable("the probe failed");
  if (!report.available) throw NotApplicable(fmt::format("backend unavailable: {}", report.probe_reason));
  if (devices_failed) throw NotApplicable("the devices check failed");
  if (devices.empty()) throw NotApplicable("the backend reports no devices");
}

std::string Context::label(int ordinal) const { return fmt::format("{}:{}", report.backend_name, ordinal); }

Buffer Context::allocate(int ordinal, std::uint64_t size, BP_MemoryKind kind) {
  const char* what = kind == BP_MEMORY_PINNED_HOST ? "pinned host" : "device";
  auto allocated = client().memory_allocate(ordinal, kind, size);
  require_ok(allocated.status(),
             fmt::format("memory_allocate of {} bytes of {} memory on {}", size, what, label(ordinal)));
  const detail::BufferAllocation args = *allocated;
  if (args.buffer == nullptr) {
    throw CheckFailure(
        fmt::format("memory_allocate of {} bytes on {} returned success but no buffer", size, label(ordinal)));
  }
  return Buffer(this, args.buffer, args.address, size, ordinal);
}

void Context::write(const Buffer& buffer, std::uint64_t offset, const void* data, std::uint64_t size) {
  require_ok(client().copy_to_device(buffer.get(), offset, data, size),
             fmt::format("copy_to_device of {} bytes at offset {} into a {}-byte buffer on {}", size, offset,
                         buffer.size(), label(buffer.ordinal())));
}

std::vector<std::uint8_t> Context::read(const Buffer& buffer, std::uint64_t offset, std::uint64_t size) {
  std::vector<std::uint8_t> data(static_cast<std::size_t>(size));
  require_ok(client().copy_to_host(buffer.get(), offset, data.data(), size),
             fmt::format("copy_to_host of {} bytes at offset {} from a {}-byte buffer on {}", size, offset,
                         buffer.size(), label(buffer.ordinal())));
  return data;
}

void Context::copy(const Buffer& source, std::uint64_t source_offset, const Buffer& destination,
                   std::uint64_t destination_offset, std::uint64_t size) {
  require_ok(client().copy_device_to_device(source.get(), source_offset, destination.get(), destination_offset, size),
             fmt::format("copy_device_to_device of {} bytes from {} offset {} to {} offset {}", size,
                         label(source.ordinal()), source_offset, label(destination.ordinal()), destination_offset));
}

void Context::finish(BP_Event* event, std::string_view what) {
  if (event == nullptr) throw CheckFailure(fmt::format("{} returned success but no event", what));
  const detail::PluginClient calls = client();
  const PluginStatus waited = calls.event_wait(event);
  calls.event_destroy(event);
  if (!waited.ok()) {
    throw CheckFailure(fmt::format("event_wait after {} failed: {}: {}", what, error_code_name(waited.plugin_code()),
                                   waited.message()));
  }
}

std::vector<std::uint8_t> Context::random_bytes(std::size_t size) { return random_bytes(size, random); }

std::vector<std::uint8_t> Context::random_bytes(std::size_t size, std::mt19937_64& generator) {
  std::vector<std::uint8_t> bytes(size);
  std::size_t index = 0;
  while (index < size) {
    std::uint64_t word = generator();
    for (int byte = 0; byte < 8 && index < size; ++byte, word >>= 8) {
      bytes[index++] = static_cast<std::uint8_t>(word);
    }
  }
  return bytes;
}

void require_equal_bytes(const std::vector<std::uint8_t>& actual, const std::vector<std::uint8_t>& expected,
                         std::string_view what) {
  if (actual.size() != expected.size()) {
    throw CheckFailure(fmt::format("{}: {} bytes instead of {}", what, actual.size(), expected.size()));
  }
  const auto mismatch = std::mismatch(actual.begin(), actual.end(), expected.begin());
  if (mismatch.first != actual.end()) {
    const auto index = static_cast<std::size_t>(mismatch.first - actual.begin());
    const auto wrong = static_cast<std::size_t>(std::count_if(
        actual.begin(), actual.end(),
        [&, position = std::size_t{0}](std::uint8_t value) mutable { return value != expected[position++]; }));
    throw CheckFailure(fmt::format("{}: byte {} of {} is 0x{:02x}, expected 0x{:02x} ({} byte(s) differ)", what, index,
                                   actual.size(), *mismatch.first, *mismatch.second, wrong));
  }
}

}  // namespace backplane::conformance
