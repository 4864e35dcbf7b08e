#include "targets.hpp"

#include "config/config.hpp"
#include "config/selector.hpp"
#include "loader/table_validation.hpp"
#include "remote/s3_xml.hpp"
#include "safetensors/json_number.hpp"
#include "tokens/token_formats.hpp"
#include "tokens/token_layout.hpp"
#include "trace_reader.hpp"

#include <backplane/batch_stream.hpp>
#include <backplane/error.hpp>
#include <backplane/safetensors.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace backplane::fuzz {
using namespace ::backplane::detail;
namespace {

void require(bool condition, const char* invariant) {
  if (!condition) throw std::logic_error(std::string("fuzz invariant broken: ") + invariant);
}

std::string_view as_text(Bytes data) { return {reinterpret_cast<const char*>(data.data()), data.size()}; }

// Reads fields off the front of the input; zeros once it runs out.
class Reader {
 public:
  explicit Reader(Bytes data) : data_(data) {}
  template <class T>
  T take() {
    T value{};
    const std::size_t count = std::min(sizeof(T), data_.size());
    if (count == 0) return value;
    std::memcpy(&value, data_.data(), count);
    data_ = data_.subspan(count);
    return value;
  }
  Bytes rest() const { return data_; }

 private:
  Bytes data_;
};

void check_header(const safetensors::Header& header) {
  require(header.data_offset == 8 + header.header_size, "data_offset is 8 + N");
  require(header.data_offset <= header.file_size, "the header fits in the file");
  std::uint64_t previous_end = 0;
  std::uint64_t data_bytes = 0;
  for (const auto& tensor : header.tensors) {
    require(tensor.begin <= tensor.end, "begin <= end");
    require(tensor.begin >= previous_end || tensor.begin == tensor.end, "tensors in data order, not overlapping");
    require(header.data_offset + tensor.end <= header.file_size, "tensor data inside the file");
    require(safetensors::find_dtype(tensor.dtype) != nullptr, "known dtype");
    // element_count() fits (validation checked it); bytes follow from it.
    const std::uint64_t bits = tensor.element_count() * tensor.dtype_bits;
    require(bits % 8 == 0 && bits / 8 == tensor.byte_size(), "byte size matches shape and dtype");
    require(header.find(tensor.name) == &tensor, "find() locates every tensor");
    previous_end = std::max(previous_end, tensor.end);
    data_bytes += tensor.byte_size();
  }
  require(data_bytes <= header.file_size - header.data_offset, "no more data than the file holds");
}

// What our writer makes of an accepted header must read back the same.
void round_trip(const safetensors::Header& header) {
  std::vector<safetensors::TensorSpec> specs;
  std::uint64_t data_bytes = 0;
  for (const auto& tensor : header.tensors) {
    specs.push_back({tensor.name, tensor.dtype, tensor.shape});
    data_bytes += tensor.byte_size();
  }
  safetensors::FilePlan plan;
  try {
    plan = safetensors::plan_file(specs, header.metadata);
  } catch (const Error&) {
    return;  // e.g. re-escaped metadata grew past kMaxHeaderSize
  }
  const auto* prefix = reinterpret_cast<const std::byte*>(plan.prefix.data());
  const auto again =
      safetensors::parse_header({prefix, plan.prefix.size()}, plan.prefix.size() + data_bytes, "round-trip");
  require(again.tensors.size() == header.tensors.size(), "round-trip keeps every tensor");
  for (const auto& tensor : header.tensors) {
    const auto* copy = again.find(tensor.name);
    require(copy != nullptr, "round-trip keeps the names");
    require(copy->dtype == tensor.dtype && copy->shape == tensor.shape, "round-trip keeps dtype and shape");
  }
  require(again.metadata == header.metadata, "round-trip keeps the metadata");
}

// ---- token_headers: a layout the loader would map ----

void check_token_layout(std::span<const std::byte> prefix, std::uint64_t file_size, std::string_view file,
                        const TokenRequest& request) {
  TokenLayout layout;
  try {
    layout = describe_token_file(prefix, file_size, file, request);
  } catch (const Error&) {
    return;
  }
  require(dtype_is_integer(layout.dtype), "tokens are integers");
  require(!request.dtype || *request.dtype == layout.dtype, "the dtype asked for is the one found");
  require(layout.format == &detect_token_format(prefix, file), "the layout's format is the one detected");
  std::uint64_t data_bytes = 0;
  std::uint64_t end = 0;
  require(!__builtin_mul_overflow(layout.count, static_cast<std::uint64_t>(dtype_bits(layout.dtype) / 8), &data_bytes),
          "the byte count fits 64 bits");
  require(!__builtin_add_overflow(layout.data_offset, data_bytes, &end), "the end offset fits 64 bits");
  // Tokens in a second file are checked against it by the loader.
  require(!layout.data_file.empty() || end <= file_size, "the tokens lie inside the file");
  // A safetensors tensor may be followed by others; every other format's
  // tokens run to the end of the file.
  require(layout.format->names_tensors || !layout.data_file.empty() || end == file_size,
          "the tokens end where the file does");
  // The loader reads min(4096, size) bytes, then what the format's header_bytes asks.
  const std::uint64_t needed = layout.format->header_bytes(prefix, file_size);
  require(needed <= file_size, "the header never asks for more than the file");
  const std::uint64_t loader_reads = std::max<std::uint64_t>(needed, std::min<std::uint64_t>(prefix.size(), 4096));
  require(loader_reads <= prefix.size(), "an accepted header lies inside the bytes given");
  const TokenLayout again =
      describe_token_file(prefix.first(static_cast<std::size_t>(loader_reads)), file_size, file, request);
  require(again.format == layout.format && again.dtype == layout.dtype && again.data_offset == layout.data_offset &&
              again.count == layout.count,
          "the header bytes the loader reads give the same layout");
}

// ---- plugin_table: pointers only ever aimed at real memory ----

BP_Error* trap_call(void*) {
  std::abort();  // validate_table must never call into the plugin
}

template <class Field>
void set_function(Field& field, bool present) {
  using Trap = BP_Error* (*)(void*);
  Trap trap = present ? &trap_call : nullptr;
  static_assert(sizeof(field) == sizeof(trap));
  std::memcpy(&field, &trap, sizeof(trap));
}

// The length of the JSON number (RFC 8259's grammar) at the start of `text`;
// nullopt when the text does not start with one, or the number is cut short
// ("1.", "1e+") or has a leading zero ("01").
std::optional<std::size_t> json_number_length(std::string_view text) {
  std::size_t at = 0;
  const auto digits = [&] {
    const std::size_t from = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
    return at - from;
  };
  if (at < text.size() && text[at] == '-') ++at;
  if (at < text.size() && text[at] == '0') {
    ++at;
    if (digits() != 0) return std::nullopt;
  } else if (digits() == 0) {
    return std::nullopt;
  }
  if (at < text.size() && text[at] == '.') {
    ++at;
    if (digits() == 0) return std::nullopt;
  }
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    if (at < text.size() && (text[at] == '+' || text[at] == '-')) ++at;
    if (digits() == 0) return std::nullopt;
  }
  return at;
}

