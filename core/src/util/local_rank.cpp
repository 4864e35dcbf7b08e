#include "util/local_rank.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <charconv>

namespace backplane::detail {

std::optional<LocalRank> local_rank(const Environment& environment, std::string_view consequence) {
  for (std::string_view variable : kLocalRankVariables) {
    auto value = environment.get(variable);
    if (!value || value->empty()) continue;
    LocalRank found{variable, *value};
    const char* end = value->data() + value->size();
    auto [parsed_to, error] = std::from_chars(value->data(), end, found.rank);
    if (error != std::errc() || parsed_to != end) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}='{}' is not a non-negative integer; {}", variable, *value, consequence));
    }
    return found;
  }
  return std::nullopt;
}

}  // namespace backplane::detail
