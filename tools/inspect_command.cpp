// `backplane inspect FILE [--json]`: a safetensors file's tensors, dtypes,
// shapes, offsets and metadata, and whether it is valid. Reads only the
// header. Exit status: 0 valid, 1 invalid or unreadable, 2 usage error.
// The JSON shape is documented in docs/safetensors.md and only grows.
#include "commands.hpp"

#include <backplane/safetensors.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

namespace backplane::tools {
namespace {

namespace st = backplane::safetensors;
using json = nlohmann::ordered_json;

constexpr std::string_view kUsage = "usage: backplane inspect FILE [--json]\n";

// A name as the terminal shows it: raw unless it holds control characters
// (which could rewrite the line), then quoted with escapes.
std::string printable(std::string_view text) {
  bool plain =
      std::none_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; });
  if (plain && !text.empty()) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7F) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string shape_text(const std::vector<std::uint64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string dump(const json& value) { return value.dump(2, ' ', false, json::error_handler_t::replace); }

json header_json(const std::string& file, const st::Header& header) {
  json tensors = json::array();
  std::uint64_t data_bytes = 0;
  for (const st::TensorEntry& tensor : header.tensors) {
    data_bytes += tensor.byte_size();
    tensors.push_back({{"name", tensor.name},
                       {"dtype", tensor.dtype},
                       {"shape", tensor.shape},
                       {"data_offsets", {tensor.begin, tensor.end}},
                       {"file_offsets", {header.data_offset + tensor.begin, header.data_offset + tensor.end}},
                       {"nbytes", tensor.byte_size()}});
  }
  json metadata = nullptr;
  if (header.metadata) {
    metadata = json::object();
    for (const auto& [key, value] : *header.metadata) metadata[key] = value;
  }
  return {{"file", file},
          {"valid", true},
          {"file_size", header.file_size},
          {"header_size", header.header_size},
          {"data_offset", header.data_offset},
          {"data_size", data_bytes},
          {"metadata", metadata},
          {"tensors", tensors}};
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

}  // namespace

int run_inspect(const Arguments& args) {
  std::optional<std::string> file;
  bool as_json = false;
  bool options_done = false;
  for (std::string_view arg : args) {
    if (!options_done && arg == "--json") {
      as_json = true;
    } else if (!options_done && (arg == "--help" || arg == "-h")) {
      fmt::print("{}", kUsage);
      return 0;
    } else if (!options_done && arg == "--") {
      options_done = true;
    } else if (!options_done && arg.size() > 1 && arg.front() == '-') {
      fmt::print(stderr, "backplane inspect: unknown option '{}'\n{}", arg, kUsage);
      return 2;
    } else if (file) {
      fmt::print(stderr, "backplane inspect: one file at a time\n{}", kUsage);
      return 2;
    } else {
      file = std::string(arg);
    }
  }
  if (!file) {
    fmt::print(stderr, "{}", kUsage);
    return 2;
  }

  try {
    st::Header header = st::read_header(*file);
    if (as_json) {
      fmt::print("{}\n", dump(header_json(*file, header)));
    } else {
      print_text(*file, header);
    }
    return 0;
  } catch (const Error& error) {
    const auto* format_error = dynamic_cast<const st::FormatError*>(&error);
    if (as_json) {
      json details = {
          {"code", to_string(error.code())},
          {"rule", format_error ? json(st::rule_name(format_error->rule())) : json(nullptr)},
          {"tensor", format_error && format_error->tensor() ? json(*format_error->tensor()) : json(nullptr)},
          {"message", error.what()}};
      fmt::print("{}\n", dump({{"file", *file}, {"valid", false}, {"error", details}}));
    } else if (format_error) {
      fmt::print("file       {}\n", printable(*file));
      fmt::print("verdict    invalid: {}{}\n", st::rule_name(format_error->rule()),
                 format_error->tensor() ? " (tensor " + printable(*format_error->tensor()) + ")" : "");
    }
    fmt::print(stderr, "backplane inspect: error: {}\n", error.what());
    return 1;
  }
}

}  // namespace backplane::tools
