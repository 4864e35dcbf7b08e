// The HTTP client against a real S3 server (SeaweedFS) and the tests' fault
// proxy in front of it, both started by object_servers.py.
#include <doctest/doctest.h>

#include "remote/object_client.hpp"

#include "servers_control.hpp"

#include <backplane/error.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using backplane::Error;
using backplane::ErrorCode;
namespace detail = backplane::detail;
using backplane::testing::control;
using backplane::testing::server_variable;

namespace {

std::vector<std::byte> pattern_bytes(std::size_t size, unsigned seed) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>((i * 7 + seed) % 251);
  return bytes;
}

// Uploads `bytes` as `key` and gives its s3:// URL.
detail::ObjectUrl put(const std::string& key, const std::vector<std::byte>& bytes) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("backplane-put-" + std::to_string(::getpid()));
  {
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  REQUIRE(control("put " + key + " " + file.string()) == "ok");
  std::filesystem::remove(file);
  return detail::parse_object_url("s3://" + server_variable("BACKPLANE_TEST_S3_BUCKET") + "/" + key);
}

detail::S3Settings settings_for(const std::string& endpoint_variable, bool signed_requests = true,
                                const std::string& secret = "") {
  detail::S3Settings settings;
  settings.endpoint = server_variable(endpoint_variable.c_str());
  settings.endpoint_source = "the test";
  if (signed_requests) {
    settings.credentials = detail::S3Credentials{server_variable("AWS_ACCESS_KEY_ID"),
                                                 secret.empty() ? server_variable("AWS_SECRET_ACCESS_KEY") : secret, "",
                                                 "the test's variables"};
  }
  return settings;
}

// Short limits, so that a test of giving up gives up soon; the rules are the
// same as the defaults'.
detail::RetryPolicy quick_policy() {
  detail::RetryPolicy policy;
  policy.attempts = 3;
  policy.deadline = std::chrono::seconds(20);
  policy.stall = std::chrono::seconds(1);
  policy.backoff_first = std::chrono::milliseconds(10);
  policy.backoff_most = std::chrono::milliseconds(50);
  return policy;
}

