// `backplane inspect FILE [--json]`: a safetensors file's tensors, dtypes,
// shapes, offsets and metadata, and whether it is valid. Reads only the
// header. A token file of another format (an llm.c shard, a NumPy or
// Megatron file) is named as such, with the call that reads it. Exit status:
// 0 valid, 1 invalid or unreadable, 2 usage error.
// The JSON shape is documented in docs/safetensors.md and only grows.
#include "arguments.hpp"
#include "commands.hpp"

#include <backplane/safetensors.hpp>
#include <backplane/tokens.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <span>
#include <string>

namespace backplane::tools {
namespace {

namespace st = backplane::safetensors;
using json = nlohmann::ordered_json;

constexpr std::string_view kUsage =
    "usage: backplane inspect FILE [--json]\n"
    "       backplane inspect s3://BUCKET/KEY | http(s)://URL [--json]   (a token file in object storage)\n";

std::string shape_text(const std::vector<std::uint64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string dump(const json& value) { return value.dump(2, ' ', false, json::error_handler_t::replace); }

// Writes the JSON of a valid header as it goes, tensor by tensor, exactly as
// dump(2) would print the whole document: a header of a million tensors
// never becomes a JSON tree in memory (several times the header's size).
class StreamedJson {
 public:
  ~StreamedJson() { flush(); }
  void write(std::string_view text) {
    out_.append(text);
    if (out_.size() >= kFlushAt) flush();
  }
  // `value` dumped at `indent` spaces of nesting, its first line not indented.
  void write(const json& value, std::size_t indent) {
    const std::string text = dump(value);
    std::size_t start = 0;
    while (start < text.size()) {
      const std::size_t end = std::min(text.find('\n', start), text.size());
      if (start > 0) out_.append(indent, ' ');
      out_.append(text, start, end - start);
      if (end < text.size()) out_ += '\n';
      start = end + 1;
    }
    if (out_.size() >= kFlushAt) flush();
  }
  // A tensor entry at the tensors array's nesting, by hand: a million of
  // them through a JSON object each would take several times read_header.
  void write_tensor(const st::TensorEntry& tensor, std::uint64_t data_offset) {
    out_ += "{\n      \"name\": ";
    append_string(tensor.name);
    out_ += ",\n      \"dtype\": ";
    append_string(tensor.dtype);
    out_ += ",\n      \"shape\": ";
    append_numbers(tensor.shape);
    out_ += ",\n      \"data_offsets\": ";
    append_numbers({tensor.begin, tensor.end});
    out_ += ",\n      \"file_offsets\": ";
    append_numbers({data_offset + tensor.begin, data_offset + tensor.end});
    fmt::format_to(std::back_inserter(out_), ",\n      \"nbytes\": {}\n    }}", tensor.byte_size());
    if (out_.size() >= kFlushAt) flush();
  }
  void flush() {
    std::fwrite(out_.data(), 1, out_.size(), stdout);
    out_.clear();
  }

 private:
  // As dump() writes a string: UTF-8 as is (a valid header's names are valid
  // UTF-8), escapes for the quote, the backslash and control characters.
  void append_string(std::string_view text) {
    out_ += '"';
    for (const char c : text) {
      switch (c) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\b': out_ += "\\b"; break;
        case '\f': out_ += "\\f"; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            fmt::format_to(std::back_inserter(out_), "\\u{:04x}", static_cast<unsigned>(c));
          } else {
            out_ += c;
          }
      }
    }
    out_ += '"';
  }
  // An array of numbers at the nesting of a tensor's fields, as dump(2) does.
  void append_numbers(std::initializer_list<std::uint64_t> numbers) {
    append_numbers(std::span<const std::uint64_t>(numbers.begin(), numbers.size()));
  }
  void append_numbers(std::span<const std::uint64_t> numbers) {
    if (numbers.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    for (std::size_t index = 0; index < numbers.size(); ++index) {
      fmt::format_to(std::back_inserter(out_), "{}\n        {}", index == 0 ? "" : ",", numbers[index]);
    }
    out_ += "\n      ]";
  }

  static constexpr std::size_t kFlushAt = std::size_t{1} << 20;
  std::string out_;
};

void print_json(const std::string& file, const st::Header& header) {
  std::uint64_t data_bytes = 0;
  for (const st::TensorEntry& tensor : header.tensors) data_bytes += tensor.byte_size();
  json metadata = nullptr;
  if (header.metadata) {
    metadata = json::object();
    for (const auto& [key, value] : *header.metadata) metadata[key] = value;
  }
  StreamedJson out;
  out.write("{\n  \"file\": ");
  out.write(json(file), 2);
  out.write(
      fmt::format(",\n  \"valid\": true,\n  \"file_size\": {},\n  \"header_size\": {},\n  \"data_offset\": {},\n"
                  "  \"data_size\": {},\n  \"metadata\": ",
                  header.file_size, header.header_size, header.data_offset, data_bytes));
  out.write(metadata, 2);
  out.write(",\n  \"tensors\": ");
  if (header.tensors.empty()) out.write("[]");
  for (std::size_t index = 0; index < header.tensors.size(); ++index) {
    const st::TensorEntry& tensor = header.tensors[index];
    out.write(index == 0 ? "[\n    " : ",\n    ");
    out.write_tensor(tensor, header.data_offset);
  }
  if (!header.tensors.empty()) out.write("\n  ]");
  out.write("\n}\n");
}

void print_text(const std::string& file, const st::Header& header) {
  std::uint64_t data_bytes = 0;
  for (const auto& tensor : header.tensors) data_bytes += tensor.byte_size();
  fmt::print("file       {}\n", printable(file));
  fmt::print("size       {} bytes ({})\n", header.file_size, format_bytes(header.file_size));
  fmt::print("header     {} bytes; data starts at byte {}\n", header.header_size, header.data_offset);
  if (!header.metadata) {
    fmt::print("metadata   none\n");
  } else if (header.metadata->empty()) {
    fmt::print("metadata   (empty)\n");
  } else {
    bool first = true;
    for (const auto& [key, value] : *header.metadata) {
      fmt::print("{}{} = {}\n", first ? "metadata   " : "           ", printable(key), printable(value));
      first = false;
    }
  }
  fmt::print("tensors    {} ({} of data)\n", header.tensors.size(), format_bytes(data_bytes));
  if (!header.tensors.empty()) {
    struct Row {
      std::string name, dtype, shape, relative, absolute, bytes;
    };
    std::vector<Row> rows{{"name", "dtype", "shape", "data offsets", "file offsets", "bytes"}};
    for (const auto& tensor : header.tensors) {
      rows.push_back({printable(tensor.name), tensor.dtype, shape_text(tensor.shape),
                      fmt::format("[{}, {})", tensor.begin, tensor.end),
                      fmt::format("[{}, {})", header.data_offset + tensor.begin, header.data_offset + tensor.end),
                      std::to_string(tensor.byte_size())});
    }
    std::size_t widths[5] = {};
    for (const Row& row : rows) {
      const std::string* cells[5] = {&row.name, &row.dtype, &row.shape, &row.relative, &row.absolute};
      for (int i = 0; i < 5; ++i) widths[i] = std::max(widths[i], cells[i]->size());
    }
    for (const Row& row : rows) {
      fmt::print("  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:>}\n", row.name, widths[0], row.dtype, widths[1],
                 row.shape, widths[2], row.relative, widths[3], row.absolute, widths[4], row.bytes);
    }
  }
  fmt::print("verdict    valid\n");
}

// The file as a token file of another format than safetensors, when it is
// one: what a user who ran inspect on a training shard needs to hear.
std::optional<TokenFileInfo> other_token_format(const std::string& file) {
  try {
    TokenFileInfo info = describe_tokens(file);
    if (info.format == "safetensors") return std::nullopt;
    return info;
  } catch (const Error&) {
    return std::nullopt;  // not a token file either (a raw one needs a dtype): the safetensors error stands
  }
}

std::string token_file_text(const std::string& file, const TokenFileInfo& info) {
  return fmt::format(
      "{} is a token file, not a safetensors file: {} of {} {} tokens; read it with load_tokens "
      "(Python: backplane.load_tokens), see docs/tokens.md",
      printable(file), info.format, info.count, dtype_name(info.dtype));
}

bool names_object(std::string_view file) {
  return file.starts_with("s3://") || file.starts_with("http://") || file.starts_with("https://");
}

// An object (s3://, http(s)://) is read only as far as its header: what
// describe_tokens finds there, by ranged requests.
int inspect_object(const std::string& object, bool as_json) {
  try {
    const TokenFileInfo info = describe_tokens(object);
    if (as_json) {
      json report = {{"object", object},
                     {"format", info.format},
                     {"dtype", std::string(dtype_name(info.dtype))},
                     {"count", info.count},
                     {"data_file", info.data_file}};
      if (info.documents) report["documents"] = *info.documents;
      fmt::print("{}\n", dump(report));
    } else {
      fmt::print("object     {}\n", printable(object));
      fmt::print("format     {}\n", info.format);
      fmt::print("tokens     {} {}\n", info.count, dtype_name(info.dtype));
      if (info.data_file != object) fmt::print("data       {}\n", printable(info.data_file));
      if (info.documents) fmt::print("documents  {}\n", *info.documents);
    }
    return 0;
  } catch (const Error& error) {
    fmt::print(stderr, "backplane inspect: error: {}\n", error.what());
    return 1;
  }
}

}  // namespace

int run_inspect(const Arguments& args) {
  const ParsedArguments parsed = parse_arguments(args, {{"--json", false}});
  if (parsed.help) {
    fmt::print("{}", kUsage);
    return 0;
  }
  if (!parsed.error.empty() || parsed.positional.size() > 1) {
    fmt::print(stderr, "backplane inspect: {}\n{}", parsed.error.empty() ? "one file at a time" : parsed.error, kUsage);
    return 2;
  }
  if (parsed.positional.empty()) {
    fmt::print(stderr, "{}", kUsage);
    return 2;
  }
  const std::string file(parsed.positional.front());
  const bool as_json = !parsed.options.empty();
  if (names_object(file)) return inspect_object(file, as_json);

  try {
    st::Header header = st::read_header(file);
    if (as_json) {
      print_json(file, header);
    } else {
      print_text(file, header);
    }
    return 0;
  } catch (const Error& error) {
    const auto* format_error = dynamic_cast<const st::FormatError*>(&error);
    const std::optional<TokenFileInfo> tokens = other_token_format(file);
    if (as_json) {
      json details = {
          {"code", to_string(error.code())},
          {"rule", format_error ? json(st::rule_name(format_error->rule())) : json(nullptr)},
          {"tensor", format_error && format_error->tensor() ? json(*format_error->tensor()) : json(nullptr)},
          {"message", error.what()}};
      json report = {{"file", file}, {"valid", false}, {"error", details}};
      if (tokens) {
        report["token_file"] = {{"format", tokens->format},
                                {"dtype", std::string(dtype_name(tokens->dtype))},
                                {"count", tokens->count},
                                {"data_file", tokens->data_file}};
      }
      fmt::print("{}\n", dump(report));
    } else if (tokens) {
      fmt::print("file       {}\n", printable(file));
      fmt::print("verdict    not safetensors: {} of {} {} tokens\n", tokens->format, tokens->count,
                 dtype_name(tokens->dtype));
      fmt::print(stderr, "backplane inspect: {}\n", token_file_text(file, *tokens));
      return 1;
    } else if (format_error) {
      fmt::print("file       {}\n", printable(file));
      fmt::print("verdict    invalid: {}{}\n", st::rule_name(format_error->rule()),
                 format_error->tensor() ? " (tensor " + printable(*format_error->tensor()) + ")" : "");
    }
    fmt::print(stderr, "backplane inspect: error: {}\n", error.what());
    return 1;
  }
}

}  // namespace backplane::tools
