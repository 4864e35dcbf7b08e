// The checks and message pieces every backend needs, written once: ranges
// (offset + size cannot wrap), host pointers, options, and byte sizes in one
// format, so that every plugin's errors read alike.
#ifndef BACKPLANE_PLUGIN_SDK_CHECKS_HPP
#define BACKPLANE_PLUGIN_SDK_CHECKS_HPP

#include <backplane/plugin.h>
#include <backplane/plugin_support.hpp>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace backplane::plugin_sdk {

// "512 bytes", "1.50 KiB", "19.09 GiB".
inline std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  char text[64];
  std::snprintf(text, sizeof(text), "%.2f %s", value, kUnits[unit]);
  return text;
}

// "U8", "I64", ...: the names conversion messages use; "unknown" otherwise.
inline const char* integer_type_name(BP_IntegerType type) {
  switch (type) {
    case BP_INTEGER_U8: return "U8";
    case BP_INTEGER_U16: return "U16";
    case BP_INTEGER_U32: return "U32";
    case BP_INTEGER_I32: return "I32";
    case BP_INTEGER_I64: return "I64";
    default: return "unknown";
  }
}

// Bytes per element of an integer type; 0 for a type the ABI does not define.
inline std::uint64_t integer_size(BP_IntegerType type) {
  switch (type) {
    case BP_INTEGER_U8: return 1;
    case BP_INTEGER_U16: return 2;
    case BP_INTEGER_U32:
    case BP_INTEGER_I32: return 4;
    case BP_INTEGER_I64: return 8;
    default: return 0;
  }
}

inline std::string quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

// [offset, offset + size) must lie inside `limit` bytes; compared without
// computing offset + size, so it cannot wrap.
inline void check_range(std::string_view call, std::string_view role, std::uint64_t offset, std::uint64_t size,
                        std::uint64_t limit) {
  if (offset > limit || size > limit - offset) {
    throw Failure(BP_ERROR_OUT_OF_RANGE, std::string(call) + ": " + std::string(role) + " range at offset " +
                                             std::to_string(offset) + " of size " + std::to_string(size) +
                                             " does not fit in buffer size " + std::to_string(limit));
  }
}

// memory_wrap of foreign memory: `size` bytes from `offset` bytes into an
// allocation of `extent` bytes must stay inside it. `what` names the call.
inline void check_inside_allocation(std::string_view what, std::uint64_t offset, std::uint64_t size,
                                    std::uint64_t extent) {
  if (offset > extent || size > extent - offset) {
    throw Failure(BP_ERROR_OUT_OF_RANGE, std::string(what) + ": the range runs past the end of its " +
                                             format_bytes(extent) + " allocation (it starts " + std::to_string(offset) +
                                             " bytes in)");
  }
}

inline void check_host_pointer(std::string_view call, std::string_view role, const void* pointer, std::uint64_t size) {
  if (pointer == nullptr && size != 0) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(call) + ": " + std::string(role) +
                                                 " host pointer is NULL with size " + std::to_string(size));
  }
}

// A (pointer, size) string from the ABI; NULL is accepted only with size 0.
inline std::string_view abi_string(const char* data, std::size_t size, std::string_view what) {
  if (data == nullptr && size != 0) {
    throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL with size " + std::to_string(size));
  }
  return data == nullptr ? std::string_view{} : std::string_view{data, size};
}

// The backend_create options ([backend.NAME] in the config), checked once:
// every key must be one the backend knows, and values parse strictly.
class Options {
 public:
  Options(std::string_view backend, const BP_KeyValue* options, std::size_t count) : backend_(backend) {
    if (options == nullptr && count != 0) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT,
                    "backend_create: options is NULL with option_count " + std::to_string(count));
    }
    for (std::size_t index = 0; index < count; ++index) {
      require_args(&options[index], "backend_create: option");
      const std::string where = "backend_create: option " + std::to_string(index);
      entries_.emplace_back(abi_string(options[index].key, options[index].key_size, where + " key"),
                            abi_string(options[index].value, options[index].value_size, where + " value"));
    }
  }

  // Refuses any key outside `known`, naming it and the known ones.
  void allow_only(std::initializer_list<std::string_view> known) const {
    for (const auto& [key, value] : entries_) {
      bool found = false;
      for (std::string_view name : known) found = found || name == key;
      if (found) continue;
      std::string names;
      for (std::string_view name : known) names += (names.empty() ? "" : ", ") + std::string(name);
      throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(backend_) + ": unknown option " + quoted(key) + " = " +
                                                   quoted(value) +
                                                   " (known options: " + (names.empty() ? "none" : names) + ")");
    }
  }

  // Every option as given, in order; the views are valid during
  // backend_create. For a backend whose options include a family of keys
  // (the pjrt adapter's create.<key>), which allow_only cannot list.
  const std::vector<std::pair<std::string_view, std::string_view>>& entries() const { return entries_; }

  // The value of `key` (the last one given), or nullptr.
  const std::string_view* find(std::string_view key) const {
    const std::string_view* value = nullptr;
    for (const auto& entry : entries_) {
      if (entry.first == key) value = &entry.second;
    }
    return value;
  }

  // A strict decimal integer in [minimum, maximum]: no sign, space or suffix.
  std::int64_t integer(std::string_view key, std::int64_t fallback, std::int64_t minimum, std::int64_t maximum) const {
    return parse(key, fallback, minimum, maximum);
  }

  // The same for values past INT64_MAX (byte counts, limits).
  std::uint64_t unsigned_integer(std::string_view key, std::uint64_t fallback, std::uint64_t minimum,
                                 std::uint64_t maximum) const {
    return parse(key, fallback, minimum, maximum);
  }

 private:
  template <class Integer>
  Integer parse(std::string_view key, Integer fallback, Integer minimum, Integer maximum) const {
    const std::string_view* value = find(key);
    if (value == nullptr) return fallback;
    Integer parsed = 0;
    const char* end = value->data() + value->size();
    const auto [stop, status] = std::from_chars(value->data(), end, parsed);
    const bool digits_only = !value->empty() && value->find_first_not_of("0123456789") == std::string_view::npos;
    if (!digits_only || status != std::errc{} || stop != end || parsed < minimum || parsed > maximum) {
      throw Failure(BP_ERROR_INVALID_ARGUMENT, std::string(backend_) + ": option " + std::string(key) + " = " +
                                                   quoted(*value) + " is invalid: expected an integer from " +
                                                   std::to_string(minimum) + " to " + std::to_string(maximum));
    }
    return parsed;
  }

  std::string_view backend_;
  std::vector<std::pair<std::string_view, std::string_view>> entries_;  // valid during backend_create
};

}  // namespace backplane::plugin_sdk

#endif  // BACKPLANE_PLUGIN_SDK_CHECKS_HPP
