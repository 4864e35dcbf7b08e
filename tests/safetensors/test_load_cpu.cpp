// load() onto host-addressable devices: zero-copy views of one mapping, no
// tensor data read, names, errors, unaligned data.
#include "support/load_fixture.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

using namespace backplane;
using namespace backplane::testing;
namespace st = backplane::safetensors;

namespace {

// Three tensors of several dtypes, written by our writer.
struct SmallFile {
  std::vector<std::uint8_t> weights = random_bytes(6 * 4, 11);
  std::vector<std::uint8_t> tokens = random_bytes(1000 * 2, 12);
  std::vector<std::uint8_t> flag = random_bytes(1, 13);
  std::filesystem::path path;

  explicit SmallFile(const TempDir& dir) {
    std::vector<st::HostTensor> tensors{
        {{"weights", "F32", {2, 3}}, std::as_bytes(std::span(weights))},
        {{"tokens", "U16", {1000}}, std::as_bytes(std::span(tokens))},
        {{"flag", "BOOL", {}}, std::as_bytes(std::span(flag))},
    };
    path = write_bytes(dir, "small.safetensors", st::serialize(tensors, st::Metadata{{"format", "pt"}}));
  }
};

}  // namespace

TEST_CASE("[safetensors] a cpu load is a zero-copy view of one read-only mapping of the file") {
  Runtime runtime(placement_options());
  TempDir dir;
  SmallFile file(dir);
  const st::Header header = st::read_header(file.path);
  {
    st::Loaded loaded = st::load(runtime, file.path, kCpu0);
    REQUIRE(loaded.tensors.size() == 3);
    CHECK(loaded.metadata == st::Metadata{{"format", "pt"}});
    CHECK(loaded.header.tensors.size() == 3);
    CHECK(loaded.header.data_offset == header.data_offset);
    for (const auto& [name, array] : loaded.tensors) {
      const st::TensorEntry* entry = header.find(name);
      REQUIRE(entry != nullptr);
      CHECK(array.device() == kCpu0);
      CHECK(array.dtype() == st::dtype_of(*entry));
      CHECK(array.nbytes() == entry->byte_size());
      // The pointer is the file's own page-cache page at the tensor's offset.
      auto from = mapped_from(array.host_data());
      REQUIRE(from.has_value());
      CHECK(std::filesystem::equivalent(from->path, file.path));
      CHECK(from->offset == header.data_offset + entry->begin);
      CHECK(array.is_ready());
    }
    CHECK(loaded.tensors.at("tokens").shape() == std::vector<std::int64_t>{1000});
    CHECK(loaded.tensors.at("flag").shape().empty());
    CHECK(std::memcmp(loaded.tensors.at("tokens").host_data(), file.tokens.data(), file.tokens.size()) == 0);
    CHECK(loaded.tensors.at("weights").to_vector<float>().size() == 6);

    // One mapping shared by all arrays; a view outlives the rest.
    Array view = loaded.tensors.at("tokens").slice(10, 20);
    loaded.tensors.clear();
    CHECK(is_mapped(std::filesystem::canonical(file.path)));
    CHECK(std::memcmp(view.host_data(), file.tokens.data() + 20, 20) == 0);
  }
  CHECK_FALSE(is_mapped(std::filesystem::canonical(file.path)));  // unmapped with the last array
}

TEST_CASE("[safetensors] a consumer writing into a cpu-loaded tensor changes neither the file nor crashes") {
  // DLPack consumers such as PyTorch cannot be told memory is read-only: the
  // mapping is copy-on-write, so a write stays private to this process.
  Runtime runtime(placement_options());
  TempDir dir;
  SmallFile file(dir);
  {
    st::Loaded loaded = st::load(runtime, file.path, kCpu0);
    auto* bytes = static_cast<std::uint8_t*>(const_cast<void*>(loaded.tensors.at("tokens").host_data()));
    const auto changed = static_cast<std::uint8_t>(file.tokens[0] + 1);
    bytes[0] = changed;
    // The array sees its own write (little-endian U16: low byte first).
    const auto expected = static_cast<std::uint16_t>(changed | (file.tokens[1] << 8));
    CHECK(loaded.tensors.at("tokens").to_vector<std::uint16_t>()[0] == expected);
  }
  st::Loaded again = st::load(runtime, file.path, kCpu0);
  CHECK(std::memcmp(again.tensors.at("tokens").host_data(), file.tokens.data(), file.tokens.size()) == 0);
}