std::string message_of(auto&& call, ErrorCode expected) {
  try {
    call();
  } catch (const Error& error) {
    CHECK_MESSAGE(error.code() == expected, error.what());
    return error.what();
  }
  FAIL("no error");
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("[remote] stat, ranged reads and listings return the object's own bytes") {
  const std::vector<std::byte> bytes = pattern_bytes(3'000'017, 1);
  const detail::ObjectUrl object = put("client/ranges/a.bin", bytes);
  put("client/ranges/b.bin", pattern_bytes(10, 2));
  put("client/ranges/sub/c.bin", pattern_bytes(20, 3));
  detail::ObjectClient client(settings_for("BACKPLANE_TEST_S3_ENDPOINT"), detail::RetryPolicy{});

  const detail::ObjectInfo info = client.stat(object);
  CHECK(info.size == bytes.size());
  CHECK_FALSE(info.etag.empty());
  for (const auto& [offset, length] : std::vector<std::pair<std::size_t, std::size_t>>{
           {0, 1}, {0, 4096}, {1'000'003, 777'777}, {bytes.size() - 5, 5}, {0, bytes.size()}}) {
    std::vector<std::byte> out(length);
    client.read(object, info, offset, out);
    CHECK(std::equal(out.begin(), out.end(), bytes.begin() + static_cast<std::ptrdiff_t>(offset)));
  }
  CHECK(client.stats().bytes == 1 + 4096 + 777'777 + 5 + bytes.size());

  const std::vector<detail::ListedObject> listed =
      client.list(server_variable("BACKPLANE_TEST_S3_BUCKET"), "client/ranges/");
  REQUIRE(listed.size() == 3);
  CHECK(listed[0].key == "client/ranges/a.bin");
  CHECK(listed[0].size == bytes.size());
  CHECK(listed[1].key == "client/ranges/b.bin");
  CHECK(listed[2].key == "client/ranges/sub/c.bin");
}

TEST_CASE("[remote] 403 and 404 fail at once and say what they mean, never the secret") {
  const detail::ObjectUrl object = put("client/refusals/a.bin", pattern_bytes(100, 4));
  SUBCASE("a wrong secret key") {
    detail::ObjectClient client(settings_for("BACKPLANE_TEST_S3_ENDPOINT", true, "not-the-secret-xyz"), quick_policy());
    const std::string message = message_of(
        [&] {
          std::vector<std::byte> out(10);
          client.read(object, {100, ""}, 0, out);
        },
        ErrorCode::kIo);
    CHECK(contains(message, "s3://tokens/client/refusals/a.bin bytes 0-9"));
    CHECK(contains(message, "access denied (HTTP 403 (SignatureDoesNotMatch"));
    CHECK(contains(message, "the secret key does not match the access key id (credentials from the test's variables)"));
    CHECK_FALSE(contains(message, "not-the-secret-xyz"));
    CHECK(client.stats().retries == 0);
  }
  SUBCASE("no credentials for a bucket that is not public") {
    detail::ObjectClient client(settings_for("BACKPLANE_TEST_S3_ENDPOINT", false), quick_policy());
    const std::string message = message_of(
        [&] {
          std::vector<std::byte> out(10);
          client.read(object, {100, ""}, 0, out);
        },
        ErrorCode::kIo);
    CHECK(contains(message, "HTTP 403"));
    CHECK(contains(message, "the request was unsigned"));
  }
  SUBCASE("a missing object") {
    detail::ObjectClient client(settings_for("BACKPLANE_TEST_S3_ENDPOINT"), quick_policy());
    const detail::ObjectUrl missing = detail::parse_object_url("s3://tokens/client/refusals/nothing.bin");
    CHECK(contains(message_of([&] { client.stat(missing); }, ErrorCode::kNotFound),
                   "HEAD s3://tokens/client/refusals/nothing.bin: no such object (HTTP 404"));
    CHECK(contains(message_of(
                       [&] {
                         std::vector<std::byte> out(4);
                         client.read(missing, {100, ""}, 0, out);
                       },
                       ErrorCode::kNotFound),
                   "no such object (HTTP 404 (NoSuchKey"));
    CHECK(client.stats().retries == 0);
  }
}

TEST_CASE("[remote] resets, 503s and bodies cut short are retried, and the bytes are the object's") {
  const std::vector<std::byte> bytes = pattern_bytes(200'000, 5);
  const detail::ObjectUrl object = put("client/retries/a.bin", bytes);
  detail::ObjectClient client(settings_for("BACKPLANE_TEST_S3_PROXY"), detail::RetryPolicy{});
  const detail::ObjectInfo info = client.stat(object);
  // The reset comes first, on a fresh connection: on a reused one, curl itself
  // would open another and send the request again.
  REQUIRE(control("faults reset 503 truncate") == "ok");
  std::vector<std::byte> out(150'000);
  client.read(object, info, 25'000, out);
  CHECK(std::equal(out.begin(), out.end(), bytes.begin() + 25'000));
  CHECK(client.stats().retries == 3);
}

TEST_CASE("[remote] retries are bounded: the error names the URL, the range, the last failure and the attempts") {
  const detail::ObjectUrl object = put("client/bounded/a.bin", pattern_bytes(1000, 6));
  detail::ObjectClient client(settings_for("BACKPLANE_TEST_S3_PROXY"), quick_policy());
  const detail::ObjectInfo info = client.stat(object);
  std::vector<std::byte> out(100);
  SUBCASE("503 SlowDown every time") {
    REQUIRE(control("faults 503 503 503") == "ok");
    const std::string message = message_of([&] { client.read(object, info, 100, out); }, ErrorCode::kIo);
    CHECK(
        contains(message, "GET s3://tokens/client/bounded/a.bin bytes 100-199: HTTP 503 (SlowDown) after 3 attempts"));
    CHECK(contains(message, "at most 3 times within 20 s"));
  }
  SUBCASE("a server that stops answering") {
    REQUIRE(control("faults stall stall stall") == "ok");
    const std::string message = message_of([&] { client.read(object, info, 100, out); }, ErrorCode::kIo);
    CHECK(contains(message, "bytes 100-199"));
    CHECK(contains(message, "after 3 attempts"));
  }
  CHECK(client.stats().retries == 2);
}

TEST_CASE("[remote] an object replaced after it was opened is an error, never a mix of two versions") {
  const detail::ObjectUrl object = put("client/changed/a.bin", pattern_bytes(1000, 7));
  detail::ObjectClient client(settings_for("BACKPLANE_TEST_S3_ENDPOINT"), quick_policy());
  const detail::ObjectInfo before = client.stat(object);
  put("client/changed/a.bin", pattern_bytes(1000, 8));
  std::vector<std::byte> out(10);
  const std::string message = message_of([&] { client.read(object, before, 0, out); }, ErrorCode::kInvalidFile);
  CHECK(contains(message, "the object changed since it was opened"));
}

TEST_CASE("[remote] cancel() ends a request in flight and refuses the next ones") {
  const detail::ObjectUrl object = put("client/cancel/a.bin", pattern_bytes(1000, 9));
  detail::RetryPolicy patient;
  patient.stall = std::chrono::seconds(600);
  patient.deadline = std::chrono::seconds(600);
  detail::ObjectClient client(settings_for("BACKPLANE_TEST_S3_PROXY"), patient);
  const detail::ObjectInfo info = client.stat(object);
  REQUIRE(control("faults stall") == "ok");
  std::string message;
  std::thread reader([&] {
    message = message_of(
        [&] {
          std::vector<std::byte> out(10);
          client.read(object, info, 0, out);
        },
        ErrorCode::kCancelled);
  });
  // Whether the cancel comes before the request or during its stall, the
  // read ends cancelled: no wait on the stall's length either way.
  client.cancel();
  reader.join();
  CHECK(contains(message, "cancelled (the stream was closed)"));
  CHECK(contains(message_of([&] { client.stat(object); }, ErrorCode::kCancelled), "cancelled"));
}