// At the top of the double range, where serde_json's twice-rounded float and
// strtod's correctly rounded one may fall on either side of infinity.
bool at_top_of_range(double value) {
  return std::fabs(value) >= std::numeric_limits<double>::max() * (1 - 4 * std::numeric_limits<double>::epsilon());
}

}  // namespace

void safetensors_header(Bytes data) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data.data());
  safetensors::Header header;
  try {
    header = safetensors::parse_header({bytes, data.size()}, data.size(), "fuzz.safetensors");
  } catch (const Error&) {
    return;
  }
  check_header(header);
  round_trip(header);
}

void config(Bytes data) {
  try {
    const Config parsed = parse_config(as_text(data), "/fuzz/config.toml");
    require(data.size() <= kMaxConfigFileBytes, "oversized text is refused");
    if (parsed.default_device) parse_selector(*parsed.default_device);  // already checked: must not throw
    for (const auto& [name, backend] : parsed.backend) require(is_valid_backend_name(name), "backend names valid");
  } catch (const Error&) {
  }
}

void selector(Bytes data) {
  const std::string_view text = as_text(data);
  DeviceSelector parsed;
  try {
    parsed = parse_selector(text);
  } catch (const Error&) {
    return;
  }
  require(is_valid_backend_name(parsed.backend), "backend name valid");
  require(!parsed.ordinal || *parsed.ordinal >= 0, "ordinal >= 0");
  require(parsed.to_string() == text, "only canonical text is accepted");
  require(parse_selector(parsed.to_string()) == parsed, "round-trip");
}

