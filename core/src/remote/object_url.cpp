#include "remote/object_url.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

namespace backplane::detail {
namespace {

constexpr std::string_view kS3 = "s3://";
constexpr std::string_view kHttp = "http://";
constexpr std::string_view kHttps = "https://";

bool unreserved(unsigned char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.' || c == '~';
}

std::string percent_encode(std::string_view text, bool keep_slash) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (unreserved(c) || (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace

bool is_object_url(std::string_view path) noexcept {
  return path.starts_with(kS3) || path.starts_with(kHttp) || path.starts_with(kHttps);
}

std::string shown_url(std::string_view url) {
  const std::size_t query = url.find('?');
  if (query == std::string_view::npos) return std::string(url);
  return std::string(url.substr(0, query)) + "?...";
}

ObjectUrl parse_object_url(std::string_view text) {
  ObjectUrl object;
  object.url = std::string(text);
  object.shown = shown_url(text);
  if (text.starts_with(kS3)) {
    const std::string_view rest = text.substr(kS3.size());
    const std::size_t slash = rest.find('/');
    object.scheme = ObjectUrl::Scheme::kS3;
    object.bucket = std::string(rest.substr(0, slash));
    if (slash != std::string_view::npos) object.key = std::string(rest.substr(slash + 1));
    if (object.bucket.empty() || object.key.empty()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: an s3 URL names a bucket and a key (s3://BUCKET/KEY)", object.shown));
    }
    return object;
  }
  const bool https = text.starts_with(kHttps);
  if (!https && !text.starts_with(kHttp)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: not an object URL (s3://, http:// or https://)", object.shown));
  }
  object.scheme = https ? ObjectUrl::Scheme::kHttps : ObjectUrl::Scheme::kHttp;
  const std::string_view rest = text.substr(https ? kHttps.size() : kHttp.size());
  const std::size_t host_end = rest.find_first_of("/?#");
  if (rest.substr(0, host_end).empty()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: the URL names no host", object.shown));
  }
  return object;
}

std::string encode_key(std::string_view key) { return percent_encode(key, true); }

std::string encode_query_value(std::string_view text) { return percent_encode(text, false); }

}  // namespace backplane::detail
