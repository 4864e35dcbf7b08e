// The safetensors header's schema, agreeing with serde_json + serde's derive
// for the reference's types rather than with JSON in general (the tokens are
// json_lexer's, the numbers json_number's):
//
// - The top level is an object (a struct with a flattened map: serde uses
//   deserialize_map, so an array is refused there).
// - `__metadata__` is null or an object of string values; given twice it is
//   an error (duplicate struct field); a key repeated inside it: the last wins.
// - Every other key is a tensor (HashMap<String, TensorInfo>): a repeated
//   name keeps the last entry, but every entry must still be a valid
//   TensorInfo. A TensorInfo is an object (unknown fields ignored, duplicate
//   fields an error) or, as serde allows for structs, an array of exactly
//   [dtype, shape, data_offsets]. dtype is a variant name or a single-key
//   object {"NAME": null}. shape and data_offsets hold JSON integers that
//   serde_json reads as u64 (no sign, fraction or exponent, at most 2^64-1).
// - Tensor entries are buffered by serde (flatten) through deserialize_any,
//   so every number anywhere in them goes through serde_json's float parser,
//   which refuses numbers it rounds to infinity ("number out of range").
#include "safetensors/json_dialect.hpp"

#include "safetensors/json_lexer.hpp"

#include <algorithm>
#include <string>

namespace backplane::safetensors::detail {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : json_(text) {}

  RawHeader parse_document(const std::function<void(std::size_t)>& consumed) {
    json_.skip_whitespace();
    if (json_.at_end()) json_.fail("EOF while parsing a value");
    if (json_.peek() != '{') json_.fail("invalid type: expected an object at the top level");
    RawHeader header;
    header.tensors.reserve(estimated_members());
    json_.advance();  // depth 1
    bool seen_metadata = false;
    std::size_t released = 0;
    json_.skip_whitespace();
    if (json_.peek_is('}')) {
      json_.advance();
    } else {
      while (true) {
        std::string key = json_.parse_key();
        if (key == "__metadata__") {
          if (seen_metadata) json_.fail("duplicate field `__metadata__`");
          seen_metadata = true;
          header.metadata = parse_metadata();
        } else {
          RawTensor tensor = parse_tensor();
          header.tensors.push_back(TensorEntry{std::move(key), std::string(tensor.dtype->name), tensor.dtype->bits,
                                               std::move(tensor.shape), tensor.begin, tensor.end});
        }
        if (consumed && json_.position() - released >= kReleaseStep) {
          released = json_.position();
          consumed(released);
        }
        if (!json_.next_member('}')) break;
      }
    }
    json_.skip_whitespace();
    if (!json_.at_end()) json_.fail("trailing characters");
    keep_last_of_each_name(header.tensors);
    return header;
  }

 private:
  // `__metadata__`: Option<HashMap<String, String>>, at depth 2.
  std::optional<Metadata> parse_metadata() {
    json_.skip_whitespace();
    if (json_.peek_is('n')) {
      json_.parse_literal("null");
      return std::nullopt;
    }
    if (!json_.peek_is('{')) json_.fail("invalid type: `__metadata__` must be an object of strings or null");
    json_.enter(2);
    json_.advance();
    Metadata metadata;
    json_.skip_whitespace();
    if (json_.peek_is('}')) {
      json_.advance();
      return metadata;
    }
    do {
      std::string key = json_.parse_key();
      json_.skip_whitespace();
      if (!json_.peek_is('"')) json_.fail("invalid type: `__metadata__` values must be strings");
      metadata[std::move(key)] = json_.parse_string();  // a repeated key: the last wins
    } while (json_.next_member('}'));
    return metadata;
  }

  // A dtype: "NAME", or {"NAME": null} (serde's externally tagged unit variant).
  const DTypeInfo* parse_dtype() {
    json_.skip_whitespace();
    if (json_.peek_is('"')) return lookup_dtype(json_.parse_string());
    if (!json_.peek_is('{')) json_.fail("invalid type: dtype must be a string");
    json_.enter(3);
    json_.advance();
    json_.skip_whitespace();
    if (json_.peek_is('}')) json_.fail("invalid value: dtype object must have a single key");
    const DTypeInfo* dtype = lookup_dtype(json_.parse_key());
    json_.skip_whitespace();
    if (!json_.peek_is('n')) json_.fail("invalid type: dtype variant value must be null");
    json_.parse_literal("null");
    if (json_.next_member('}')) json_.fail("invalid value: dtype object must have a single key");
    return dtype;
  }

  const DTypeInfo* lookup_dtype(const std::string& name) const {
    const DTypeInfo* dtype = find_dtype(name);
    if (dtype == nullptr) json_.fail("unknown variant `" + name + "` for dtype");
    return dtype;
  }

  // Vec<usize> (exact_count 0 = any length) or (usize, usize), at depth 3.
  std::vector<std::uint64_t> parse_unsigned_list(const char* field, std::size_t exact_count) {
    json_.skip_whitespace();
    if (!json_.peek_is('[')) json_.fail(std::string("invalid type: ") + field + " must be an array");
    json_.enter(3);
    json_.advance();
    std::vector<std::uint64_t> values;
    json_.skip_whitespace();
    if (json_.peek_is(']')) {
      json_.advance();
    } else {
      do {
        json_.skip_whitespace();
        if (!json_.peek_is('-') && (json_.peek() < '0' || json_.peek() > '9')) {
          json_.fail(std::string("invalid type: ") + field + " must hold non-negative integers");
        }
        const JsonNumber number = json_.parse_number();
        if (!number.is_unsigned) {
          json_.fail(std::string("invalid type: ") + field + " must hold integers in 0..2^64-1");
        }
        values.push_back(number.unsigned_value);
      } while (json_.next_member(']'));
    }
    if (exact_count != 0 && values.size() != exact_count) {
      json_.fail("invalid length " + std::to_string(values.size()) + ": " + field + " needs " +
                 std::to_string(exact_count) + " elements");
    }
    return values;
  }