void plugin_table(Bytes data) {
  Reader reader(data);
  // The table sits at the start of a larger buffer so that a struct_size past
  // today's table (a newer minor) still describes readable memory.
  struct alignas(BP_PluginApi) Storage {
    BP_PluginApi table;
    std::array<unsigned char, 64> newer_fields;
  } storage{};
  BP_PluginApi& table = storage.table;

  const auto size_choice = reader.take<std::uint16_t>();
  table.struct_size = size_choice % (sizeof(Storage) + 1);
  const auto version_choice = reader.take<std::uint8_t>();
  table.abi_major = (version_choice & 1) != 0 ? reader.take<std::uint32_t>() : BP_ABI_MAJOR;
  table.abi_minor = reader.take<std::uint32_t>();
  table.priority = reader.take<std::int32_t>();
  table.capabilities = reader.take<BP_Capabilities>();

  // Names point into these buffers (or are NULL) with sizes up to the buffer.
  static const std::string kNames[] = {"sim", "cpu", "Bad Name", std::string(80, 'a'), "x-y", ""};
  const auto name_choice = reader.take<std::uint8_t>();
  const auto name_size = reader.take<std::uint8_t>();
  const auto version_size = reader.take<std::uint8_t>();
  const auto present_mask = reader.take<std::uint32_t>();
  const auto expected_choice = reader.take<std::uint8_t>();
  const Bytes tail = reader.rest();
  const std::string free_text(as_text(tail.subspan(0, std::min<std::size_t>(tail.size(), 100))));
  const std::string* name_buffer = nullptr;
  const std::size_t names = std::size(kNames);
  if (name_choice % (names + 2) < names) name_buffer = &kNames[name_choice % (names + 2)];
  if (name_choice % (names + 2) == names) name_buffer = &free_text;
  // A heap copy of exactly the chosen size, so ASan catches a read past it.
  std::vector<char> name_storage;
  if (name_buffer != nullptr) {
    name_storage.assign(name_buffer->begin(), name_buffer->end());
    table.name_size = name_storage.empty() ? 0 : name_size % (name_storage.size() + 1);
    name_storage.resize(table.name_size);
    table.name = name_storage.empty() ? "" : name_storage.data();
  } else {
    table.name = nullptr;
    table.name_size = name_size;
  }
  std::vector<char> version_storage(version_size % 16, 'v');
  if ((present_mask >> 31) != 0) {
    table.version = nullptr;
    table.version_size = version_size;
  } else {
    table.version = version_storage.data();
    table.version_size = version_storage.size();
  }
  int bit = 0;
  auto next = [&] { return ((present_mask >> (bit++ % 24)) & 1) != 0 || ((present_mask >> 30) & 1) != 0; };
  set_function(table.backend_create, next());
  set_function(table.backend_destroy, next());
  set_function(table.probe, next());
  set_function(table.device_count, next());
  set_function(table.device_info, next());
  set_function(table.memory_allocate, next());
  set_function(table.memory_free, next());
  set_function(table.copy_to_device, next());
  set_function(table.copy_to_host, next());
  set_function(table.copy_device_to_device, next());
  set_function(table.copy_to_device_async, next());
  set_function(table.copy_to_host_async, next());
  set_function(table.copy_device_to_device_async, next());
  set_function(table.event_wait, next());
  set_function(table.event_query, next());
  set_function(table.event_destroy, next());
  set_function(table.convert_integers, next());
  set_function(table.memory_wrap, next());
  if (!tail.empty()) {
    std::memcpy(storage.newer_fields.data(), tail.data(), std::min(tail.size(), storage.newer_fields.size()));
  }

  const std::string_view expected_names[] = {"", "sim", "cpu"};
  const std::string_view expected = expected_names[expected_choice % 3];
  const auto problem = validate_table(&table, expected);
  if (problem) {
    require(problem->status == BackendStatus::kFailed || problem->status == BackendStatus::kIncompatible,
            "a problem is failed or incompatible");
    require(!problem->reason.empty(), "a problem has a reason");
    return;
  }
  require(table.struct_size >= BP_PLUGIN_API_SIZE_1_0, "accepted tables hold the 1.0 fields");
  if ((table.capabilities & BP_CAPABILITY_WRAP_MEMORY) != 0) {
    require(BP_TABLE_HAS_CALL(&table, memory_wrap), "accepted tables claiming memory_wrap hold it");
  }
  require(table.abi_major == BP_ABI_MAJOR, "accepted tables speak our major");
  const std::string_view name(table.name, table.name_size);
  require(is_valid_backend_name(name), "accepted names are valid");
  require(expected.empty() || name == expected, "accepted names match the file");
  require(table.probe != nullptr && table.backend_create != nullptr && table.event_destroy != nullptr,
          "required calls present");
}

