// Device selector syntax (core/src/config/selector.hpp).
#include <doctest/doctest.h>

#include <span>
#include <string>
#include <vector>

#include "backplane/error.hpp"
#include "config/selector.hpp"

using backplane::Error;
using backplane::ErrorCode;
using backplane::detail::DeviceSelector;
using backplane::detail::parse_selector;
using backplane::detail::suggest_backend;

namespace {

// The message of the Error that parse_selector throws for `text`, after
// checking its code.
std::string selector_error(std::string_view text, std::span<const std::string> known_backends = {}) {
  try {
    parse_selector(text, known_backends);
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kInvalidArgument);
    return error.what();
  }
  FAIL("parse_selector accepted '" << std::string(text) << "'");
  return {};
}

}  // namespace

TEST_SUITE("config") {
  TEST_CASE("[selector] accepts backend and backend:ordinal") {
    CHECK(parse_selector("cpu") == DeviceSelector{"cpu", std::nullopt});
    CHECK(parse_selector("cpu:0") == DeviceSelector{"cpu", 0});
    CHECK(parse_selector("cuda") == DeviceSelector{"cuda", std::nullopt});
    CHECK(parse_selector("cuda:1") == DeviceSelector{"cuda", 1});
    CHECK(parse_selector("my_backend2:15") == DeviceSelector{"my_backend2", 15});
    CHECK(parse_selector("cuda:2147483647") == DeviceSelector{"cuda", 2147483647});
  }

  TEST_CASE("[selector] to_string is canonical and round-trips") {
    for (const char* text : {"cpu", "cpu:0", "cuda:1", "x_1:42"}) {
      const DeviceSelector selector = parse_selector(text);
      CHECK(selector.to_string() == text);
      CHECK(parse_selector(selector.to_string()) == selector);
    }
  }

  TEST_CASE("[selector] empty input") {
    CHECK(selector_error("") ==
          "invalid device selector '': it is empty (expected BACKEND or BACKEND:ORDINAL, "
          "e.g. 'cpu' or 'cuda:1')");
  }

  TEST_CASE("[selector] leading, trailing and inner whitespace are distinct errors") {
    CHECK(selector_error(" cpu").find("' cpu': it has leading whitespace") != std::string::npos);
    CHECK(selector_error("\tcpu").find("'\\x09cpu': it has leading whitespace") != std::string::npos);
    CHECK(selector_error("cpu ").find("'cpu ': it has trailing whitespace") != std::string::npos);
    CHECK(selector_error("cpu:0\n").find("it has trailing whitespace") != std::string::npos);
    CHECK(selector_error("cuda :1").find("'cuda :1': it contains whitespace") != std::string::npos);
    CHECK(selector_error("cuda: 1").find("it contains whitespace") != std::string::npos);
  }

  TEST_CASE("[selector] empty backend part") {
    CHECK(selector_error(":1").find("':1': missing backend name before ':'") != std::string::npos);
    CHECK(selector_error(":").find("missing backend name before ':'") != std::string::npos);
  }

  TEST_CASE("[selector] empty ordinal") {
    CHECK(selector_error("cuda:").find("'cuda:': missing ordinal after ':'") != std::string::npos);
  }

  TEST_CASE("[selector] negative ordinal") {
    CHECK(selector_error("cuda:-1").find("'cuda:-1': ordinal '-1' is negative") != std::string::npos);
  }

  TEST_CASE("[selector] non-numeric ordinal") {
    CHECK(selector_error("cuda:x").find("'cuda:x': ordinal 'x' is not a non-negative decimal number") !=
          std::string::npos);
    CHECK(selector_error("cuda:1a").find("ordinal '1a' is not a non-negative decimal number") != std::string::npos);
    CHECK(selector_error("cuda:0x1").find("ordinal '0x1' is not a non-negative decimal number") != std::string::npos);
    CHECK(selector_error("cuda:--1").find("ordinal '--1' is not a non-negative decimal number") != std::string::npos);
    CHECK(selector_error("cuda:+1").find("'cuda:+1': ordinal '+1' has a sign") != std::string::npos);
    CHECK(selector_error("cuda:01").find("ordinal '01' has a leading zero") != std::string::npos);
  }

  TEST_CASE("[selector] ordinal too large") {
    CHECK(selector_error("cuda:2147483648").find("ordinal '2147483648' is too large (at most 2147483647)") !=
          std::string::npos);
    CHECK(selector_error("cuda:99999999999999999999999").find("is too large") != std::string::npos);
  }

  TEST_CASE("[selector] more than one colon") {
    CHECK(selector_error("cuda:1:2").find("'cuda:1:2': it has more than one ':'") != std::string::npos);
    CHECK(selector_error("cuda::1").find("more than one ':'") != std::string::npos);
  }

  TEST_CASE("[selector] uppercase backend suggests the lowercase form only where that backend exists") {
    const std::vector<std::string> known{"cpu", "cuda"};
    CHECK(selector_error("CUDA:1", known).find("'CUDA:1': backend names are lowercase; did you mean 'cuda:1'?") !=
          std::string::npos);
    CHECK(selector_error("Cpu", known).find("did you mean 'cpu'?") != std::string::npos);
    // GPU is no typo of a 'gpu' backend: the suggestion is the backend that serves GPUs.
    CHECK(selector_error("GPU:0", known).find("'GPU:0': backend names are lowercase; did you mean 'cuda:0'?") !=
          std::string::npos);
    // Nothing known to suggest (no backends given, or none that fits): no guess.
    CHECK(selector_error("CUDA:1").find("'CUDA:1': backend names are lowercase (expected") != std::string::npos);
    CHECK(selector_error("CUDA:1").find("did you mean") == std::string::npos);
    CHECK(selector_error("GPU:0", std::vector<std::string>{"cpu"}).find("did you mean") == std::string::npos);
  }

  TEST_CASE("[selector] a suggestion names only a known backend") {
    const std::vector<std::string> known{"cpu", "cuda", "opencl"};
    CHECK(suggest_backend("gpu", known) == "cuda");
    CHECK(suggest_backend("GPU", known) == "cuda");
    CHECK(suggest_backend("CL", known) == "opencl");
    CHECK(suggest_backend("Cpu", known) == "cpu");
    CHECK_FALSE(suggest_backend("gpu", std::vector<std::string>{"cpu", "opencl"}));
    CHECK_FALSE(suggest_backend("cpu", known));  // already a backend's name: nothing to suggest
    CHECK_FALSE(suggest_backend("tpu", known));
  }

  TEST_CASE("[selector] invalid characters in the backend name") {
    CHECK(selector_error("my-gpu:0")
              .find("'my-gpu:0': invalid character '-' in backend name 'my-gpu'; backend "
                    "names use only a-z, 0-9 and _") != std::string::npos);
    CHECK(selector_error("cu.da").find("invalid character '.'") != std::string::npos);
    CHECK(selector_error("gp\xC3\xBC").find("invalid character '\\xc3'") != std::string::npos);
  }

  TEST_CASE("[selector] messages quote long input only in part") {
    const std::string long_input(10000, 'a');
    const std::string message = selector_error(long_input + ":x");
    CHECK(message.size() < 300);
    CHECK(message.find("...'") != std::string::npos);
  }

  TEST_CASE("[selector] backend name rule") {
    CHECK(backplane::detail::is_valid_backend_name("cpu"));
    CHECK(backplane::detail::is_valid_backend_name("a_1"));
    CHECK_FALSE(backplane::detail::is_valid_backend_name(""));
    CHECK_FALSE(backplane::detail::is_valid_backend_name("Cpu"));
    CHECK_FALSE(backplane::detail::is_valid_backend_name("c-pu"));
  }
}
