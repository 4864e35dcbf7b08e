// Megatron-Core indexed datasets: the fixtures megatron-core's own
// IndexedDatasetBuilder wrote (tests/tokens/megatron/write_fixtures.py)
// load equal to what its own IndexedDataset read back, from the prefix, the
// .bin or the .idx, zero-copy from the .bin, with each document's start; a
// broken index is refused naming the file and the field.
#include "support/errors.hpp"
#include "support/load_fixture.hpp"
#include "token_file_writers.hpp"

#include "tokens/byte_fields.hpp"

#include <backplane/tokens.hpp>

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

using namespace backplane;
using namespace backplane::testing;

namespace {

const std::filesystem::path kFixtures = std::filesystem::path(BP_TEST_SOURCE_DIR) / "tests/tokens/megatron";

nlohmann::json expected() {
  std::ifstream file(kFixtures / "expected.json");
  return nlohmann::json::parse(file);
}

std::vector<std::int64_t> tokens_of(const Array& array) {
  std::vector<std::int64_t> values;
  const auto count = static_cast<std::size_t>(array.shape()[0]);
  const auto* bytes = static_cast<const std::byte*>(array.host_data());
  for (std::size_t index = 0; index < count; ++index) {
    switch (array.dtype()) {
      case DType::kU8: values.push_back(std::to_integer<std::uint8_t>(bytes[index])); break;
      case DType::kU16:
        values.push_back(detail::read_little_endian<std::uint16_t>({bytes, count * 2}, index * 2));
        break;
      case DType::kI32:
        values.push_back(
            static_cast<std::int32_t>(detail::read_little_endian<std::uint32_t>({bytes, count * 4}, index * 4)));
        break;
      default: FAIL("unexpected dtype " << dtype_name(array.dtype()));
    }
  }
  return values;
}

// A copy of the uint16 fixture in `directory` as PREFIX.idx / PREFIX.bin,
// its index changed by `edit`.
template <class Edit>
std::filesystem::path broken_copy(const TempDir& directory, Edit edit) {
  std::vector<std::byte> index = read_file(kFixtures / "gpt2_uint16.idx");
  std::vector<std::byte> data = read_file(kFixtures / "gpt2_uint16.bin");
  edit(index, data);
  write_bytes(directory, "broken.idx", index);
  write_bytes(directory, "broken.bin", data);
  return directory / "broken";
}

void put_u64(std::vector<std::byte>& bytes, std::size_t offset, std::uint64_t value) {
  for (int shift = 0; shift < 64; shift += 8)
    bytes[offset + shift / 8] = static_cast<std::byte>((value >> shift) & 0xff);
}

// Where megatron-core's documents start, from what its own reader gave
// back: each document's first sequence's offset (the lengths summed), for
// the documents that hold tokens.
std::vector<std::int64_t> expected_starts(const nlohmann::json& want) {
  std::vector<std::int64_t> offsets{0};
  for (const auto& length : want["sequence_lengths"]) offsets.push_back(offsets.back() + length.get<std::int64_t>());
  const auto indices = want["document_indices"].get<std::vector<std::size_t>>();
  std::vector<std::int64_t> starts;
  for (std::size_t document = 0; document + 1 < indices.size(); ++document) {
    if (offsets[indices[document + 1]] > offsets[indices[document]]) starts.push_back(offsets[indices[document]]);
  }
  return starts;
}

void append_u32(std::string& out, std::uint32_t value) { out.append(reinterpret_cast<const char*>(&value), 4); }
void append_u64(std::string& out, std::uint64_t value) { out.append(reinterpret_cast<const char*>(&value), 8); }

// PREFIX.idx and PREFIX.bin of U16 sequences of `lengths` tokens (token i
// is i) and the given document indices, as IndexedDatasetBuilder lays them
// out (x86-64 is little-endian, as the format is).
std::filesystem::path write_dataset(const TempDir& directory, const std::string& name,
                                    const std::vector<std::uint32_t>& lengths,
                                    const std::vector<std::uint64_t>& documents) {
  std::string index("MMIDIDX\0\0", 9);
  append_u64(index, 1);
  index += '\x08';  // uint16
  append_u64(index, lengths.size());
  append_u64(index, documents.size());
  for (const std::uint32_t length : lengths) append_u32(index, length);
  std::uint64_t pointer = 0;
  for (const std::uint32_t length : lengths) {
    append_u64(index, pointer);
    pointer += std::uint64_t{length} * 2;
  }
  for (const std::uint64_t document : documents) append_u64(index, document);
  std::vector<std::uint8_t> data;
  for (std::uint64_t token = 0; token < pointer / 2; ++token) {
    data.push_back(static_cast<std::uint8_t>(token));
    data.push_back(static_cast<std::uint8_t>(token >> 8));
  }
  write_bytes(directory, name + ".idx",
              {reinterpret_cast<const std::byte*>(index.data()),
               reinterpret_cast<const std::byte*>(index.data()) + index.size()});
  write_bytes(directory, name + ".bin", as_bytes_vector(data));
  return directory / name;
}

// PREFIX.idx and PREFIX.bin of one document of one sequence of `count`
// tokens of dtype `code`, `width` bytes each, their bytes 0, 1, 2, ...
std::filesystem::path write_typed_dataset(const TempDir& directory, const std::string& name, std::uint8_t code,
                                          std::size_t width, std::uint32_t count) {
  std::string index("MMIDIDX\0\0", 9);
  append_u64(index, 1);
  index += static_cast<char>(code);
  append_u64(index, 1);  // sequences
  append_u64(index, 2);  // document indices: 0, 1
  append_u32(index, count);
  append_u64(index, 0);
  append_u64(index, 0);
  append_u64(index, 1);
  std::vector<std::uint8_t> data(count * width);
  for (std::size_t byte = 0; byte < data.size(); ++byte) data[byte] = static_cast<std::uint8_t>(byte * 7 + 1);
  write_bytes(directory, name + ".idx",
              {reinterpret_cast<const std::byte*>(index.data()),
               reinterpret_cast<const std::byte*>(index.data()) + index.size()});
  write_bytes(directory, name + ".bin", as_bytes_vector(data));
  return directory / name;
}

std::string load_error(Runtime& runtime, const std::filesystem::path& path) {
  return error_from([&] { (void)load_tokens(runtime, path); }).what();
}

}  // namespace

