// Whether a file may be trusted to run code in this process (a plugin) or to
// name code that will be (the config file's plugin_paths): the rule of ssh's
// StrictModes and sudo. The file, its directory and every ancestor up to /
// must be owned by root or by the running user (effective uid) and must not
// be writable by group or others. A root-owned directory with the sticky bit
// (/tmp) may be writable by others: there nobody can replace what another
// user created. Every symlink met on the way, at any hop, is followed only
// under the kernel's protected_symlinks rule (link_may_be_followed), whether
// or not the kernel enforces it, and the directory holding it is judged
// like the file's: so nothing on the path can be re-pointed by another
// user between the judgement and the open.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <string>

namespace backplane::detail {

// Why `file` must not be trusted, naming the path that failed and the command
// that fixes it ("refused: /opt/p is writable by its group (gid 100); run
// chmod g-w /opt/p"); nullopt when it may be. A symlink is checked as named
// (the directories that hold the link) and where it leads.
std::optional<std::string> untrusted_path(const std::filesystem::path& file);

// The kernel's protected_symlinks rule: a symlink that lies in a sticky
// world-writable directory (/tmp) is followed only when it belongs to the
// running user (effective uid) or to the directory's owner; its owner could
// otherwise re-point it at any file between a check and a use.
bool link_may_be_followed(const struct stat& directory, const struct stat& link) noexcept;

}  // namespace backplane::detail
