#include "isolation/probe_protocol.hpp"

#include <unistd.h>

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
  if (done_ || garbled_) return;
  buffer_.append(bytes);
  parse();
}

void RecordReader::parse() {
  std::size_t start = 0;
  while (!done_ && !garbled_) {
    const std::size_t header_end = buffer_.find('\n', start);
    if (header_end == std::string::npos) break;
    const std::string_view header(buffer_.data() + start, header_end - start);
    const std::size_t space = header.find(' ');
    std::size_t size = 0;
    if (space == std::string_view::npos ||
        std::from_chars(header.data() + space + 1, header.data() + header.size(), size).ec != std::errc()) {
      garbled_ = true;  // not our protocol: the child's verdict is lost
      break;
    }
    const std::size_t value_start = header_end + 1;
    if (buffer_.size() < value_start + size + 1) break;  // the rest has not arrived
    std::string key(header.substr(0, space));
    values_[key] = buffer_.substr(value_start, size);
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
