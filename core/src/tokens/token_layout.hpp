// Where the tokens of a token file are, decided from the file's first bytes
// and its size alone: no file is opened here, so the fuzzer and the tests
// reach every header rule without writing files. load_tokens.cpp opens,
// reads the prefix, asks this layer, then maps the file. The formats
// themselves are the rows of token_formats.hpp.
//
// Every function here throws backplane::Error naming the file (`file`, only
// used in messages) and the problem, with the codes tokens.hpp documents.
#pragma once

#include <backplane/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::detail {

struct TokenFormat;  // a row of the format table (token_formats.hpp)

// The tokens of a file: `count` elements of `dtype`, contiguous from byte
// `data_offset`. data_offset + count * size of dtype never overflows and,
// for tokens in the header's own file, never passes the file's size.
struct TokenLayout {
  const TokenFormat* format = nullptr;  // set by describe_token_file
  DType dtype = DType::kU8;
  std::uint64_t data_offset = 0;
  std::uint64_t count = 0;
  // Empty: the tokens are in the file the header is in. Otherwise the path
  // of the file that holds them (a format of an index beside a data file):
  // data_offset and count are within that file, whose size the loader
  // checks, since a reader sees only the header's file.
  std::string data_file;
  // Where documents start, as token offsets from data_offset, for a format
  // that records documents (a Megatron-Core index): the first token of each
  // document that holds any, so strictly increasing and below `count`.
  // nullopt for formats that record none.
  std::optional<std::vector<std::int64_t>> document_starts;
};

// What the caller asks for (TokenFileOptions without the device).
struct TokenRequest {
  std::optional<DType> dtype;  // required for raw files, else a check of the header's
  std::string_view name;       // the safetensors tensor; empty: the file's only one
};

// What a format's reader is given: the file's first bytes (at least what
// the format's header_bytes asked for, at most the whole file), its size, its
// name for messages, and the caller's request.
struct TokenHeader {
  std::span<const std::byte> prefix;
  std::uint64_t file_size = 0;
  std::string_view file;
  TokenRequest request;
  // `prefix` lies in a shared read-only mapping of the file (TokenFile maps
  // a long header rather than copy it): a reader that walks it once may
  // drop the pages it has read (util/page_advice drop_pages).
  bool prefix_mapped = false;
};

// Detects the format (token_formats.hpp) and reads the header. `prefix` must
// hold at least the format's header_bytes() of the file
// (Error(kInvalidArgument) otherwise) and at most `file_size`; bytes after
// the header are ignored. Checks the request against the format: a tensor
// name only where the format names tensors, a dtype that is an integer and,
// where the header gives one, the header's.
TokenLayout describe_token_file(std::span<const std::byte> prefix, std::uint64_t file_size, std::string_view file,
                                const TokenRequest& request);
// The same over another table of formats (the tests' own rows), and with
// `prefix_mapped` as TokenHeader says.
TokenLayout describe_token_file(std::span<const std::byte> prefix, std::uint64_t file_size, std::string_view file,
                                const TokenRequest& request, std::span<const TokenFormat> formats,
                                bool prefix_mapped = false);

}  // namespace backplane::detail
