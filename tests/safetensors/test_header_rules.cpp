// Every validation rule, each broken by a file built byte by byte, in the
// reference's check order; verdicts agree with safetensors 0.8 (checked by
// running the reference on the same bytes, see cross_check.py).
#include "support/file_builder.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace backplane;
using namespace backplane::testing;
using safetensors::Rule;

namespace {

const std::string kU8x2 = R"({"dtype":"U8","shape":[2],"data_offsets":[0,2]})";

void check_rule(const std::vector<std::byte>& file, Rule expected, std::optional<std::string> tensor = std::nullopt) {
  std::optional<std::string> named;
  CHECK(rule_text(verdict(file, &named)) == rule_text(expected));
  CHECK(named == tensor);
}

}  // namespace

TEST_CASE("[safetensors] a minimal valid file parses with its layout") {
  auto header = parse(one_tensor(kU8x2, "ab"));
  REQUIRE(header.tensors.size() == 1);
  CHECK(header.tensors[0].name == "t");
  CHECK(header.tensors[0].dtype == "U8");
  CHECK(header.tensors[0].shape == std::vector<std::uint64_t>{2});
  CHECK(header.tensors[0].begin == 0);
  CHECK(header.tensors[0].end == 2);
  CHECK(header.header_size == 5 + kU8x2.size() + 1);
  CHECK(header.data_offset == 8 + header.header_size);
  CHECK(header.file_size == header.data_offset + 2);
  CHECK_FALSE(header.metadata.has_value());
}

TEST_CASE("[safetensors] HeaderTooSmall: fewer than 8 bytes") {
  for (std::string_view file : {"", "\x01", "1234567"}) {
    check_rule(bytes_of(file), Rule::kHeaderTooSmall);
  }
}

TEST_CASE("[safetensors] HeaderTooLarge: over 100,000,000, checked before the file size") {
  check_rule(bytes_of(le64(100'000'001)), Rule::kHeaderTooLarge);
  check_rule(bytes_of(le64(~std::uint64_t{0})), Rule::kHeaderTooLarge);
  // Exactly the limit is allowed: the file is then merely too short.
  check_rule(bytes_of(le64(100'000'000)), Rule::kInvalidHeaderLength);
}

TEST_CASE("[safetensors] InvalidHeaderLength: 8 + N past the end") {
  check_rule(st_file("{}", "", 3), Rule::kInvalidHeaderLength);
  check_rule(bytes_of(le64(1)), Rule::kInvalidHeaderLength);
  // 8 + N exactly at the end is fine as far as this rule goes.
  CHECK(rule_text(verdict(st_file("{}"))) == "valid");
}

TEST_CASE("[safetensors] InvalidHeader: the header is not UTF-8") {
  check_rule(st_file("{\"\xff\":1}"), Rule::kInvalidHeader);
  check_rule(st_file("{\"\xc0\x80\":1}"), Rule::kInvalidHeader);          // overlong NUL
  check_rule(st_file("{\"\xed\xa0\x80\":1}"), Rule::kInvalidHeader);      // encoded surrogate
  check_rule(st_file("{\"\xf4\x90\x80\x80\":1}"), Rule::kInvalidHeader);  // above U+10FFFF
  check_rule(st_file("{\"\xe2\x82\":1}"), Rule::kInvalidHeader);          // truncated sequence
  // Checked before the JSON: a broken document with bad UTF-8 is InvalidHeader.
  check_rule(st_file("\xff"), Rule::kInvalidHeader);
}

TEST_CASE("[safetensors] InvalidHeaderDeserialization: not the reference's JSON") {
  check_rule(st_file(""), Rule::kInvalidHeaderDeserialization);
  check_rule(st_file("[]"), Rule::kInvalidHeaderDeserialization);
  check_rule(st_file("{\"t\":" + kU8x2 + ",}", "ab"), Rule::kInvalidHeaderDeserialization);
  check_rule(one_tensor(R"({"dtype":"u8","shape":[2],"data_offsets":[0,2]})", "ab"),
             Rule::kInvalidHeaderDeserialization);
  check_rule(one_tensor(R"({"dtype":"U8","shape":[-2],"data_offsets":[0,2]})", "ab"),
             Rule::kInvalidHeaderDeserialization);
}

TEST_CASE("[safetensors] InvalidOffset names the tensor: gap, overlap, start, reversed") {
  std::string gap =
      R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}})";
  check_rule(st_file(gap, "abcde"), Rule::kInvalidOffset, "b");
  std::string overlap =
      R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})";
  check_rule(st_file(overlap, "abc"), Rule::kInvalidOffset, "b");
  check_rule(one_tensor(R"({"dtype":"U8","shape":[2],"data_offsets":[1,3]})", "abc"), Rule::kInvalidOffset, "t");
  check_rule(one_tensor(R"({"dtype":"U8","shape":[2],"data_offsets":[2,0]})", "ab"), Rule::kInvalidOffset, "t");
  // Same offsets twice: the second one in (begin, end, name) order is named.
  std::string twice =
      R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  check_rule(st_file(twice, "a"), Rule::kInvalidOffset, "b");
  // Tensors are checked in offset order, not header order.
  std::string unordered =
      R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  CHECK(parse(st_file(unordered, "xy")).tensors.front().name == "a");
}

