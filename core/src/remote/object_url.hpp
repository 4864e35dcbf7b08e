// Object URLs: where a token file lives when it is not on a local disk.
//
//   s3://BUCKET/KEY          an S3 object (AWS, or the S3-compatible server
//                            of AWS_ENDPOINT_URL[_S3]); KEY may hold a glob
//   http://HOST[:PORT]/PATH  a file a web server serves with Range requests
//   https://HOST[:PORT]/PATH the same over TLS
//
// A path that starts with none of these is a local path, as before.
#pragma once

#include <string>
#include <string_view>

namespace backplane::detail {

struct ObjectUrl {
  enum class Scheme { kS3, kHttp, kHttps };
  Scheme scheme = Scheme::kS3;
  std::string bucket;  // s3 only
  std::string key;     // s3: the object's key; http(s): empty
  // What the user wrote: for s3 the URL itself, for http(s) the URL to
  // request.
  std::string url;
  // The URL as messages show it: a query (which may carry a presigned
  // URL's signature) is cut to "?...".
  std::string shown;
};

// True when `path` names an object rather than a local file.
bool is_object_url(std::string_view path) noexcept;

// Splits an object URL. Throws Error(kInvalidArgument) naming the URL for
// an s3 URL without a bucket or a key, and for an http(s) URL without a
// host.
ObjectUrl parse_object_url(std::string_view text);

// `url` with its query, if any, cut to "?...".
std::string shown_url(std::string_view url);

// The key with every byte but the unreserved ones and '/' percent-encoded,
// as S3's signed requests need it in a path (RFC 3986; SigV4's rule).
std::string encode_key(std::string_view key);
// `text` with every byte but the unreserved ones percent-encoded: a query
// parameter's value.
std::string encode_query_value(std::string_view text);

}  // namespace backplane::detail