TEST_CASE("[tokens][megatron] megatron-core's datasets load equal to its own reader, from any of their names") {
  Runtime runtime(placement_options());
  const nlohmann::json all = expected();
  for (const auto& [name, want] : all.items()) {
    CAPTURE(name);
    for (const std::string& given : {name, name + ".bin", name + ".idx"}) {
      CAPTURE(given);
      const Array tokens = load_tokens(runtime, kFixtures / given);
      CHECK(dtype_name(tokens.dtype()) == (want["dtype"] == "uint16"  ? "U16"
                                           : want["dtype"] == "int32" ? "I32"
                                                                      : "U8"));
      CHECK(tokens_of(tokens) == want["tokens"].get<std::vector<std::int64_t>>());
      const std::optional<MappedFrom> from = mapped_from(tokens.host_data());
      REQUIRE(from.has_value());
      CHECK(from->path == kFixtures / (name + ".bin"));  // zero-copy: a view of the .bin
    }
  }
}

TEST_CASE("[tokens][megatron] every integer dtype code loads as its dtype, the .bin's bytes zero-copy") {
  const TempDir directory;
  Runtime runtime(placement_options());
  const struct {
    std::uint8_t code;
    DType dtype;
  } codes[] = {{1, DType::kU8},  {2, DType::kI8},  {3, DType::kI16},
               {4, DType::kI32}, {5, DType::kI64}, {8, DType::kU16}};
  for (const auto& [code, dtype] : codes) {
    CAPTURE(static_cast<int>(code));
    const std::size_t width = dtype_bits(dtype) / 8;
    const std::filesystem::path prefix = write_typed_dataset(directory, fmt::format("code{}", code), code, width, 10);
    const Array tokens = load_tokens(runtime, prefix);
    CHECK(tokens.dtype() == dtype);
    CHECK(tokens.shape() == std::vector<std::int64_t>{10});
    const std::vector<std::byte> bin = read_file(prefix.string() + ".bin");
    REQUIRE(tokens.nbytes() == bin.size());
    CHECK(std::memcmp(tokens.host_data(), bin.data(), bin.size()) == 0);
  }
}

TEST_CASE("[tokens][megatron] a .bin without its .idx is a raw file") {
  Runtime runtime(placement_options());
  TempDir directory;
  write_bytes(directory, "alone.bin", read_file(kFixtures / "gpt2_uint16.bin"));
  CHECK(contains(load_error(runtime, directory / "alone.bin"), "a raw token file"));
  TokenFileOptions u16;
  u16.dtype = DType::kU16;
  CHECK(load_tokens(runtime, directory / "alone.bin", u16).shape()[0] == 415);
}

