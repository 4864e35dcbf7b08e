// The batch stream state's fields, as one table (state.cpp): each row writes
// its field, reads it back strictly, and says whether a stream can resume
// from the saved value. A new field is one row there.
#pragma once

#include <backplane/batch_stream.hpp>

namespace backplane::detail {

// Throws kInvalidArgument ("BatchStream: cannot resume ...") for the first
// field of `saved`, in the table's order, that a stream whose own state is
// `stream` (its step unused) cannot continue from: a step outside
// [0, kLastStep], or a seed, context, global batch, weights or source that
// differs, naming both values.
void check_resumable(const BatchStreamState& saved, const BatchStreamState& stream);

}  // namespace backplane::detail
