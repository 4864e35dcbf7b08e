// load_tokens over a given table of formats: the public load_tokens is this
// over token_formats(); the tests load through a table with formats of
// their own (a format of two files among them).
#pragma once

#include "tokens/token_formats.hpp"

#include <backplane/tokens.hpp>

#include <span>

namespace backplane::detail {

Array load_tokens_with(Runtime& runtime, const std::filesystem::path& path, const TokenFileOptions& options,
                       std::span<const TokenFormat> formats);
// The same, with the path as given and the document starts the format records.
TokenFileEntry load_token_entry_with(Runtime& runtime, const std::filesystem::path& path,
                                     const TokenFileOptions& options, std::span<const TokenFormat> formats);

}  // namespace backplane::detail