TEST_CASE("[tokens][megatron] a broken index is refused, naming the file and the field") {
  Runtime runtime(placement_options());
  TempDir directory;
  const std::string index = (directory / "broken.idx").string();
  struct Case {
    const char* what;
    void (*edit)(std::vector<std::byte>& index, std::vector<std::byte>& data);
    std::string message;
  };
  const std::vector<Case> cases = {
      {"bad magic", [](auto& idx, auto&) { idx[0] = std::byte{'X'}; },
       index + ": Megatron index magic (bytes 0-8) is not MMIDIDX\\0\\0"},
      {"another version", [](auto& idx, auto&) { put_u64(idx, 9, 2); },
       index + ": Megatron index version (bytes 9-16) is 2; this reader knows version 1"},
      {"an unknown dtype code", [](auto& idx, auto&) { idx[17] = std::byte{9}; },
       index + ": Megatron index dtype code (byte 17) is 9, not one of 1 (uint8), 2 (int8), 3 (int16), 4 (int32), 5 "
               "(int64), 8 (uint16)"},
      {"a float dtype code", [](auto& idx, auto&) { idx[17] = std::byte{7}; },
       index + ": Megatron index dtype code (byte 17) is 7 (float32): token files hold integers"},
      {"counts that overrun the file", [](auto& idx, auto&) { put_u64(idx, 18, std::uint64_t{1} << 62); },
       index + ": Megatron index says 4611686018427387904 sequences and 13 document indices, more than 2^64 bytes"},
      {"a truncated index", [](auto& idx, auto&) { idx.resize(idx.size() - 8); },
       index + ": Megatron index says 20 sequences and 13 document indices, 378 bytes with the header (398 with the "
               "modes of a multimodal index), but the file is 370 bytes"},
      {"a pointer that does not follow the lengths", [](auto& idx, auto&) { put_u64(idx, 34 + 20 * 4 + 8, 7); },
       index + ": Megatron index pointer of sequence 1 is byte 7, but the sequences before it end at byte "},
      {"a negative length", [](auto& idx, auto&) { put_u64(idx, 34, 0xffffffff); },
       index + ": Megatron index length of sequence 0 is -1"},
      {"document indices out of order", [](auto& idx, auto&) { put_u64(idx, 34 + 20 * 12 + 8, 99); },
       index + ": Megatron index document index 1 is 99: the indices run from 0 to the 20 sequences, in order"},
      {"a .bin shorter than the index says", [](auto&, auto& data) { data.resize(data.size() - 2); },
       (directory / "broken.bin").string() + ": the Megatron-Core indexed dataset header " + index +
           " says 415 U16 tokens from byte 0 (830 bytes), but the file is 828 bytes"},
  };
  for (const Case& broken : cases) {
    CAPTURE(broken.what);
    const std::filesystem::path prefix = broken_copy(directory, broken.edit);
    const std::string message = load_error(runtime, prefix);
    CHECK_MESSAGE(message.starts_with(broken.message), message);
  }
  // The .bin missing altogether: named, with the system's words.
  broken_copy(directory, [](auto&, auto&) {});
  std::filesystem::remove(directory / "broken.bin");
  const std::string missing = load_error(runtime, directory / "broken.idx");
  CHECK_MESSAGE(contains(missing, (directory / "broken.bin").string()), missing);
}

TEST_CASE("[tokens][megatron] an index that lays out no tokens is refused, naming it, whatever its .bin holds") {
  Runtime runtime(placement_options());
  TempDir directory;
  const std::string refusal = (directory / "none.idx").string() +
                              ": Megatron index lays out no tokens (0 sequences): a dataset of no tokens is refused, "
                              "whatever " +
                              (directory / "none.bin").string() + " holds";
  write_dataset(directory, "none", {}, {0});  // its .bin is empty
  CHECK(load_error(runtime, directory / "none") == refusal);
  directory.write("none.bin", "\x01\x02\x03\x04");  // bytes the index does not lay out
  const Error error = error_from([&] { (void)load_tokens(runtime, directory / "none.bin"); });
  CHECK(error.code() == ErrorCode::kInvalidFile);
  CHECK(error.what() == refusal);
  CHECK(error_from([&] { (void)describe_tokens(directory / "none.idx"); }).what() == refusal);
  write_dataset(directory, "hollow", {0, 0}, {0, 1, 2});
  directory.write("hollow.bin", "\x01\x02");
  CHECK(load_error(runtime, directory / "hollow") ==
        (directory / "hollow.idx").string() +
            ": Megatron index lays out no tokens (2 sequences, all of length 0): a dataset of no tokens is refused, "
            "whatever " +
            (directory / "hollow.bin").string() + " holds");
}

