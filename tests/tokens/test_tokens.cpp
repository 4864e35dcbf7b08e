// load_tokens / load_token_files on files written here with plain C++ I/O:
// every format round-trips as a zero-copy view of the file, every bad header
// is refused with its code and a message naming the file and the problem,
// patterns match in bytewise order, and a shard past 4 GiB reads as such.
#include "token_file_writers.hpp"

#include "support/errors.hpp"
#include "support/load_fixture.hpp"

#include <backplane/safetensors.hpp>
#include <backplane/tokens.hpp>

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

using namespace backplane;
using namespace backplane::testing;

namespace {

std::vector<std::uint16_t> counting_u16(std::size_t count) {
  std::vector<std::uint16_t> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<std::uint16_t>(i * 7919 + 3);
  return values;
}

TokenFileOptions with_dtype(DType dtype) {
  TokenFileOptions options;
  options.dtype = dtype;
  return options;
}

// load_tokens must fail with `code`, and its message must name the file and
// hold every one of `words`.
void check_refused(Runtime& runtime, const std::filesystem::path& path, ErrorCode code,
                   std::initializer_list<std::string_view> words, const TokenFileOptions& options = {}) {
  const Error error = error_from([&] { load_tokens(runtime, path, options); });
  CAPTURE(error.what());
  CHECK(error.code() == code);
  CHECK(contains(error.what(), path.filename().string()));
  for (const std::string_view word : words) CHECK(contains(error.what(), word));
}

}  // namespace

TEST_CASE("[tokens] an llm.c shard of U16 tokens is a zero-copy view of the file after its header") {
  Runtime runtime(placement_options());
  TempDir dir;
  const std::vector<std::uint16_t> tokens = counting_u16(5000);
  const auto path = dir.write("train_000001.bin", llmc_u16_shard(tokens));
  {
    const Array array = load_tokens(runtime, path);
    CHECK(array.dtype() == DType::kU16);
    CHECK(array.shape() == std::vector<std::int64_t>{5000});
    CHECK(array.device() == kCpu0);
    CHECK(array.is_ready());
    CHECK(array.to_vector<std::uint16_t>() == tokens);
    const auto from = mapped_from(array.host_data());
    REQUIRE(from.has_value());
    CHECK(std::filesystem::equivalent(from->path, path));
    CHECK(from->offset == 1024);
    CHECK(is_mapped(path));
  }
  CHECK_FALSE(is_mapped(path));  // the last array gone, the mapping is too
}

TEST_CASE("[tokens] an llm.c shard of U32 tokens (magic 20240801, version 7) loads") {
  Runtime runtime(placement_options());
  TempDir dir;
  const std::vector<std::uint32_t> tokens{0, 1, 128000, 4000000000u, 7};
  const auto path = dir.write("llama.bin", llmc_header(20240801, 7, 5) + token_bytes(tokens));
  const Array array = load_tokens(runtime, path, with_dtype(DType::kU32));
  CHECK(array.dtype() == DType::kU32);
  CHECK(array.to_vector<std::uint32_t>() == tokens);
}