  // TensorInfo, at depth 2: an object, or an array of the three fields in order.
  RawTensor parse_tensor() {
    json_.skip_whitespace();
    RawTensor tensor;
    if (json_.peek_is('[')) {
      json_.enter(2);
      json_.advance();
      std::size_t count = 0;
      json_.skip_whitespace();
      if (!json_.peek_is(']')) {
        do {
          switch (count++) {
            case 0: tensor.dtype = parse_dtype(); break;
            case 1: tensor.shape = parse_unsigned_list("shape", 0); break;
            case 2: set_offsets(tensor, parse_unsigned_list("data_offsets", 2)); break;
            default: json_.fail("invalid length: a tensor given as an array has 3 elements");
          }
        } while (json_.next_member(']'));
      } else {
        json_.advance();
      }
      if (count != 3) json_.fail("invalid length: a tensor given as an array has 3 elements");
      return tensor;
    }
    if (!json_.peek_is('{')) json_.fail("invalid type: a tensor entry must be an object");
    json_.enter(2);
    json_.advance();
    bool has_dtype = false, has_shape = false, has_offsets = false;
    json_.skip_whitespace();
    if (json_.peek_is('}')) {
      json_.advance();
    } else {
      do {
        std::string key = json_.parse_key();
        if (key == "dtype") {
          if (has_dtype) json_.fail("duplicate field `dtype`");
          has_dtype = true;
          tensor.dtype = parse_dtype();
        } else if (key == "shape") {
          if (has_shape) json_.fail("duplicate field `shape`");
          has_shape = true;
          tensor.shape = parse_unsigned_list("shape", 0);
        } else if (key == "data_offsets") {
          if (has_offsets) json_.fail("duplicate field `data_offsets`");
          has_offsets = true;
          set_offsets(tensor, parse_unsigned_list("data_offsets", 2));
        } else {
          json_.skip_value(3);  // unknown fields are ignored, but must be valid JSON
        }
      } while (json_.next_member('}'));
    }
    if (!has_dtype) json_.fail("missing field `dtype`");
    if (!has_shape) json_.fail("missing field `shape`");
    if (!has_offsets) json_.fail("missing field `data_offsets`");
    return tensor;
  }

  static void set_offsets(RawTensor& tensor, const std::vector<std::uint64_t>& offsets) {
    tensor.begin = offsets[0];
    tensor.end = offsets[1];
  }

  // An upper bound on the top-level members (so the tensors' vector is
  // allocated once, not grown to up to twice its size): the ':' at depth 1
  // outside strings. At most one per 16 bytes of text, the least a tensor
  // entry takes, whatever the text is.
  std::size_t estimated_members() const {
    std::size_t count = 0;
    int depth = 0;
    bool in_string = false;
    const std::string_view text = json_.text();
    for (std::size_t index = json_.position(); index < text.size(); ++index) {
      const char c = text[index];
      if (in_string) {
        if (c == '\\') {
          ++index;
        } else if (c == '"') {
          in_string = false;
        }
        continue;
      }
      switch (c) {
        case '"': in_string = true; break;
        case '{':
        case '[': ++depth; break;
        case '}':
        case ']': --depth; break;
        case ':': count += depth == 1 ? 1 : 0; break;
        default: break;
      }
    }
    return std::min(count, text.size() / 16 + 1);
  }

  // A repeated name keeps its last entry (serde's HashMap). Sorting positions
  // by name costs 4 bytes a tensor, where a hash map of the names cost more
  // than the tensors themselves.
  static void keep_last_of_each_name(std::vector<TensorEntry>& tensors) {
    if (tensors.size() < 2) return;
    std::vector<std::uint32_t> order(tensors.size());
    for (std::uint32_t index = 0; index < order.size(); ++index) order[index] = index;
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      const int compared = tensors[a].name.compare(tensors[b].name);
      return compared != 0 ? compared < 0 : a < b;
    });
    bool repeated = false;
    for (std::size_t index = 0; index + 1 < order.size(); ++index) {
      if (tensors[order[index]].name == tensors[order[index + 1]].name) {
        tensors[order[index]].dtype.clear();  // marks an entry a later one replaces
        repeated = true;
      }
    }
    if (!repeated) return;
    std::erase_if(tensors, [](const TensorEntry& tensor) { return tensor.dtype.empty(); });
  }

  // How far the parser gets between calls of `consumed`.
  static constexpr std::size_t kReleaseStep = 8u << 20;

  JsonLexer json_;
};

}  // namespace

DialectResult parse_header_json(std::string_view text, const std::function<void(std::size_t)>& consumed) {
  DialectResult result;
  try {
    result.header = Parser(text).parse_document(consumed);
  } catch (const JsonSyntaxError& error) {
    result.error = error.message;
    result.error_offset = error.offset;
  }
  return result;
}

}  // namespace backplane::safetensors::detail
