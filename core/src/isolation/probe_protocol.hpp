// What the probe helper tells its parent, over a pipe: a sequence of records
// `KEY SIZE\n<SIZE bytes>\n`. Keys: `stage` (the call about to run), then at
// the end `status` (the BackendStatus as a number), `reason`, `abi`, `name`
// and finally `done`. A record cut short (the child died writing it) is
// ignored; anything after `done` is too.
//
// The child runs the plugin's code, so what it writes is not trusted: the
// reader takes at most kMaxResultBytes, only the keys above, and a `status`
// that is a BackendStatus; anything else marks the stream as not ours, and
// the parent describes it as such.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace backplane::detail::isolation {

// The file descriptor the helper writes its records to.
inline constexpr int kResultFd = 3;
// More than the helper ever writes (a reason is bounded by the loader's
// limits): beyond this the child is not speaking the protocol.
inline constexpr std::size_t kMaxResultBytes = std::size_t{256} << 10;

// Writes one record to `fd`, retrying short writes; false when the pipe is gone.
bool write_record(int fd, std::string_view key, std::string_view value) noexcept;

// Collects records from the bytes read so far.
class RecordReader {
 public:
  void feed(std::string_view bytes);
  bool done() const { return done_; }
  // The bytes were not the protocol (or too many): nothing more is read.
  bool garbled() const { return garbled_; }
  std::size_t bytes_received() const { return received_; }
  // The first bytes that did not parse, printable, for messages.
  const std::string& garbage() const { return garbage_; }
  // The last value of `key`, if one was received.
  std::optional<std::string> get(std::string_view key) const;

 private:
  void parse();
  void reject(std::string_view bytes);
  std::string buffer_;
  std::map<std::string, std::string, std::less<>> values_;
  std::size_t received_ = 0;
  std::string garbage_;
  bool done_ = false;
  bool garbled_ = false;
};

}  // namespace backplane::detail::isolation