TEST_CASE("[tokens] NumPy files of versions 1.0, 2.0 and 3.0 load flattened, in every integer dtype") {
  Runtime runtime(placement_options());
  TempDir dir;
  SUBCASE("1.0, <u2, 1-D") {
    const auto tokens = counting_u16(300);
    const auto path = dir.write("a.npy", npy_file(npy_dict("<u2", "(300,)"), token_bytes(tokens)));
    const Array array = load_tokens(runtime, path);
    CHECK(array.dtype() == DType::kU16);
    CHECK(array.to_vector<std::uint16_t>() == tokens);
    const auto from = mapped_from(array.host_data());
    REQUIRE(from.has_value());
    CHECK(from->offset == 128);  // numpy pads the header to 64 bytes
  }
  SUBCASE("2.0, <i4, 2-D, flattened in C order") {
    const std::vector<std::int32_t> tokens{-1, 2, -3, 4, 5, -6};
    const auto path = dir.write("b.npy", npy_file(npy_dict("<i4", "(2, 3)"), token_bytes(tokens), 2));
    const Array array = load_tokens(runtime, path);
    CHECK(array.dtype() == DType::kI32);
    CHECK(array.shape() == std::vector<std::int64_t>{6});
    CHECK(array.to_vector<std::int32_t>() == tokens);
  }
  SUBCASE("3.0, |u1") {
    const std::vector<std::uint8_t> tokens{9, 8, 7};
    const auto path = dir.write("c.npy", npy_file(npy_dict("|u1", "(3,)"), token_bytes(tokens), 3));
    CHECK(load_tokens(runtime, path).to_vector<std::uint8_t>() == tokens);
  }
  SUBCASE("<u8 and <i8, <i2, |i1") {
    const std::vector<std::uint64_t> wide{1, 1ull << 40, ~0ull};
    CHECK(load_tokens(runtime, dir.write("d.npy", npy_file(npy_dict("<u8", "(3,)"), token_bytes(wide))))
              .to_vector<std::uint64_t>() == wide);
    const std::vector<std::int64_t> signed_wide{-5, 1ll << 50};
    CHECK(
        load_tokens(runtime, dir.write("e.npy", npy_file(npy_dict("<i8", "(2,)"), token_bytes(signed_wide)))).dtype() ==
        DType::kI64);
    const std::vector<std::int16_t> narrow{-300, 300};
    CHECK(load_tokens(runtime, dir.write("f.npy", npy_file(npy_dict("<i2", "(2,)"), token_bytes(narrow))))
              .to_vector<std::int16_t>() == narrow);
    const std::vector<std::int8_t> bytes{-1, 1};
    CHECK(load_tokens(runtime, dir.write("g.npy", npy_file(npy_dict("|i1", "(2,)"), token_bytes(bytes)))).dtype() ==
          DType::kI8);
  }
  SUBCASE("Fortran order with one dimension above 1 has the same bytes as C order") {
    const auto tokens = counting_u16(4);
    const auto path = dir.write("h.npy", npy_file(npy_dict("<u2", "(1, 4)", true), token_bytes(tokens)));
    CHECK(load_tokens(runtime, path).to_vector<std::uint16_t>() == tokens);
  }
  SUBCASE("a header written by Python 2 (long integers with L, keys in another order)") {
    const auto tokens = counting_u16(2);
    const std::string dict = "{'shape': (2L,), 'fortran_order': False, 'descr': '<u2'}";
    CHECK(load_tokens(runtime, dir.write("i.npy", npy_file(dict, token_bytes(tokens)))).to_vector<std::uint16_t>() ==
          tokens);
  }
  SUBCASE("a scalar is one token, an empty array none") {
    const std::vector<std::uint32_t> one{42};
    CHECK(load_tokens(runtime, dir.write("j.npy", npy_file(npy_dict("<u4", "()"), token_bytes(one)))).element_count() ==
          1);
    CHECK(load_tokens(runtime, dir.write("k.npy", npy_file(npy_dict("<u4", "(0, 5)"), ""))).element_count() == 0);
  }
}

TEST_CASE("[tokens] a safetensors file gives its one tensor, or the one named, flattened") {
  Runtime runtime(placement_options());
  TempDir dir;
  const auto tokens = counting_u16(64);
  const std::vector<float> weights{1, 2, 3};
  const std::vector<safetensors::HostTensor> one{{{"tokens", "U16", {8, 8}}, std::as_bytes(std::span(tokens))}};
  const auto single = write_bytes(dir, "single.safetensors", safetensors::serialize(one));
  const Array array = load_tokens(runtime, single);
  CHECK(array.dtype() == DType::kU16);
  CHECK(array.shape() == std::vector<std::int64_t>{64});
  CHECK(array.to_vector<std::uint16_t>() == tokens);
  const auto from = mapped_from(array.host_data());
  REQUIRE(from.has_value());
  CHECK(from->offset == safetensors::read_header(single).data_offset);

  const std::vector<safetensors::HostTensor> two{{{"tokens", "U16", {64}}, std::as_bytes(std::span(tokens))},
                                                 {{"weights", "F32", {3}}, std::as_bytes(std::span(weights))}};
  const auto several = write_bytes(dir, "several.safetensors", safetensors::serialize(two));
  TokenFileOptions named;
  named.name = "tokens";
  CHECK(load_tokens(runtime, several, named).to_vector<std::uint16_t>() == tokens);
  check_refused(runtime, several, ErrorCode::kInvalidArgument, {"2 tensors", "'tokens'", "'weights'", "name"});
  named.name = "weights";
  check_refused(runtime, several, ErrorCode::kInvalidFile, {"'weights'", "F32", "not an integer"}, named);
  named.name = "labels";
  check_refused(runtime, several, ErrorCode::kNotFound, {"no tensor named 'labels'", "'tokens'"}, named);
}

