// DType: names, sizes, stable numbers.
#include <backplane/plugin.h>
#include <backplane/dtype.hpp>

#include <doctest/doctest.h>

#include <set>
#include <string>

using backplane::DType;

TEST_CASE("[placement] every safetensors dtype has its name, bit width and a unique stable number") {
  const std::pair<const char*, int> expected[] = {
      {"BOOL", 8},    {"F4", 4},      {"F6_E2M3", 6}, {"F6_E3M2", 6},     {"U8", 8},          {"I8", 8},
      {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8}, {"I16", 16},
      {"U16", 16},    {"F16", 16},    {"BF16", 16},   {"I32", 32},        {"U32", 32},        {"F32", 32},
      {"C64", 64},    {"F64", 64},    {"I64", 64},    {"U64", 64},
  };
  std::set<std::int32_t> numbers;
  for (const auto& [name, bits] : expected) {
    CAPTURE(name);
    const auto dtype = backplane::dtype_from_name(name);
    REQUIRE(dtype.has_value());
    CHECK(backplane::dtype_name(*dtype) == name);
    CHECK(backplane::dtype_bits(*dtype) == bits);
    numbers.insert(static_cast<std::int32_t>(*dtype));
  }
  CHECK(numbers.size() == 22);
  CHECK(backplane::kAllDTypes.size() == 22);
  for (DType dtype : backplane::kAllDTypes) CHECK(backplane::dtype_from_name(backplane::dtype_name(dtype)) == dtype);
}

TEST_CASE("[placement] dtype numbers of the convertible integers match the ABI's BP_IntegerType") {
  CHECK(static_cast<std::int32_t>(DType::kU8) == BP_INTEGER_U8);
  CHECK(static_cast<std::int32_t>(DType::kU16) == BP_INTEGER_U16);
  CHECK(static_cast<std::int32_t>(DType::kU32) == BP_INTEGER_U32);
  CHECK(static_cast<std::int32_t>(DType::kI32) == BP_INTEGER_I32);
  CHECK(static_cast<std::int32_t>(DType::kI64) == BP_INTEGER_I64);
}

TEST_CASE("[placement] dtype names are case-sensitive and unknown names are refused") {
  CHECK_FALSE(backplane::dtype_from_name("u16").has_value());
  CHECK_FALSE(backplane::dtype_from_name("Bf16").has_value());
  CHECK_FALSE(backplane::dtype_from_name("").has_value());
  CHECK_FALSE(backplane::dtype_from_name("F8").has_value());
  CHECK(backplane::dtype_name(static_cast<DType>(0)).empty());
  CHECK(backplane::dtype_bits(static_cast<DType>(99)) == 0);
}

TEST_CASE("[placement] sub-byte dtypes round their storage up to whole bytes") {
  CHECK(backplane::dtype_storage_bytes(DType::kF4, 3) == 2u);
  CHECK(backplane::dtype_storage_bytes(DType::kF4, 4) == 2u);
  CHECK(backplane::dtype_storage_bytes(DType::kF6_E2M3, 4) == 3u);
  CHECK(backplane::dtype_storage_bytes(DType::kF6_E3M2, 5) == 4u);
  CHECK(backplane::dtype_storage_bytes(DType::kU16, 5) == 10u);
  CHECK(backplane::dtype_storage_bytes(DType::kC64, 2) == 16u);
  CHECK_FALSE(backplane::dtype_storage_bytes(DType::kI64, UINT64_MAX / 2).has_value());
  CHECK(backplane::dtype_is_integer(DType::kI8));
  CHECK_FALSE(backplane::dtype_is_integer(DType::kBool));
  CHECK_FALSE(backplane::dtype_is_integer(DType::kF32));
}
