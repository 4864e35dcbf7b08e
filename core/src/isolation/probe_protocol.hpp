// What the probe helper tells its parent, over a pipe: a sequence of records
// `KEY SIZE\n<SIZE bytes>\n`. Keys: `stage` (the call about to run), then at
// the end `status` (the BackendStatus as a number), `reason`, `abi`, `name`
// and finally `done`. A record cut short (the child died writing it) is
// ignored; anything after `done` is too.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace backplane::detail::isolation {

// The file descriptor the helper writes its records to.
inline constexpr int kResultFd = 3;

// Writes one record to `fd`, retrying short writes; false when the pipe is gone.
bool write_record(int fd, std::string_view key, std::string_view value) noexcept;

// Collects records from the bytes read so far.
class RecordReader {
 public:
  void feed(std::string_view bytes);
  bool done() const { return done_; }
  // The last value of `key`, if one was received.
  std::optional<std::string> get(std::string_view key) const;

 private:
  void parse();
  std::string buffer_;
  std::map<std::string, std::string, std::less<>> values_;
  bool done_ = false;
  bool garbled_ = false;  // a header that is not ours: nothing more is read
};

}  // namespace backplane::detail::isolation
