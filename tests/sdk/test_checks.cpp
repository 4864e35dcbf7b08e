// The SDK's shared checks and message pieces.
#include <backplane/plugin_sdk/checks.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sdk = backplane::plugin_sdk;

namespace {

std::string failure_of(auto&& body, BP_ErrorCode* code = nullptr) {
  try {
    body();
  } catch (const sdk::Failure& failure) {
    if (code != nullptr) *code = failure.code();
    return failure.what();
  }
  return "";
}

}  // namespace

TEST_CASE("byte sizes read the same in every plugin's messages") {
  CHECK(sdk::format_bytes(0) == "0 bytes");
  CHECK(sdk::format_bytes(1023) == "1023 bytes");
  CHECK(sdk::format_bytes(1536) == "1.50 KiB");
  CHECK(sdk::format_bytes(20'497'835'008ull) == "19.09 GiB");
}

TEST_CASE("a range check cannot be fooled by offset + size wrapping around") {
  BP_ErrorCode code = 0;
  CHECK(failure_of([] { sdk::check_range("copy_to_host", "source", 0, 16, 16); }).empty());
  CHECK(failure_of([] { sdk::check_range("copy_to_host", "source", 16, 0, 16); }).empty());
  const std::string wrapped =
      failure_of([] { sdk::check_range("copy_to_host", "source", 8, UINT64_MAX - 4, 16); }, &code);
  CHECK(code == BP_ERROR_OUT_OF_RANGE);
  CHECK(wrapped == "copy_to_host: source range at offset 8 of size 18446744073709551611 does not fit in buffer "
                   "size 16");
  CHECK(!failure_of([] { sdk::check_range("copy_to_host", "source", 17, 0, 16); }).empty());
}

TEST_CASE("options: unknown keys and malformed integers are refused naming the key and the rule") {
  const std::vector<BP_KeyValue> pairs = {
      {sizeof(BP_KeyValue), "devices", 7, "3", 1},
      {sizeof(BP_KeyValue), "colour", 6, "blue", 4},
  };
  const sdk::Options options("demo", pairs.data(), pairs.size());
  CHECK(options.integer("devices", 1, 1, 64) == 3);
  CHECK(options.integer("absent", 9, 1, 64) == 9);
  BP_ErrorCode code = 0;
  CHECK(failure_of([&] { options.allow_only({"devices"}); }, &code) ==
        "demo: unknown option \"colour\" = \"blue\" (known options: devices)");
  CHECK(code == BP_ERROR_INVALID_ARGUMENT);
  for (const char* bad : {"-1", "+3", "3 ", "0x3", "", "65", "99999999999999999999"}) {
    const std::vector<BP_KeyValue> one = {{sizeof(BP_KeyValue), "devices", 7, bad, std::string(bad).size()}};
    const sdk::Options parsed("demo", one.data(), one.size());
    CAPTURE(bad);
    CHECK(failure_of([&] { parsed.integer("devices", 1, 1, 64); }) ==
          "demo: option devices = \"" + std::string(bad) + "\" is invalid: expected an integer from 1 to 64");
  }
}

TEST_CASE("options: a NULL key with a size, or a short option struct, is an error, not a read") {
  const BP_KeyValue null_key{sizeof(BP_KeyValue), nullptr, 3, "x", 1};
  CHECK(failure_of([&] { sdk::Options("demo", &null_key, 1); }) ==
        "backend_create: option 0 key is NULL with size 3");
  const BP_KeyValue short_struct{4, "k", 1, "v", 1};
  CHECK(failure_of([&] { sdk::Options("demo", &short_struct, 1); }).find("struct_size 4 is smaller") !=
        std::string::npos);
  CHECK(failure_of([&] { sdk::Options("demo", nullptr, 2); }) ==
        "backend_create: options is NULL with option_count 2");
}
