// The one HTTP client of remote token files, over libcurl (which also signs
// S3 requests, CURLOPT_AWS_SIGV4): HEAD for an object's size and ETag,
// ranged GETs into the caller's memory, and S3 listings. No SDK, no HTTP or
// TLS of our own.
//
// The failure rules (docs/tokens.md, "Token files in object storage"):
// - A request that fails for a reason that may pass (a refused or reset
//   connection, a timeout, a body cut short, HTTP 408, 429, 500, 502, 503,
//   504, S3's SlowDown) is sent again after a backoff (exponential, with
//   full jitter) until `attempts` requests have failed or `deadline` has
//   passed since the first; the error then names the URL, the byte range,
//   the last status or network error and the attempts.
// - 403 and 404 fail at once, saying what they mean.
// - A read names the ETag the object had when it was opened (If-Match): an
//   object replaced since fails with kInvalidFile, never mixes two versions.
// - cancel() makes every request in flight, and every later one, fail at
//   once with kCancelled (a closing stream never waits on the network).
//
// Thread-safety: every member may be called from any thread at once; each
// request takes a connection of its own from a small pool, which keeps the
// connections alive between requests.
#pragma once

#include "remote/object_url.hpp"
#include "remote/s3_settings.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace backplane::detail {

struct RetryPolicy {
  int attempts = 6;
  // From the first request of a read to its last failure: past it, the read
  // fails (a server that stops answering is reported within this).
  std::chrono::milliseconds deadline{60'000};
  // No byte received for this long: the request has stalled, and is retried.
  std::chrono::milliseconds stall{15'000};
  std::chrono::milliseconds backoff_first{100};
  std::chrono::milliseconds backoff_most{5'000};
};

struct ObjectInfo {
  std::uint64_t size = 0;
  std::string etag;  // empty when the server sends none
};

struct ListedObject {
  std::string key;
  std::uint64_t size = 0;
  std::string etag;
};

struct ObjectClientStats {
  std::uint64_t requests = 0;
  std::uint64_t retries = 0;
  std::uint64_t bytes = 0;  // body bytes of ranged reads
};

// One request and what came back, as object_client.cpp defines them.
struct ObjectRequest;
struct ObjectResponse;

class ObjectClient {
 public:
  ObjectClient(S3Settings settings, RetryPolicy policy);
  ~ObjectClient();
  ObjectClient(const ObjectClient&) = delete;
  ObjectClient& operator=(const ObjectClient&) = delete;

  // The object's size and ETag. Throws kNotFound for a missing object, kIo
  // for the rest (with the rules above).
  ObjectInfo stat(const ObjectUrl& object);
  // out.size() bytes from `offset`: the object as `info` described it.
  void read(const ObjectUrl& object, const ObjectInfo& info, std::uint64_t offset, std::span<std::byte> out);
  // Every key of `bucket` that starts with `prefix`, in the server's order
  // (S3's is bytewise), following continuation tokens.
  std::vector<ListedObject> list(const std::string& bucket, const std::string& prefix);

  void cancel() noexcept;
  ObjectClientStats stats() const noexcept;
  const S3Settings& settings() const noexcept { return settings_; }

 private:
  struct Connection;
  ObjectResponse perform(const ObjectRequest& request);
  std::unique_ptr<Connection> take_connection();
  void give_back(std::unique_ptr<Connection> connection);
  bool wait_backoff(std::chrono::steady_clock::time_point until);

  S3Settings settings_;
  RetryPolicy policy_;
  std::mutex mutex_;
  std::condition_variable cancelled_changed_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::atomic<bool> cancelled_{false};
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::uint64_t> retries_{0};
  std::atomic<std::uint64_t> bytes_{0};
};

}  // namespace backplane::detail
