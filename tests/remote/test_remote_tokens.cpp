// Token files in object storage: every format loads from an s3:// object
// equal, bit for bit, to the same file loaded from the disk; S3 globs list
// and sort as local ones do; describe_tokens reads only the header.
#include <doctest/doctest.h>

#include "../tokens/token_file_writers.hpp"
#include "support/errors.hpp"

#include "servers_control.hpp"
#include "support/load_fixture.hpp"

#include <backplane/safetensors.hpp>
#include <backplane/tokens.hpp>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace backplane;
using namespace backplane::testing;

namespace {

// Uploads a local file as `key` and gives its URL.
std::string upload(const std::filesystem::path& file, const std::string& key) {
  const std::string answer = control("put " + key + " " + file.string());
  REQUIRE_MESSAGE(answer == "ok", answer);
  return "s3://" + server_variable("BACKPLANE_TEST_S3_BUCKET") + "/" + key;
}

// The server's endpoint, for load_tokens to find as a user's would.
struct ServerEndpoint {
  ServerEndpoint() { ::setenv("AWS_ENDPOINT_URL", server_variable("BACKPLANE_TEST_S3_ENDPOINT").c_str(), 1); }
  ~ServerEndpoint() { ::unsetenv("AWS_ENDPOINT_URL"); }
};

std::vector<std::byte> bytes_of(const Array& array) {
  const auto* data = static_cast<const std::byte*>(array.host_data());
  return {data, data + array.nbytes()};
}

void check_same(Runtime& runtime, const std::filesystem::path& local, const std::string& url,
                const TokenFileOptions& options = {}) {
  CAPTURE(url);
  const Array from_disk = load_tokens(runtime, local, options);
  const Array from_object = load_tokens(runtime, url, options);
  CHECK(from_object.dtype() == from_disk.dtype());
  CHECK(from_object.shape() == from_disk.shape());
  CHECK(bytes_of(from_object) == bytes_of(from_disk));
  const TokenFileInfo disk_info = describe_tokens(local, options);
  const TokenFileInfo object_info = describe_tokens(url, options);
  CHECK(object_info.format == disk_info.format);
  CHECK(object_info.count == disk_info.count);
  CHECK(object_info.documents == disk_info.documents);
}

std::vector<std::uint16_t> counting(std::size_t count, unsigned seed) {
  std::vector<std::uint16_t> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<std::uint16_t>(i * 7919 + seed);
  return values;
}

}  // namespace

TEST_CASE("[remote][tokens] every format loads from an s3 object equal to the file on disk") {
  ServerEndpoint endpoint;
  Runtime runtime(placement_options());
  TempDir dir;
  const std::vector<std::uint16_t> tokens = counting(3'000'000, 3);  // several download parts

  SUBCASE("an llm.c shard") {
    const auto path = dir.write("train_000.bin", llmc_u16_shard(tokens));
    check_same(runtime, path, upload(path, "formats/train_000.bin"));
  }
  SUBCASE("a .npy file") {
    const auto path = dir.write("tokens.npy", npy_file(npy_dict("<u2", "(3000000,)"), token_bytes(tokens)));
    check_same(runtime, path, upload(path, "formats/tokens.npy"));
  }
  SUBCASE("a safetensors file, by tensor name") {
    const std::vector<std::uint32_t> wide{1, 2, 3, 4000000000u};
    const std::vector<safetensors::HostTensor> tensors{{{"tokens", "U16", {3000000}}, std::as_bytes(std::span(tokens))},
                                                       {{"other", "U32", {4}}, std::as_bytes(std::span(wide))}};
    const auto path = write_bytes(dir, "tokens.safetensors", safetensors::serialize(tensors));
    const std::string url = upload(path, "formats/tokens.safetensors");
    TokenFileOptions named;
    named.name = "other";
    check_same(runtime, path, url, named);
    named.name = "tokens";
    check_same(runtime, path, url, named);
  }
  SUBCASE("a raw file, with its dtype") {
    const auto path = dir.write("tokens.raw", token_bytes(tokens));
    TokenFileOptions raw;
    raw.dtype = DType::kU16;
    check_same(runtime, path, upload(path, "formats/tokens.raw"), raw);
  }
  SUBCASE("a Megatron-Core indexed dataset: the .idx beside the .bin, by either name or the prefix") {
    const std::filesystem::path fixtures = std::filesystem::path(BP_TEST_SOURCE_DIR) / "tests/tokens/megatron";
    const std::string bin = upload(fixtures / "llama_int32.bin", "formats/mega/llama_int32.bin");
    upload(fixtures / "llama_int32.idx", "formats/mega/llama_int32.idx");
    check_same(runtime, fixtures / "llama_int32.bin", bin);
    check_same(runtime, fixtures / "llama_int32", bin.substr(0, bin.size() - 4));
    CHECK(describe_tokens(bin).data_file == bin);
  }
}

TEST_CASE("[remote][tokens] an s3 glob lists the bucket and matches as a local glob does") {
  ServerEndpoint endpoint;
  Runtime runtime(placement_options());
  TempDir dir;
  for (const char* name : {"train_002.bin", "train_000.bin", "train_001.bin", "valid_000.bin"}) {
    const auto path = dir.write(name, llmc_u16_shard(counting(1000, static_cast<unsigned>(name[7]))));
    upload(path, std::string("glob/") + name);
  }
  upload(dir.write("nested.bin", llmc_u16_shard(counting(10, 1))), "glob/sub/train_009.bin");

  const std::vector<TokenFileEntry> entries = load_token_file_entries(runtime, "s3://tokens/glob/train_*.bin");
  REQUIRE(entries.size() == 3);
  CHECK(entries[0].path == "s3://tokens/glob/train_000.bin");
  CHECK(entries[1].path == "s3://tokens/glob/train_001.bin");
  CHECK(entries[2].path == "s3://tokens/glob/train_002.bin");
  CHECK(bytes_of(entries[1].tokens) == bytes_of(load_tokens(runtime, dir / "train_001.bin")));

  const Error none = error_from([&] { load_token_files(runtime, "s3://tokens/glob/test_*.bin"); });
  CAPTURE(std::string(none.what()));
  CHECK(none.code() == ErrorCode::kNotFound);
  CHECK(contains(none.what(), "no object matches 's3://tokens/glob/test_*.bin'"));
}

TEST_CASE("[remote][tokens] a missing object and a wrong secret are named, and the secret is not") {
  ServerEndpoint endpoint;
  Runtime runtime(placement_options());
  const Error missing = error_from([&] { load_tokens(runtime, "s3://tokens/nothing/here.bin"); });
  CHECK(missing.code() == ErrorCode::kNotFound);
  CHECK(contains(missing.what(), "s3://tokens/nothing/here.bin: no such object"));

  const std::string secret = server_variable("AWS_SECRET_ACCESS_KEY");
  ::setenv("AWS_SECRET_ACCESS_KEY", "a-wrong-secret-123", 1);
  const Error denied = error_from([&] { describe_tokens("s3://tokens/nothing/here.bin"); });
  ::setenv("AWS_SECRET_ACCESS_KEY", secret.c_str(), 1);
  CHECK(denied.code() == ErrorCode::kIo);
  CHECK(contains(denied.what(), "HTTP 403"));
  CHECK_FALSE(contains(denied.what(), "a-wrong-secret-123"));
}
