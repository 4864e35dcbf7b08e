// The files a glob(3) pattern names, for load_token_files.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace backplane::detail {

// Every path matching `pattern` (glob(3): *, ?, [...]; no ~ or braces),
// sorted bytewise. Directories that cannot be read are skipped, as a shell
// skips them. A path that exists as written matches itself even when glob
// would read its characters as a pattern ("shard[1].bin"), and so does the
// prefix of a dataset of two files that load_tokens opens by it (a
// Megatron-Core PREFIX, of PREFIX.idx and PREFIX.bin), when glob matches
// nothing else. Throws
// Error(kNotFound) naming the pattern when nothing matches (an empty list
// with `allow_empty`), Error(kInvalidArgument) for an empty pattern or one
// holding a NUL byte, Error(kOutOfMemory), Error(kIo) for any other failure
// of glob.
std::vector<std::string> glob_paths(std::string_view pattern, bool allow_empty = false);

}  // namespace backplane::detail
