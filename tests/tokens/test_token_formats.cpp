// The format table is the one list of formats: docs/tokens.md's Formats
// table has its rows in its order, and the messages that name formats are
// made from it.
#include "support/errors.hpp"

#include "tokens/token_formats.hpp"
#include "tokens/token_layout.hpp"

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <fstream>
#include <string>
#include <vector>

using namespace backplane;
using namespace backplane::detail;
using namespace backplane::testing;

namespace {

// The cells of a Markdown table row, split at unescaped '|' and trimmed.
std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (std::size_t index = 1; index < line.size(); ++index) {  // past the leading '|'
    if (line[index] == '|' && line[index - 1] != '\\') {
      const auto first = cell.find_first_not_of(' ');
      const auto last = cell.find_last_not_of(' ');
      cells.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
      cell.clear();
    } else {
      cell += line[index];
    }
  }
  return cells;
}

// The rows of the first table after the heading "## Formats", header and
// separator left out.
std::vector<std::vector<std::string>> documented_formats() {
  std::ifstream doc(std::string(BP_TEST_SOURCE_DIR) + "/docs/tokens.md");
  REQUIRE(doc);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  bool in_section = false;
  int table_lines = 0;
  while (std::getline(doc, line)) {
    if (line.starts_with("## ")) {
      if (in_section) break;
      in_section = line == "## Formats";
      continue;
    }
    if (!in_section) continue;
    if (!line.starts_with("|")) {
      if (table_lines > 0) break;  // the first table ended
      continue;
    }
    if (++table_lines > 2) rows.push_back(cells_of(line));
  }
  return rows;
}

}  // namespace

TEST_CASE("[tokens] docs/tokens.md lists the formats of the table, in detection order, recognised as it says") {
  const std::vector<std::vector<std::string>> rows = documented_formats();
  const std::span<const TokenFormat> formats = token_formats();
  REQUIRE(rows.size() == formats.size());
  for (std::size_t index = 0; index < formats.size(); ++index) {
    CAPTURE(formats[index].name);
    REQUIRE(rows[index].size() >= 2);
    CHECK(rows[index][0] == formats[index].name);
    CHECK(rows[index][1] == formats[index].recognised_by);
  }
}

TEST_CASE("[tokens] the table ends with a format that recognises any file, and every row is complete") {
  const std::span<const TokenFormat> formats = token_formats();
  REQUIRE(!formats.empty());
  CHECK(formats.back().recognises({}, "any.name"));
  CHECK(formats.back().needs_dtype);
  for (const TokenFormat& format : formats) {
    CAPTURE(format.name);
    CHECK(!format.name.empty());
    CHECK(!format.with_article.empty());
    CHECK((format.recognises != nullptr));
    CHECK((format.header_bytes != nullptr));
    CHECK((format.read != nullptr));
  }
}

TEST_CASE("[tokens] the messages that name formats come from the table") {
  const std::span<const TokenFormat> formats = token_formats();
  const std::string raw_file(16, '\0');
  const Error no_dtype =
      error_from([&] { describe_token_file(std::as_bytes(std::span(raw_file)), raw_file.size(), "plain.bin", {}); });
  CHECK(no_dtype.code() == ErrorCode::kInvalidArgument);
  for (const TokenFormat& format : formats) {
    CAPTURE(format.name);
    if (!format.needs_dtype) CHECK(contains(no_dtype.what(), fmt::format("not {}", format.with_article)));
  }
  CHECK(contains(no_dtype.what(), "plain.bin: a raw token file (not "));

  TokenRequest named;
  named.dtype = DType::kU16;
  named.name = "tokens";
  const Error name_on_raw =
      error_from([&] { describe_token_file(std::as_bytes(std::span(raw_file)), raw_file.size(), "plain.bin", named); });
  for (const TokenFormat& format : formats) {
    if (format.names_tensors) CHECK(contains(name_on_raw.what(), format.name));
  }
  CHECK(contains(name_on_raw.what(), "plain.bin: a tensor name ('tokens') applies to "));
  CHECK(contains(name_on_raw.what(), " files only"));
  CHECK(contains(name_on_raw.what(), "; this is a raw token file"));
}
