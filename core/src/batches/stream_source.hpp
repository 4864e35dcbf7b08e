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
  bool droppable = false;  // a file mapping whose pages may be given back
};

}  // namespace backplane::detail
