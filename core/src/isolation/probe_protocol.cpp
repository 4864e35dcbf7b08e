#include "isolation/probe_protocol.hpp"

#include "loader/plugin_limits.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <string>

namespace backplane::detail::isolation {
namespace {

bool write_all(int fd, const char* data, std::size_t size) noexcept {
  while (size > 0) {
    ssize_t written = ::write(fd, data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    data += written;
    size -= static_cast<std::size_t>(written);
  }
  return true;
}

}  // namespace

bool write_record(int fd, std::string_view key, std::string_view value) noexcept {
  try {
    std::string record;
    record.reserve(key.size() + value.size() + 24);
    record.append(key).append(" ").append(std::to_string(value.size())).append("\n");
    record.append(value).append("\n");
    return write_all(fd, record.data(), record.size());
  } catch (...) {  // no memory for the record: the parent sees it cut short
    return false;
  }
}

void RecordReader::feed(std::string_view bytes) {
  received_ += bytes.size();
  if (done_ || garbled_) return;
  if (received_ > kMaxResultBytes) {
    reject(bytes);
    return;
  }
  buffer_.append(bytes);
  parse();
}

void RecordReader::reject(std::string_view bytes) {
  garbled_ = true;
  constexpr std::size_t kShown = 32;
  for (const char c : bytes.substr(0, kShown)) {
    const auto byte = static_cast<unsigned char>(c);
    garbage_ += byte >= 0x20 && byte < 0x7F ? std::string(1, c) : fmt::format("\\x{:02x}", byte);
  }
  buffer_.clear();
}

void RecordReader::parse() {
  std::size_t start = 0;
  while (!done_ && !garbled_) {
    const std::size_t header_end = buffer_.find('\n', start);
    if (header_end == std::string::npos) break;
    const std::string_view header(buffer_.data() + start, header_end - start);
    const std::size_t space = header.find(' ');
    std::size_t size = 0;
    const std::string_view key = space == std::string_view::npos ? header : header.substr(0, space);
    const bool known = key == "stage" || key == "status" || key == "reason" || key == "abi" || key == "name" ||
                       key == "done" || key == "in_child" || key == "priority" || key == "capabilities" ||
                       key == "dlpack" || key == "device";
    const auto parsed = space == std::string_view::npos
                            ? std::from_chars_result{header.data(), std::errc::invalid_argument}
                            : std::from_chars(header.data() + space + 1, header.data() + header.size(), size);
    if (!known || parsed.ec != std::errc() || parsed.ptr != header.data() + header.size() || size > kMaxResultBytes) {
      reject(std::string_view(buffer_).substr(start));  // not our protocol: the child's verdict is lost
      return;
    }
    const std::size_t value_start = header_end + 1;
    if (buffer_.size() < value_start + size + 1) break;  // the rest has not arrived
    if (buffer_[value_start + size] != '\n') {
      reject(std::string_view(buffer_).substr(start));
      return;
    }
    std::string value = buffer_.substr(value_start, size);
    if (key == "status" && value != "0" && value != "1" && value != "2" && value != "3" && value != "4" &&
        value != "5") {
      reject(std::string_view(buffer_).substr(start));
      return;
    }
    if (key == "device") {
      if (devices_.size() >= static_cast<std::size_t>(kMaxPluginDevices)) {
        reject(std::string_view(buffer_).substr(start));
        return;
      }
      devices_.push_back(std::move(value));
    } else {
      values_[std::string(key)] = std::move(value);
    }
    if (key == "done") done_ = true;
    start = value_start + size + 1;
  }
  buffer_.erase(0, start);
}

std::optional<std::string> RecordReader::get(std::string_view key) const {
  if (auto found = values_.find(key); found != values_.end()) return found->second;
  return std::nullopt;
}

namespace {

void put_field(std::string& out, std::string_view field) {
  out.append(std::to_string(field.size())).append(":").append(field).append(",");
}

// Reads netstrings from a `device` record, each within `limit` bytes.
class FieldReader {
 public:
  explicit FieldReader(std::string_view text) : rest_(text) {}

