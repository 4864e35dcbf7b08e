// What a stream accepts of its sources: the memory release_pages may give
// back, thousands of token files without a cost per file and source, and the
// output dtypes that keep every token's value.
#include "support/placement_fixture.hpp"
#include "support/temp_dir.hpp"

#include <backplane/batch_stream.hpp>
#include <backplane/tokens.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

using namespace backplane;
using namespace backplane::testing;

namespace {

BatchStreamOptions small_stream(std::int64_t batch, std::int64_t context) {
  BatchStreamOptions options;
  options.batch_size = batch;
  options.context = context;
  options.devices = {kCpu1};
  options.seed = 5;
  return options;
}

std::string refusal(Runtime& runtime, std::vector<Array> sources, const BatchStreamOptions& options) {
  return error_from([&] { BatchStream stream(runtime, std::move(sources), options); }).what();
}

// Bytes this process has read through read(2) and friends (proc(5) rchar),
// or nothing where the kernel does not account them.
std::optional<std::uint64_t> bytes_read_by_process() {
  std::ifstream io("/proc/self/io");
  std::string key;
  std::uint64_t value = 0;
  while (io >> key >> value) {
    if (key == "rchar:") return value;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("[batches] release_pages refuses a private mapping whose modified pages it would throw away") {
  Runtime runtime(placement_options());
  TempDir directory;
  const std::filesystem::path path = directory / "tokens.u16";
  std::vector<std::uint16_t> tokens(8192, 7);
  {
    std::ofstream file(path, std::ios::binary);
    file.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2));
  }
  const std::size_t bytes = tokens.size() * 2;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  REQUIRE(mapped != MAP_FAILED);
  auto* values = static_cast<std::uint16_t*>(mapped);
  for (std::size_t index = 0; index < tokens.size(); ++index) values[index] = 9;  // the process's own copy now
  REQUIRE(::mprotect(mapped, bytes, PROT_READ) == 0);                             // read-only, still modified
  const std::shared_ptr<const void> owner(
      mapped, [bytes](const void* address) { ::munmap(const_cast<void*>(address), bytes); });
  Array source = Array::wrap_host(runtime, kCpu0, DType::kU16, {8192}, mapped, owner);

  BatchStreamOptions options = small_stream(4, 127);
  options.release_pages = true;
  const std::string message = refusal(runtime, {source}, options);
  CHECK(contains(message, "release_pages: source 0 is not in a shared mapping"));

  // Without release_pages the stream reads what the memory holds, and the
  // memory keeps it.
  options.release_pages = false;
  BatchStream stream(runtime, {source}, options);
  for (int step = 0; step < 20; ++step) {
    for (const std::uint16_t value : stream.next()[0].to_vector<std::uint16_t>()) REQUIRE(value == 9);
  }
  CHECK(values[0] == 9);
  CHECK(values[tokens.size() - 1] == 9);
}

TEST_CASE("[batches] a stream over 2000 token files reads /proc/self/maps once, not once per file") {
  Runtime runtime(placement_options());
  TempDir directory;
  std::vector<Array> sources;
  const std::vector<std::uint16_t> tokens(64, 3);
  TokenFileOptions raw;
  raw.dtype = DType::kU16;
  for (int index = 0; index < 2000; ++index) {
    const std::filesystem::path path = directory / fmt::format("shard_{:04}.u16", index);
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2));
    sources.push_back(load_tokens(runtime, path, raw));  // one mapping each
  }
  std::ifstream maps("/proc/self/maps");
  const std::string listing((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
  REQUIRE(listing.size() > 2000 * 40);  // a line per file

  const std::optional<std::uint64_t> before = bytes_read_by_process();
  if (!before) {
    MESSAGE("skipped: /proc/self/io has no rchar (no task I/O accounting in this kernel)");
    return;
  }
  BatchStream stream(runtime, sources, small_stream(4, 15));
  const std::uint64_t read = *bytes_read_by_process() - *before;
  CAPTURE(read);
  CAPTURE(listing.size());
  // One read of the listing (plus what the rest of the process read
  // meanwhile); once per file would be 2000 of them.
  CHECK(read < 4 * listing.size());
  CHECK(stream.next()[0].to_vector<std::uint16_t>() == std::vector<std::uint16_t>(64, 3));
}

TEST_CASE("[batches] an output dtype that cannot hold every token is refused, naming both dtypes") {
  Runtime runtime(placement_options());
  const std::vector<std::uint32_t> tokens(1000, 70000);
  Array source = Array::from_host(runtime, kCpu0, DType::kU32, {1000}, tokens.data(), tokens.size() * 4);
  for (const DType narrow : {DType::kU16, DType::kI8, DType::kI32, DType::kU8}) {
    CAPTURE(dtype_name(narrow));
    BatchStreamOptions options = small_stream(4, 15);
    options.dtype = narrow;
    const std::string message = refusal(runtime, {source}, options);
    CHECK(contains(message, fmt::format("dtype {} cannot hold every U32 token", dtype_name(narrow))));
  }
  const std::vector<std::int64_t> signed_tokens(1000, -5);
  Array negative = Array::from_host(runtime, kCpu0, DType::kI64, {1000}, signed_tokens.data(), 8000);
  BatchStreamOptions options = small_stream(4, 15);
  options.dtype = DType::kU64;
  CHECK(contains(refusal(runtime, {negative}, options), "dtype U64 cannot hold every I64 token"));

  // Widening keeps every value: U32 as U64 and as I64 hands out 70000.
  options = small_stream(4, 15);
  options.dtype = DType::kU64;
  CHECK(BatchStream(runtime, {source}, options).next()[0].to_vector<std::uint64_t>() ==
        std::vector<std::uint64_t>(4 * 16, 70000));
  options.dtype = DType::kI64;
  CHECK(BatchStream(runtime, {source}, options).next()[0].to_vector<std::int64_t>() ==
        std::vector<std::int64_t>(4 * 16, 70000));
}
