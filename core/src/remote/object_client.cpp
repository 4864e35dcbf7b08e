#include "remote/object_client.hpp"

#include "remote/s3_xml.hpp"

#include <backplane/error.hpp>

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <string_view>
#include <utility>

namespace backplane::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Error and listing bodies are read into memory up to this; a longer error
// body is cut (its first bytes say what it is), a longer listing page is a
// server fault.
constexpr std::size_t kMostBody = 16u << 20;

void initialise_curl() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Whether a network failure may pass if the request is sent again.
bool transient(CURLcode code) noexcept {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return true;
    default: return false;
  }
}

bool transient_status(long status) noexcept {
  return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

std::string range_words(const std::optional<std::pair<std::uint64_t, std::uint64_t>>& range) {
  if (!range) return {};
  return fmt::format(" bytes {}-{}", range->first, range->first + range->second - 1);
}

std::string_view header_value(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return {};
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return {};
  }
  std::string_view value = line.substr(name.size() + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
    value.remove_suffix(1);
  }
  return value;
}

std::string without_quotes(std::string_view etag) {
  if (etag.starts_with("W/")) etag.remove_prefix(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return std::string(etag);
}

}  // namespace

struct ObjectClient::Connection {
  CURL* easy = nullptr;
  Connection() : easy(curl_easy_init()) {
    if (easy == nullptr) throw Error(ErrorCode::kOutOfMemory, "curl_easy_init failed");
  }
  ~Connection() { curl_easy_cleanup(easy); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
};

struct ObjectRequest {
  bool head = false;
  std::string url;    // to request
  std::string shown;  // for messages
  bool sign = false;
  std::optional<std::pair<std::uint64_t, std::uint64_t>> range;  // offset, length
  std::string if_match;
  std::span<std::byte> into;  // a range's body goes here; empty: into ObjectResponse::body
};

struct ObjectResponse {
  long status = 0;
  CURLcode code = CURLE_OK;
  std::string network_error;
  std::string etag;
  std::string bucket_region;  // x-amz-bucket-region, on a wrong-region answer
  std::optional<std::uint64_t> length;
  std::string body;
  std::uint64_t received = 0;
  bool overflow = false;
  // The words for the last failure: "HTTP 503 (SlowDown)", "connection reset".
  std::string failure() const {
    if (code != CURLE_OK) return network_error;
    const S3ErrorBody error = parse_error(body);
    return error.code.empty() ? fmt::format("HTTP {}", status) : fmt::format("HTTP {} ({})", status, error.code);
  }
};

namespace {

struct Transfer {
  const ObjectRequest* request;
  ObjectResponse* response;
  CURL* easy;
  const std::atomic<bool>* cancelled;
};

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {  // a new response (after a redirect or a 100)
    transfer->response->etag.clear();
    transfer->response->length.reset();
  } else if (std::string_view etag = header_value(line, "etag"); !etag.empty()) {
    transfer->response->etag = without_quotes(etag);
  } else if (std::string_view region = header_value(line, "x-amz-bucket-region"); !region.empty()) {
    transfer->response->bucket_region = std::string(region);
  } else if (std::string_view length = header_value(line, "content-length"); !length.empty()) {
    std::uint64_t value = 0;
    if (std::from_chars(length.data(), length.data() + length.size(), value).ec == std::errc()) {
      transfer->response->length = value;
    }
  }
  return size * count;
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  ObjectResponse& response = *transfer->response;
  const std::size_t bytes = size * count;
  long status = 0;
  curl_easy_getinfo(transfer->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status == 206 && !transfer->request->into.empty()) {
    const std::span<std::byte> into = transfer->request->into;
    if (response.received + bytes > into.size()) {
      response.overflow = true;
      return 0;
    }
    std::memcpy(into.data() + response.received, data, bytes);
    response.received += bytes;
    return bytes;
  }
  if (response.body.size() + bytes > kMostBody) {
    response.overflow = true;
    return 0;
  }
  response.body.append(data, bytes);
  return bytes;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<Transfer*>(user)->cancelled->load() ? 1 : 0;
}

}  // namespace

