#include "tokens/npy_header.hpp"

#include "tokens/byte_fields.hpp"
#include "tokens/python_literal.hpp"

#include "safetensors/text.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <vector>

namespace backplane::detail {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::uint64_t kVersionEnd = 8;  // magic and the two version bytes

using safetensors::detail::quote;

[[noreturn]] void invalid(std::string_view file, const std::string& problem) {
  throw Error(ErrorCode::kInvalidFile, fmt::format("{}: NumPy header {}", file, problem));
}

// Bytes of the header-length field of version `major`: 0 for a version this
// reader does not know.
std::uint64_t length_field_bytes(std::uint8_t major, std::uint8_t minor) noexcept {
  if (minor != 0) return 0;
  if (major == 1) return 2;
  if (major == 2 || major == 3) return 4;
  return 0;
}

std::uint64_t header_length(std::span<const std::byte> prefix, std::uint64_t field_bytes) noexcept {
  return field_bytes == 2 ? read_little_endian<std::uint16_t>(prefix, kVersionEnd)
                          : read_little_endian<std::uint32_t>(prefix, kVersionEnd);
}

struct IntegerType {
  char kind;
  std::uint64_t bytes;
  DType dtype;
};
constexpr std::array<IntegerType, 8> kIntegerTypes{{
    {'u', 1, DType::kU8},
    {'u', 2, DType::kU16},
    {'u', 4, DType::kU32},
    {'u', 8, DType::kU64},
    {'i', 1, DType::kI8},
    {'i', 2, DType::kI16},
    {'i', 4, DType::kI32},
    {'i', 8, DType::kI64},
}};

std::string_view kind_description(char kind) noexcept {
  switch (kind) {
    case 'b': return "a boolean";
    case 'f': return "a float";
    case 'c': return "a complex number";
    case 'S':
    case 'a': return "a byte string";
    case 'U': return "a unicode string";
    case 'V': return "raw bytes (void)";
    case 'O': return "a Python object";
    case 'M': return "a datetime";
    case 'm': return "a timedelta";
    default: return "an unknown kind";
  }
}

// The dtype of a descr string such as '<u2' or '|i1'.
DType integer_dtype(std::string_view descr, std::string_view file) {
  const std::string field = "field 'descr' is " + quote(descr);
  std::string_view rest = descr;
  char order = '\0';
  if (!rest.empty() && (rest.front() == '<' || rest.front() == '>' || rest.front() == '|' || rest.front() == '=')) {
    order = rest.front();
    rest.remove_prefix(1);
  }
  const char kind = rest.empty() ? '\0' : rest.front();
  if (kind != 'u' && kind != 'i') {
    invalid(file,
            fmt::format("{} ({}), not an integer dtype; token files hold integers", field, kind_description(kind)));
  }
  rest.remove_prefix(1);
  const auto type = std::find_if(kIntegerTypes.begin(), kIntegerTypes.end(), [&](const IntegerType& candidate) {
    return candidate.kind == kind && rest == std::to_string(candidate.bytes);
  });
  if (type == kIntegerTypes.end()) {
    invalid(file, fmt::format("{}: an integer of {} bytes is not one of 1, 2, 4 or 8", field, rest));
  }
  if (type->bytes == 1) return type->dtype;  // one byte: the order does not matter
  if (order == '>') {
    invalid(file, fmt::format("{}: big-endian; the file is mapped as it is, so only little-endian ('<{}{}') is "
                              "read (convert it with numpy: array.astype('<{}{}'))",
                              field, kind, type->bytes, kind, type->bytes));
  }
  if (order != '<') {
    invalid(file, fmt::format("{}: a {}-byte integer needs the byte order '<' (little-endian)", field, type->bytes));
  }
  return type->dtype;
}

const PythonLiteral& entry(const PythonLiteral& dict, std::string_view key) {
  for (std::size_t index = 0; index < dict.keys.size(); ++index) {
    if (dict.keys[index] == key) return dict.items[index];
  }
  // The caller has checked that every key is there.
  throw Error(ErrorCode::kInternal, fmt::format("NumPy header key '{}' missing after the check", key));
}

void check_keys(const PythonLiteral& dict, std::string_view file) {
  constexpr std::array<std::string_view, 3> kKeys{"descr", "fortran_order", "shape"};
  std::vector<std::string_view> seen;
  for (const std::string& name : dict.keys) {
    if (std::find(kKeys.begin(), kKeys.end(), name) == kKeys.end()) {
      invalid(file, fmt::format("has the key {}; numpy writes only 'descr', 'fortran_order' and 'shape'", quote(name)));
    }
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      invalid(file, fmt::format("has the key {} twice", quote(name)));
    }
    seen.push_back(name);
  }
  for (const std::string_view key : kKeys) {
    if (std::find(seen.begin(), seen.end(), key) == seen.end()) {
      invalid(file, fmt::format("lacks the key '{}'", key));
    }
  }
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape.front());
  return fmt::format("({})", fmt::join(shape, ", "));
}

