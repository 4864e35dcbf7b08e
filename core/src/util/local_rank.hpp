// The launcher's local rank: which process of a data-parallel job on this
// machine this one is. The default device (registry/selection.cpp) and trace
// file names (%r, trace/file_name.cpp) read it from the same variables.
#pragma once

#include "util/environment.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace backplane::detail {

// The launchers' local-rank variables, in the order they are consulted:
// torchrun, Open MPI, Slurm.
inline constexpr std::string_view kLocalRankVariables[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};

struct LocalRank {
  std::string_view variable;  // the one that was set
  std::string value;          // as written
  std::uint64_t rank = 0;
};

// The first local-rank variable that is set and not empty, or nullopt.
// Error(kInvalidArgument) "VARIABLE='VALUE' is not a non-negative integer"
// followed by "; " and `consequence` (what the rank decides, and how to do
// without) when the value is malformed: ignoring it would silently treat
// every rank as rank 0.
std::optional<LocalRank> local_rank(const Environment& environment, std::string_view consequence);

}  // namespace backplane::detail
