// The header's JSON dialect. Each expected verdict below is what the
// reference (PyPI safetensors 0.8.0) said for the same bytes; cross_check.py
// re-asks the installed reference where one is available.
#include "support/file_builder.hpp"

#include "safetensors/json_dialect.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace backplane;
using namespace backplane::testing;

namespace {

struct Case {
  const char* label;
  std::string header;
  std::string data;
  const char* expected;  // "valid" or the rule name
};

const std::string kEntry = R"({"dtype":"U8","shape":[2],"data_offsets":[0,2]})";

std::string with_field(const std::string& field) {
  return R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":)" + field + "}}";
}

std::string nested_arrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

void run(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    CAPTURE(c.label);
    CHECK(rule_text(verdict(st_file(c.header, c.data))) == c.expected);
  }
}

constexpr const char* kBad = "InvalidHeaderDeserialization";

}  // namespace

TEST_CASE("[safetensors] dialect: whitespace and the top level") {
  run({
      {"spaces around", " {\"a\":" + kEntry + "} ", "ab", "valid"},
      {"tab cr lf", "\t\r\n{\"a\":" + kEntry + "}\n", "ab", "valid"},
      {"padding spaces", "{\"a\":" + kEntry + "}" + std::string(100, ' '), "ab", "valid"},
      {"form feed", "\f{}", "", kBad},
      {"byte order mark", "\xEF\xBB\xBF{}", "", kBad},
      {"NUL padding", "{}" + std::string(6, '\0'), "", kBad},
      {"only spaces", "        ", "", kBad},
      {"empty object", "{}", "", "valid"},
      {"array", "[]", "", kBad},
      {"null", "null", "", kBad},
      {"string", "\"x\"", "", kBad},
      {"trailing brace", "{}}", "", kBad},
      {"two objects", "{}{}", "", kBad},
      {"unterminated", "{\"a\":" + kEntry, "ab", kBad},
      {"trailing comma", "{\"a\":" + kEntry + ",}", "ab", kBad},
      {"missing colon", "{\"a\" " + kEntry + "}", "ab", kBad},
      {"bare key", "{a:" + kEntry + "}", "ab", kBad},
  });
}

TEST_CASE("[safetensors] dialect: tensor entries") {
  run({
      {"as array", R"({"a":["U8",[2],[0,2]]})", "ab", "valid"},
      {"as array of 4", R"({"a":["U8",[2],[0,2],5]})", "ab", kBad},
      {"as array of 2", R"({"a":["U8",[2]]})", "ab", kBad},
      {"null entry", R"({"a":null})", "", kBad},
      {"number entry", R"({"a":5})", "", kBad},
      {"missing field", R"({"a":{"dtype":"U8","shape":[2]}})", "ab", kBad},
      {"duplicate field", R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"dtype":"U8"}})", "ab", kBad},
      {"duplicate shape", R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"shape":[2]}})", "ab", kBad},
      {"unknown fields", with_field(R"({"y":[true,false,null,"s",1.5e3,-7]})"), "ab", "valid"},
      {"empty name", "{\"\":" + kEntry + "}", "ab", "valid"},
      {"dtype as unit-variant map", R"({"a":{"dtype":{"U8":null},"shape":[2],"data_offsets":[0,2]}})", "ab", "valid"},
      {"dtype map with value", R"({"a":{"dtype":{"U8":1},"shape":[2],"data_offsets":[0,2]}})", "ab", kBad},
      {"dtype map with {}", R"({"a":{"dtype":{"U8":{}},"shape":[2],"data_offsets":[0,2]}})", "ab", kBad},
      {"dtype empty map", R"({"a":{"dtype":{},"shape":[2],"data_offsets":[0,2]}})", "ab", kBad},
      {"dtype two keys", R"({"a":{"dtype":{"U8":null,"I8":null},"shape":[2],"data_offsets":[0,2]}})", "ab", kBad},
      {"dtype in array", R"({"a":{"dtype":["U8"],"shape":[2],"data_offsets":[0,2]}})", "ab", kBad},
      {"dtype lower case", R"({"a":{"dtype":"u8","shape":[2],"data_offsets":[0,2]}})", "ab", kBad},
      {"dtype with space", R"({"a":{"dtype":"U8 ","shape":[2],"data_offsets":[0,2]}})", "ab", kBad},
      {"dtype unknown", R"({"a":{"dtype":"I4","shape":[2],"data_offsets":[0,2]}})", "ab", kBad},
      {"scalar", R"({"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]}})", "x", "valid"},
      {"shape null", R"({"a":{"dtype":"U8","shape":null,"data_offsets":[0,2]}})", "ab", kBad},
      {"shape float", R"({"a":{"dtype":"U8","shape":[2.0],"data_offsets":[0,2]}})", "ab", kBad},
      {"shape exponent", R"({"a":{"dtype":"U8","shape":[2e0],"data_offsets":[0,2]}})", "ab", kBad},
      {"shape leading zero", R"({"a":{"dtype":"U8","shape":[02],"data_offsets":[0,2]}})", "ab", kBad},
      {"shape -0", R"({"a":{"dtype":"U8","shape":[-0],"data_offsets":[0,2]}})", "ab", kBad},
      {"shape string", R"({"a":{"dtype":"U8","shape":["2"],"data_offsets":[0,2]}})", "ab", kBad},
      {"shape 2^64", R"({"a":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,2]}})", "ab", kBad},
      {"offsets of 3", R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2,2]}})", "ab", kBad},
      {"offsets of 1", R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0]}})", "ab", kBad},
      {"offsets as map", R"({"a":{"dtype":"U8","shape":[2],"data_offsets":{"0":0,"1":2}}})", "ab", kBad},
  });
}

