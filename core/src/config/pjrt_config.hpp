// The config file's [pjrt.NAME] tables: PJRT plugin libraries for the pjrt
// adapter (docs/configuration.md, "PJRT plugins").
#pragma once

#include "config/config.hpp"
#include "config/toml_reader.hpp"

#include <vector>

namespace backplane::detail {

// The tables under the top-level key `pjrt`, in file order. Throws
// Error(kConfig) at the offending node's FILE:LINE:COLUMN for: `pjrt` not a
// table of tables, an empty NAME, a missing or empty `library` or one that is
// not a string, `options` that is not a table, an option of a type PJRT has
// no value for (a table, a date, an array of anything but integers), a NUL in
// an option, and any other key.
std::vector<PjrtLibraryConfig> read_pjrt_tables(const Reader& reader, const toml::node& node);

}  // namespace backplane::detail
