// Object URLs, the AWS settings and the S3 XML readers: no server needed.
#include <doctest/doctest.h>

#include "remote/object_url.hpp"
#include "remote/s3_settings.hpp"
#include "remote/s3_xml.hpp"

#include <backplane/error.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

using backplane::Error;
using backplane::ErrorCode;
namespace detail = backplane::detail;

namespace {

struct TempHome {
  std::filesystem::path dir;
  TempHome() {
    char pattern[] = "/tmp/backplane-aws-XXXXXX";
    dir = ::mkdtemp(pattern);
    std::filesystem::create_directories(dir / ".aws");
  }
  ~TempHome() { std::filesystem::remove_all(dir); }
  void write(const std::string& relative, const std::string& text) const { std::ofstream(dir / relative) << text; }
};

std::string message_of(auto&& call, ErrorCode expected) {
  try {
    call();
  } catch (const Error& error) {
    CHECK(error.code() == expected);
    return error.what();
  }
  FAIL("no error");
  return {};
}

}  // namespace

TEST_CASE("[remote] object URLs split into scheme, bucket and key, and hide a query in messages") {
  CHECK(detail::is_object_url("s3://b/k"));
  CHECK(detail::is_object_url("https://host/x.bin"));
  CHECK_FALSE(detail::is_object_url("data/s3://x"));
  CHECK_FALSE(detail::is_object_url("/tmp/x.bin"));

  const detail::ObjectUrl s3 = detail::parse_object_url("s3://my-bucket/fineweb/train_000.bin");
  CHECK(s3.scheme == detail::ObjectUrl::Scheme::kS3);
  CHECK(s3.bucket == "my-bucket");
  CHECK(s3.key == "fineweb/train_000.bin");

  const detail::ObjectUrl signed_url =
      detail::parse_object_url("https://host:8443/a.bin?X-Amz-Signature=SECRETSIGNATURE");
  CHECK(signed_url.scheme == detail::ObjectUrl::Scheme::kHttps);
  CHECK(signed_url.shown == "https://host:8443/a.bin?...");

  CHECK(message_of([] { detail::parse_object_url("s3://bucket-only"); }, ErrorCode::kInvalidArgument)
            .find("s3://BUCKET/KEY") != std::string::npos);
  CHECK(message_of([] { detail::parse_object_url("s3:///key"); }, ErrorCode::kInvalidArgument)
            .find("names a bucket and a key") != std::string::npos);
  CHECK(message_of([] { detail::parse_object_url("http:///x"); }, ErrorCode::kInvalidArgument).find("names no host") !=
        std::string::npos);
}

TEST_CASE("[remote] keys are percent-encoded as SigV4 signs them") {
  CHECK(detail::encode_key("a b/c+d~e.bin") == "a%20b/c%2Bd~e.bin");
  CHECK(detail::encode_query_value("dir/x y") == "dir%2Fx%20y");
}

