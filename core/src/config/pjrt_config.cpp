#include "config/pjrt_config.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace backplane::detail {
namespace {

// Sorts (node, item) pairs by where the node is in the file: toml++ iterates
// keys in sorted order, and file order is what a user reads.
template <class Item>
void sort_by_position(std::vector<std::pair<const toml::node*, Item>>& items) {
  std::stable_sort(items.begin(), items.end(), [](const auto& left, const auto& right) {
    const auto a = left.first->source().begin;
    const auto b = right.first->source().begin;
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  });
}

// One create option as "<type>:<value>" (PJRT_NamedValue's types).
std::string typed_option(const Reader& reader, const toml::node& value, const std::string& qualified) {
  if (const auto* string = value.as_string()) {
    if (string->get().find('\0') != std::string::npos) {
      reader.fail(value, fmt::format("option '{}' = \"{}\" contains a NUL character (\\u0000)", printable(qualified),
                                     printable(string->get())));
    }
    return "string:" + string->get();
  }
  if (const auto* integer = value.as_integer()) return fmt::format("int64:{}", integer->get());
  if (const auto* floating = value.as_floating_point()) return "float:" + float_text(floating->get());
  if (const auto* boolean = value.as_boolean()) return boolean->get() ? "bool:true" : "bool:false";
  if (const auto* array = value.as_array()) {
    std::string text = "int64_list:";
    for (std::size_t index = 0; index < array->size(); ++index) {
      const toml::node& element = *array->get(index);
      const auto* integer = element.as_integer();
      if (integer == nullptr) {
        reader.fail(element, fmt::format("option '{}' must be an array of integers (PJRT's int64 list), got {} at "
                                         "index {}",
                                         qualified, type_name(element), index));
      }
      text += fmt::format("{}{}", index == 0 ? "" : ",", integer->get());
    }
    return text;
  }
  reader.fail(value, fmt::format("option '{}' must be a string, integer, float, boolean or array of integers, got {}",
                                 qualified, type_name(value)));
}

PjrtLibraryConfig read_one(const Reader& reader, const toml::node& node, const std::string& name) {
  const std::string table_name = fmt::format("pjrt.{}", name);
  const toml::table* table = node.as_table();
  if (table == nullptr) reader.fail(node, fmt::format("'{}' must be a table, got {}", table_name, type_name(node)));
  PjrtLibraryConfig library;
  library.name = name;
  library.where = reader.where(node);
  bool has_library = false;
  for (auto&& [key, value] : *table) {
    const std::string qualified = fmt::format("{}.{}", table_name, printable(key.str()));
    if (key.str() == "library") {
      const auto* text = value.as_string();
      if (text == nullptr) {
        reader.fail(value, fmt::format("'{}' must be a string (the path of the PJRT plugin library), got {}", qualified,
                                       type_name(value)));
      }
      if (text->get().empty()) reader.fail(value, fmt::format("'{}' is empty; expected the library's path", qualified));
      reader.refuse_nul_in_path(value, qualified, text->get());
      const std::filesystem::path path(text->get());
      library.library = path.is_absolute() ? path : (reader.source().parent_path() / path).lexically_normal();
      has_library = true;
    } else if (key.str() == "options") {
      const toml::table* options = value.as_table();
      if (options == nullptr) {
        reader.fail(value,
                    fmt::format("'{}' must be a table of PJRT create options, got {}", qualified, type_name(value)));
      }
      std::vector<std::pair<const toml::node*, std::pair<std::string, std::string>>> found;
      for (auto&& [option, option_value] : *options) {
        const std::string option_name = fmt::format("{}.{}", qualified, printable(option.str()));
        if (option.str().empty() || option.str().find('\0') != std::string_view::npos) {
          reader.fail(option_value,
                      fmt::format("option name '{}' is empty or contains a NUL character (\\u0000)", option_name));
        }
        found.push_back({&option_value, {std::string(option.str()), typed_option(reader, option_value, option_name)}});
      }
      sort_by_position(found);
      for (auto& [unused, option] : found) library.options.push_back(std::move(option));
    } else {
      reader.fail(value, fmt::format("'{}': unknown key '{}'; [{}] takes 'library' and 'options'", qualified,
                                     printable(key.str()), table_name));
    }
  }
  if (!has_library) {
    reader.fail(node, fmt::format("[{}] has no 'library' (the path of the PJRT plugin library)", table_name));
  }
  return library;
}

}  // namespace

std::vector<PjrtLibraryConfig> read_pjrt_tables(const Reader& reader, const toml::node& node) {
  const toml::table* tables = node.as_table();
  if (tables == nullptr) {
    reader.fail(node, fmt::format("'pjrt' must be a table of [pjrt.NAME] tables, got {}", type_name(node)));
  }
  std::vector<std::pair<const toml::node*, PjrtLibraryConfig>> found;
  for (auto&& [key, value] : *tables) {
    if (key.str().empty()) reader.fail(value, "'pjrt.\"\"': the PJRT plugin's name is empty");
    found.push_back({&value, read_one(reader, value, printable(key.str()))});
  }
  sort_by_position(found);
  std::vector<PjrtLibraryConfig> libraries;
  for (auto& [unused, library] : found) libraries.push_back(std::move(library));
  return libraries;
}

}  // namespace backplane::detail