TEST_CASE("[tokens] a raw file is tokens of the dtype given, on the device given") {
  Runtime runtime(placement_options());
  TempDir dir;
  const auto tokens = counting_u16(1000);
  const auto path = dir.write("tokens.u16", token_bytes(tokens));
  TokenFileOptions options = with_dtype(DType::kU16);
  options.device = kCpu2;
  const Array array = load_tokens(runtime, path, options);
  CHECK(array.device() == kCpu2);
  CHECK(array.to_vector<std::uint16_t>() == tokens);
  CHECK(mapped_from(array.host_data())->offset == 0);
}

TEST_CASE("[tokens] an llm.c header that lies is refused, naming the file and the field") {
  Runtime runtime(placement_options());
  TempDir dir;
  SUBCASE("the wrong version for the magic") {
    const auto path = dir.write("v2.bin", llmc_header(20240520, 2, 0));
    check_refused(runtime, path, ErrorCode::kInvalidFile, {"llm.c", "version", "is 2", "needs version 1"});
    const auto u32 = dir.write("v1.bin", llmc_header(20240801, 1, 0));
    check_refused(runtime, u32, ErrorCode::kInvalidFile, {"version", "is 1", "needs version 7"});
  }
  SUBCASE("a token count that does not match the file's size") {
    const auto path = dir.write("shard.bin", llmc_header(20240520, 1, 1000) + std::string(1024, '\0'));
    const Error error = error_from([&] { load_tokens(runtime, path); });
    CHECK(error.code() == ErrorCode::kInvalidFile);
    CHECK(std::string(error.what()) == path.string() +
                                           ": llm.c shard header says 1000 tokens (3024 bytes with the header) "
                                           "but the file is 2048 bytes");
  }
  SUBCASE("a header cut short") {
    const auto path = dir.write("short.bin", llmc_header(20240520, 1, 0).substr(0, 100));
    check_refused(runtime, path, ErrorCode::kInvalidFile, {"truncated", "100 bytes", "1024"});
  }
  SUBCASE("a dtype that contradicts the header") {
    const auto path = dir.write("shard.bin", llmc_u16_shard(counting_u16(4)));
    check_refused(runtime, path, ErrorCode::kInvalidArgument, {"I32 was asked for", "llm.c", "says U16"},
                  with_dtype(DType::kI32));
  }
}