ObjectClient::ObjectClient(S3Settings settings, RetryPolicy policy) : settings_(std::move(settings)), policy_(policy) {
  initialise_curl();
}

ObjectClient::~ObjectClient() = default;

std::unique_ptr<ObjectClient::Connection> ObjectClient::take_connection() {
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      std::unique_ptr<Connection> connection = std::move(idle_.back());
      idle_.pop_back();
      return connection;
    }
  }
  return std::make_unique<Connection>();
}

void ObjectClient::give_back(std::unique_ptr<Connection> connection) {
  std::lock_guard lock(mutex_);
  idle_.push_back(std::move(connection));
}

bool ObjectClient::wait_backoff(Clock::time_point until) {
  std::unique_lock lock(mutex_);
  return !cancelled_changed_.wait_until(lock, until, [&] { return cancelled_.load(); });
}

void ObjectClient::cancel() noexcept {
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
  }
  cancelled_changed_.notify_all();
}

ObjectClientStats ObjectClient::stats() const noexcept { return {requests_.load(), retries_.load(), bytes_.load()}; }

ObjectResponse ObjectClient::perform(const ObjectRequest& request) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + policy_.deadline;
  const std::string what =
      fmt::format("{} {}{}", request.head ? "HEAD" : "GET", request.shown, range_words(request.range));
  thread_local std::minstd_rand jitter(std::random_device{}());
  ObjectResponse response;
  for (int attempt = 1;; ++attempt) {
    if (cancelled_) throw Error(ErrorCode::kCancelled, fmt::format("{}: cancelled (the stream was closed)", what));
    response = ObjectResponse{};
    std::unique_ptr<Connection> connection = take_connection();
    CURL* easy = connection->easy;
    curl_easy_reset(easy);
    Transfer transfer{&request, &response, easy, &cancelled_};
    char error_text[CURL_ERROR_SIZE] = {};
    curl_slist* headers = nullptr;
    const auto remaining = std::max<long>(
        1, static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
    curl_easy_setopt(easy, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, error_text);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, &transfer);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &transfer);
    curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(easy, CURLOPT_XFERINFODATA, &transfer);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, remaining);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, std::min(remaining, 10'000L));
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, std::max<long>(1, static_cast<long>(policy_.stall.count() / 1000)));
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    // A signed request is never sent on to another host; a plain one may be.
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, request.sign ? 0L : 1L);
    curl_easy_setopt(easy, CURLOPT_MAXREDIRS, 5L);
    if (request.head) curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    std::string range;
    if (request.range) {
      range = fmt::format("{}-{}", request.range->first, request.range->first + request.range->second - 1);
      curl_easy_setopt(easy, CURLOPT_RANGE, range.c_str());
    }
    std::string if_match;
    if (!request.if_match.empty()) {
      if_match = fmt::format("If-Match: \"{}\"", request.if_match);
      headers = curl_slist_append(headers, if_match.c_str());
    }
    std::string signing;
    std::string token;
    if (request.sign && settings_.credentials) {
      signing = fmt::format("aws:amz:{}:s3", settings_.region);
      curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, signing.c_str());
      curl_easy_setopt(easy, CURLOPT_USERNAME, settings_.credentials->access_key_id.c_str());
      curl_easy_setopt(easy, CURLOPT_PASSWORD, settings_.credentials->secret_access_key.c_str());
      if (!settings_.credentials->session_token.empty()) {
        token = "x-amz-security-token: " + settings_.credentials->session_token;
        headers = curl_slist_append(headers, token.c_str());
      }
    }
    if (!settings_.ca_bundle.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, settings_.ca_bundle.c_str());
    if (headers != nullptr) curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    ++requests_;
    response.code = curl_easy_perform(easy);
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &response.status);
    curl_slist_free_all(headers);
    // Forget the secrets before the handle waits in the pool.
    curl_easy_reset(easy);
    give_back(std::move(connection));
    if (response.code == CURLE_ABORTED_BY_CALLBACK || cancelled_) {
      throw Error(ErrorCode::kCancelled, fmt::format("{}: cancelled (the stream was closed)", what));
    }
    if (response.overflow) {
      throw Error(ErrorCode::kIo, fmt::format("{}: the server sent more than was asked for", what));
    }
    if (response.code != CURLE_OK) {
      response.network_error = error_text[0] != '\0' ? error_text : curl_easy_strerror(response.code);
    }
    bool retry = false;
    if (response.code != CURLE_OK) {
      retry = transient(response.code);
      if (!retry) throw Error(ErrorCode::kIo, fmt::format("{}: {}", what, response.network_error));
    } else if (transient_status(response.status)) {
      retry = true;
    } else if (request.range && response.status == 206 && response.received != request.range->second) {
      response.network_error =
          fmt::format("the body ended after {} of {} bytes", response.received, request.range->second);
      response.code = CURLE_PARTIAL_FILE;
      retry = true;
    }
    if (!retry) {
      bytes_ += response.received;
      return response;
    }
    const Clock::time_point now = Clock::now();
    if (attempt >= policy_.attempts || now >= deadline) {
      throw Error(ErrorCode::kIo,
                  fmt::format("{}: {} after {} attempts in {:.1f} s (requests are tried at most {} times within "
                              "{:.0f} s)",
                              what, response.failure(), attempt, std::chrono::duration<double>(now - start).count(),
                              policy_.attempts, std::chrono::duration<double>(policy_.deadline).count()));
    }
    ++retries_;
    const std::chrono::milliseconds most = std::min<std::chrono::milliseconds>(
        policy_.backoff_most, policy_.backoff_first * (1L << std::min(attempt - 1, 20)));
    std::uniform_int_distribution<long long> pause(0, std::max<long long>(0, most.count()));
    const Clock::time_point resume = std::min(deadline, now + std::chrono::milliseconds(pause(jitter)));
    if (!wait_backoff(resume)) {
      throw Error(ErrorCode::kCancelled, fmt::format("{}: cancelled (the stream was closed)", what));
    }
  }
}

