#include "config/selector.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <system_error>
#include <utility>

#include "backplane/error.hpp"

namespace backplane::detail {
namespace {

constexpr std::size_t kMaxQuotedLength = 64;

bool is_backend_char(char c) noexcept { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

bool is_ascii_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// The input as it appears in messages: quoted, non-printable bytes escaped,
// cut after kMaxQuotedLength bytes so a huge argument cannot flood a log.
std::string quote(std::string_view text) {
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < kMaxQuotedLength; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte == '\\' || byte == '\'') {
      out += '\\';
      out += static_cast<char>(byte);
    } else if (byte < 0x20 || byte >= 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += static_cast<char>(byte);
    }
  }
  if (text.size() > kMaxQuotedLength) out += "...";
  out += "'";
  return out;
}

[[noreturn]] void fail(std::string_view text, std::string_view problem) {
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("invalid device selector {}: {} (expected BACKEND or BACKEND:ORDINAL, "
                          "e.g. 'cpu' or 'cuda:1')",
                          quote(text), problem));
}

std::string lowercase(std::string_view text) {
  std::string lowered(text);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; });
  return lowered;
}

void check_backend(std::string_view text, std::string_view backend, std::string_view ordinal_part,
                   std::span<const std::string> known_backends) {
  if (backend.empty()) fail(text, "missing backend name before ':'");
  if (is_valid_backend_name(backend)) return;
  if (is_valid_backend_name(lowercase(backend))) {
    // Only a backend that exists is suggested: "GPU:0" is no typo of a 'gpu' backend.
    const std::optional<std::string> suggestion = suggest_backend(backend, known_backends);
    if (!suggestion) fail(text, "backend names are lowercase");
    const std::string selector =
        text.size() > backend.size() ? fmt::format("{}:{}", *suggestion, ordinal_part) : *suggestion;
    fail(text, fmt::format("backend names are lowercase; did you mean {}?", quote(selector)));
  }
  const auto bad = std::find_if(backend.begin(), backend.end(), [](char c) { return !is_backend_char(c); });
  fail(text, fmt::format("invalid character {} in backend name {}; backend names use only a-z, 0-9 and _",
                         quote(std::string_view(&*bad, 1)), quote(backend)));
}

int parse_ordinal(std::string_view text, std::string_view ordinal) {
  if (ordinal.empty()) fail(text, "missing ordinal after ':'");
  const bool all_digits_after_sign = ordinal.size() > 1 && std::all_of(ordinal.begin() + 1, ordinal.end(),
                                                                       [](char c) { return c >= '0' && c <= '9'; });
  if (ordinal.front() == '-' && all_digits_after_sign) {
    fail(text, fmt::format("ordinal {} is negative; ordinals count from 0", quote(ordinal)));
  }
  if (ordinal.front() == '+' && all_digits_after_sign) {
    fail(text, fmt::format("ordinal {} has a sign; write the number alone", quote(ordinal)));
  }
  if (!std::all_of(ordinal.begin(), ordinal.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    fail(text, fmt::format("ordinal {} is not a non-negative decimal number", quote(ordinal)));
  }
  if (ordinal.size() > 1 && ordinal.front() == '0') {
    fail(text, fmt::format("ordinal {} has a leading zero", quote(ordinal)));
  }
  int value = 0;
  const auto [end, error] = std::from_chars(ordinal.data(), ordinal.data() + ordinal.size(), value);
  if (error == std::errc::result_out_of_range) {
    fail(text, fmt::format("ordinal {} is too large (at most {})", quote(ordinal), std::numeric_limits<int>::max()));
  }
  if (error != std::errc() || end != ordinal.data() + ordinal.size()) {
    fail(text, fmt::format("ordinal {} is not a non-negative decimal number", quote(ordinal)));
  }
  return value;
}

}  // namespace

bool is_valid_backend_name(std::string_view name) noexcept {
  return !name.empty() && std::all_of(name.begin(), name.end(), is_backend_char);
}

std::optional<std::string> suggest_backend(std::string_view name, std::span<const std::string> known_backends) {
  // Generic names people type for a kind of device, and the backend that serves it.
  static constexpr std::pair<std::string_view, std::string_view> kGenericNames[] = {
      {"gpu", "cuda"}, {"nvidia", "cuda"}, {"host", "cpu"}, {"cl", "opencl"}};
  auto known = [&](std::string_view candidate) {
    return std::find(known_backends.begin(), known_backends.end(), candidate) != known_backends.end();
  };
  const std::string lowered = lowercase(name);
  if (lowered != name && known(lowered)) return lowered;
  for (const auto& [generic, backend] : kGenericNames) {
    if (lowered == generic && known(backend)) return std::string(backend);
  }
  return std::nullopt;
}

std::string DeviceSelector::to_string() const { return ordinal ? fmt::format("{}:{}", backend, *ordinal) : backend; }

DeviceSelector parse_selector(std::string_view text, std::span<const std::string> known_backends) {
  if (text.empty()) fail(text, "it is empty");
  if (is_ascii_space(text.front())) fail(text, "it has leading whitespace");
  if (is_ascii_space(text.back())) fail(text, "it has trailing whitespace");
  if (std::any_of(text.begin(), text.end(), is_ascii_space)) fail(text, "it contains whitespace");
  if (std::count(text.begin(), text.end(), ':') > 1) fail(text, "it has more than one ':'");

  const auto colon = text.find(':');
  const std::string_view backend = text.substr(0, colon);
  const std::string_view ordinal_part = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  check_backend(text, backend, ordinal_part, known_backends);

  DeviceSelector selector{std::string(backend), std::nullopt};
  if (colon != std::string_view::npos) selector.ordinal = parse_ordinal(text, ordinal_part);
  return selector;
}

}  // namespace backplane::detail