std::vector<std::uint64_t> read_shape(const PythonLiteral& value, std::string_view file) {
  if (value.kind != PythonLiteral::Kind::kTuple) {
    invalid(file, fmt::format("field 'shape' is a {}, not a tuple", python_type_name(value.kind)));
  }
  std::vector<std::uint64_t> shape;
  for (const PythonLiteral& item : value.items) {
    if (item.kind != PythonLiteral::Kind::kInteger) {
      invalid(file, fmt::format("field 'shape' holds a {}, not an int", python_type_name(item.kind)));
    }
    if (item.negative) invalid(file, fmt::format("field 'shape' holds -{}", item.magnitude));
    if (item.too_large) invalid(file, "field 'shape' holds a dimension above 2^64 - 1");
    shape.push_back(item.magnitude);
  }
  return shape;
}

}  // namespace

bool has_npy_magic(std::span<const std::byte> prefix) noexcept {
  if (prefix.size() < kMagic.size()) return false;
  return std::equal(kMagic.begin(), kMagic.end(), prefix.begin(),
                    [](char expected, std::byte actual) { return static_cast<std::byte>(expected) == actual; });
}

std::uint64_t npy_header_bytes(std::span<const std::byte> prefix, std::uint64_t file_size) noexcept {
  const std::uint64_t have = std::min<std::uint64_t>(prefix.size(), file_size);
  if (have < kVersionEnd || !has_npy_magic(prefix)) return have;
  const std::uint64_t field_bytes =
      length_field_bytes(std::to_integer<std::uint8_t>(prefix[6]), std::to_integer<std::uint8_t>(prefix[7]));
  const std::uint64_t preamble = kVersionEnd + field_bytes;
  if (field_bytes == 0 || have < preamble) return have;
  const std::uint64_t length = header_length(prefix, field_bytes);
  if (length > kMaxNpyHeaderBytes) return have;
  return std::min(preamble + length, file_size);
}