TEST_CASE("[tokens][megatron] an llm.c shard with a .idx beside it is refused, naming both files and formats") {
  Runtime runtime(placement_options());
  TempDir directory;
  write_dataset(directory, "shard", {600}, {0, 1});  // 600 U16 tokens: 1200 bytes, within the shard's 1224
  const auto shard = directory.write("shard.bin", llmc_u16_shard(std::vector<std::uint16_t>(100, 7)));
  const auto index = directory / "shard.idx";
  const std::string refusal = shard.string() + ": its own header says it is an llm.c shard (100 U16 tokens), but " +
                              index.string() +
                              " beside it makes it the headerless token data of a Megatron-Core indexed dataset; a "
                              "file is not read as another format than its header says: move " +
                              index.string() + " away to load " + shard.string() + " as an llm.c shard";
  for (const auto& path : {shard, directory / "shard", index}) {
    CAPTURE(path);
    const Error error = error_from([&] { (void)load_tokens(runtime, path); });
    CHECK(error.code() == ErrorCode::kInvalidFile);
    CHECK(error.what() == refusal);
    CHECK(error_from([&] { (void)describe_tokens(path); }).what() == refusal);
  }
  // Tokens that only happen to begin with the magic, no llm.c header holding
  // up behind it, are the dataset's as its index says.
  write_dataset(directory, "chance", {600}, {0, 1});
  std::vector<std::byte> data = read_file(directory / "chance.bin");
  const std::string magic = le32(20240520);
  std::memcpy(data.data(), magic.data(), magic.size());
  write_bytes(directory, "chance.bin", data);
  CHECK(load_tokens(runtime, directory / "chance.bin").shape()[0] == 600);
  std::filesystem::remove(index);
  CHECK(load_tokens(runtime, shard).shape()[0] == 100);
}

TEST_CASE("[tokens][megatron] describe_tokens reads the index alone: format, dtype, count and the data file") {
  const TokenFileInfo info = describe_tokens(kFixtures / "llama_int32");
  CHECK(info.format == "Megatron-Core indexed dataset");
  CHECK(info.dtype == DType::kI32);
  CHECK(info.count == expected()["llama_int32"]["tokens"].size());
  CHECK(info.data_file == (kFixtures / "llama_int32.bin").string());
  TempDir directory;
  CHECK(contains(error_from([&] {
                   (void)describe_tokens(broken_copy(directory, [](auto& idx, auto&) { idx[17] = std::byte{6}; }));
                 }).what(),
                 "dtype code (byte 17) is 6 (float64): token files hold integers"));
}

TEST_CASE("[tokens][megatron] each document starts at its first sequence's first token, as megatron-core reads it") {
  Runtime runtime(placement_options());
  const nlohmann::json all = expected();
  for (const auto& [name, want] : all.items()) {
    CAPTURE(name);
    const std::vector<std::int64_t> starts = expected_starts(want);
    REQUIRE(starts.size() + 1 == want["document_indices"].size());  // the fixtures' documents all hold tokens
    // The prefix matches itself as a pattern, as the .bin and the .idx do.
    for (const std::string& given : {name, name + ".bin", name + ".idx"}) {
      CAPTURE(given);
      const std::vector<TokenFileEntry> entries = load_token_file_entries(runtime, (kFixtures / given).string());
      REQUIRE(entries.size() == 1);
      CHECK(entries[0].path == (kFixtures / given).string());
      REQUIRE(entries[0].document_starts.has_value());
      CHECK(*entries[0].document_starts == starts);
    }
    CHECK(describe_tokens(kFixtures / name).documents == starts.size());
  }
}

TEST_CASE("[tokens][megatron] documents without tokens start nowhere: the starts strictly increase below the end") {
  Runtime runtime(placement_options());
  TempDir directory;
  // Documents: {seq 0: 3 tokens}, {} (no sequence), {seq 1: 0 tokens, seq 2: 2},
  // {seq 3: 4}, {seq 4: 0 tokens} (at the end).
  const std::filesystem::path prefix = write_dataset(directory, "gaps", {3, 0, 2, 4, 0}, {0, 1, 1, 3, 4, 5});
  const std::vector<TokenFileEntry> entries = load_token_file_entries(runtime, prefix.string());
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].tokens.shape()[0] == 9);
  CHECK(entries[0].document_starts == std::vector<std::int64_t>{0, 3, 5});
  CHECK(describe_tokens(prefix).documents == 3u);
  // One document of every sequence: one start.
  const std::filesystem::path whole = write_dataset(directory, "whole", {3, 0, 2}, {0, 3});
  CHECK(load_token_file_entries(runtime, whole.string())[0].document_starts == std::vector<std::int64_t>{0});
}

