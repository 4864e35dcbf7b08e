// Writing: the bytes of the reference's `prepare` + `serialize_to_file`, and
// refusing anything that would make a file no reader accepts.
#include <backplane/safetensors.hpp>

#include "safetensors/json_dialect.hpp"
#include "safetensors/text.hpp"
#include "util/atomic_file.hpp"

#include <algorithm>
#include <array>
#include <numeric>
#include <set>

namespace backplane::safetensors {
namespace {

[[noreturn]] void refuse(const std::string& tensor, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "cannot write tensor " + detail::quote(tensor) + ": " + why);
}

void require_utf8(std::string_view text, const std::string& what) {
  if (detail::find_invalid_utf8(text)) {
    throw Error(ErrorCode::kInvalidArgument, "cannot write " + what + ": it is not valid UTF-8");
  }
}

// Byte size of a tensor, with the same checks a reader applies.
std::uint64_t byte_size(const TensorSpec& spec, const DTypeInfo& dtype) {
  std::uint64_t elements = 1;
  for (std::uint64_t dimension : spec.shape) {
    if (__builtin_mul_overflow(elements, dimension, &elements))
      refuse(spec.name, "its element count overflows 64 bits");
  }
  std::uint64_t bits = 0;
  if (__builtin_mul_overflow(elements, dtype.bits, &bits)) refuse(spec.name, "its bit count overflows 64 bits");
  if (bits % 8 != 0) {
    refuse(spec.name, std::to_string(elements) + " elements of " + spec.dtype +
                          " do not fill whole bytes (a reader rejects it: MisalignedSlice)");
  }
  return bits / 8;
}

void append_unsigned_list(std::string& out, const std::vector<std::uint64_t>& values) {
  out += '[';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i != 0) out += ',';
    out += std::to_string(values[i]);
  }
  out += ']';
}

// The 8-byte little-endian length, then the JSON padded with spaces.
std::string frame(std::string json) {
  json.append((8 - json.size() % 8) % 8, ' ');
  if (json.size() > kMaxHeaderSize) {
    throw Error(ErrorCode::kInvalidArgument, "cannot write a header of " + std::to_string(json.size()) +
                                                 " bytes: readers refuse more than " + std::to_string(kMaxHeaderSize));
  }
  std::string prefix(8, '\0');
  auto size = static_cast<std::uint64_t>(json.size());
  for (std::size_t i = 0; i < 8; ++i) prefix[i] = static_cast<char>((size >> (8 * i)) & 0xFF);
  return prefix + json;
}

void check_data_sizes(std::span<const HostTensor> tensors, const FilePlan& plan) {
  for (std::size_t i = 0; i < plan.order.size(); ++i) {
    const HostTensor& tensor = tensors[plan.order[i]];
    std::uint64_t expected = plan.header.tensors[i].byte_size();
    if (tensor.data.size() != expected) {
      refuse(tensor.spec.name, "it has " + std::to_string(tensor.data.size()) + " bytes of data, but shape and " +
                                   tensor.spec.dtype + " need " + std::to_string(expected));
    }
  }
}

std::vector<TensorSpec> specs_of(std::span<const HostTensor> tensors) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const HostTensor& tensor : tensors) specs.push_back(tensor.spec);
  return specs;
}

}  // namespace

FilePlan plan_file(std::span<const TensorSpec> tensors, const std::optional<Metadata>& metadata) {
  std::vector<const DTypeInfo*> dtype_of(tensors.size());
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorSpec& spec = tensors[i];
    // `__metadata__` would be read back as the metadata field, not a tensor.
    if (spec.name == "__metadata__") refuse(spec.name, "the name is reserved for the metadata");
    require_utf8(spec.name, "a tensor name");
    if (!names.insert(spec.name).second) refuse(spec.name, "the name is given twice");
    dtype_of[i] = find_dtype(spec.dtype);
    if (dtype_of[i] == nullptr) refuse(spec.name, "unknown dtype " + detail::quote(spec.dtype));
  }
  if (metadata) {
    for (const auto& [key, value] : *metadata) {
      require_utf8(key, "a metadata key");
      require_utf8(value, "the metadata value of " + detail::quote(key));
    }
  }

  FilePlan plan;
  plan.order.resize(tensors.size());
  std::iota(plan.order.begin(), plan.order.end(), std::size_t{0});
  // Descending dtype (so each tensor's offset is a multiple of its element
  // size), then name, bytewise: the reference's sort.
  std::sort(plan.order.begin(), plan.order.end(), [&](std::size_t a, std::size_t b) {
    if (dtype_of[a] != dtype_of[b]) return dtype_of[a] > dtype_of[b];
    return tensors[a].name < tensors[b].name;
  });

  std::string json = "{";
  if (metadata) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : *metadata) {
      if (!first) json += ',';
      first = false;
      detail::append_json_string(json, key);
      json += ':';
      detail::append_json_string(json, value);
    }
    json += '}';
  }
  std::uint64_t offset = 0;
  for (std::size_t index : plan.order) {
    const TensorSpec& spec = tensors[index];
    std::uint64_t size = byte_size(spec, *dtype_of[index]);
    std::uint64_t end = 0;
    if (__builtin_add_overflow(offset, size, &end)) refuse(spec.name, "the data section would pass 2^64 bytes");
    if (json.size() > 1) json += ',';
    detail::append_json_string(json, spec.name);
    json += ":{\"dtype\":";
    detail::append_json_string(json, spec.dtype);
    json += ",\"shape\":";
    append_unsigned_list(json, spec.shape);
    json += ",\"data_offsets\":";
    append_unsigned_list(json, {offset, end});
    json += '}';
    plan.header.tensors.push_back(TensorEntry{spec.name, spec.dtype, dtype_of[index]->bits, spec.shape, offset, end});
    offset = end;
  }
  json += '}';

  plan.prefix = frame(std::move(json));
  plan.header.metadata = metadata;
  plan.header.header_size = plan.prefix.size() - 8;
  plan.header.data_offset = plan.prefix.size();
  if (__builtin_add_overflow(offset, plan.header.data_offset, &plan.header.file_size)) {
    throw Error(ErrorCode::kInvalidArgument, "cannot write a file of more than 2^64 bytes");
  }
  return plan;
}

std::vector<std::byte> serialize(std::span<const HostTensor> tensors, const std::optional<Metadata>& metadata) {
  std::vector<TensorSpec> specs = specs_of(tensors);
  FilePlan plan = plan_file(specs, metadata);
  check_data_sizes(tensors, plan);
  std::vector<std::byte> bytes;
  bytes.reserve(static_cast<std::size_t>(plan.header.file_size));
  const auto* prefix = reinterpret_cast<const std::byte*>(plan.prefix.data());
  bytes.insert(bytes.end(), prefix, prefix + plan.prefix.size());
  for (std::size_t index : plan.order)
    bytes.insert(bytes.end(), tensors[index].data.begin(), tensors[index].data.end());
  return bytes;
}

void save(const std::filesystem::path& path, std::span<const HostTensor> tensors,
          const std::optional<Metadata>& metadata) {
  std::vector<TensorSpec> specs = specs_of(tensors);
  FilePlan plan = plan_file(specs, metadata);
  check_data_sizes(tensors, plan);
  ::backplane::detail::AtomicFile file(path);
  file.write(std::as_bytes(std::span(plan.prefix)));
  for (std::size_t index : plan.order) file.write(tensors[index].data);
  file.commit();
}

}  // namespace backplane::safetensors
