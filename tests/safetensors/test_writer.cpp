// The writer: byte-exact against the reference's own fixtures, read back
// bit-exactly for every dtype and shape corner, refusals, atomic replace.
#include "support/errors.hpp"
#include "support/file_builder.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

using namespace backplane;
using namespace backplane::testing;
namespace st = backplane::safetensors;

namespace {

struct OwnedTensor {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> data;
};

std::vector<st::HostTensor> views(const std::vector<OwnedTensor>& tensors) {
  std::vector<st::HostTensor> out;
  for (const OwnedTensor& t : tensors) out.push_back({{t.name, t.dtype, t.shape}, t.data});
  return out;
}

std::vector<std::byte> pattern(std::size_t size, unsigned seed) {
  std::mt19937 random(seed);
  std::vector<std::byte> bytes(size);
  for (auto& b : bytes) b = static_cast<std::byte>(random() & 0xFF);
  return bytes;
}

std::uint64_t nbytes(const std::string& dtype, const std::vector<std::uint64_t>& shape) {
  std::uint64_t elements = 1;
  for (auto d : shape) elements *= d;
  return elements * st::find_dtype(dtype)->bits / 8;
}

OwnedTensor make(std::string name, std::string dtype, std::vector<std::uint64_t> shape, unsigned seed = 1) {
  auto size = nbytes(dtype, shape);
  return {std::move(name), std::move(dtype), std::move(shape), pattern(size, seed)};
}

std::vector<std::byte> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {reinterpret_cast<const std::byte*>(chars.data()),
          reinterpret_cast<const std::byte*>(chars.data()) + chars.size()};
}

// Saves, reads the header back and checks every tensor's bytes in the file.
st::Header round_trip(const std::vector<OwnedTensor>& tensors, const std::optional<st::Metadata>& metadata = {}) {
  TempDir dir;
  auto path = dir / "round.safetensors";
  st::save(path, views(tensors), metadata);
  auto header = st::read_header(path);
  auto file = read_file(path);
  CHECK(file == st::serialize(views(tensors), metadata));
  CHECK(header.file_size == file.size());
  CHECK(header.tensors.size() == tensors.size());
  CHECK(header.metadata == metadata);
  for (const OwnedTensor& t : tensors) {
    CAPTURE(t.name);
    const st::TensorEntry* entry = header.find(t.name);
    REQUIRE(entry != nullptr);
    CHECK(entry->dtype == t.dtype);
    CHECK(entry->shape == t.shape);
    REQUIRE(entry->byte_size() == t.data.size());
    if (!t.data.empty()) {  // memcmp's pointers must be valid even for size 0
      CHECK(std::memcmp(file.data() + header.data_offset + entry->begin, t.data.data(), t.data.size()) == 0);
    }
  }
  return header;
}

std::string header_text(const std::vector<std::byte>& file) {
  std::uint64_t size = 0;
  std::memcpy(&size, file.data(), 8);
  return std::string(reinterpret_cast<const char*>(file.data()) + 8, size);
}

}  // namespace

TEST_CASE("[safetensors] writer matches the reference's own serialization fixtures") {
  // safetensors tensor.rs: test_empty.
  CHECK(st::serialize({}) == st_file("{}      "));
  CHECK(st::serialize({}, st::Metadata{{"framework", "pt"}}) == st_file(R"({"__metadata__":{"framework":"pt"}})"
                                                                        "     "));
  // test_serialization_forced_alignement: "attn0", F32 [1,1,2,3], 0.0..5.0.
  std::vector<float> values{0, 1, 2, 3, 4, 5};
  std::vector<std::byte> data(sizeof(float) * values.size());
  std::memcpy(data.data(), values.data(), data.size());
  std::vector<st::HostTensor> tensors{{{"attn0", "F32", {1, 1, 2, 3}}, data}};
  std::string expected_header = R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})"
                                "       ";
  CHECK(st::serialize(tensors) ==
        st_file(expected_header, std::string(reinterpret_cast<const char*>(data.data()), data.size())));
  // Observed from PyPI safetensors 0.8.0: metadata {} is written, a scalar has shape [].
  std::vector<std::byte> one{std::byte{'q'}};
  CHECK(header_text(st::serialize(std::vector<st::HostTensor>{{{"a", "U8", {}}, one}}, st::Metadata{})) ==
        R"({"__metadata__":{},"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]}})"
        "  ");
}

