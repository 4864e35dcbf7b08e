// load_tokens and load_token_files: open once, read the header's bytes with
// pread, describe the layout (the format table, token_formats.hpp), then map
// the whole file and wrap the tokens as a zero-copy array.
#include <backplane/tokens.hpp>

#include "tokens/load_tokens.hpp"

#include "tokens/byte_fields.hpp"
#include "tokens/glob_paths.hpp"
#include "tokens/token_file.hpp"
#include "tokens/token_formats.hpp"
#include "tokens/token_layout.hpp"

#include "placement/placement.hpp"
#include "util/text_argument.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

namespace backplane {
namespace {

// Enough for every llm.c header, every NumPy header numpy writes for an
// integer array, and most safetensors headers: one read for almost any file.
constexpr std::uint64_t kFirstRead = 4096;

Device host_device(Runtime& runtime, const TokenFileOptions& options, const std::filesystem::path& path) {
  const Device device = options.device ? *options.device : runtime.resolve("cpu");
  const auto live = detail::placement_of(runtime)->device(device);
  if (!live->host_addressable()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: token files are mapped into host memory, and {} is not host-addressable (load "
                            "onto cpu, then move batches with take_windows or device_put)",
                            path.string(), live->selector()));
  }
  return device;
}

// The file to read the header of: `path`, unless a two-file format's row
// says `path` is its data file or the prefix of its files.
std::string header_file_for(const std::filesystem::path& path, std::span<const detail::TokenFormat> formats) {
  for (const detail::TokenFormat& format : formats) {
    if (format.index_file_for == nullptr) continue;
    if (std::optional<std::string> index = format.index_file_for(path.string())) return *index;
  }
  return path.string();
}

// A data file whose own header says what it is (an llm.c shard beside a
// stale .idx) is not read as another format's headerless tokens: that would
// hand out its header bytes as tokens. A magic that only happens to open the
// tokens, whose header does not hold up, is data as the index says.
void refuse_self_described_data(detail::TokenFile& data, const detail::TokenLayout& layout,
                                const detail::TokenFile& header, std::span<const detail::TokenFormat> formats) {
  std::span<const std::byte> prefix = data.prefix(kFirstRead);
  const detail::TokenFormat& own = detail::detect_token_format(prefix, data.name(), formats);
  if (own.needs_dtype || &own == layout.format) return;
  const std::uint64_t header_bytes = own.header_bytes(prefix, data.size());
  if (header_bytes > prefix.size()) prefix = data.prefix(header_bytes);
  detail::TokenLayout described;
  try {
    described = own.read({prefix, data.size(), data.name(), detail::TokenRequest{}});
  } catch (const Error&) {
    return;
  }
  throw Error(ErrorCode::kInvalidFile,
              fmt::format("{}: its own header says it is {} ({} {} tokens), but {} beside it makes it the headerless "
                          "token data of {}; a file is not read as another format than its header says: move {} "
                          "away to load {} as {}",
                          data.name(), own.with_article, described.count, dtype_name(described.dtype), header.name(),
                          layout.format->with_article, header.name(), data.name(), own.with_article));
}

// The tokens' file when it is not the header's: opened, and checked to hold
// what the header says it holds and to have no header of its own.
std::shared_ptr<const detail::TokenFileMapping> map_data_file(const detail::TokenLayout& layout,
                                                              const detail::TokenFile& header,
                                                              std::span<const detail::TokenFormat> formats) {
  detail::TokenFile data(layout.data_file);
  refuse_self_described_data(data, layout, header, formats);
  std::uint64_t bytes = 0;
  std::uint64_t end = 0;
  const auto token_bytes = static_cast<std::uint64_t>(dtype_bits(layout.dtype) / 8);
  if (!detail::multiply_fits(layout.count, token_bytes, bytes) || !detail::add_fits(layout.data_offset, bytes, end) ||
      end > data.size()) {
    throw Error(ErrorCode::kInvalidFile,
                fmt::format("{}: the {} header {} says {} {} tokens from byte {} ({} bytes), but the file is {} bytes",
                            data.name(), layout.format->name, header.name(), layout.count, dtype_name(layout.dtype),
                            layout.data_offset, bytes, data.size()));
  }
  if (data.size() == 0) {
    throw Error(ErrorCode::kInvalidFile, fmt::format("{}: the file is empty (its {} header {} says no tokens)",
                                                     data.name(), layout.format->name, header.name()));
  }
  return data.map();
}

// The header's layout: the first read, then what the format's header asks.
detail::TokenLayout read_layout(detail::TokenFile& file, const TokenFileOptions& options,
                                std::span<const detail::TokenFormat> formats) {
  const detail::TokenRequest request{options.dtype, options.name};
  std::span<const std::byte> prefix = file.prefix(kFirstRead);
  const detail::TokenFormat& format = detail::detect_token_format(prefix, file.name(), formats);
  const std::uint64_t header_bytes = format.header_bytes(prefix, file.size());
  if (header_bytes > prefix.size()) prefix = file.prefix(header_bytes);
  return detail::describe_token_file(prefix, file.size(), file.name(), request, formats, file.is_mapped(prefix));
}

void refuse_nul_arguments(const std::filesystem::path& path, const TokenFileOptions& options, const char* call) {
  detail::refuse_nul_bytes(path.native(), call, "path");
  detail::refuse_nul_bytes(options.name, call, "name");
}

}  // namespace

