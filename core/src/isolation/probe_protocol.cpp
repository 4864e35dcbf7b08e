#include "isolation/probe_protocol.hpp"

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
    const bool known =
        key == "stage" || key == "status" || key == "reason" || key == "abi" || key == "name" || key == "done";
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
    values_[std::string(key)] = std::move(value);
    if (key == "done") done_ = true;
    start = value_start + size + 1;
  }
  buffer_.erase(0, start);
}

std::optional<std::string> RecordReader::get(std::string_view key) const {
  if (auto found = values_.find(key); found != values_.end()) return found->second;
  return std::nullopt;
}

}  // namespace backplane::detail::isolation
