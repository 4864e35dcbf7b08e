// A file whose code runs in this process (a PJRT library) is judged when it
// is opened and held open: what is loaded later through /proc/self/fd/N is
// the file judged, whatever its path names by then.
#include "support/temp_dir.hpp"

#include "util/held_file.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <variant>

using backplane::detail::held_descriptor;
using backplane::detail::HeldFile;
using backplane::detail::hold_trusted_file;
using backplane::testing::TempDir;

namespace {

std::string text_of(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

HeldFile held(const std::filesystem::path& file) {
  auto outcome = hold_trusted_file(file);
  if (auto* problem = std::get_if<std::string>(&outcome)) FAIL("not held: " << *problem);
  return std::get<HeldFile>(outcome);
}

}  // namespace

TEST_CASE("[held file] the file judged is the one read through its descriptor after its path is re-pointed") {
  TempDir dir;
  const auto judged = dir.write("lib.so", "the file judged");
  const HeldFile library = held(judged);
  CHECK(library.path == "/proc/self/fd/" + std::to_string(library.descriptor));
  CHECK(held_descriptor(library.path) == library.descriptor);
  // What an attacker does between the judgement and the load: another file
  // takes the name.
  const auto swapped = dir.write("other.so", "a file never judged");
  REQUIRE(std::rename(swapped.c_str(), judged.c_str()) == 0);
  CHECK(text_of(judged.string()) == "a file never judged");
  CHECK(text_of(library.path) == "the file judged");
  // The new file is another file: judged again, it is held apart.
  const HeldFile other = held(judged);
  CHECK(other.descriptor != library.descriptor);
  CHECK(text_of(other.path) == "a file never judged");
  // One descriptor per file, however often it is judged.
  CHECK(held(judged).descriptor == other.descriptor);
}

TEST_CASE("[held file] only exact paths of held descriptors name one") {
  CHECK_FALSE(held_descriptor("/proc/self/fd/0").has_value());  // open, but not held
  TempDir dir;
  const HeldFile file = held(dir.write("lib.so", "x"));
  CHECK_FALSE(held_descriptor("/proc/self/fd/0" + std::to_string(file.descriptor)).has_value());
  CHECK_FALSE(held_descriptor("/proc/self/fd/" + std::to_string(file.descriptor) + "/").has_value());
  CHECK_FALSE(held_descriptor("/dev/fd/" + std::to_string(file.descriptor)).has_value());
}

TEST_CASE("[held file] a file the trust rule refuses, or one that is not a regular file, is not held") {
  TempDir dir;
  const auto open = dir.write("open.so", "x");
  REQUIRE(::chmod(open.c_str(), 0666) == 0);
  auto refused = hold_trusted_file(open);
  REQUIRE(std::holds_alternative<std::string>(refused));
  CHECK(std::get<std::string>(refused) ==
        "refused: " + open.string() + " is world-writable (anyone could replace it); run chmod o-w " + open.string());
  auto directory = hold_trusted_file(dir.path());
  REQUIRE(std::holds_alternative<std::string>(directory));
  CHECK(std::get<std::string>(directory) == dir.path().string() + " is a directory, not a regular file");
}