void batch_stream_state(Bytes data) {
  BatchStreamState state;
  try {
    state = BatchStreamState::from_json(as_text(data));
  } catch (const Error&) {
    return;
  }
  require(state.step >= 0 && state.global_batch >= 0 && state.context >= 0, "counts are not negative");
  const BatchStreamState again = BatchStreamState::from_json(state.to_json());
  require(again.seed == state.seed && again.step == state.step && again.global_batch == state.global_batch &&
              again.context == state.context && again.weights == state.weights &&
              again.sources.size() == state.sources.size() && again.documents == state.documents &&
              again.schedule == state.schedule && again.weight_schedule == state.weight_schedule &&
              again.mixture == state.mixture,
          "to_json round-trips");
  // A schedule's entries start after step 0 and increase, each with a
  // global batch and a context of at least 1.
  std::int64_t after = 0;
  for (const BatchStreamState::Stage& stage : state.schedule) {
    require(stage.step > after && stage.global_batch >= 1 && stage.context >= 1, "schedule entries are ordered");
    after = stage.step;
  }
  for (std::size_t index = 0; index < state.sources.size(); ++index) {
    require(again.sources[index].tokens == state.sources[index].tokens &&
                again.sources[index].dtype == state.sources[index].dtype &&
                again.sources[index].fingerprint == state.sources[index].fingerprint,
            "sources round-trip");
  }
}

void token_headers(Bytes data) {
  const std::span<const std::byte> file = std::as_bytes(data);
  for (const std::string_view name : {"fuzz.bin", "fuzz.safetensors", "fuzz.idx"}) {
    for (const std::optional<DType> dtype : {std::optional<DType>(), std::optional<DType>(DType::kU16)}) {
      check_token_layout(file, file.size(), name, TokenRequest{dtype, {}});
    }
  }
  // The same header at the start of a file of any size up to 2^64 - 1, as
  // no test machine could write.
  if (data.size() < 8) return;
  std::uint64_t claimed = 0;
  std::memcpy(&claimed, data.data() + data.size() - 8, 8);
  const auto prefix = file.first(data.size() - 8);
  check_token_layout(prefix, std::max<std::uint64_t>(claimed, prefix.size()), "fuzz.bin", {});
}