TEST_CASE("[safetensors] ValidationOverflow: element count, then bit count") {
  check_rule(one_tensor(R"({"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,2]})", "ab"),
             Rule::kValidationOverflow, "t");
  // 2^61 bytes would fit, but the reference counts bits: 2^64 overflows.
  check_rule(one_tensor(R"({"dtype":"U8","shape":[2305843009213693952],"data_offsets":[0,2]})", "ab"),
             Rule::kValidationOverflow, "t");
  check_rule(one_tensor(R"({"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,2]})", "ab"),
             Rule::kValidationOverflow, "t");
  // A zero dimension keeps the product at zero whatever follows.
  check_rule(one_tensor(R"({"dtype":"U8","shape":[0,18446744073709551615,2],"data_offsets":[0,0]})", "ab"),
             Rule::kMetadataIncompleteBuffer);
}

TEST_CASE("[safetensors] MisalignedSlice: sub-byte tensors must fill whole bytes") {
  check_rule(one_tensor(R"({"dtype":"F4","shape":[3],"data_offsets":[0,1]})", "a"), Rule::kMisalignedSlice, "t");
  check_rule(one_tensor(R"({"dtype":"F6_E3M2","shape":[2],"data_offsets":[0,2]})", "ab"), Rule::kMisalignedSlice, "t");
  check_rule(one_tensor(R"({"dtype":"F4","shape":[1],"data_offsets":[0,0]})"), Rule::kMisalignedSlice, "t");
  CHECK(rule_text(verdict(one_tensor(R"({"dtype":"F4","shape":[2],"data_offsets":[0,1]})", "a"))) == "valid");
  CHECK(rule_text(verdict(one_tensor(R"({"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]})", "abc"))) == "valid");
}

TEST_CASE("[safetensors] TensorInvalidInfo: offsets disagree with shape x dtype") {
  check_rule(one_tensor(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", "12345678"), Rule::kTensorInvalidInfo,
             "t");
  check_rule(one_tensor(R"({"dtype":"U8","shape":[2],"data_offsets":[0,18446744073709551615]})", "ab"),
             Rule::kTensorInvalidInfo, "t");
  // Checked per tensor, so an earlier tensor's bad size wins over a later gap.
  std::string both =
      R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}})";
  check_rule(st_file(both, "abcde"), Rule::kTensorInvalidInfo, "a");
}

TEST_CASE("[safetensors] MetadataIncompleteBuffer: data section length != tensors") {
  check_rule(one_tensor(kU8x2, "abc"), Rule::kMetadataIncompleteBuffer);
  check_rule(one_tensor(kU8x2, "a"), Rule::kMetadataIncompleteBuffer);
  check_rule(st_file("{}", "x"), Rule::kMetadataIncompleteBuffer);
  check_rule(one_tensor(R"({"dtype":"U8","shape":[0],"data_offsets":[18446744073709551615,18446744073709551615]})"),
             Rule::kInvalidOffset, "t");
}

TEST_CASE("[safetensors] the message names file, rule and tensor; code is kInvalidFile") {
  auto file = one_tensor(R"({"dtype":"U8","shape":[2],"data_offsets":[1,3]})", "abc");
  try {
    safetensors::parse_header(file, file.size(), "weights/model.safetensors");
    FAIL("accepted");
  } catch (const safetensors::FormatError& error) {
    std::string message = error.what();
    CHECK(error.code() == ErrorCode::kInvalidFile);
    CHECK(message.find("weights/model.safetensors") == 0);
    CHECK(message.find("InvalidOffset") != std::string::npos);
    CHECK(message.find("'t'") != std::string::npos);
    CHECK(error.file() == "weights/model.safetensors");
  }
  // A hostile name cannot put a raw newline into the message.
  auto hostile = st_file(R"({"a\nb":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})", "abc");
  try {
    parse(hostile);
    FAIL("accepted");
  } catch (const safetensors::FormatError& error) {
    CHECK(std::string(error.what()).find('\n') == std::string::npos);
    CHECK(error.tensor() == "a\nb");
  }
}

TEST_CASE("[safetensors] parse_header needs the header bytes, not the data") {
  auto file = one_tensor(kU8x2, "ab");
  auto prefix = std::span(file).first(file.size() - 2);
  CHECK(safetensors::parse_header(prefix, file.size(), "f").tensors.size() == 1);
  CHECK_THROWS_AS(safetensors::parse_header(std::span(file).first(10), file.size(), "f"), Error);
  try {
    safetensors::parse_header(file, file.size() - 1, "f");
    FAIL("accepted a prefix longer than the file");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("[safetensors] read_header reads files; missing is kNotFound") {
  TempDir dir;
  auto good = one_tensor(kU8x2, "ab");
  auto path = dir.write("good.safetensors", std::string(reinterpret_cast<const char*>(good.data()), good.size()));
  CHECK(safetensors::read_header(path).tensors.at(0).name == "t");
  try {
    safetensors::read_header(dir / "missing.safetensors");
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kNotFound);
  }
  try {
    safetensors::read_header(dir.path());
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kInvalidArgument);
  }
  // A header length far past the end is refused before anything is allocated.
  auto lying = dir.write("lying.safetensors", le64(99'999'999) + "{}");
  try {
    safetensors::read_header(lying);
    FAIL("no error");
  } catch (const safetensors::FormatError& error) {
    CHECK(error.rule() == Rule::kInvalidHeaderLength);
    CHECK(error.file() == lying.string());
  }
  CHECK_THROWS_AS(safetensors::read_header(dir.write("short.safetensors", "abc")), safetensors::FormatError);
}