TEST_CASE("[safetensors] dialect: repeated keys") {
  run({
      {"tensor twice: last wins", R"({"a":{"dtype":"I8","shape":[9],"data_offsets":[0,9]},"a":)" + kEntry + "}", "ab",
       "valid"},
      {"tensor twice: first must still parse", R"({"a":5,"a":)" + kEntry + "}", "ab", kBad},
      {"metadata twice", R"({"__metadata__":null,"__metadata__":null})", "", kBad},
      {"metadata key twice", R"({"__metadata__":{"k":"v","k":"w"}})", "", "valid"},
  });
  auto header = parse(st_file(R"({"a":{"dtype":"I8","shape":[9],"data_offsets":[0,9]},"a":)" + kEntry + "}", "ab"));
  REQUIRE(header.tensors.size() == 1);
  CHECK(header.tensors[0].dtype == "U8");
  auto metadata = parse(st_file(R"({"__metadata__":{"k":"v","k":"w"}})")).metadata;
  REQUIRE(metadata.has_value());
  CHECK(metadata->at("k") == "w");
}

TEST_CASE("[safetensors] dialect: __metadata__") {
  run({
      {"null", R"({"__metadata__":null})", "", "valid"},
      {"empty", R"({"__metadata__":{}})", "", "valid"},
      {"after tensors", "{\"a\":" + kEntry + R"( , "__metadata__" : { "k" : "v" } })", "ab", "valid"},
      {"escaped key", R"({"__metadata\u005f_":{"k":"v"}})", "", "valid"},
      {"integer value", R"({"__metadata__":{"k":1}})", "", kBad},
      {"null value", R"({"__metadata__":{"k":null}})", "", kBad},
      {"array", R"({"__metadata__":[]})", "", kBad},
      {"number", R"({"__metadata__":5})", "", kBad},
      {"other case is a tensor", R"({"__METADATA__":{}})", "", kBad},
  });
  CHECK_FALSE(parse(st_file(R"({"__metadata__":null})")).metadata.has_value());
  auto escaped = parse(st_file(R"({"__metadata\u005f_":{"k\n":"v\u00e9"}})")).metadata;
  REQUIRE(escaped.has_value());
  CHECK(escaped->at("k\n") == "v\xC3\xA9");
}

TEST_CASE("[safetensors] dialect: strings") {
  run({
      {"surrogate pair", "{\"a\\ud83d\\ude00\":" + kEntry + "}", "ab", "valid"},
      {"lone high surrogate", "{\"a\\ud800\":" + kEntry + "}", "ab", kBad},
      {"lone low surrogate", "{\"a\\udc00\":" + kEntry + "}", "ab", kBad},
      {"high then non-low", with_field(R"("\uD83D\u0041")"), "ab", kBad},
      {"reversed pair", with_field(R"("\uDE00\uD83D")"), "ab", kBad},
      {"escaped NUL", with_field(R"("\u0000")"), "ab", "valid"},
      {"short \\u", with_field(R"("\u00")"), "ab", kBad},
      {"bad hex", with_field(R"("\uZZZZ")"), "ab", kBad},
      {"unknown escape", with_field(R"("\x")"), "ab", kBad},
      {"raw control character", "{\"a\x01\":" + kEntry + "}", "ab", kBad},
      {"raw DEL", "{\"a\x7f\":" + kEntry + "}", "ab", "valid"},
      {"escapes", "{\"a\\u00E9\\/\\b\\f\\n\\r\\t\\\"\\\\\":" + kEntry + "}", "ab", "valid"},
  });
  CHECK(parse(st_file("{\"a\\ud83d\\ude00\":" + kEntry + "}", "ab")).tensors[0].name == "a\xF0\x9F\x98\x80");
  CHECK(parse(st_file("{\"\\u00E9\\/\\n\":" + kEntry + "}", "ab")).tensors[0].name == "\xC3\xA9/\n");
}

