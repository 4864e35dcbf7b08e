// A file whose code runs in this process (a PJRT library), judged by the
// trust rule at the moment it is opened and then held open until the process
// exits. Whoever loads it later, here (the pjrt adapter at the first device
// use) or in the probe helper (which inherits the descriptor), names it
// /proc/self/fd/N and so loads the very file that was judged, whatever its
// path names by then: no check-then-use gap, however long.
//
// Held for ever because the loader remembers a library by the name it was
// opened under: a descriptor number closed and reused for another file would
// make a later dlopen of /proc/self/fd/N return the first library. One
// descriptor per file (device and inode), so the count is bounded by the
// distinct files judged.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace backplane::detail {

struct HeldFile {
  int descriptor = -1;  // close-on-exec; never closed
  std::string path;     // "/proc/self/fd/N"
};

// Opens `file` read-only and judges what was opened: the trust rule on its
// path (untrusted_path), after which the path must still name the file
// opened. Thread-safe. Returns instead why it must not be used: the trust
// rule's refusal, "cannot open PATH: <why>", "PATH is a directory, not a
// regular file" or "refused: PATH changed while it was checked ...".
std::variant<HeldFile, std::string> hold_trusted_file(const std::filesystem::path& file);

// N, when `path` is exactly the /proc/self/fd/N of a file held here.
std::optional<int> held_descriptor(std::string_view path);

}  // namespace backplane::detail