TEST_CASE("[safetensors] loading a 1 GiB file onto the cpu reads none of its tensor data") {
  Runtime runtime(placement_options());
  TempDir dir;
  // Sparse: ftruncate extends the file without writing (or storing) data.
  constexpr std::uint64_t kTokens = std::uint64_t{1} << 29;  // 1 GiB of U16
  const std::string json = R"({"tokens":{"dtype":"U16","shape":[536870912],"data_offsets":[0,1073741824]}})";
  std::string padded = json + std::string((8 - json.size() % 8) % 8, ' ');
  const auto path = dir / "big.safetensors";
  write_bytes(dir, "big.safetensors", bytes_of(le64(padded.size()) + padded));
  const std::uint64_t data_offset = 8 + padded.size();
  REQUIRE(::truncate(path.c_str(), static_cast<off_t>(data_offset + kTokens * 2)) == 0);

  st::Loaded loaded = st::load(runtime, path, kCpu0);
  const Array& tokens = loaded.tensors.at("tokens");
  REQUIRE(tokens.element_count() == kTokens);

  // mincore: which pages of the mapping are in the page cache. A fresh sparse
  // file has none; reading a page (as a copying loader would) brings it in.
  const long page = ::sysconf(_SC_PAGESIZE);
  const auto first = reinterpret_cast<std::uintptr_t>(tokens.host_data());
  const std::uintptr_t aligned = first / static_cast<std::uintptr_t>(page) * static_cast<std::uintptr_t>(page);
  const std::size_t length = static_cast<std::size_t>(first - aligned + tokens.nbytes());
  std::vector<unsigned char> resident((length + static_cast<std::size_t>(page) - 1) / static_cast<std::size_t>(page));
  auto resident_pages = [&] {
    REQUIRE(::mincore(reinterpret_cast<void*>(aligned), length, resident.data()) == 0);
    std::size_t count = 0;
    for (unsigned char flags : resident) count += flags & 1;
    return count;
  };
  // At most the page that also holds the header.
  CHECK(resident_pages() <= 1);

  // The measurement can see a read: touch 16 pages in the middle.
  const auto* bytes = static_cast<const volatile unsigned char*>(tokens.host_data());
  unsigned sum = 0;
  for (int index = 0; index < 16; ++index) sum += bytes[kTokens + static_cast<std::uint64_t>(index * page)];
  CHECK(sum == 0);  // holes read as zeros
  CHECK(resident_pages() >= 16);
}

TEST_CASE("[safetensors] load picks tensors by name and names unknown ones") {
  Runtime runtime(placement_options());
  TempDir dir;
  SmallFile file(dir);
  st::LoadOptions options;
  options.names = {"flag", "tokens", "flag"};
  st::Loaded loaded = st::load(runtime, file.path, kCpu0, options);
  CHECK(loaded.tensors.size() == 2);
  CHECK(loaded.tensors.contains("flag"));
  CHECK(loaded.tensors.contains("tokens"));
  CHECK(loaded.header.tensors.size() == 3);  // the header still lists all

  options.names = {"tokens", "bias"};
  auto error = error_from([&] { st::load(runtime, file.path, kCpu0, options); });
  CHECK(error.code() == ErrorCode::kNotFound);
  CHECK(contains(error.what(), "no tensor named 'bias'"));
  CHECK(contains(error.what(), "3 tensors"));
  CHECK(contains(error.what(), "'weights'"));
  CHECK(contains(error.what(), file.path.string()));
}

TEST_CASE("[safetensors] load reports progress once on the cpu and follows the default device") {
  Runtime runtime(placement_options());
  TempDir dir;
  SmallFile file(dir);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> reports;
  st::LoadOptions options;
  options.progress = [&](std::uint64_t done, std::uint64_t total) { reports.emplace_back(done, total); };
  {
    DefaultDeviceScope scope(runtime, "cpu:1");
    st::Loaded loaded = st::load(runtime, file.path, std::nullopt, options);
    CHECK(loaded.tensors.at("weights").device() == kCpu1);
  }
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].first == 6 * 4 + 2000 + 1);
  CHECK(reports[0].second == reports[0].first);
  // Outside the scope the default is the fastest device (sim ranks above cpu).
  CHECK(st::load(runtime, file.path).tensors.at("flag").device() == runtime.default_device().device);
}

