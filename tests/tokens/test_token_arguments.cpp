// What load_tokens refuses before or beyond a header: text that C would cut
// at a NUL byte, and more files than the kernel lets a process map. And the
// pattern loader that keeps each file's path.
#include "support/errors.hpp"
#include "support/load_fixture.hpp"

#include "util/page_advice.hpp"

#include <backplane/tokens.hpp>

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <sys/mman.h>

#include <string>
#include <vector>

using namespace backplane;
using namespace backplane::testing;
using namespace std::string_literals;

namespace {

TokenFileOptions u16() {
  TokenFileOptions options;
  options.dtype = DType::kU16;
  return options;
}

}  // namespace

TEST_CASE("[tokens] a NUL byte in a path, a tensor name or a pattern is refused, naming the argument") {
  Runtime runtime(placement_options());
  TempDir directory;
  const std::filesystem::path evil = directory.write("evil.u16", "abcd");
  directory.write("evil.u16good.u16", "abcd");

  // "evil.u16\0good.u16" would open evil.u16 if it were passed on as a C string.
  const std::string path = evil.string() + "\0good.u16"s;
  Error error = error_from([&] { load_tokens(runtime, path, u16()); });
  CHECK(error.code() == ErrorCode::kInvalidArgument);
  CHECK(std::string(error.what()) ==
        fmt::format("load_tokens: path holds a NUL byte at offset {}", evil.string().size()));

  TokenFileOptions named = u16();
  named.name = "a\0b"s;
  error = error_from([&] { load_tokens(runtime, evil, named); });
  CHECK(error.code() == ErrorCode::kInvalidArgument);
  CHECK(std::string(error.what()) == "load_tokens: name holds a NUL byte at offset 1");

  const std::string pattern = (directory / "*.u16").string() + "\0x"s;
  error = error_from([&] { load_token_files(runtime, pattern, u16()); });
  CHECK(error.code() == ErrorCode::kInvalidArgument);
  CHECK(std::string(error.what()) ==
        fmt::format("load_token_files: pattern holds a NUL byte at offset {}", pattern.size() - 2));
}

TEST_CASE("[tokens] load_token_file_entries keeps each file's path next to its tokens, in bytewise order") {
  Runtime runtime(placement_options());
  TempDir directory;
  directory.write("b.u16", "bbbb");
  directory.write("a.u16", "aaaaaa");
  const std::vector<TokenFileEntry> entries = load_token_file_entries(runtime, (directory / "*.u16").string(), u16());
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].path == (directory / "a.u16").string());
  CHECK(entries[0].tokens.shape() == std::vector<std::int64_t>{3});
  CHECK(entries[1].path == (directory / "b.u16").string());
  CHECK(entries[1].tokens.to_vector<std::uint16_t>() == std::vector<std::uint16_t>{0x6262, 0x6262});
}

// The sanitizers' allocators map memory of their own and abort when the
// table is full, before load_tokens could report anything.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

TEST_CASE("[tokens] more token files than vm.max_map_count allows: the error names the limit and the count") {
  if (kSanitized) {
    MESSAGE("skipped: a sanitizer's allocator aborts once the mapping table is full");
    return;
  }
  const std::uint64_t limit = detail::max_map_count();
  if (limit == 0 || limit > 300000) {
    MESSAGE("skipped: vm.max_map_count is ", limit, ", too high to reach in a test (or unreadable)");
    return;
  }
  Runtime runtime(placement_options());
  TempDir directory;
  const std::filesystem::path path = directory.write("tokens.u16", "abcdefgh");
  (void)load_tokens(runtime, path, u16());  // the device and its allocators exist before the table fills

  // Fill the process's mapping table: one page each, alternately readable
  // and not, so that no two merge into one mapping.
  std::vector<void*> filler;
  filler.reserve(static_cast<std::size_t>(limit));
  for (std::uint64_t index = 0; index < limit; ++index) {
    void* page = ::mmap(nullptr, 4096, index % 2 ? PROT_READ : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) break;
    filler.push_back(page);
  }
  std::string message;
  ErrorCode code = ErrorCode::kInternal;
  try {
    (void)load_tokens(runtime, path, u16());
  } catch (const Error& error) {
    message = error.what();
    code = error.code();
  }
  for (void* page : filler) ::munmap(page, 4096);
  CAPTURE(message);
  CHECK(code == ErrorCode::kOutOfMemory);
  CHECK(contains(message, "tokens.u16: cannot map the file (8 bytes)"));
  CHECK(contains(message, fmt::format("at the kernel's limit vm.max_map_count = {}", limit)));
  CHECK(contains(message, "memory mappings"));
  CHECK(contains(message, "sysctl -w vm.max_map_count="));
}
