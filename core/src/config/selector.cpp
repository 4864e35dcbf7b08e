#include "config/selector.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <system_error>

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

void check_backend(std::string_view text, std::string_view backend, std::string_view ordinal_part) {
  if (backend.empty()) fail(text, "missing backend name before ':'");
  if (is_valid_backend_name(backend)) return;
  std::string lowered(backend);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; });
  if (is_valid_backend_name(lowered)) {
    std::string suggestion = lowered;
    if (text.size() > backend.size()) suggestion += fmt::format(":{}", ordinal_part);
    fail(text, fmt::format("backend names are lowercase; did you mean {}?", quote(suggestion)));
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

std::string DeviceSelector::to_string() const { return ordinal ? fmt::format("{}:{}", backend, *ordinal) : backend; }

DeviceSelector parse_selector(std::string_view text) {
  if (text.empty()) fail(text, "it is empty");
  if (is_ascii_space(text.front())) fail(text, "it has leading whitespace");
  if (is_ascii_space(text.back())) fail(text, "it has trailing whitespace");
  if (std::any_of(text.begin(), text.end(), is_ascii_space)) fail(text, "it contains whitespace");
  if (std::count(text.begin(), text.end(), ':') > 1) fail(text, "it has more than one ':'");

  const auto colon = text.find(':');
  const std::string_view backend = text.substr(0, colon);
  const std::string_view ordinal_part = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  check_backend(text, backend, ordinal_part);

  DeviceSelector selector{std::string(backend), std::nullopt};
  if (colon != std::string_view::npos) selector.ordinal = parse_ordinal(text, ordinal_part);
  return selector;
}

}  // namespace backplane::detail
