// One entry of discovery's list before it is probed: a plugin file of the
// search path, an instance of a plugin that serves several backends (the
// pjrt adapter, once per PJRT library), or a source already known broken.
#pragma once

#include "loader/plugin_library.hpp"

#include <backplane/backplane.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace backplane::detail {

struct Candidate {
  std::filesystem::path file;
  SearchOrigin origin = SearchOrigin::kCode;
  std::string origin_detail;
  // The backend's name: from the file name, or the instance's; empty for a
  // directly named file, which reveals it only once opened.
  std::string name;
  // The name the table must declare: the file name's (for an instance, the
  // plugin's, which differs from `name`).
  std::string table_name;
  // An instance: the PJRT library it drives and the options that say so,
  // which come before the user's options for `name`.
  std::filesystem::path library;
  PluginOptions instance_options;
  // Set: listed with this status and reason as it is, nothing opened (a
  // broken source, the adapter with no PJRT library).
  std::optional<BackendStatus> listed_status;
  std::string listed_reason;

  bool instance() const { return !library.empty(); }
  // What a later candidate of the same name is shadowed by, in words.
  std::string shadow_name() const {
    if (!library.empty()) {
      return origin_detail.empty() ? library.string() : library.string() + " (" + origin_detail + ")";
    }
    return file.string();
  }
  // The listing a candidate starts from: name, path, origin, library.
  BackendInfo info() const {
    BackendInfo info{};
    info.name = name;
    info.status = BackendStatus::kFailed;
    info.plugin_path = file;
    info.origin = origin;
    info.origin_detail = origin_detail;
    info.library = library;
    return info;
  }
};

}  // namespace backplane::detail
