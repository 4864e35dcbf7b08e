// A format of two files, an index beside its data (Megatron-Core's .idx and
// .bin are one), as a row of the tests' own table: the loader reads the
// index, maps the data file the reader names, checks that file against the
// index, and opens both from the index's path, the data's or their prefix.
#include "support/errors.hpp"
#include "support/load_fixture.hpp"

#include "tokens/byte_fields.hpp"
#include "tokens/load_tokens.hpp"
#include "tokens/token_formats.hpp"

#include <backplane/tokens.hpp>

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

using namespace backplane;
using namespace backplane::testing;

namespace {

// "X.pairidx": the magic PAIRIDX1 and a little-endian u64 token count; the
// U16 tokens are all of "X.pairbin".
constexpr std::string_view kMagic = "PAIRIDX1";
constexpr std::string_view kIndex = ".pairidx";
constexpr std::string_view kData = ".pairbin";

std::string without(std::string_view path, std::string_view suffix) {
  return std::string(path.substr(0, path.size() - suffix.size()));
}

detail::TokenFormat pair_format() {
  detail::TokenFormat format;
  format.name = "pair index";
  format.with_article = "a pair index";
  format.recognised_by = "the magic PAIRIDX1";
  format.recognises = [](std::span<const std::byte> prefix, std::string_view) noexcept {
    return prefix.size() >= kMagic.size() && std::memcmp(prefix.data(), kMagic.data(), kMagic.size()) == 0;
  };
  format.header_bytes = [](std::span<const std::byte>, std::uint64_t file_size) noexcept {
    return std::min<std::uint64_t>(16, file_size);
  };
  format.read = [](const detail::TokenHeader& header) {
    if (header.prefix.size() < 16) throw Error(ErrorCode::kInvalidFile, std::string(header.file) + ": short index");
    detail::TokenLayout layout;
    layout.dtype = DType::kU16;
    layout.count = detail::read_little_endian<std::uint64_t>(header.prefix, 8);
    layout.data_file = without(header.file, kIndex) + std::string(kData);
    return layout;
  };
  format.index_file_for = [](const std::string& path) -> std::optional<std::string> {
    std::string index;
    if (path.ends_with(kData))
      index = without(path, kData) + std::string(kIndex);
    else if (!std::filesystem::exists(path))
      index = path + std::string(kIndex);
    if (index.empty() || !std::filesystem::exists(index)) return std::nullopt;
    return index;
  };
  return format;
}

// The pair format first, then every real one.
std::vector<detail::TokenFormat> formats_with_pair() {
  std::vector<detail::TokenFormat> formats{pair_format()};
  for (const detail::TokenFormat& format : detail::token_formats()) formats.push_back(format);
  return formats;
}

void write_pair(const TempDir& directory, const std::vector<std::uint16_t>& tokens, std::uint64_t claimed) {
  std::string index(kMagic);
  for (int shift = 0; shift < 64; shift += 8) index += static_cast<char>((claimed >> shift) & 0xff);
  directory.write("shard.pairidx", index);
  directory.write("shard.pairbin",
                  std::string(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(std::uint16_t)));
}

}  // namespace

TEST_CASE("[tokens] a two-file format opens from its index, its data file or their prefix, mapping the data file") {
  Runtime runtime(placement_options());
  TempDir directory;
  const std::vector<std::uint16_t> tokens = {5, 6, 7, 8, 9, 65535};
  write_pair(directory, tokens, tokens.size());
  const std::vector<detail::TokenFormat> formats = formats_with_pair();
  for (const std::string name : {"shard.pairidx", "shard.pairbin", "shard"}) {
    CAPTURE(name);
    const Array array = detail::load_tokens_with(runtime, directory / name, {}, formats);
    CHECK(array.dtype() == DType::kU16);
    CHECK(array.to_vector<std::uint16_t>() == tokens);
    const std::optional<MappedFrom> from = mapped_from(array.host_data());
    REQUIRE(from.has_value());
    CHECK(from->path == directory / "shard.pairbin");  // zero-copy: a view of the data file
    CHECK(from->offset == 0);
  }
}

TEST_CASE("[tokens] a two-file format's data file must hold what its index says") {
  Runtime runtime(placement_options());
  TempDir directory;
  const std::vector<detail::TokenFormat> formats = formats_with_pair();
  write_pair(directory, {1, 2, 3}, 4);
  const Error short_data =
      error_from([&] { detail::load_tokens_with(runtime, directory / "shard.pairidx", {}, formats); });
  CHECK(short_data.code() == ErrorCode::kInvalidFile);
  CHECK(std::string(short_data.what()) ==
        fmt::format("{}: the pair index header {} says 4 U16 tokens from byte 0 (8 bytes), but the file is 6 bytes",
                    (directory / "shard.pairbin").string(), (directory / "shard.pairidx").string()));

  std::filesystem::remove(directory / "shard.pairbin");
  const Error missing =
      error_from([&] { detail::load_tokens_with(runtime, directory / "shard.pairidx", {}, formats); });
  CHECK(missing.code() == ErrorCode::kNotFound);
  CHECK(contains(missing.what(), "shard.pairbin"));

  // The dtype asked for is checked against the index's, as for any header.
  write_pair(directory, {1, 2}, 2);
  TokenFileOptions wrong;
  wrong.dtype = DType::kU32;
  CHECK(contains(error_from([&] { detail::load_tokens_with(runtime, directory / "shard", wrong, formats); }).what(),
                 "dtype U32 was asked for, but the pair index header says U16"));
}
