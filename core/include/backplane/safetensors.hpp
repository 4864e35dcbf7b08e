// The safetensors file format: header parsing, validation and writing.
//
// The format half reads and checks the 8-byte length + JSON header exactly as
// the reference implementation (huggingface/safetensors, `tensor.rs`) does,
// and writes the bytes the reference writer writes, without any device. At
// the end, load() and save() of Arrays build on it: zero-copy views of a
// mapped file on the CPU, streamed loads onto other devices (see
// docs/safetensors.md).
//
// Error model: every function here throws backplane::Error. A file that breaks
// a format rule throws FormatError (code kInvalidFile), whose message names the
// file, the rule (the reference's error variant name) and, where there is one,
// the tensor. A missing file is kNotFound; bad arguments to the writer are
// kInvalidArgument.
//
// Thread-safety: all functions are reentrant; they share no state.
#ifndef BACKPLANE_SAFETENSORS_HPP
#define BACKPLANE_SAFETENSORS_HPP

#include <backplane/api.h>

#include <backplane/array.hpp>
#include <backplane/backplane.hpp>
#include <backplane/dtype.hpp>
#include <backplane/error.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::safetensors {

// The reference rejects a header length above this (bytes of JSON).
inline constexpr std::uint64_t kMaxHeaderSize = 100'000'000;

// The format rules, named after the reference's SafeTensorError variants and
// listed in the order the reference checks them.
enum class Rule : std::uint8_t {
  kHeaderTooSmall,                // file shorter than the 8-byte length
  kHeaderTooLarge,                // header length above kMaxHeaderSize
  kInvalidHeaderLength,           // 8 + header length past the end of the file
  kInvalidHeader,                 // header is not valid UTF-8
  kInvalidHeaderDeserialization,  // header is not the reference's JSON schema
  kInvalidOffset,                 // tensors do not tile the data section
  kValidationOverflow,            // element or bit count overflows 64 bits
  kMisalignedSlice,               // sub-byte dtype not ending on a byte boundary
  kTensorInvalidInfo,             // data_offsets length != shape x dtype size
  kMetadataIncompleteBuffer,      // data section length != file length - 8 - N
};

// "InvalidOffset", ...: the reference's variant name.
BACKPLANE_API std::string_view rule_name(Rule rule) noexcept;

// A file that breaks a format rule. what() reads
// "FILE: not a valid safetensors file: RULE (tensor 'NAME'): detail".
class BACKPLANE_API FormatError : public Error {
 public:
  FormatError(Rule rule, std::string file, std::optional<std::string> tensor, const std::string& detail);
  ~FormatError() override;

  Rule rule() const noexcept { return rule_; }
  const std::string& file() const noexcept { return file_; }
  // The tensor the rule failed for; absent for file-level rules.
  const std::optional<std::string>& tensor() const noexcept { return tensor_; }
  // The explanation alone, without file, rule and tensor.
  const std::string& detail() const noexcept { return detail_; }

 private:
  Rule rule_;
  std::string file_;
  std::optional<std::string> tensor_;
  std::string detail_;
};

// Element types, by the names files use (case-sensitive). dtypes() lists all
// 22 in the reference's enum order, which is ascending alignment: the writer
// orders tensors by it. Sub-byte types (F4: 4 bits, F6_*: 6 bits) pack
// elements without padding, so only whole bytes' worth of elements is valid.
struct BACKPLANE_API DTypeInfo {
  std::string_view name;
  std::uint32_t bits;
};
BACKPLANE_API std::span<const DTypeInfo> dtypes() noexcept;
// nullptr when `name` is not a dtype the reference knows.
BACKPLANE_API const DTypeInfo* find_dtype(std::string_view name) noexcept;

// One tensor of a validated header.
struct TensorEntry;
// The placement layer's DType of a validated entry (whose name is always
// known). The file order uses dtypes() rank, not DType's numeric values.
BACKPLANE_API DType dtype_of(const TensorEntry& tensor);

struct BACKPLANE_API TensorEntry {
  std::string name;
  std::string dtype;  // one of dtypes()
  std::uint32_t dtype_bits = 0;
  std::vector<std::uint64_t> shape;  // empty for a scalar
  std::uint64_t begin = 0;           // data_offsets, relative to the data section
  std::uint64_t end = 0;

  std::uint64_t byte_size() const noexcept { return end - begin; }
  std::uint64_t element_count() const noexcept;  // fits: validation checked it
};

using Metadata = std::map<std::string, std::string>;

// A header that passed every rule: reading [data_offset + begin,
// data_offset + end) of the file gives each tensor's bytes.
struct BACKPLANE_API Header {
  std::vector<TensorEntry> tensors;  // in data order: by (begin, end, name)
  std::optional<Metadata> metadata;  // absent when the file has none or null
  std::uint64_t header_size = 0;     // N, the JSON's length including padding
  std::uint64_t data_offset = 0;     // 8 + N: where the data section starts
  std::uint64_t file_size = 0;

  // nullptr when there is no tensor of that name.
  const TensorEntry* find(std::string_view name) const noexcept;
};

// Parses and validates a header. `file_prefix` holds the file's first bytes:
// at least min(file_size, 8 + N) of them (the 8-byte length and the JSON);
// anything after is ignored. `file_name` only goes into error messages.
// Never reads tensor data. Throws FormatError for a broken rule,
// Error(kInvalidArgument) when `file_prefix` is shorter than required or
// longer than `file_size`.
BACKPLANE_API Header parse_header(std::span<const std::byte> file_prefix, std::uint64_t file_size,
                                  std::string_view file_name);