TEST_CASE("[safetensors] writer orders by dtype (descending) then name, bytewise") {
  std::vector<OwnedTensor> tensors;
  unsigned seed = 0;
  for (const st::DTypeInfo& dtype : st::dtypes()) {
    std::vector<std::uint64_t> shape = dtype.bits == 4   ? std::vector<std::uint64_t>{2, 3}
                                       : dtype.bits == 6 ? std::vector<std::uint64_t>{4}
                                                         : std::vector<std::uint64_t>{2, 3};
    tensors.push_back(make("n_" + std::string(dtype.name), std::string(dtype.name), shape, ++seed));
  }
  for (const char* name : {"b", "B", "a", "\xC3\xA9"}) tensors.push_back(make(name, "U8", {1}, ++seed));
  auto header = round_trip(tensors, st::Metadata{{"zz", "1"}, {"aa", "2"}});
  std::vector<std::string> order;
  for (const auto& entry : header.tensors) order.push_back(entry.name);
  CHECK(order.front() == "n_U64");
  CHECK(order.back() == "n_BOOL");
  auto u8 = std::find(order.begin(), order.end(), "B");
  REQUIRE(u8 != order.end());
  CHECK(std::vector<std::string>(u8, u8 + 5) == std::vector<std::string>{"B", "a", "b", "n_U8", "\xC3\xA9"});
  // Each tensor of whole-byte elements starts at a multiple of its element size.
  for (const auto& entry : header.tensors) {
    if (entry.dtype_bits >= 8) CHECK(entry.begin % (entry.dtype_bits / 8) == 0);
  }
  CHECK(header_text(st::serialize(views(tensors), st::Metadata{{"zz", "1"}, {"aa", "2"}}))
            .starts_with(R"({"__metadata__":{"aa":"2","zz":"1"},"n_U64":{"dtype":"U64","shape":[2,3],)"));
}

TEST_CASE("[safetensors] read back bit-exactly: every dtype, one per file") {
  unsigned seed = 100;
  for (const st::DTypeInfo& dtype : st::dtypes()) {
    CAPTURE(dtype.name);
    std::vector<std::uint64_t> shape =
        dtype.bits < 8 ? std::vector<std::uint64_t>{4, 2} : std::vector<std::uint64_t>{3, 5};
    round_trip({make("x", std::string(dtype.name), shape, ++seed)});
  }
}

TEST_CASE("[safetensors] read back: scalars, zero-size tensors, empty files") {
  round_trip({make("scalar", "F64", {})});
  auto header = round_trip({make("empty", "F32", {0}), make("empty2", "I64", {3, 0, 2}), make("x", "U8", {3})});
  CHECK(header.find("empty")->byte_size() == 0);
  round_trip({});
  round_trip({}, st::Metadata{});
  round_trip({make("only_zero", "BF16", {0})});
}

TEST_CASE("[safetensors] read back: metadata with any text") {
  st::Metadata metadata{{"format", "pt"},
                        {"quote\"back\\slash", "line\nbreak\ttab\x01\x1f\x7f/"},
                        {"\xE2\x82\xAC uro", "\xF0\x9F\x98\x80"},
                        {"", ""}};
  round_trip({make("w", "F16", {4})}, metadata);
  CHECK(header_text(st::serialize({}, st::Metadata{{"k", "\x01\n"}}))
            .starts_with(R"({"__metadata__":{"k":"\u0001\n"}})"));
}

TEST_CASE("[safetensors] read back: many tensors, unicode and odd names") {
  std::vector<OwnedTensor> tensors;
  for (int i = 0; i < 1000; ++i) {
    tensors.push_back(make("layer." + std::to_string(i) + ".weight",
                           i % 3 == 0   ? "F32"
                           : i % 3 == 1 ? "BF16"
                                        : "U8",
                           {static_cast<std::uint64_t>(i % 7), 3}, static_cast<unsigned>(i)));
  }
  for (const char* name : {"\xE6\x9D\x83\xE9\x87\x8D", "\xF0\x9F\x98\x80", "with \"quotes\"", "back\\slash",
                           "new\nline", "", " ", "__metadata", "__metadata__ "}) {
    tensors.push_back(make(name, "I32", {2}, 7));
  }
  round_trip(tensors);
}

TEST_CASE("[safetensors] writer refuses what no reader would accept") {
  auto refused = [](std::vector<OwnedTensor> tensors, const std::string& fragment) {
    CAPTURE(fragment);
    try {
      st::serialize(views(tensors));
      FAIL("written");
    } catch (const Error& error) {
      CHECK(error.code() == ErrorCode::kInvalidArgument);
      CHECK(std::string(error.what()).find(fragment) != std::string::npos);
    }
  };
  refused({make("a", "U8", {1}), make("a", "I8", {1})}, "'a'");
  refused({make("__metadata__", "U8", {1})}, "reserved");
  refused({{"t", "X8", {1}, pattern(1, 1)}}, "unknown dtype");
  refused({{"t", "f32", {1}, pattern(4, 1)}}, "unknown dtype");
  refused({{"t", "F32", {2}, pattern(4, 1)}}, "need 8");
  refused({{"t", "F4", {3}, pattern(2, 1)}}, "MisalignedSlice");
  refused({{"t", "U8", {1ull << 32, 1ull << 32}, {}}}, "overflows");
  refused({{"t", "U16", {1ull << 61}, {}}}, "overflows");
  refused({{"bad\xff", "U8", {1}, pattern(1, 1)}}, "UTF-8");
  CHECK_THROWS_AS(st::serialize({}, st::Metadata{{"k", "\xC0\x80"}}), Error);
}