  std::optional<std::string_view> next(std::size_t limit, std::string_view what, std::string& problem) {
    const std::size_t colon = rest_.find(':');
    std::size_t size = 0;
    const auto parsed =
        std::from_chars(rest_.data(), rest_.data() + (colon == std::string_view::npos ? 0 : colon), size);
    if (colon == std::string_view::npos || colon == 0 || parsed.ec != std::errc() ||
        parsed.ptr != rest_.data() + colon || size > rest_.size() - colon - 1 || rest_.size() - colon - 1 - size < 1 ||
        rest_[colon + 1 + size] != ',') {
      problem = fmt::format("the {} is not a netstring", what);
      return std::nullopt;
    }
    if (size > limit) {
      problem = fmt::format("the {} has {} bytes, more than {}", what, size, limit);
      return std::nullopt;
    }
    const std::string_view field = rest_.substr(colon + 1, size);
    rest_.remove_prefix(colon + 2 + size);
    return field;
  }

  std::optional<std::uint64_t> number(std::uint64_t limit, std::string_view what, std::string& problem) {
    const auto field = next(20, what, problem);
    if (!field) return std::nullopt;
    std::uint64_t value = 0;
    const auto parsed = std::from_chars(field->data(), field->data() + field->size(), value);
    if (field->empty() || parsed.ec != std::errc() || parsed.ptr != field->data() + field->size() || value > limit) {
      problem = fmt::format("the {} '{}' is not a number from 0 to {}", what, *field, limit);
      return std::nullopt;
    }
    return value;
  }

  bool finished() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

}  // namespace

std::string encode_device(const DeviceInfo& device) {
  std::string out;
  put_field(out, device.name);
  put_field(out, std::to_string(static_cast<int>(device.kind)));
  put_field(out, std::to_string(device.memory_total));
  put_field(out, device.memory_free ? std::to_string(*device.memory_free) : std::string());
  put_field(out, std::to_string(device.attributes.size()));
  for (const auto& [key, value] : device.attributes) {
    put_field(out, key);
    put_field(out, value);
  }
  put_field(out, std::to_string(device.memory_kinds.size()));
  for (const auto& kind : device.memory_kinds) put_field(out, kind);
  return out;
}

std::optional<DeviceInfo> decode_device(std::string_view text, std::string& problem) {
  FieldReader fields(text);
  DeviceInfo device;
  const auto name = fields.next(kMaxPluginTextSize, "device name", problem);
  if (!name) return std::nullopt;
  device.name = std::string(*name);
  const auto kind = fields.number(static_cast<std::uint64_t>(DeviceKind::kAccelerator), "device kind", problem);
  if (!kind) return std::nullopt;
  device.kind = static_cast<DeviceKind>(*kind);
  const auto total = fields.number(UINT64_MAX, "memory_total", problem);
  if (!total) return std::nullopt;
  device.memory_total = *total;
  const auto free = fields.next(20, "memory_free", problem);
  if (!free) return std::nullopt;
  if (!free->empty()) {
    std::uint64_t value = 0;
    const auto parsed = std::from_chars(free->data(), free->data() + free->size(), value);
    if (parsed.ec != std::errc() || parsed.ptr != free->data() + free->size()) {
      problem = fmt::format("the memory_free '{}' is not a number", *free);
      return std::nullopt;
    }
    device.memory_free = value;
  }
  const auto attributes = fields.number(kMaxDeviceAttributes, "attribute count", problem);
  if (!attributes) return std::nullopt;
  for (std::uint64_t index = 0; index < *attributes; ++index) {
    const auto key = fields.next(kMaxPluginTextSize, "attribute key", problem);
    if (!key) return std::nullopt;
    const auto value = fields.next(kMaxPluginTextSize, "attribute value", problem);
    if (!value) return std::nullopt;
    device.attributes.emplace_back(std::string(*key), std::string(*value));
  }
  const auto memories = fields.number(kMaxDeviceMemories, "memory count", problem);
  if (!memories) return std::nullopt;
  for (std::uint64_t index = 0; index < *memories; ++index) {
    const auto memory = fields.next(kMaxPluginTextSize, "memory kind", problem);
    if (!memory) return std::nullopt;
    device.memory_kinds.emplace_back(*memory);
  }
  if (!fields.finished()) {
    problem = "bytes follow the last memory kind";
    return std::nullopt;
  }
  return device;
}

}  // namespace backplane::detail::isolation