// Opens `path` and reads its 8-byte length and JSON header only (never the
// tensor data), then validates as parse_header does. Throws Error(kNotFound)
// when the file does not exist, Error(kInvalidArgument) when it cannot be
// opened or is not a regular file, FormatError for a broken rule.
BACKPLANE_API Header read_header(const std::filesystem::path& path);

// --- Writing -----------------------------------------------------------

// A tensor to write: its bytes are little-endian, row-major, dense, and
// exactly shape-product x dtype bits / 8 long.
struct BACKPLANE_API TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
};
struct BACKPLANE_API HostTensor {
  TensorSpec spec;
  std::span<const std::byte> data;  // borrowed for the duration of the call
};

// The layout the reference writer produces: tensors sorted by dtype
// (descending alignment) then name (bytewise), packed back to back; compact
// JSON with `__metadata__` first (keys sorted); the JSON padded with spaces
// to a multiple of 8 bytes.
struct BACKPLANE_API FilePlan {
  std::string prefix;              // the 8-byte little-endian N, then the N header bytes
  Header header;                   // what a reader will see; tensors in the order written
                                   // (a reader lists zero-size tensors that share an offset by name)
  std::vector<std::size_t> order;  // order[i]: index into the input of the i-th tensor written
};

// Plans a file. Throws Error(kInvalidArgument), naming the tensor, for a name
// that is duplicated or `__metadata__`, an unknown dtype, a sub-byte tensor
// that does not fill whole bytes, a size overflow, text that is not UTF-8, or
// a header longer than kMaxHeaderSize: each would make a file no reader accepts.
BACKPLANE_API FilePlan plan_file(std::span<const TensorSpec> tensors, const std::optional<Metadata>& metadata);

// The whole file in memory. Also throws Error(kInvalidArgument) when a
// tensor's data length does not match its shape and dtype.
BACKPLANE_API std::vector<std::byte> serialize(std::span<const HostTensor> tensors,
                                               const std::optional<Metadata>& metadata = std::nullopt);

// Writes the file atomically: into a temporary file in the same directory,
// flushed to disk, then renamed over `path`; on any failure `path` is
// untouched and the temporary file removed. Throws as serialize does, and
// Error(kNotFound) / Error(kInvalidArgument) when the directory is missing or
// not writable.
BACKPLANE_API void save(const std::filesystem::path& path, std::span<const HostTensor> tensors,
                        const std::optional<Metadata>& metadata = std::nullopt);

struct BACKPLANE_API SaveOptions {
  // Flush the file to disk (fsync) before it replaces `path`, and the
  // rename after: a machine that loses power keeps the old file or the whole
  // new one. false: for scratch files, skip both flushes (several times
  // faster on a slow disk); the save is still atomic for every process on
  // the machine, but a crash of the machine may leave a partial file.
  bool durable = true;
};

// --- Loading and saving Arrays -------------------------------------------

struct BACKPLANE_API LoadOptions {
  // The tensors to load; empty loads every tensor. A name the file does not
  // have is Error(kNotFound) naming it and listing a few that exist.
  std::vector<std::string> names;
  // (bytes done, total) of the selected tensors' data, called on the thread
  // that called load(): after each staging chunk of a streamed load (monotone,
  // the last call is (total, total)); once with (total, total) on a
  // host-addressable device, where nothing is read. Must not throw.
  ProgressCallback progress;
};

struct BACKPLANE_API Loaded {
  std::map<std::string, Array> tensors;
  std::optional<Metadata> metadata;  // the file's __metadata__, absent when none or null
  Header header;                     // the whole header, also of tensors not loaded
};

// Loads a safetensors file onto `device` (nullopt: runtime.default_device()).
//
// On a host-addressable device (cpu) nothing is read but the header: the file
// is mapped read-only once and every array is a zero-copy view of its bytes
// (Array::wrap_host), whatever their alignment; the mapping lives until the
// last array (or view, or transfer reading it) is gone. The file must not be
// truncated or rewritten in place while mapped (save() replaces files by
// rename, which is safe): reading a truncated mapping raises SIGBUS.
//
// On any other device the tensors stream from the file into device memory
// through a ring of pinned staging buffers (plain host buffers where the
// backend has no pinned memory): the next chunk is read (pread) while the
// previous ones are copied to the device. Every device buffer is allocated
// before the first read, so running out of device memory is thrown before
// any data moves. Returns when all data has arrived: the arrays are ready.
//
// Throws FormatError for a file that breaks a rule, Error(kNotFound) for a
// missing file or an unknown tensor name, Error(kInvalidArgument) for a file
// that cannot be opened or is not a regular file, Error(kIo) when a read
// fails or the file shrinks meanwhile, Error(kUnsupported) naming the tensor
// for a dimension above INT64_MAX (valid when another dimension is 0, but not
// representable as an Array shape), Error(kOutOfMemory) and the device's
// errors, and what Runtime::resolve / default_device throw.
BACKPLANE_API Loaded load(Runtime& runtime, const std::filesystem::path& path,
                          std::optional<Device> device = std::nullopt, const LoadOptions& options = {});

// Writes `arrays` (on any devices; device data is copied to host memory one
// tensor at a time, waiting for arrays still arriving) as save() of
// HostTensors does: the same layout, atomically, refusing the same input
// (Error(kInvalidArgument) naming the tensor), plus an empty Array.
BACKPLANE_API void save(const std::filesystem::path& path, const std::map<std::string, Array>& arrays,
                        const std::optional<Metadata>& metadata = std::nullopt);
// The same with options (SaveOptions::durable).
BACKPLANE_API void save(const std::filesystem::path& path, const std::map<std::string, Array>& arrays,
                        const std::optional<Metadata>& metadata, const SaveOptions& options);

}  // namespace backplane::safetensors

#endif  // BACKPLANE_SAFETENSORS_HPP
