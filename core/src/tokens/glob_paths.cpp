#include "tokens/glob_paths.hpp"

#include "tokens/token_file.hpp"
#include "tokens/token_formats.hpp"

#include "remote/object_client.hpp"
#include "remote/object_url.hpp"
#include "remote/s3_settings.hpp"
#include "util/environment.hpp"

#include "safetensors/text.hpp"
#include "util/text_argument.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <fnmatch.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>

namespace backplane::detail {
namespace {

using safetensors::detail::quote;

class GlobResult {
 public:
  GlobResult() = default;
  ~GlobResult() { ::globfree(&result_); }
  GlobResult(const GlobResult&) = delete;
  GlobResult& operator=(const GlobResult&) = delete;
  glob_t* get() noexcept { return &result_; }

 private:
  glob_t result_{};
};

bool exists(const std::string& path) { return TokenFile::exists(path); }

// A name load_tokens opens as written though no file has it: the prefix
// of a two-file format's index and data.
bool names_dataset(const std::string& path) {
  for (const TokenFormat& format : token_formats()) {
    if (format.index_file_for != nullptr && format.index_file_for(path)) return true;
  }
  return false;
}

bool has_wildcard(std::string_view text) { return text.find_first_of("*?[") != std::string_view::npos; }

// The s3:// URLs of the keys that match `pattern` (an s3 URL whose key holds
// a wildcard), listed from the longest prefix without one; matched as glob(3)
// matches paths (a wildcard never matches a '/').
std::vector<std::string> list_matching(const std::string& pattern) {
  const ObjectUrl url = parse_object_url(pattern);
  const std::string prefix = url.key.substr(0, url.key.find_first_of("*?["));
  ObjectClient client(read_s3_settings(Environment::process()), RetryPolicy{});
  std::vector<std::string> paths;
  for (const ListedObject& object : client.list(url.bucket, prefix)) {
    if (::fnmatch(url.key.c_str(), object.key.c_str(), FNM_PATHNAME) == 0) {
      paths.push_back(fmt::format("s3://{}/{}", url.bucket, object.key));
    }
  }
  return paths;
}

}  // namespace

std::vector<std::string> glob_paths(std::string_view pattern, bool allow_empty) {
  if (pattern.empty()) throw Error(ErrorCode::kInvalidArgument, "load_token_files: the pattern is empty");
  refuse_nul_bytes(pattern, "load_token_files", "pattern");
  const std::string text(pattern);
  if (is_object_url(text)) {
    // An http(s) URL is never a pattern ('?' starts its query): one file.
    const bool listed = text.starts_with("s3://") && has_wildcard(text);
    std::vector<std::string> paths = listed ? list_matching(text) : std::vector<std::string>{};
    if (!listed && (exists(text) || names_dataset(text))) paths.push_back(text);
    if (paths.empty() && !allow_empty) {
      throw Error(ErrorCode::kNotFound, fmt::format("no object matches {}", quote(shown_url(text))));
    }
    std::sort(paths.begin(), paths.end());
    return paths;
  }
  GlobResult result;
  // GLOB_NOSORT: glob sorts by the locale's collation; the order here is bytewise.
  const int status = ::glob(text.c_str(), GLOB_NOSORT, nullptr, result.get());
  std::vector<std::string> paths;
  if (status == 0) {
    for (std::size_t index = 0; index < result.get()->gl_pathc; ++index)
      paths.emplace_back(result.get()->gl_pathv[index]);
  } else if (status == GLOB_NOSPACE) {
    throw Error(ErrorCode::kOutOfMemory, fmt::format("out of memory while matching {}", quote(text)));
  } else if (status != GLOB_NOMATCH) {
    throw Error(ErrorCode::kIo, fmt::format("matching {} failed (glob error {})", quote(text), status));
  }
  if (paths.empty() && (exists(text) || names_dataset(text))) paths.push_back(text);
  if (paths.empty() && !allow_empty) throw Error(ErrorCode::kNotFound, fmt::format("no file matches {}", quote(text)));
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace backplane::detail
