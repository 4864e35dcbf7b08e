// The SDK's shared checks and message pieces.
#include <backplane/plugin_sdk/checks.hpp>
#include <backplane/plugin_sdk/fork.hpp>
#include <backplane/plugin_sdk/typed_value.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
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
  CHECK(wrapped ==
        "copy_to_host: source range at offset 8 of size 18446744073709551611 does not fit in buffer "
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
  CHECK(failure_of([&] { sdk::Options("demo", &null_key, 1); }) == "backend_create: option 0 key is NULL with size 3");
  const BP_KeyValue short_struct{4, "k", 1, "v", 1};
  CHECK(failure_of([&] { sdk::Options("demo", &short_struct, 1); }).find("struct_size 4 is smaller") !=
        std::string::npos);
  CHECK(failure_of([&] { sdk::Options("demo", nullptr, 2); }) == "backend_create: options is NULL with option_count 2");
}

TEST_CASE("options: unsigned integers reach UINT64_MAX, with the same strictness") {
  const std::vector<BP_KeyValue> pairs = {{sizeof(BP_KeyValue), "limit", 5, "18446744073709551615", 20}};
  const sdk::Options options("demo", pairs.data(), pairs.size());
  CHECK(options.unsigned_integer("limit", 0, 0, UINT64_MAX) == UINT64_MAX);
  CHECK(failure_of([&] { options.unsigned_integer("limit", 0, 0, 100); }) ==
        "demo: option limit = \"18446744073709551615\" is invalid: expected an integer from 0 to 100");
}

TEST_CASE("a wrapped range must stay inside the allocation it points into") {
  CHECK(failure_of([] { sdk::check_inside_allocation("memory_wrap of 96 bytes on demo:0", 4000, 96, 4096); }).empty());
  BP_ErrorCode code = 0;
  CHECK(failure_of([] { sdk::check_inside_allocation("memory_wrap of 97 bytes on demo:0", 4000, 97, 4096); }, &code) ==
        "memory_wrap of 97 bytes on demo:0: the range runs past the end of its 4.00 KiB allocation (it starts 4000 "
        "bytes in)");
  CHECK(code == BP_ERROR_OUT_OF_RANGE);
}

TEST_CASE("integer type names and the fork guard's message read alike in every plugin") {
  CHECK(std::string(sdk::integer_type_name(BP_INTEGER_U16)) == "U16");
  CHECK(std::string(sdk::integer_type_name(static_cast<BP_IntegerType>(99))) == "unknown");
  sdk::ForkGuard guard;
  CHECK_FALSE(guard.forked());
  guard.note_initialised();
  CHECK_FALSE(guard.forked());  // this process initialised it
  CHECK(guard.message("Demo", "demo contexts do not survive fork", "demo") ==
        "Demo was initialised in process " + std::to_string(getpid()) +
            " before fork(); demo contexts do not survive fork: use the demo backend only in the parent, or start "
            "workers with the 'spawn' method");
}

TEST_CASE("text past the core's limit is cut to its beginning, whole characters, with a note saying so") {
  CHECK(sdk::fitted_text("short") == "short");
  const std::string exact(sdk::kMaxTextSize, 'a');
  CHECK(sdk::fitted_text(exact) == exact);
  // A PJRT plugin's message of 10 MB: its first words say what failed.
  std::string long_text = "what failed: ";
  while (long_text.size() < 10'000'033) long_text += "\xc3\xa9";  // é, two bytes each
  long_text.resize(10'000'033);
  const std::string fitted = sdk::fitted_text(long_text);
  CHECK(fitted.size() <= sdk::kMaxTextSize);
  CHECK(fitted.starts_with("what failed: \xc3\xa9"));
  const std::string note = " [cut: 10000033 bytes, more than the 65536 a plugin may answer; this is the beginning]";
  REQUIRE(fitted.ends_with(note));
  const std::string kept = fitted.substr(0, fitted.size() - note.size());
  CHECK(kept.size() + note.size() > sdk::kMaxTextSize - 2);  // cut at most one character early
  CHECK(kept.back() == '\xa9');                              // no character split
  // Errors made by the SDK carry the fitted text.
  BP_Error* error = sdk::make_error(BP_ERROR_DEVICE, long_text);
  CHECK(std::string(error->message, error->message_size) == fitted);
  error->destroy(error);
}

TEST_CASE("typed option values: one grammar, parsed once for the core's check and the pjrt adapter") {
  using Problem = sdk::TypedValueProblem;
  using Type = sdk::TypedValue::Type;
  const auto value = [](std::string_view text) { return std::get<sdk::TypedValue>(sdk::parse_typed_value(text)); };
  CHECK(value("int64:-9223372036854775808").integer == INT64_MIN);
  CHECK(value("bool:true").boolean);
  CHECK(value("float:0.5").real == 0.5f);
  CHECK(value("string:a:b").text == "a:b");
  CHECK(value("int64_list:").integers.empty());
  CHECK(value("int64_list:1,-2,3").integers == std::vector<std::int64_t>{1, -2, 3});
  CHECK(value("int64_list:7").type == Type::kInt64List);
  const auto problem = [](std::string_view text) { return std::get<Problem>(sdk::parse_typed_value(text)); };
  CHECK(problem("2").kind == Problem::Kind::kNoType);
  CHECK(problem("double:1").kind == Problem::Kind::kUnknownType);
  CHECK(problem("double:1").type == "double");
  const Problem list = problem("int64_list:1,,2");
  CHECK(list.kind == Problem::Kind::kBadValue);
  CHECK(list.value == "1,,2");
  CHECK(list.part == "");                       // the element that failed
  CHECK(problem("float:1e39").part == "1e39");  // past a 32-bit float, which PJRT takes
  CHECK(problem("int64:9223372036854775808").kind == Problem::Kind::kBadValue);
  CHECK(problem("bool:yes").part == "yes");
}