TEST_CASE("[safetensors] dialect: literals and numbers in ignored fields") {
  run({
      {"true", with_field("true"), "ab", "valid"},
      {"nul", with_field("nul"), "ab", kBad},
      {"True", with_field("True"), "ab", kBad},
      {"huge exponent", with_field("1e400"), "ab", kBad},
      {"-1e400", with_field("-1e400"), "ab", kBad},
      {"1 and 308 zeros", with_field("1" + std::string(308, '0')), "ab", "valid"},
      {"1 and 309 zeros", with_field("1" + std::string(309, '0')), "ab", kBad},
      {"DBL_MAX", with_field("1.7976931348623157e308"), "ab", "valid"},
      // serde_json's float parser overflows here where strtod would round down.
      {"just above DBL_MAX digits", with_field("1.7976931348623158e308"), "ab", kBad},
      {"long mantissa, big exponent", with_field("123456789012345678901234567890e300"), "ab", kBad},
      {"zero with huge exponent", with_field("0e99999999999"), "ab", "valid"},
      {"tiny", with_field("1e-99999999999"), "ab", "valid"},
      {"sub-normal", with_field("4.9e-324"), "ab", "valid"},
      {"many numbers", with_field("[1.5e300,-0,1e-999,123456789012345678901234567890,0.0e0,-0.0,1E5,1e+5,1e-5]"), "ab",
       "valid"},
      {"minus alone", with_field("-"), "ab", kBad},
      {"1.", with_field("1."), "ab", kBad},
      {".5", with_field(".5"), "ab", kBad},
      {"+1", with_field("+1"), "ab", kBad},
      {"-01", with_field("-01"), "ab", kBad},
      {"1e", with_field("1e"), "ab", kBad},
      {"1e+", with_field("1e+"), "ab", kBad},
      {"NaN", with_field("NaN"), "ab", kBad},
  });
}

TEST_CASE("[safetensors] dialect: nesting depth limit is serde_json's 128") {
  // The top-level object and the tensor entry are two levels.
  run({
      {"127 levels", with_field(nested_arrays(125)), "ab", "valid"},
      {"128 levels", with_field(nested_arrays(126)), "ab", kBad},
      {"deep objects", with_field([] {
         std::string s;
         for (int i = 0; i < 200; ++i) s += "{\"k\":";
         s += "1";
         for (int i = 0; i < 200; ++i) s += "}";
         return s;
       }()),
       "ab", kBad},
      {"100000 levels", with_field(nested_arrays(100000)), "ab", kBad},
  });
}

TEST_CASE("[safetensors] dialect: UTF-8 check matches Rust's str::from_utf8") {
  using backplane::safetensors::detail::find_invalid_utf8;
  CHECK_FALSE(find_invalid_utf8("plain ascii").has_value());
  CHECK_FALSE(find_invalid_utf8("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF").has_value());
  CHECK(find_invalid_utf8("ab\x80") == 2u);
  CHECK(find_invalid_utf8("\xC1\xBF") == 0u);           // overlong 2-byte
  CHECK(find_invalid_utf8("\xE0\x9F\xBF") == 0u);       // overlong 3-byte
  CHECK(find_invalid_utf8("\xF0\x8F\xBF\xBF") == 0u);   // overlong 4-byte
  CHECK(find_invalid_utf8("\xED\xBF\xBF") == 0u);       // surrogate
  CHECK(find_invalid_utf8("x\xF5\x80\x80\x80") == 1u);  // lead byte past U+10FFFF
  CHECK(find_invalid_utf8("\xE2\x82") == 0u);           // truncated
  CHECK(find_invalid_utf8("\xE2\x28\xA1") == 0u);       // bad continuation
}
