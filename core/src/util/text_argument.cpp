#include "util/text_argument.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

namespace backplane::detail {

void refuse_nul_bytes(std::string_view text, std::string_view function, std::string_view argument) {
  const std::size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return;
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{}: {} holds a NUL byte at offset {}", function, argument, nul));
}

}  // namespace backplane::detail
