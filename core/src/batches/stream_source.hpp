// One token source of a batch stream, as the plan opened it.
#pragma once

#include <backplane/array.hpp>

#include <cstddef>
#include <cstdint>

namespace backplane::detail {

struct StreamSource {
  Array array;  // keeps the memory alive
  const std::byte* data = nullptr;
  std::uint64_t tokens = 0;
  // Where a window may start: without documents, every token whose window
  // fits (tokens - T of them); with documents, the document starts whose
  // window fits.
  std::uint64_t starts = 0;
  bool droppable = false;  // a file mapping whose pages may be given back
};

}  // namespace backplane::detail
