#include "remote/s3_xml.hpp"

#include "util/utf8.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <charconv>

namespace backplane::detail {
namespace {

// One reference after '&' (`text` starts after it): what it stands for and
// how many bytes it took, or nothing (the '&' is kept as it is).
bool unescape_one(std::string_view text, std::string& out, std::size_t& used) {
  const std::size_t semicolon = text.find(';');
  if (semicolon == std::string_view::npos || semicolon > 10) return false;
  const std::string_view name = text.substr(0, semicolon);
  used = semicolon + 1;
  static constexpr std::pair<std::string_view, char> kNamed[] = {
      {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
  for (const auto& [entity, ch] : kNamed) {
    if (name == entity) {
      out += ch;
      return true;
    }
  }
  if (name.size() < 2 || name[0] != '#') return false;
  const bool hex = name[1] == 'x' || name[1] == 'X';
  const std::string_view digits = name.substr(hex ? 2 : 1);
  std::uint32_t code = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), code, hex ? 16 : 10);
  if (error != std::errc() || end != digits.data() + digits.size() || digits.empty() || code == 0 || code > 0x10FFFF ||
      (code >= 0xD800 && code <= 0xDFFF)) {
    return false;
  }
  append_utf8(out, static_cast<char32_t>(code));
  return true;
}

std::string unescaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    std::size_t used = 0;
    if (text[i] == '&' && unescape_one(text.substr(i + 1), out, used)) {
      i += used;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string etag_without_quotes(std::string etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return etag;
}

}  // namespace

std::optional<std::string> element_text(std::string_view xml, std::string_view tag, std::size_t& from) {
  const std::string open = fmt::format("<{}>", tag);
  const std::string close = fmt::format("</{}>", tag);
  const std::size_t begin = xml.find(open, from);
  if (begin == std::string_view::npos) return std::nullopt;
  const std::size_t text = begin + open.size();
  const std::size_t end = xml.find(close, text);
  if (end == std::string_view::npos) return std::nullopt;
  from = end + close.size();
  return unescaped(xml.substr(text, end - text));
}

ListingPage parse_listing(std::string_view xml, const std::string& source) {
  ListingPage page;
  std::size_t at = 0;
  while (true) {
    std::size_t contents_at = at;
    const std::optional<std::string> contents = element_text(xml, "Contents", contents_at);
    if (!contents) break;
    std::size_t inner = 0;
    ListedObject object;
    std::optional<std::string> key = element_text(*contents, "Key", inner);
    inner = 0;
    const std::optional<std::string> size = element_text(*contents, "Size", inner);
    inner = 0;
    const std::optional<std::string> etag = element_text(*contents, "ETag", inner);
    if (!key || !size) {
      throw Error(ErrorCode::kIo, fmt::format("{}: the listing has an object without a Key or a Size", source));
    }
    const auto [end, error] = std::from_chars(size->data(), size->data() + size->size(), object.size);
    if (error != std::errc() || end != size->data() + size->size()) {
      throw Error(ErrorCode::kIo, fmt::format("{}: the listing gives {} a Size that is not a number", source, *key));
    }
    object.key = std::move(*key);
    if (etag) object.etag = etag_without_quotes(*etag);
    page.objects.push_back(std::move(object));
    at = contents_at;
  }
  std::size_t flag_at = 0;
  page.truncated = element_text(xml, "IsTruncated", flag_at).value_or("false") == "true";
  if (page.truncated) {
    std::size_t token_at = 0;
    page.next_token = element_text(xml, "NextContinuationToken", token_at).value_or("");
    if (page.next_token.empty()) {
      throw Error(ErrorCode::kIo, fmt::format("{}: the listing is truncated but gives no continuation token", source));
    }
  }
  return page;
}

S3ErrorBody parse_error(std::string_view xml) {
  S3ErrorBody error;
  std::size_t at = 0;
  error.code = element_text(xml, "Code", at).value_or("");
  at = 0;
  error.message = element_text(xml, "Message", at).value_or("");
  if (error.message.size() > 300) error.message = error.message.substr(0, 300) + "...";
  return error;
}

}  // namespace backplane::detail
