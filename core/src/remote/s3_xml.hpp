// The two XML documents an S3 server answers with that the client reads: a
// ListObjectsV2 page and an error. Pure functions over the body (fuzzed):
// only the elements named here are read, and their text is unescaped (the
// five named entities and numeric references); anything else is ignored.
#pragma once

#include "remote/object_client.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::detail {

struct ListingPage {
  std::vector<ListedObject> objects;
  bool truncated = false;
  std::string next_token;  // NextContinuationToken, when truncated
};

// Throws Error(kIo) naming `source` when a <Contents> lacks its <Key> or
// its <Size> is not a number, or a truncated page has no token.
ListingPage parse_listing(std::string_view xml, const std::string& source);

struct S3ErrorBody {
  std::string code;     // "NoSuchKey", "SignatureDoesNotMatch", ...; empty if none
  std::string message;  // the server's words, cut to 300 bytes
};
S3ErrorBody parse_error(std::string_view xml);

// The text of the first <tag>...</tag> at or after `from`, unescaped, and
// where it ends; nullopt when there is none.
std::optional<std::string> element_text(std::string_view xml, std::string_view tag, std::size_t& from);

}  // namespace backplane::detail