TEST_CASE("[safetensors] unaligned tensor data loads zero-copy and reads correctly") {
  Runtime runtime(placement_options());
  TempDir dir;
  // A U8 of one byte first, so the U16 tensor starts at an odd address.
  const std::string data = std::string("\x07", 1) + std::string("\x01\x02\x03\x04\x05\x06", 6);
  const auto path = write_bytes(
      dir, "odd.safetensors",
      st_file(
          R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U16","shape":[3],"data_offsets":[1,7]}})",
          data));
  st::Loaded loaded = st::load(runtime, path, kCpu0);
  const Array& b = loaded.tensors.at("b");
  CHECK(reinterpret_cast<std::uintptr_t>(b.host_data()) % 2 == 1);
  CHECK(b.to_vector<std::uint16_t>() == std::vector<std::uint16_t>{0x0201, 0x0403, 0x0605});
  const std::vector<std::int64_t> offsets{0, 1};
  Array windows = take_windows(runtime, b, offsets, 2, kCpu0, DType::kI64);
  CHECK(windows.to_vector<std::int64_t>() == std::vector<std::int64_t>{0x0201, 0x0403, 0x0403, 0x0605});
}

TEST_CASE("[safetensors] load refuses invalid and missing files with the format error") {
  Runtime runtime(placement_options());
  TempDir dir;
  const auto bad = write_bytes(
      dir, "gap.safetensors",
      st_file(
          R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})",
          "xyz"));
  for (const Device& device : {kCpu0, kSim0}) {
    try {
      st::load(runtime, bad, device);
      FAIL("expected FormatError");
    } catch (const st::FormatError& error) {
      CHECK(error.rule() == st::Rule::kInvalidOffset);
      CHECK(error.tensor() == "b");
      CHECK(error.file() == bad.string());
    }
  }
  const auto tiny = write_bytes(dir, "tiny.safetensors", bytes_of("abc"));
  try {
    st::load(runtime, tiny, kCpu0);
    FAIL("expected FormatError");
  } catch (const st::FormatError& error) {
    CHECK(error.rule() == st::Rule::kHeaderTooSmall);
  }
  CHECK(error_from([&] { st::load(runtime, dir / "missing.safetensors", kCpu0); }).code() == ErrorCode::kNotFound);
  CHECK(error_from([&] { st::load(runtime, dir.path(), kCpu0); }).code() == ErrorCode::kInvalidArgument);
  // The device is checked before the file.
  CHECK(error_from([&] { st::load(runtime, bad, Device{"nope", 0}); }).code() == ErrorCode::kNotFound);
}

TEST_CASE("[safetensors] load refuses a dimension no Array shape can hold") {
  Runtime runtime(placement_options());
  TempDir dir;
  // Valid for the reference (the product is 0), but 2^63 is not an int64.
  const auto path = write_bytes(
      dir, "huge.safetensors", st_file(R"({"z":{"dtype":"U8","shape":[0,9223372036854775808],"data_offsets":[0,0]}})"));
  auto error = error_from([&] { st::load(runtime, path, kCpu0); });
  CHECK(error.code() == ErrorCode::kUnsupported);
  CHECK(contains(error.what(), "'z'"));
}

TEST_CASE("[safetensors] empty files and zero-size tensors load on the cpu") {
  Runtime runtime(placement_options());
  TempDir dir;
  const auto empty = write_bytes(dir, "empty.safetensors", st::serialize({}));
  CHECK(st::load(runtime, empty, kCpu0).tensors.empty());
  const auto zero =
      write_bytes(dir, "zero.safetensors", st_file(R"({"z":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]}})"));
  st::Loaded loaded = st::load(runtime, zero, kCpu0);
  CHECK(loaded.tensors.at("z").nbytes() == 0);
  CHECK(loaded.tensors.at("z").shape() == std::vector<std::int64_t>{0, 4});
}
