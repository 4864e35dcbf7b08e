// The header readers as pure functions over a file's first bytes and its
// size: detection order, sizes no file on a test machine could have, and the
// Python literal syntax of NumPy headers.
#include "token_file_writers.hpp"

#include "support/errors.hpp"

#include "tokens/python_literal.hpp"
#include "tokens/token_formats.hpp"
#include "tokens/token_layout.hpp"

#include <doctest/doctest.h>

#include <span>

using namespace backplane;
using namespace backplane::detail;
using namespace backplane::testing;

namespace {

std::span<const std::byte> as_span(const std::string& bytes) { return std::as_bytes(std::span(bytes)); }

TokenLayout describe(const std::string& prefix, std::uint64_t file_size, std::string_view file = "t.bin",
                     TokenRequest request = {}) {
  return describe_token_file(as_span(prefix), file_size, file, request);
}

}  // namespace

TEST_CASE("[tokens] detection: NumPy magic, then llm.c magic, then a .safetensors name, else raw") {
  const std::string npy = npy_file(npy_dict("<u2", "(1,)"), "ab");
  const std::string llmc = llmc_header(20240520, 1, 0);
  const auto detected = [](const std::string& prefix, std::string_view file) {
    return detect_token_format(as_span(prefix), file).name;
  };
  CHECK(detected(npy, "x.safetensors") == "NumPy .npy");
  CHECK(detected(llmc, "x.safetensors") == "llm.c shard");
  CHECK(detected(llmc, "x.npy") == "llm.c shard");
  CHECK(detected(std::string(8, '\0'), "x.safetensors") == "safetensors");
  CHECK(detected(std::string(8, '\0'), "x.npy") == "raw");
  CHECK(detected({}, "x.bin") == "raw");
}

TEST_CASE("[tokens] header sizes: what the loader reads before describing a file") {
  const auto format = [](std::string_view name) -> const TokenFormat& {
    for (const TokenFormat& row : token_formats()) {
      if (row.name == name) return row;
    }
    FAIL("no format named ", name);
    return token_formats().back();
  };
  const TokenFormat& numpy = format("NumPy .npy");
  const std::string npy = npy_file(npy_dict("<u2", "(1,)"), "ab");
  CHECK(numpy.header_bytes(as_span(npy), npy.size()) == 128);
  CHECK(numpy.header_bytes(as_span(npy.substr(0, 12)), 50) == 50);  // capped by the file
  std::string lying = npy.substr(0, 12);
  lying[8] = '\xff';
  lying[9] = '\xff';
  CHECK(numpy.header_bytes(as_span(lying), 1 << 20) == 10 + 0xffff);
  std::string v2 = npy_file(npy_dict("<u2", "(1,)"), "ab", 2).substr(0, 12);
  v2[8] = v2[9] = v2[10] = v2[11] = '\xff';  // 4 GiB of header: above the limit
  CHECK(numpy.header_bytes(as_span(v2), ~0ull) == 12);
  CHECK(format("llm.c shard").header_bytes({}, 100) == 100);
  CHECK(format("llm.c shard").header_bytes({}, 5000) == 1024);
  CHECK(format("raw").header_bytes({}, 5000) == 0);
  // safetensors: 8 + the length field when the framing holds, else the prefix.
  std::string framed(8, '\0');
  framed[0] = '\x10';
  CHECK(format("safetensors").header_bytes(as_span(framed), 100) == 24);
  CHECK(format("safetensors").header_bytes(as_span(framed), 20) == 8);  // runs past the end
  CHECK(format("safetensors").header_bytes(as_span(framed.substr(0, 5)), 5) == 5);
}