namespace {

// The words for an answer that is no success and not worth another try.
Error refusal(const ObjectResponse& response, const std::string& what, const S3Settings& settings, bool s3) {
  const S3ErrorBody error = parse_error(response.body);
  const std::string server = error.code.empty() ? std::string() : fmt::format(" ({}: {})", error.code, error.message);
  switch (response.status) {
    case 404:
      return Error(ErrorCode::kNotFound, fmt::format("{}: no such {} (HTTP 404{})", what,
                                                     error.code == "NoSuchBucket" ? "bucket" : "object", server));
    case 403: {
      std::string advice;
      if (!s3) {
        advice = "the server refuses to serve it";
      } else if (!settings.credentials) {
        advice =
            "the request was unsigned (no credentials were found): set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE";
      } else if (error.code == "SignatureDoesNotMatch") {
        advice = fmt::format("the secret key does not match the access key id (credentials from {})",
                             settings.credentials->source);
      } else if (error.code == "InvalidAccessKeyId") {
        advice = fmt::format("the server does not know the access key id (credentials from {})",
                             settings.credentials->source);
      } else {
        advice = fmt::format("the credentials (from {}) may not read it", settings.credentials->source);
      }
      return Error(ErrorCode::kIo, fmt::format("{}: access denied (HTTP 403{}): {}", what, server, advice));
    }
    case 412:
      return Error(ErrorCode::kInvalidFile,
                   fmt::format("{}: the object changed since it was opened (HTTP 412: its ETag is no longer the "
                               "one it had); a run never reads a mix of two versions: start again to read the "
                               "new one",
                               what));
    case 416:
      return Error(ErrorCode::kOutOfRange, fmt::format("{}: the range is past the object's end (HTTP 416)", what));
    case 301:
    case 307:
      if (s3) {
        return Error(ErrorCode::kIo,
                     fmt::format("{}: the bucket is in another region{} than {} (HTTP {}): set AWS_REGION", what,
                                 response.bucket_region.empty() ? "" : " (" + response.bucket_region + ")",
                                 settings.region, response.status));
      }
      break;
    default: break;
  }
  return Error(ErrorCode::kIo, fmt::format("{}: HTTP {}{}", what, response.status, server));
}

}  // namespace