void json_number(Bytes data) {
  const std::string_view text = as_text(data);
  const safetensors::detail::JsonNumberScan scan = safetensors::detail::scan_json_number(text, 0);
  require(scan.number.has_value() == scan.error.empty(), "exactly one of a number and an error");
  require(scan.end <= text.size(), "the scan ends inside the text");
  const std::optional<std::size_t> length = json_number_length(text);
  if (!length) {
    require(!scan.number, "text that does not start with a JSON number is refused");
    return;
  }
  const std::string literal(text.substr(0, *length));
  const double expected = std::strtod(literal.c_str(), nullptr);
  if (!scan.number) {
    require(scan.error == "number out of range", "a JSON number is refused only as out of range");
    require(at_top_of_range(expected), "only a number at the top of the range or past it is out of range");
    return;
  }
  const safetensors::detail::JsonNumber& number = *scan.number;
  require(scan.end == *length, "the number ends where JSON's grammar ends it");
  std::uint64_t integer = 0;
  const auto parsed = std::from_chars(literal.data(), literal.data() + literal.size(), integer);
  const bool plain = literal.find_first_of("-.eE") == std::string::npos;
  require(number.is_unsigned == (plain && parsed.ec == std::errc{}), "u64 exactly for plain integers within u64");
  if (number.is_unsigned) require(number.unsigned_value == integer, "a u64 reads as its digits say");
  require(std::signbit(number.value) == (literal.front() == '-'), "the sign is the text's");
  // Where both accept, serde_json's float (rounded twice) agrees with strtod
  // to within a few ulps; below the normal range only the magnitude matters.
  const double magnitude = std::fabs(expected);
  if (std::isinf(expected)) {
    require(std::isfinite(number.value) && at_top_of_range(number.value),
            "a number strtod rounds to infinity is accepted only at the top of the range");
  } else if (magnitude >= std::numeric_limits<double>::min()) {
    require(std::fabs(number.value - expected) <= 4 * std::numeric_limits<double>::epsilon() * magnitude,
            "within 4 ulps of strtod");
  } else {
    require(std::fabs(number.value) <= 2 * std::numeric_limits<double>::min(),
            "a number strtod takes below the normal range stays there");
  }
}

void trace_summary(Bytes data) {
  std::istringstream in(std::string(as_text(data)));
  tools::TraceSummary summary;
  try {
    summary = tools::read_trace_summary(in);
  } catch (const Error&) {
    return;
  }
  require(summary.devices.size() <= tools::kMaxTraceGroups, "at most kMaxTraceGroups devices");
  require(summary.streams.size() <= tools::kMaxTraceGroups, "at most kMaxTraceGroups streams");
  std::uint64_t events = 0;
  for (const auto& [device, categories] : summary.devices) {
    for (const auto& [category, totals] : categories) {
      require(std::find(std::begin(tools::kDeviceCategories), std::end(tools::kDeviceCategories), category) !=
                  std::end(tools::kDeviceCategories),
              "only the reported categories");
      events += totals.events;
    }
  }
  for (const auto& [name, totals] : summary.batch_stream.by_name) events += totals.events;
  require(events <= data.size(), "no more events than bytes");
  std::uint64_t in_streams = 0;
  for (const auto& [stream, totals] : summary.streams) {
    for (const auto& [name, named] : totals.by_name) in_streams += named.events;
  }
  std::uint64_t in_total = 0;
  for (const auto& [name, totals] : summary.batch_stream.by_name) in_total += totals.events;
  require(in_streams <= in_total, "a stream's events are among all streams' events");
}

void s3_listing(Bytes data) {
  const std::string_view text = as_text(data);
  try {
    const ListingPage page = parse_listing(text, "fuzz");
    require(!page.truncated || !page.next_token.empty(), "a truncated page has a continuation token");
    require(page.objects.size() <= text.size() / 20, "each object took at least its <Key> and <Size> tags");
  } catch (const Error& error) {
    require(error.code() == ErrorCode::kIo, "a listing is refused with kIo");
  }
  const S3ErrorBody error = parse_error(text);
  require(error.message.size() <= 303, "an error's message is cut to 300 bytes");
}

}  // namespace backplane::fuzz