TokenLayout read_npy_header(std::span<const std::byte> prefix, std::uint64_t file_size, std::string_view file) {
  if (prefix.size() > file_size) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} bytes given as the start of a file of {}", file, prefix.size(), file_size));
  }
  if (!has_npy_magic(prefix)) {
    invalid(file, "is missing: the file does not start with \\x93NUMPY");
  }
  if (file_size < kVersionEnd) {
    invalid(file, fmt::format("is truncated: the file is {} bytes, it ends inside the version", file_size));
  }
  if (prefix.size() < kVersionEnd) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} bytes given to read a NumPy header", file, prefix.size()));
  }
  const auto major = std::to_integer<std::uint8_t>(prefix[6]);
  const auto minor = std::to_integer<std::uint8_t>(prefix[7]);
  const std::uint64_t field_bytes = length_field_bytes(major, minor);
  if (field_bytes == 0) {
    invalid(file, fmt::format("format version {}.{} is not one of 1.0, 2.0 and 3.0", major, minor));
  }
  const std::uint64_t preamble = kVersionEnd + field_bytes;
  if (prefix.size() < preamble) {
    if (file_size < preamble) {
      invalid(file, fmt::format("is truncated: the file is {} bytes, it ends inside the header length", file_size));
    }
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} bytes given to read a NumPy header", file, prefix.size()));
  }
  const std::uint64_t length = header_length(prefix, field_bytes);
  if (length > kMaxNpyHeaderBytes) {
    invalid(file,
            fmt::format("length field says {} bytes, above the {} this reader accepts", length, kMaxNpyHeaderBytes));
  }
  const std::uint64_t header_end = preamble + length;  // at most 12 + 2^20
  if (header_end > file_size) {
    invalid(file, fmt::format("is truncated: its length field says {} bytes of header after byte {}, but the file "
                              "is {} bytes",
                              length, preamble, file_size));
  }
  if (prefix.size() < header_end) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} bytes given to read a NumPy header of {}", file, prefix.size(), header_end));
  }
  const auto* text_begin = reinterpret_cast<const char*>(prefix.data()) + preamble;
  const std::string_view text(text_begin, static_cast<std::size_t>(length));
  const PythonLiteral header = parse_python_literal(text, file, "NumPy header");
  if (header.kind != PythonLiteral::Kind::kDict) {
    invalid(file, fmt::format("is a {}, not a dict", python_type_name(header.kind)));
  }
  check_keys(header, file);

  const PythonLiteral& descr = entry(header, "descr");
  if (descr.kind == PythonLiteral::Kind::kList) {
    invalid(file, "field 'descr' is a list of fields (a structured array), not an integer dtype");
  }
  if (descr.kind != PythonLiteral::Kind::kString) {
    invalid(file, fmt::format("field 'descr' is a {}, not a dtype string", python_type_name(descr.kind)));
  }
  TokenLayout layout;
  layout.dtype = integer_dtype(descr.text, file);
  layout.data_offset = header_end;

  const PythonLiteral& fortran_order = entry(header, "fortran_order");
  if (fortran_order.kind != PythonLiteral::Kind::kBoolean) {
    invalid(file, fmt::format("field 'fortran_order' is a {}, not a bool", python_type_name(fortran_order.kind)));
  }
  const std::vector<std::uint64_t> shape = read_shape(entry(header, "shape"), file);
  if (fortran_order.truth && std::count_if(shape.begin(), shape.end(), [](auto extent) { return extent > 1; }) > 1) {
    invalid(file, fmt::format("says fortran_order True for shape {}: its bytes are not the tokens in C order (save "
                              "it with numpy.ascontiguousarray)",
                              shape_text(shape)));
  }

  // A zero extent empties the array whatever the others are (numpy agrees).
  const bool empty = std::find(shape.begin(), shape.end(), std::uint64_t{0}) != shape.end();
  std::uint64_t count = 1;
  std::uint64_t data_bytes = 0;
  const auto token_bytes = static_cast<std::uint64_t>(dtype_bits(layout.dtype) / 8);
  bool fits = true;
  if (empty) {
    count = 0;
  } else {
    for (const std::uint64_t extent : shape) fits = fits && multiply_fits(count, extent, count);
  }
  fits = fits && multiply_fits(count, token_bytes, data_bytes);
  std::uint64_t expected_size = 0;
  fits = fits && add_fits(header_end, data_bytes, expected_size);
  if (!fits) {
    invalid(file, fmt::format("says shape {} of {}, more than 2^64 bytes", shape_text(shape), quote(descr.text)));
  }
  if (expected_size != file_size) {
    invalid(file, fmt::format("says shape {} of {} ({} bytes after a {}-byte header) but the file is {} bytes",
                              shape_text(shape), quote(descr.text), data_bytes, header_end, file_size));
  }
  layout.count = count;
  return layout;
}

}  // namespace backplane::detail