TEST_CASE("[tokens] a NumPy header that is not an integer array the file holds is refused") {
  Runtime runtime(placement_options());
  TempDir dir;
  const std::string data = token_bytes(counting_u16(4));
  SUBCASE("truncated: the length field points past the end") {
    const std::string whole = npy_file(npy_dict("<u2", "(4,)"), "");
    const auto path = dir.write("cut.npy", whole.substr(0, 40));
    check_refused(runtime, path, ErrorCode::kInvalidFile, {"NumPy header", "truncated", "40 bytes"});
    const auto tiny = dir.write("tiny.npy", whole.substr(0, 9));
    check_refused(runtime, tiny, ErrorCode::kInvalidFile, {"truncated", "9 bytes"});
  }
  SUBCASE("big-endian") {
    const auto path = dir.write("big.npy", npy_file(npy_dict(">u2", "(4,)"), data));
    check_refused(runtime, path, ErrorCode::kInvalidFile, {"'>u2'", "big-endian", "'<u2'"});
  }
  SUBCASE("float") {
    const auto path = dir.write("float.npy", npy_file(npy_dict("<f4", "(2,)"), std::string(8, '\0')));
    check_refused(runtime, path, ErrorCode::kInvalidFile, {"'descr'", "'<f4'", "float", "not an integer"});
  }
  SUBCASE("bool, structured") {
    check_refused(runtime, dir.write("bool.npy", npy_file(npy_dict("|b1", "(2,)"), "\1\0")), ErrorCode::kInvalidFile,
                  {"boolean"});
    const std::string structured = "{'descr': [('a', '<u2')], 'fortran_order': False, 'shape': (4,)}";
    check_refused(runtime, dir.write("struct.npy", npy_file(structured, data)), ErrorCode::kInvalidFile,
                  {"structured"});
  }
  SUBCASE("a shape that does not match the file's size") {
    const auto path = dir.write("shape.npy", npy_file(npy_dict("<u2", "(5,)"), data));
    check_refused(runtime, path, ErrorCode::kInvalidFile, {"(5,)", "10 bytes", "136 bytes"});
  }
  SUBCASE("Fortran order with two dimensions above 1") {
    const auto path = dir.write("fortran.npy", npy_file(npy_dict("<u2", "(2, 2)", true), data));
    check_refused(runtime, path, ErrorCode::kInvalidFile, {"fortran_order True", "(2, 2)"});
  }
  SUBCASE("an unknown version, keys numpy does not write, a header that is not a literal") {
    check_refused(runtime, dir.write("v4.npy", npy_file(npy_dict("<u2", "(4,)"), data, 4)), ErrorCode::kInvalidFile,
                  {"version 4.0"});
    const std::string extra = "{'descr': '<u2', 'fortran_order': False, 'shape': (4,), 'x': 1}";
    check_refused(runtime, dir.write("extra.npy", npy_file(extra, data)), ErrorCode::kInvalidFile, {"'x'"});
    const std::string missing = "{'descr': '<u2', 'shape': (4,)}";
    check_refused(runtime, dir.write("missing.npy", npy_file(missing, data)), ErrorCode::kInvalidFile,
                  {"lacks the key 'fortran_order'"});
    check_refused(runtime, dir.write("junk.npy", npy_file("{'descr': <u2}", data)), ErrorCode::kInvalidFile,
                  {"not a Python literal"});
  }
  SUBCASE("a dtype that contradicts the header") {
    const auto path = dir.write("u2.npy", npy_file(npy_dict("<u2", "(4,)"), data));
    check_refused(runtime, path, ErrorCode::kInvalidArgument, {"U32 was asked for", "NumPy", "says U16"},
                  with_dtype(DType::kU32));
  }
}

TEST_CASE("[tokens] a raw file needs an integer dtype and a whole number of tokens") {
  Runtime runtime(placement_options());
  TempDir dir;
  const auto odd = dir.write("odd.bin", std::string(1001, '\1'));
  check_refused(runtime, odd, ErrorCode::kInvalidArgument, {"raw", "needs a dtype"});
  check_refused(runtime, odd, ErrorCode::kInvalidFile, {"1001 bytes", "not a whole number of U16 tokens"},
                with_dtype(DType::kU16));
  check_refused(runtime, odd, ErrorCode::kInvalidArgument, {"F32", "not an integer"}, with_dtype(DType::kF32));
  check_refused(runtime, dir.write("empty.bin", ""), ErrorCode::kInvalidFile, {"empty"}, with_dtype(DType::kU8));
  TokenFileOptions named = with_dtype(DType::kU8);
  named.name = "tokens";
  check_refused(runtime, odd, ErrorCode::kInvalidArgument, {"'tokens'", "safetensors files only", "raw"}, named);
}

TEST_CASE("[tokens] a path that is missing, a directory or a FIFO is refused without blocking") {
  Runtime runtime(placement_options());
  TempDir dir;
  check_refused(runtime, dir / "missing.bin", ErrorCode::kNotFound, {"cannot open"});
  std::filesystem::create_directory(dir / "shards");
  check_refused(runtime, dir / "shards", ErrorCode::kInvalidArgument, {"a directory", "not a regular file"});
  REQUIRE(::mkfifo((dir / "pipe").c_str(), 0600) == 0);
  check_refused(runtime, dir / "pipe", ErrorCode::kInvalidArgument, {"FIFO"});
}

TEST_CASE("[tokens] tokens live on a host-addressable device only") {
  Runtime runtime(placement_options());
  TempDir dir;
  const auto path = dir.write("shard.bin", llmc_u16_shard(counting_u16(4)));
  TokenFileOptions options;
  options.device = kSim0;
  check_refused(runtime, path, ErrorCode::kInvalidArgument, {"sim:0", "not host-addressable"}, options);
}