namespace detail {

TokenFileEntry load_token_entry_with(Runtime& runtime, const std::filesystem::path& path,
                                     const TokenFileOptions& options, std::span<const TokenFormat> formats) {
  // The arguments, then the device: nothing bad is reported by touching the file.
  refuse_nul_arguments(path, options, "load_tokens");
  const Device device = host_device(runtime, options, path);
  TokenFile file(header_file_for(path, formats));
  TokenLayout layout = read_layout(file, options, formats);

  // describe_token_file has refused an empty raw file, and every header is
  // at least 8 bytes: the file is not empty, so it can be mapped.
  std::shared_ptr<const TokenFileMapping> mapping =
      layout.data_file.empty() ? file.map() : map_data_file(layout, file, formats);
  const std::byte* tokens = mapping->data() + layout.data_offset;
  // count <= the file's size, an off_t: it fits an int64 extent.
  return {path.string(),
          Array::wrap_host(runtime, device, layout.dtype, {static_cast<std::int64_t>(layout.count)}, tokens,
                           std::move(mapping)),
          std::move(layout.document_starts)};
}

Array load_tokens_with(Runtime& runtime, const std::filesystem::path& path, const TokenFileOptions& options,
                       std::span<const TokenFormat> formats) {
  return load_token_entry_with(runtime, path, options, formats).tokens;
}

}  // namespace detail

Array load_tokens(Runtime& runtime, const std::filesystem::path& path, const TokenFileOptions& options) {
  return detail::load_tokens_with(runtime, path, options, detail::token_formats());
}

TokenFileInfo describe_tokens(const std::filesystem::path& path, const TokenFileOptions& options) {
  refuse_nul_arguments(path, options, "describe_tokens");
  detail::TokenFile file(header_file_for(path, detail::token_formats()));
  const detail::TokenLayout layout = read_layout(file, options, detail::token_formats());
  if (!layout.data_file.empty() && detail::TokenFile::exists(layout.data_file)) {
    detail::TokenFile data(layout.data_file);
    refuse_self_described_data(data, layout, file, detail::token_formats());
  }
  std::optional<std::uint64_t> documents;
  if (layout.document_starts) documents = layout.document_starts->size();
  return {std::string(layout.format->name), layout.dtype, layout.count,
          layout.data_file.empty() ? file.name() : layout.data_file, documents};
}

std::vector<TokenFileEntry> load_token_file_entries(Runtime& runtime, std::string_view pattern,
                                                    const TokenFileOptions& options) {
  std::vector<TokenFileEntry> entries;
  for (const std::string& path : detail::glob_paths(pattern, options.allow_empty_match)) {
    entries.push_back(detail::load_token_entry_with(runtime, path, options, detail::token_formats()));
  }
  return entries;
}

std::vector<Array> load_token_files(Runtime& runtime, std::string_view pattern, const TokenFileOptions& options) {
  std::vector<Array> arrays;
  for (TokenFileEntry& entry : load_token_file_entries(runtime, pattern, options)) {
    arrays.push_back(std::move(entry.tokens));
  }
  return arrays;
}

}  // namespace backplane
