// The token file formats, as one table. Detection asks the rows in order;
// the loader, the error messages and the Formats table of docs/tokens.md
// (checked by tests/tokens/test_token_formats.cpp) follow it. A new format
// is one row here and one reader: a header of its own with pure functions
// over the file's first bytes (llmc_header.hpp is the smallest example).
#pragma once

#include "tokens/token_layout.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace backplane::detail {

struct TokenFormat {
  // "llm.c shard": in messages ("the llm.c shard header says U16") and as
  // the first column of docs/tokens.md's table.
  std::string_view name;
  // "an llm.c shard": the format in a sentence.
  std::string_view with_article;
  // How a file is recognised, as docs/tokens.md's table says it.
  std::string_view recognised_by;
  // True when the file is of this format, judged from its first bytes (at
  // least min(8, the file's size) of them) and its name.
  bool (*recognises)(std::span<const std::byte> prefix, std::string_view file) noexcept;
  // How many of the file's first bytes `read` needs, judged from `prefix`
  // (min(file_size, 4096) bytes): the whole header where its length field is
  // sane, else what `prefix` holds (the reader then reports the bad length).
  // Never more than `file_size`.
  std::uint64_t (*header_bytes)(std::span<const std::byte> prefix, std::uint64_t file_size) noexcept;
  // The layout (its `format` is left for describe_token_file to set).
  // Throws Error(kInvalidFile) naming the file and the field of a header
  // that lies.
  TokenLayout (*read)(const TokenHeader& header);
  // The format holds named tensors: the request's `name` applies to it.
  bool names_tensors = false;
  // The file has no header to say its dtype: the request's dtype is required
  // and is the tokens' dtype (else it is a check of the header's).
  bool needs_dtype = false;
  // For a format of two files, an index (the header) beside the data, whose
  // reader names the data file in TokenLayout::data_file: the index to read
  // when `path` names the data file or the files' common prefix, else
  // nullopt (`path` is read as it is). It may look at the file system.
  // nullptr for formats of one file.
  std::optional<std::string> (*index_file_for)(const std::string& path) = nullptr;
};

// Every format, in detection order. The last row (raw) recognises any file.
std::span<const TokenFormat> token_formats() noexcept;

// The first row that recognises the file (of `formats`, the table by
// default; the last row must recognise any file).
const TokenFormat& detect_token_format(std::span<const std::byte> prefix, std::string_view file) noexcept;
const TokenFormat& detect_token_format(std::span<const std::byte> prefix, std::string_view file,
                                       std::span<const TokenFormat> formats) noexcept;

}  // namespace backplane::detail