TEST_CASE("[tokens] load_token_files matches a pattern, in bytewise order of the paths") {
  Runtime runtime(placement_options());
  TempDir dir;
  // Bytewise: upper case before lower case, "a10" before "a2".
  const std::vector<std::string> names{"b.bin", "a2.bin", "B.bin", "a10.bin"};
  for (std::size_t index = 0; index < names.size(); ++index) {
    dir.write(names[index], std::string(index + 1, static_cast<char>(index)));
  }
  dir.write("notes.txt", "not a shard");
  const std::vector<Array> arrays = load_token_files(runtime, (dir / "*.bin").string(), with_dtype(DType::kU8));
  REQUIRE(arrays.size() == 4);
  // Each file's length and bytes say which it is: B, a10, a2, b.
  const std::vector<std::size_t> expected{2, 3, 1, 0};
  for (std::size_t index = 0; index < arrays.size(); ++index) {
    CAPTURE(index);
    CHECK(arrays[index].to_vector<std::uint8_t>() ==
          std::vector<std::uint8_t>(expected[index] + 1, static_cast<std::uint8_t>(expected[index])));
  }

  SUBCASE("a plain path matches itself, even one glob would read as a pattern") {
    CHECK(load_token_files(runtime, (dir / "b.bin").string(), with_dtype(DType::kU8)).size() == 1);
    dir.write("shard[1].bin", "xy");
    CHECK(load_token_files(runtime, (dir / "shard[1].bin").string(), with_dtype(DType::kU8)).front().element_count() ==
          2);
  }
  SUBCASE("no match names the pattern") {
    const std::string pattern = (dir / "train_*.bin").string();
    const Error error = error_from([&] { load_token_files(runtime, pattern, with_dtype(DType::kU8)); });
    CHECK(error.code() == ErrorCode::kNotFound);
    CHECK(contains(error.what(), "no file matches"));
    CHECK(contains(error.what(), pattern));
  }
  SUBCASE("a file that fails fails the whole load") {
    dir.write("c.bin", "odd");
    const Error error =
        error_from([&] { load_token_files(runtime, (dir / "[abc]*.bin").string(), with_dtype(DType::kU16)); });
    CHECK(error.code() == ErrorCode::kInvalidFile);
  }
}

TEST_CASE("[tokens] a sparse llm.c shard of 2.5 G U16 tokens (5 GB) reads with 64-bit sizes") {
  Runtime runtime(placement_options());
  TempDir dir;
  constexpr std::uint64_t kTokens = 2'500'000'000;  // above INT32_MAX, and the file above 4 GiB
  constexpr std::uint64_t kSize = 1024 + kTokens * 2;
  const auto path = dir / "huge.bin";
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  const std::string header = llmc_header(20240520, 1, static_cast<std::uint32_t>(kTokens));
  const std::vector<std::uint16_t> tail{11, 22, 33, 44};
  const std::string tail_bytes = token_bytes(tail);
  const bool written = ::ftruncate(fd, static_cast<off_t>(kSize)) == 0 &&
                       ::pwrite(fd, header.data(), header.size(), 0) == static_cast<ssize_t>(header.size()) &&
                       ::pwrite(fd, tail_bytes.data(), tail_bytes.size(), static_cast<off_t>(kSize - 8)) == 8;
  ::close(fd);
  if (!written) {
    MESSAGE("skipped: this file system refuses a sparse 5 GB file (" << std::strerror(errno) << ")");
    return;
  }
  const Array tokens = load_tokens(runtime, path);
  CHECK(tokens.element_count() == kTokens);
  CHECK(tokens.nbytes() == kTokens * 2);
  const auto* values = static_cast<const std::uint16_t*>(tokens.host_data());
  CHECK(values[kTokens - 1] == 44);
  CHECK(values[kTokens - 4] == 11);
  const auto last = static_cast<std::int64_t>(kTokens);
  CHECK(tokens.slice(last - 4, last).to_vector<std::uint16_t>() == tail);
  CHECK(tokens.slice(last - 6, last - 4).to_vector<std::uint16_t>() == std::vector<std::uint16_t>{0, 0});
}
