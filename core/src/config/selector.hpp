// Device selectors: a backend name with an optional ordinal ("cpu", "cpu:0", "sim:1").
//
// This layer checks syntax only. Whether the backend exists, is available, and
// has the ordinal asked for is decided later by the registry, which knows the
// backends; it reports those errors itself.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace backplane::detail {

// A parsed selector. `backend` matches [a-z0-9_]+; `ordinal`, when present, is
// >= 0. No ordinal means "the backend's default device" (device 0 today).
struct DeviceSelector {
  std::string backend;
  std::optional<int> ordinal;

  // The canonical text: "cpu" or "cpu:0". parse_selector(s.to_string()) == s.
  std::string to_string() const;

  friend bool operator==(const DeviceSelector&, const DeviceSelector&) = default;
};

// Parses BACKEND[:ORDINAL] strictly. Nothing is trimmed, lowercased or
// guessed: every malformed input throws Error(ErrorCode::kInvalidArgument)
// with a message that quotes the input and names the problem:
//   empty input; leading, trailing or inner whitespace; empty backend (":1");
//   empty ordinal ("cuda:"); more than one ':'; a backend name with
//   characters outside [a-z0-9_] (uppercase says names are lowercase, and
//   suggests suggest_backend's name among `known_backends`, if any);
//   a negative, signed, non-numeric, zero-padded or too large ordinal.
// Thread-safe (no shared state).
DeviceSelector parse_selector(std::string_view text, std::span<const std::string> known_backends = {});

// The backend among `known_backends` that `name` most likely means, or none:
// its lowercase form, or for a common generic name ("gpu") the backend that
// serves it ("cuda"). Never a name that is not in `known_backends`, so that a
// suggestion can always be followed.
std::optional<std::string> suggest_backend(std::string_view name, std::span<const std::string> known_backends);

// True when `name` is a valid backend name: non-empty, only [a-z0-9_].
// The config reader uses the same rule for [backend.NAME] and `backends`.
bool is_valid_backend_name(std::string_view name) noexcept;

}  // namespace backplane::detail