ObjectInfo ObjectClient::stat(const ObjectUrl& object) {
  const bool s3 = object.scheme == ObjectUrl::Scheme::kS3;
  ObjectRequest request;
  request.head = true;
  request.url = s3 ? settings_.object_url(object.bucket, object.key) : object.url;
  request.shown = object.shown;
  request.sign = s3;
  const ObjectResponse response = perform(request);
  const std::string what = fmt::format("HEAD {}", object.shown);
  if (response.status != 200) {
    // A HEAD answer has no body: 403 and 404 are told apart by status alone.
    throw refusal(response, what, settings_, s3);
  }
  if (!response.length) {
    throw Error(ErrorCode::kIo, fmt::format("{}: the server gives no Content-Length, so the object's size is "
                                            "unknown",
                                            what));
  }
  return {*response.length, response.etag};
}

void ObjectClient::read(const ObjectUrl& object, const ObjectInfo& info, std::uint64_t offset,
                        std::span<std::byte> out) {
  if (out.empty()) return;
  const bool s3 = object.scheme == ObjectUrl::Scheme::kS3;
  ObjectRequest request;
  request.url = s3 ? settings_.object_url(object.bucket, object.key) : object.url;
  request.shown = object.shown;
  request.sign = s3;
  request.range = std::pair{offset, static_cast<std::uint64_t>(out.size())};
  request.if_match = info.etag;
  request.into = out;
  const ObjectResponse response = perform(request);
  const std::string what = fmt::format("GET {}{}", object.shown, range_words(request.range));
  if (response.status != 206) {
    if (response.status == 200) {
      throw Error(ErrorCode::kIo, fmt::format("{}: the server ignores Range requests (HTTP 200, the whole object); "
                                              "token files are read in ranges",
                                              what));
    }
    throw refusal(response, what, settings_, s3);
  }
  if (!info.etag.empty() && !response.etag.empty() && response.etag != info.etag) {
    throw Error(ErrorCode::kInvalidFile,
                fmt::format("{}: the object changed since it was opened (ETag {} is now {}); a run never reads a "
                            "mix of two versions: start again to read the new one",
                            what, info.etag, response.etag));
  }
}

std::vector<ListedObject> ObjectClient::list(const std::string& bucket, const std::string& prefix) {
  std::vector<ListedObject> objects;
  std::string token;
  const std::string shown = fmt::format("s3://{}/{}", bucket, prefix);
  while (true) {
    ObjectRequest request;
    // Parameters in the order SigV4 signs them (sorted by name).
    request.url = settings_.object_url(bucket, "") + "?" +
                  (token.empty() ? std::string() : "continuation-token=" + encode_query_value(token) + "&") +
                  "list-type=2&prefix=" + encode_query_value(prefix);
    request.shown = fmt::format("the listing of {}", shown);
    request.sign = true;
    const ObjectResponse response = perform(request);
    if (response.status != 200) throw refusal(response, "GET " + request.shown, settings_, true);
    ListingPage page = parse_listing(response.body, request.shown);
    std::move(page.objects.begin(), page.objects.end(), std::back_inserter(objects));
    if (!page.truncated) return objects;
    token = std::move(page.next_token);
  }
}

}  // namespace backplane::detail
