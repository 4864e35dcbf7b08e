// The header's JSON dialect: what serde_json, deserializing the reference's
// `HashMetadata` struct, accepts. Internal; a pure function over bytes.
#pragma once

#include <backplane/safetensors.hpp>

#include "util/utf8.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::safetensors::detail {

// A tensor entry as written, before the offsets are checked.
struct RawTensor {
  std::string name;
  const DTypeInfo* dtype = nullptr;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

// Tensors are kept as the public TensorEntry from the start: a huge header
// (a million tensors) is never held twice.
struct RawHeader {
  std::vector<TensorEntry> tensors;  // one per distinct name (a repeated name: the last wins), unordered
  std::optional<Metadata> metadata;
};

// Exactly one of `header` and `error` is set. `error` says what was wrong,
// `error_offset` is the byte of the header where it was noticed.
struct DialectResult {
  std::optional<RawHeader> header;
  std::string error;
  std::size_t error_offset = 0;
};

// The header must be UTF-8 as Rust's str::from_utf8 defines it, which is
// util's strict UTF-8.
using ::backplane::detail::find_invalid_utf8;

// Parses an already UTF-8-valid header. Throws nothing but std::bad_alloc.
// `consumed`, when set, is called now and then with an offset below which
// the parser will never read `text` again (nor quote it in an error), so
// that the caller can release those bytes while a huge header is parsed.
DialectResult parse_header_json(std::string_view text, const std::function<void(std::size_t offset)>& consumed = {});

}  // namespace backplane::safetensors::detail