TEST_CASE("[tokens] sizes are 64-bit and checked: no product or sum wraps around") {
  SUBCASE("an llm.c shard of 4 G - 1 U32 tokens is 16 GiB, exactly") {
    const std::uint64_t count = 0xffffffffu;
    const TokenLayout layout = describe(llmc_header(20240801, 7, 0xffffffffu), 1024 + count * 4);
    CHECK(layout.count == count);
    CHECK(layout.dtype == DType::kU32);
  }
  SUBCASE("a NumPy shape whose element count overflows 64 bits") {
    const std::string header = npy_file(npy_dict("<u2", "(4294967296, 4294967296)"), "");
    const Error error = error_from([&] { describe(header, ~0ull); });
    CHECK(error.code() == ErrorCode::kInvalidFile);
    CHECK(contains(error.what(), "more than 2^64 bytes"));
  }
  SUBCASE("a NumPy shape whose byte count overflows 64 bits") {
    const std::string header = npy_file(npy_dict("<u8", "(4611686018427387904,)"), "");
    CHECK(error_from([&] { describe(header, ~0ull); }).code() == ErrorCode::kInvalidFile);
  }
  SUBCASE("a zero extent empties the array whatever the others say") {
    const std::string header = npy_file(npy_dict("<u2", "(0, 18446744073709551615)"), "");
    CHECK(describe(header, header.size()).count == 0);
  }
  SUBCASE("a dimension above 2^64 - 1, a negative one") {
    const std::string big = npy_file(npy_dict("<u2", "(18446744073709551616,)"), "");
    CHECK(contains(error_from([&] { describe(big, big.size()); }).what(), "above 2^64 - 1"));
    const std::string negative = npy_file(npy_dict("<u2", "(-1,)"), "");
    CHECK(contains(error_from([&] { describe(negative, negative.size()); }).what(), "-1"));
  }
  SUBCASE("a prefix shorter than the header is the caller's mistake, not the file's") {
    const std::string npy = npy_file(npy_dict("<u2", "(1,)"), "ab");
    CHECK(error_from([&] { describe(npy.substr(0, 20), npy.size()); }).code() == ErrorCode::kInvalidArgument);
    CHECK(error_from([&] { describe(llmc_header(20240520, 1, 0).substr(0, 8), 1024); }).code() ==
          ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("[tokens] Python literals: what numpy writes, and what ast.literal_eval would make of the rest") {
  const auto parse = [](std::string_view text) { return parse_python_literal(text, "t.npy", "NumPy header"); };
  const PythonLiteral dict = parse("{'descr': \"<u2\", 'fortran_order': True, 'shape': (3, 4,), 'x': [None, -0]} \n");
  REQUIRE(dict.kind == PythonLiteral::Kind::kDict);
  REQUIRE(dict.items.size() == 4);
  CHECK(dict.keys == std::vector<std::string>{"descr", "fortran_order", "shape", "x"});
  CHECK(dict.items[0].text == "<u2");
  CHECK(dict.items[1].truth);
  CHECK(dict.items[2].items.size() == 2);
  CHECK(dict.items[3].kind == PythonLiteral::Kind::kList);
  CHECK_FALSE(dict.items[3].items[1].negative);  // -0 is 0
  // A parenthesised value without a comma is the value, not a tuple.
  CHECK(parse("(5)").kind == PythonLiteral::Kind::kInteger);
  CHECK(parse("(5,)").kind == PythonLiteral::Kind::kTuple);
  CHECK(parse("()").items.empty());
  CHECK(parse("'it\\'s'").text == "it's");
  for (const std::string_view broken : {"", "{", "{'a' 1}", "{1: 2}", "(1 2)", "'open", "Truth", "{'a': 1} x", "-"}) {
    CAPTURE(broken);
    const Error error = error_from([&] { parse(broken); });
    CHECK(error.code() == ErrorCode::kInvalidFile);
    CHECK(contains(error.what(), "t.npy: NumPy header is not a Python literal"));
  }
  // Nesting is bounded: a hostile header cannot exhaust the stack.
  CHECK(parse(std::string(16, '[') + std::string(16, ']')).kind == PythonLiteral::Kind::kList);
  CHECK(contains(error_from([&] { parse(std::string(100000, '(')); }).what(), "nest deeper than 16"));
}