TEST_CASE("[safetensors] save is atomic: replaces whole, leaves nothing on failure") {
  TempDir dir;
  auto path = dir / "model.safetensors";
  auto first = make("a", "U8", {4}, 1);
  st::save(path, views({first}));
  auto before = read_file(path);
  // A refused save leaves the old file and no temporary file behind.
  CHECK_THROWS_AS(st::save(path, views({first, first})), Error);
  CHECK(read_file(path) == before);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 1);
  // A good save replaces it.
  st::save(path, views({make("b", "F32", {2}, 2)}), st::Metadata{{"v", "2"}});
  CHECK(st::read_header(path).find("b") != nullptr);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 1);
  try {
    st::save(dir / "no" / "such" / "dir.safetensors", views({first}));
    FAIL("saved");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kNotFound);
  }
}

TEST_CASE("[safetensors] replacing a file keeps its mode; a new file gets the umask's") {
  TempDir dir;
  namespace fs = std::filesystem;
  const auto path = dir / "model.safetensors";
  for (const fs::perms mode : {fs::perms::owner_read | fs::perms::owner_write,
                               fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read}) {
    st::save(path, views({make("a", "U8", {4}, 1)}));
    fs::permissions(path, mode);
    st::save(path, views({make("b", "U8", {4}, 2)}));
    CHECK(st::read_header(path).find("b") != nullptr);
    CHECK(fs::status(path).permissions() == mode);
  }
  const mode_t mask = ::umask(022);
  st::save(dir / "new.safetensors", views({make("a", "U8", {4}, 1)}));
  ::umask(mask);
  CHECK(fs::status(dir / "new.safetensors").permissions() ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read));
}

TEST_CASE("[safetensors] saving through a symlink writes the file it names and keeps the link") {
  TempDir dir;
  namespace fs = std::filesystem;
  fs::create_directory(dir / "store");
  const auto target = dir / "store" / "weights.safetensors";
  st::save(target, views({make("old", "U8", {4}, 1)}));
  fs::create_symlink("store/weights.safetensors", dir / "relative.safetensors");
  fs::create_symlink(dir / "relative.safetensors", dir / "chained.safetensors");  // a link to a link
  st::save(dir / "chained.safetensors", views({make("new", "U8", {4}, 2)}));
  CHECK(fs::is_symlink(fs::symlink_status(dir / "chained.safetensors")));
  CHECK(fs::is_symlink(fs::symlink_status(dir / "relative.safetensors")));
  CHECK(st::read_header(target).find("new") != nullptr);
  // A dangling link gets its file created, as open() would.
  fs::create_symlink("store/later.safetensors", dir / "dangling.safetensors");
  st::save(dir / "dangling.safetensors", views({make("x", "U8", {1}, 3)}));
  CHECK(fs::is_symlink(fs::symlink_status(dir / "dangling.safetensors")));
  CHECK(st::read_header(dir / "store" / "later.safetensors").find("x") != nullptr);
  CHECK(std::distance(fs::directory_iterator(dir / "store"), {}) == 2);  // no temporary left behind
}

TEST_CASE("[safetensors] a file name of NAME_MAX bytes can be saved and replaced") {
  TempDir dir;
  const std::string suffix = ".safetensors";
  const auto path = dir / (std::string(255 - suffix.size(), 'n') + suffix);
  st::save(path, views({make("a", "U8", {4}, 1)}));
  st::save(path, views({make("b", "U8", {4}, 2)}));
  CHECK(st::read_header(path).find("b") != nullptr);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 1);
}

TEST_CASE("[safetensors] a file name past NAME_MAX is refused before anything is written") {
  TempDir dir;
  const auto path = dir / (std::string(256 - 12, 'n') + ".safetensors");
  const Error error = error_from([&] { st::save(path, views({make("a", "U8", {4}, 1)})); });
  CHECK(error.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(error.what(), path.string() + ": its file name is 256 bytes, longer than the 255 bytes (NAME_MAX)"));
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 0);
}

TEST_CASE("[safetensors] plan_file gives the layout without data") {
  std::vector<st::TensorSpec> specs{{"small", "U8", {3}}, {"big", "F64", {2}}};
  auto plan = st::plan_file(specs, std::nullopt);
  CHECK(plan.order == std::vector<std::size_t>{1, 0});
  CHECK(plan.header.tensors[0].name == "big");
  CHECK(plan.header.tensors[1].begin == 16);
  CHECK(plan.prefix.size() % 8 == 0);
  CHECK(plan.header.file_size == plan.prefix.size() + 19);
  // The reader agrees with the plan.
  std::vector<std::byte> file = bytes_of(plan.prefix);
  file.resize(plan.header.file_size);
  auto header = parse(file);
  CHECK(header.tensors[0].name == "big");
  CHECK(header.data_offset == plan.header.data_offset);
}

TEST_CASE("[safetensors] the format's dtype table agrees with the placement layer's DType") {
  CHECK(st::dtypes().size() == backplane::kAllDTypes.size());
  for (const st::DTypeInfo& dtype : st::dtypes()) {
    CAPTURE(dtype.name);
    st::TensorEntry entry{"t", std::string(dtype.name), dtype.bits, {}, 0, 0};
    DType placed = st::dtype_of(entry);
    CHECK(backplane::dtype_name(placed) == dtype.name);
    CHECK(backplane::dtype_bits(placed) == static_cast<int>(dtype.bits));
  }
}