TEST_CASE("[tokens][megatron] a file whose format records no documents has no document starts") {
  Runtime runtime(placement_options());
  TempDir directory;
  write_bytes(directory, "alone.bin", read_file(kFixtures / "gpt2_uint16.bin"));
  TokenFileOptions u16;
  u16.dtype = DType::kU16;
  const std::vector<TokenFileEntry> entries = load_token_file_entries(runtime, (directory / "alone.bin").string(), u16);
  REQUIRE(entries.size() == 1);
  CHECK_FALSE(entries[0].document_starts.has_value());
  CHECK_FALSE(describe_tokens(directory / "alone.bin", u16).documents.has_value());
  // A prefix with neither file is no pattern's match.
  CHECK(error_from([&] { (void)load_token_file_entries(runtime, (directory / "alone").string()); }).code() ==
        ErrorCode::kNotFound);
}

namespace {

// A /proc/self/status figure in bytes ("VmHWM", "VmRSS"); nullopt where it is
// not there.
std::optional<std::uint64_t> status_bytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    unsigned long long kib = 0;
    if (line.starts_with(key + ":") && std::sscanf(line.c_str() + key.size() + 1, "%llu", &kib) == 1) {
      return std::uint64_t{kib} * 1024;
    }
  }
  return std::nullopt;
}

// Makes the peak resident size (VmHWM) start again from the resident size
// now (proc(5), /proc/PID/clear_refs: 5). False where the kernel has no such file.
bool reset_peak_resident() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return clear.good();
}

}  // namespace

// An index is all header: 12 bytes per sequence. Copying it at every open
// cost each process as much memory again (1.9 GB for 10^8 sequences); it is
// read through a mapping, its pages dropped behind the reader.
TEST_CASE("[tokens][megatron] opening a large index does not hold it in the process's memory") {
  constexpr std::uint64_t kSequences = 8'000'000;  // of one U16 token each
  constexpr std::uint64_t kDocuments = 1000;       // of 8000 sequences each
  TempDir directory;
  {
    std::ofstream index(directory / "large.idx", std::ios::binary);
    std::string header("MMIDIDX\0\0", 9);
    append_u64(header, 1);
    header += '\x08';  // uint16
    append_u64(header, kSequences);
    append_u64(header, kDocuments + 1);
    index << header;
    std::string chunk;
    for (std::uint64_t sequence = 0; sequence < kSequences; ++sequence) {
      append_u32(chunk, 1);
      if (chunk.size() >= (1u << 20)) index << std::exchange(chunk, {});
    }
    for (std::uint64_t sequence = 0; sequence < kSequences; ++sequence) {
      append_u64(chunk, sequence * 2);
      if (chunk.size() >= (1u << 20)) index << std::exchange(chunk, {});
    }
    for (std::uint64_t document = 0; document <= kDocuments; ++document) {
      append_u64(chunk, document * (kSequences / kDocuments));
    }
    index << chunk;
    std::ofstream data(directory / "large.bin", std::ios::binary);
    const std::string tokens(1u << 20, '\x01');
    for (std::uint64_t written = 0; written < kSequences * 2; written += tokens.size()) data << tokens;
  }
  const std::uint64_t index_bytes = std::filesystem::file_size(directory / "large.idx");
  REQUIRE(index_bytes == 34 + kSequences * 12 + (kDocuments + 1) * 8);
  Runtime runtime(placement_options());
  if (!reset_peak_resident() || !status_bytes("VmHWM")) {
    MESSAGE("skipped: this kernel cannot reset the peak resident size (/proc/self/clear_refs)");
    return;
  }
  const std::uint64_t before = *status_bytes("VmRSS");
  const std::vector<TokenFileEntry> entries = load_token_file_entries(runtime, (directory / "large").string());
  const std::uint64_t peak = *status_bytes("VmHWM");
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].tokens.shape()[0] == static_cast<std::int64_t>(kSequences));
  REQUIRE(entries[0].document_starts.has_value());
  CHECK(entries[0].document_starts->size() == kDocuments);
  CHECK(entries[0].document_starts->back() == static_cast<std::int64_t>(kSequences - kSequences / kDocuments));
  // A copy, or the whole mapping resident at once, adds the index's 96 MB;
  // what may stay is a few strides of the reader and the runtime's own.
  CAPTURE(before);
  CAPTURE(peak);
  CHECK(peak - before < index_bytes / 2);
}
