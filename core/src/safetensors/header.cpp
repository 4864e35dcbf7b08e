// Reading a header: the reference's checks (SafeTensors::read_metadata and
// Metadata::validate in tensor.rs), in its order, with checked u64 arithmetic
// where the reference uses checked usize arithmetic.
#include <backplane/safetensors.hpp>

#include "safetensors/header_frame.hpp"
#include "safetensors/json_dialect.hpp"
#include "safetensors/releasable_buffer.hpp"
#include "safetensors/text.hpp"
#include "util/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <functional>
#include <new>
#include <tuple>

namespace backplane::safetensors {
namespace {

// The reference's Dtype enum, in declaration order: its derived Ord is what
// the writer sorts by, and it ascends with alignment.
constexpr std::array<DTypeInfo, 22> kDTypes{{
    {"BOOL", 8},    {"F4", 4},      {"F6_E2M3", 6}, {"F6_E3M2", 6},     {"U8", 8},          {"I8", 8},
    {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8}, {"I16", 16},
    {"U16", 16},    {"F16", 16},    {"BF16", 16},   {"I32", 32},        {"U32", 32},        {"F32", 32},
    {"C64", 64},    {"F64", 64},    {"I64", 64},    {"U64", 64},
}};

std::string format_message(Rule rule, const std::string& file, const std::optional<std::string>& tensor,
                           const std::string& detail) {
  std::string message = file + ": not a valid safetensors file: " + std::string(rule_name(rule));
  if (tensor) message += " (tensor " + detail::quote(*tensor) + ")";
  return message + ": " + detail;
}

std::uint64_t read_le64(std::span<const std::byte> bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i)
    value = (value << 8) | std::to_integer<std::uint64_t>(bytes[static_cast<std::size_t>(i)]);
  return value;
}

bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t& out) { return !__builtin_mul_overflow(a, b, &out); }
bool checked_add(std::uint64_t a, std::uint64_t b, std::uint64_t& out) { return !__builtin_add_overflow(a, b, &out); }

// Metadata::validate: walk the tensors in offset order; each must start where
// the previous one ended and hold exactly shape x dtype bits.
std::uint64_t validate(const std::vector<TensorEntry>& tensors, const std::string& file) {
  std::uint64_t start = 0;
  for (const TensorEntry& tensor : tensors) {
    if (tensor.begin != start || tensor.end < tensor.begin) {
      std::string detail = "data_offsets [" + std::to_string(tensor.begin) + ", " + std::to_string(tensor.end) + "]";
      if (tensor.end < tensor.begin) {
        detail += " end before they begin";
      } else if (tensor.begin > start) {
        detail += " leave a gap after byte " + std::to_string(start) + " of the data section";
      } else {
        detail += " overlap the previous tensor, which ends at byte " + std::to_string(start);
      }
      throw FormatError(Rule::kInvalidOffset, file, tensor.name,
                        detail + "; tensors must tile the data section with no gap or overlap");
    }
    start = tensor.end;
    std::uint64_t elements = 1;
    for (std::uint64_t dimension : tensor.shape) {
      if (!checked_mul(elements, dimension, elements)) {
        throw FormatError(Rule::kValidationOverflow, file, tensor.name,
                          "the element count of its shape overflows 64 bits");
      }
    }
    std::uint64_t bits = 0;
    if (!checked_mul(elements, tensor.dtype_bits, bits)) {
      throw FormatError(Rule::kValidationOverflow, file, tensor.name,
                        std::to_string(elements) + " elements of " + tensor.dtype + " overflow a 64-bit bit count");
    }
    if (bits % 8 != 0) {
      throw FormatError(Rule::kMisalignedSlice, file, tensor.name,
                        std::to_string(elements) + " elements of " + tensor.dtype + " (" +
                            std::to_string(tensor.dtype_bits) + " bits each) do not end on a byte boundary");
    }
    if (tensor.end - tensor.begin != bits / 8) {
      throw FormatError(Rule::kTensorInvalidInfo, file, tensor.name,
                        "data_offsets [" + std::to_string(tensor.begin) + ", " + std::to_string(tensor.end) +
                            "] span " + std::to_string(tensor.end - tensor.begin) + " bytes but " +
                            std::to_string(elements) + " elements of " + tensor.dtype + " take " +
                            std::to_string(bits / 8));
    }
  }
  return start;
}