TEST_CASE("[remote] the settings come from the variables first, then the profile's files") {
  TempHome home;
  home.write(".aws/credentials",
             "# a comment\n[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n"
             "[work]\naws_access_key_id = WORKKEY\naws_secret_access_key = WORKSECRET\n"
             "aws_session_token = WORKTOKEN\n");
  home.write(".aws/config",
             "[default]\nregion = eu-west-1\n[profile work]\nregion = ap-south-1\n"
             "endpoint_url = http://127.0.0.1:9000\ns3 =\n  addressing_style = path\n");

  SUBCASE("nothing set: the default profile's files") {
    const detail::S3Settings settings =
        detail::read_s3_settings(detail::Environment::fixed({{"HOME", home.dir.string()}}));
    REQUIRE(settings.credentials);
    CHECK(settings.credentials->access_key_id == "FILEKEY");
    CHECK(settings.region == "eu-west-1");
    CHECK(settings.endpoint.empty());
    CHECK(settings.object_url("bucket", "a b.bin") == "https://bucket.s3.eu-west-1.amazonaws.com/a%20b.bin");
    CHECK(settings.object_url("dotted.bucket", "k") == "https://s3.eu-west-1.amazonaws.com/dotted.bucket/k");
  }
  SUBCASE("AWS_PROFILE picks a profile, its endpoint is addressed path-style") {
    const detail::S3Settings settings =
        detail::read_s3_settings(detail::Environment::fixed({{"HOME", home.dir.string()}, {"AWS_PROFILE", "work"}}));
    REQUIRE(settings.credentials);
    CHECK(settings.credentials->session_token == "WORKTOKEN");
    CHECK(settings.region == "ap-south-1");
    CHECK(settings.object_url("bucket", "k.bin") == "http://127.0.0.1:9000/bucket/k.bin");
  }
  SUBCASE("the variables win over the files") {
    const detail::S3Settings settings =
        detail::read_s3_settings(detail::Environment::fixed({{"HOME", home.dir.string()},
                                                             {"AWS_ACCESS_KEY_ID", "ENVKEY"},
                                                             {"AWS_SECRET_ACCESS_KEY", "ENVSECRET"},
                                                             {"AWS_DEFAULT_REGION", "us-west-2"},
                                                             {"AWS_ENDPOINT_URL", "http://other:1"},
                                                             {"AWS_ENDPOINT_URL_S3", "http://127.0.0.1:8333/"},
                                                             {"AWS_CA_BUNDLE", "/etc/ca.pem"}}));
    CHECK(settings.credentials->access_key_id == "ENVKEY");
    CHECK(settings.region == "us-west-2");
    CHECK(settings.region_source == "AWS_DEFAULT_REGION");
    CHECK(settings.endpoint_source == "AWS_ENDPOINT_URL_S3");
    CHECK(settings.ca_bundle == "/etc/ca.pem");
    CHECK(settings.object_url("tokens", "x.bin") == "http://127.0.0.1:8333/tokens/x.bin");
    // Where the settings come from, never what the secrets are.
    const std::string described = settings.describe();
    CHECK(described.find("AWS_ACCESS_KEY_ID") != std::string::npos);
    CHECK(described.find("ENVSECRET") == std::string::npos);
    CHECK(described.find("ENVKEY") == std::string::npos);
  }
  SUBCASE("no credentials anywhere: unsigned requests") {
    const detail::S3Settings settings =
        detail::read_s3_settings(detail::Environment::fixed({{"HOME", "/nonexistent"}}));
    CHECK_FALSE(settings.credentials);
    CHECK(settings.region == "us-east-1");
    CHECK(settings.describe().find("no credentials") != std::string::npos);
  }
  SUBCASE("a profile neither file has is refused, naming it") {
    const std::string message = message_of(
        [&] {
          detail::read_s3_settings(
              detail::Environment::fixed({{"HOME", home.dir.string()}, {"AWS_PROFILE", "nosuch"}}));
        },
        ErrorCode::kConfig);
    CHECK(message.find("the profile nosuch") != std::string::npos);
  }
  SUBCASE("a malformed line names the file and line, not its text") {
    home.write(".aws/credentials", "[default]\naws_secret_access_key SECRETVALUE\n");
    const std::string message = message_of(
        [&] {
          detail::read_s3_settings(detail::Environment::fixed({{"HOME", home.dir.string()}}));
        },
        ErrorCode::kConfig);
    CHECK(message.find("credentials:2: expected \"key = value\"") != std::string::npos);
    CHECK(message.find("SECRETVALUE") == std::string::npos);
  }
}

TEST_CASE("[remote] a ListObjectsV2 page is read with its entities, and a bad one is refused") {
  const std::string xml = R"(<?xml version="1.0"?><ListBucketResult><Name>b</Name><IsTruncated>true</IsTruncated>)"
                          R"(<Contents><Key>dir/a&amp;b.bin</Key><ETag>&#34;abc&#34;</ETag><Size>22</Size></Contents>)"
                          R"(<Contents><Key>dir/&#x3b1;.bin</Key><Size>0</Size></Contents>)"
                          R"(<NextContinuationToken>tok&lt;1&gt;</NextContinuationToken></ListBucketResult>)";
  const detail::ListingPage page = detail::parse_listing(xml, "the listing");
  REQUIRE(page.objects.size() == 2);
  CHECK(page.objects[0].key == "dir/a&b.bin");
  CHECK(page.objects[0].etag == "abc");
  CHECK(page.objects[0].size == 22);
  CHECK(page.objects[1].key == "dir/\xCE\xB1.bin");
  CHECK(page.truncated);
  CHECK(page.next_token == "tok<1>");

  CHECK(message_of([] { detail::parse_listing("<Contents><Key>k</Key><Size>12x</Size></Contents>", "L"); },
                   ErrorCode::kIo)
            .find("k a Size that is not a number") != std::string::npos);
  CHECK(message_of([] { detail::parse_listing("<IsTruncated>true</IsTruncated>", "L"); }, ErrorCode::kIo)
            .find("no continuation token") != std::string::npos);

  const detail::S3ErrorBody error =
      detail::parse_error("<Error><Code>NoSuchKey</Code><Message>The key does not exist</Message></Error>");
  CHECK(error.code == "NoSuchKey");
  CHECK(error.message == "The key does not exist");
}
