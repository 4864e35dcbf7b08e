// Token files: the training set as zero-copy, read-only 1-D arrays on a cpu
// device, whatever format it was written in. docs/tokens.md lists the formats
// and errors; docs/batch-stream.md is the guide to sampling batches from them.
//
// The formats are the table in docs/tokens.md, which is the loader's own
// table (core/src/tokens/token_formats.hpp): what recognises each, in which
// order, and what each header must hold. Every offset and size is 64-bit: shards
// larger than 4 GiB are read as such.
//
// Error model: every function throws backplane::Error. kNotFound: no such file
// (or no file matches a pattern, or no tensor of that name); kInvalidFile: a
// header that lies (wrong version, a token count or shape that does not match
// the file's size, a dtype that is not an integer, a big-endian or Fortran-
// ordered NumPy array, a truncated header, an empty or ragged raw file) with a
// message naming the file and the field; kInvalidArgument: a raw file without
// `dtype`, a `dtype` that is not an integer or contradicts the header, a
// `name` for a file that is not safetensors (or none for one holding several
// tensors), a path, name or pattern holding a NUL byte (it could not reach
// the file system whole), a file that is not a regular file, a device that
// is not host-addressable; kIo / kOutOfMemory when reading or mapping fails; and
// what Runtime::resolve throws for the device.
//
// Thread-safety: reentrant; the returned arrays are immutable values.
#ifndef BACKPLANE_TOKENS_HPP
#define BACKPLANE_TOKENS_HPP

#include <backplane/api.h>

#include <backplane/array.hpp>
#include <backplane/backplane.hpp>
#include <backplane/dtype.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

struct BACKPLANE_API TokenFileOptions {
  // The element type of a raw file; for the other formats, a check: the
  // header's dtype must be this one.
  std::optional<DType> dtype;
  // The tensor to read from a safetensors file holding more than one.
  std::string name;
  // Where the array lives: a host-addressable device (default: the runtime's
  // "cpu" device). The file is mapped, never read into memory.
  std::optional<Device> device;
  // load_token_files: a pattern nothing matches gives no arrays instead of
  // throwing kNotFound, so a caller tells "no file" from a file's own
  // kNotFound (a tensor name) by the count. load_tokens ignores it.
  bool allow_empty_match = false;
};

// One token file as a 1-D array over a read-only mapping of the whole file
// (pages are read from disk when first touched, and shared with every other
// process mapping the file). The mapping lives until the last array, view or
// transfer using it is gone. Do not write through a DLPack export of it: the
// pages are read-only (SIGSEGV). The file must not be truncated while mapped
// (reading a page past its new end raises SIGBUS); replace files by rename.
BACKPLANE_API Array load_tokens(Runtime& runtime, const std::filesystem::path& path,
                                const TokenFileOptions& options = {});

// Every file whose path matches the glob(3) `pattern` (*, ?, [...]; a path
// that exists as written matches itself), sorted by path (bytewise), loaded
// as load_tokens does with the same options (load_token_file_entries keeps
// each array's path). Throws kNotFound
// naming the pattern when nothing matches (unless allow_empty_match), and the
// first file's error that fails.
BACKPLANE_API std::vector<Array> load_token_files(Runtime& runtime, std::string_view pattern,
                                                  const TokenFileOptions& options = {});

// One file that a pattern matched: its path, as glob(3) gave it, its
// tokens, and where its documents start if its format records them.
struct BACKPLANE_API TokenFileEntry {
  std::string path;
  Array tokens;
  // The token offsets into `tokens` at which each document starts, for a
  // format whose files record documents (a Megatron-Core indexed dataset:
  // the first token of each document's first sequence). Strictly
  // increasing, each below the token count: a document with no tokens
  // starts nowhere. nullopt for formats that record no documents (the
  // others); a stream can then find them by BOS or EOS tokens.
  std::optional<std::vector<std::int64_t>> document_starts;
};

// load_token_files, keeping which path gave which array (the C API's
// bp_token_files is this list).
BACKPLANE_API std::vector<TokenFileEntry> load_token_file_entries(Runtime& runtime, std::string_view pattern,
                                                                  const TokenFileOptions& options = {});

// What load_tokens would find in a token file, read from its header alone
// (nothing is mapped, no runtime is needed): the format, as docs/tokens.md's
// table names it, the dtype and count of its tokens, and the file that
// holds them. Throws what load_tokens throws for the file and the options.
struct BACKPLANE_API TokenFileInfo {
  std::string format;  // "llm.c shard", "Megatron-Core indexed dataset", ...
  DType dtype = DType::kU8;
  std::uint64_t count = 0;
  std::string data_file;  // the file the tokens are in (for a format of two files, not `path`)
  // The documents holding tokens, for a format that records documents (as
  // TokenFileEntry::document_starts counts them); nullopt for the others.
  std::optional<std::uint64_t> documents;
};
BACKPLANE_API TokenFileInfo describe_tokens(const std::filesystem::path& path, const TokenFileOptions& options = {});

}  // namespace backplane

#endif  // BACKPLANE_TOKENS_HPP