// `consumed`: see parse_header_json; offsets are into `prefix`.
Header parse_checked(std::span<const std::byte> prefix, std::uint64_t file_size, const std::string& file,
                     const std::function<void(std::size_t)>& consumed = {}) {
  if (prefix.size() > file_size) {
    throw Error(ErrorCode::kInvalidArgument, file + ": parse_header was given more bytes than the file size");
  }
  if (file_size >= 8 && prefix.size() < 8) {
    throw Error(ErrorCode::kInvalidArgument, file + ": parse_header needs the first 8 bytes");
  }
  const detail::HeaderFrame frame = detail::frame_header(prefix, file_size);
  const std::uint64_t header_size = frame.length;
  if (frame.broken == Rule::kHeaderTooSmall) {
    throw FormatError(Rule::kHeaderTooSmall, file, std::nullopt,
                      "the file has " + std::to_string(file_size) + " bytes, fewer than the 8-byte header length");
  }
  if (frame.broken == Rule::kHeaderTooLarge) {
    throw FormatError(Rule::kHeaderTooLarge, file, std::nullopt,
                      "the header length is " + std::to_string(header_size) + " bytes, more than the limit of " +
                          std::to_string(kMaxHeaderSize));
  }
  if (frame.broken == Rule::kInvalidHeaderLength) {
    throw FormatError(Rule::kInvalidHeaderLength, file, std::nullopt,
                      "the header length is " + std::to_string(header_size) + " bytes, but only " +
                          std::to_string(file_size - 8) + " bytes follow the length field");
  }
  const std::uint64_t stop = frame.end;
  if (prefix.size() < stop) {
    throw Error(ErrorCode::kInvalidArgument,
                file + ": parse_header needs the first " + std::to_string(stop) + " bytes of the file");
  }
  std::string_view text(reinterpret_cast<const char*>(prefix.data()) + 8, header_size);
  if (auto bad = detail::find_invalid_utf8(text)) {
    throw FormatError(Rule::kInvalidHeader, file, std::nullopt,
                      "the header is not valid UTF-8 (byte " + std::to_string(*bad) + " of the header)");
  }
  std::function<void(std::size_t)> consumed_text;
  if (consumed) consumed_text = [&](std::size_t offset) { consumed(8 + offset); };
  detail::DialectResult parsed = detail::parse_header_json(text, consumed_text);
  if (!parsed.header) {
    throw FormatError(Rule::kInvalidHeaderDeserialization, file, std::nullopt,
                      parsed.error + " at byte " + std::to_string(parsed.error_offset) + " of the header");
  }

  Header header;
  header.metadata = std::move(parsed.header->metadata);
  header.header_size = header_size;
  header.data_offset = stop;
  header.file_size = file_size;
  header.tensors = std::move(parsed.header->tensors);
  // The reference sorts by data_offsets only and leaves ties in hash order;
  // the name breaks ties here so that which tensor a message names is stable.
  std::sort(header.tensors.begin(), header.tensors.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  std::uint64_t data_size = validate(header.tensors, file);
  std::uint64_t covered = 0;
  if (!checked_add(data_size, stop, covered) || covered != file_size) {
    throw FormatError(Rule::kMetadataIncompleteBuffer, file, std::nullopt,
                      "the tensors cover " + std::to_string(data_size) + " bytes of data, but the file has " +
                          std::to_string(file_size - stop) + " bytes after the header");
  }
  return header;
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads exactly `size` bytes at `offset`; a file that shrank is a read error.
void read_exactly(int fd, std::byte* out, std::size_t size, std::uint64_t offset, const std::string& file) {
  while (size > 0) {
    ssize_t got = ::pread(fd, out, size, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(ErrorCode::kInvalidFile, file + ": read failed: " + std::strerror(errno));
    if (got == 0) throw Error(ErrorCode::kInvalidFile, file + ": the file became shorter while being read");
    out += got;
    size -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
}

}  // namespace

std::string_view rule_name(Rule rule) noexcept {
  switch (rule) {
    case Rule::kHeaderTooSmall: return "HeaderTooSmall";
    case Rule::kHeaderTooLarge: return "HeaderTooLarge";
    case Rule::kInvalidHeaderLength: return "InvalidHeaderLength";
    case Rule::kInvalidHeader: return "InvalidHeader";
    case Rule::kInvalidHeaderDeserialization: return "InvalidHeaderDeserialization";
    case Rule::kInvalidOffset: return "InvalidOffset";
    case Rule::kValidationOverflow: return "ValidationOverflow";
    case Rule::kMisalignedSlice: return "MisalignedSlice";
    case Rule::kTensorInvalidInfo: return "TensorInvalidInfo";
    case Rule::kMetadataIncompleteBuffer: return "MetadataIncompleteBuffer";
  }
  return "Unknown";
}

FormatError::FormatError(Rule rule, std::string file, std::optional<std::string> tensor, const std::string& detail)
    : Error(ErrorCode::kInvalidFile, format_message(rule, file, tensor, detail)),
      rule_(rule),
      file_(std::move(file)),
      tensor_(std::move(tensor)),
      detail_(detail) {}

// Out of line so the vtable and type info live in the library once.
FormatError::~FormatError() = default;

std::span<const DTypeInfo> dtypes() noexcept { return kDTypes; }

const DTypeInfo* find_dtype(std::string_view name) noexcept {
  for (const DTypeInfo& dtype : kDTypes) {
    if (dtype.name == name) return &dtype;
  }
  return nullptr;
}

DType dtype_of(const TensorEntry& tensor) {
  std::optional<DType> dtype = dtype_from_name(tensor.dtype);
  if (!dtype) throw Error(ErrorCode::kInternal, "safetensors dtype " + detail::quote(tensor.dtype) + " has no DType");
  return *dtype;
}

std::uint64_t TensorEntry::element_count() const noexcept {
  std::uint64_t count = 1;
  for (std::uint64_t dimension : shape) count *= dimension;
  return count;
}

const TensorEntry* Header::find(std::string_view name) const noexcept {
  for (const TensorEntry& tensor : tensors) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

Header parse_header(std::span<const std::byte> file_prefix, std::uint64_t file_size, std::string_view file_name) {
  try {
    return parse_checked(file_prefix, file_size, std::string(file_name));
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::kOutOfMemory, std::string(file_name) + ": out of memory while parsing the header");
  }
}

Header read_header(const std::filesystem::path& path) {
  const std::string file = path.string();
  struct stat status {};
  const int fd = ::backplane::detail::open_regular_file(path, status);
  FileDescriptor descriptor(fd);
  auto file_size = static_cast<std::uint64_t>(status.st_size);

  // The length field first, so that the size checks run before anything
  // as large as the header is allocated.
  std::array<std::byte, 8> length{};
  std::size_t first = static_cast<std::size_t>(std::min<std::uint64_t>(file_size, 8));
  read_exactly(fd, length.data(), first, 0, file);
  if (file_size < 8) return parse_header(std::span(length.data(), first), file_size, file);
  const detail::HeaderFrame frame = detail::frame_header(length, file_size);
  if (frame.broken) return parse_header(length, file_size, file);  // throws the rule it breaks
  // Read into pages of its own, which the parser hands back as it goes: the
  // peak is the parsed tensors plus a window of the text, not both whole.
  detail::ReleasableBuffer prefix(static_cast<std::size_t>(frame.end));
  std::copy(length.begin(), length.end(), prefix.data());
  read_exactly(fd, prefix.data() + 8, static_cast<std::size_t>(frame.length), 8, file);
  try {
    return parse_checked(prefix.bytes(), file_size, file, [&](std::size_t offset) { prefix.release_before(offset); });
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::kOutOfMemory, file + ": out of memory while parsing the header");
  }
}

}  // namespace backplane::safetensors

namespace backplane::safetensors::detail {

HeaderFrame frame_header(std::span<const std::byte> prefix, std::uint64_t file_size) noexcept {
  HeaderFrame frame;
  if (file_size < 8 || prefix.size() < 8) {
    frame.broken = Rule::kHeaderTooSmall;
    return frame;
  }
  frame.length = read_le64(prefix.first(8));
  if (frame.length > kMaxHeaderSize) {
    frame.broken = Rule::kHeaderTooLarge;
  } else if (frame.length + 8 > file_size) {  // no overflow: length <= kMaxHeaderSize
    frame.broken = Rule::kInvalidHeaderLength;
  } else {
    frame.end = frame.length + 8;
  }
  return frame;
}

}  // namespace backplane::safetensors::detail
