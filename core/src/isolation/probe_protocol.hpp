// What the probe helper tells its parent, over a pipe: a sequence of records
// `KEY SIZE\n<SIZE bytes>\n`. Keys: `stage` (the call about to run), then at
// the end `status` (the BackendStatus as a number), `reason`, `abi`, `name`
// and finally `done`. For a table that declares BP_CAPABILITY_PROBE_IN_CHILD
// the end also carries what the probe found, which the caller keeps instead
// of probing: `in_child` ("1"), `priority`, `capabilities`, `dlpack` (decimal
// numbers) and, when available, one `device` record per device in ordinal
// order (encode_device). A record cut short (the child died writing it) is
// ignored; anything after `done` is too.
//
// The child runs the plugin's code, so what it writes is not trusted: the
// reader takes at most kMaxResultBytes, only the keys above, a `status` that
// is a BackendStatus and at most kMaxPluginDevices `device` records;
// anything else marks the stream as not ours, and the parent describes it as
// such. A device's fields are bounded as the loader bounds a plugin's
// answers (loader/plugin_limits.hpp).
#pragma once

#include <backplane/backplane.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::detail::isolation {

// The file descriptor the helper writes its records to.
inline constexpr int kResultFd = 3;
// More than the helper writes but for a probe-in-child plugin with a
// thousand devices of long descriptions (a reason is bounded by the loader's
// limits): beyond this the child is not speaking the protocol.
inline constexpr std::size_t kMaxResultBytes = std::size_t{16} << 20;

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
  // The `device` records, in the order received.
  const std::vector<std::string>& devices() const { return devices_; }

 private:
  void parse();
  void reject(std::string_view bytes);
  std::string buffer_;
  std::map<std::string, std::string, std::less<>> values_;
  std::vector<std::string> devices_;
  std::size_t received_ = 0;
  std::string garbage_;
  bool done_ = false;
  bool garbled_ = false;
};

// One device's description as a `device` record's value: netstrings
// (`LEN:BYTES,`) of its name, kind, memory_total, memory_free ("" unknown),
// the attribute count and each key and value, the memory count and each kind.
std::string encode_device(const DeviceInfo& device);
// The device of a `device` record, or nullopt with `problem` saying what
// breaks the encoding or a limit. `backend` and `ordinal` are left for the
// caller.
std::optional<DeviceInfo> decode_device(std::string_view text, std::string& problem);

}  // namespace backplane::detail::isolation
