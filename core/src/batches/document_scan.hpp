// Where documents start in a token source marked by a BOS or EOS token: one
// pass over the tokens, at memory speed (a stream over a 20 GiB file scans
// it once when it is made), split across the gather threads.
#pragma once

#include "batches/gather_pool.hpp"

#include <backplane/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace backplane::detail {

// The tokens one pool task scans (of 8 MiB): large enough that a task's own
// cost vanishes, small enough that the threads split a file of a few hundred
// MiB evenly.
inline constexpr std::uint64_t kDocumentScanChunkBytes = std::uint64_t{8} << 20;

enum class DocumentMarker {
  kBos,  // a document starts at every occurrence of the token
  kEos,  // a document starts at 0 and after every occurrence of the token
};

// The token offsets where documents start in a 1-D source of `tokens`
// elements of the integer `dtype` at `data` (any alignment): kBos, every
// offset holding `token`; kEos, 0 and every offset just after one holding
// `token`, never `tokens` itself (an empty source has no start). Increasing
// and distinct. Splits the tokens into chunks run on `pool`'s threads (the
// caller's included). Throws Error(kInvalidArgument) naming `documents`,
// the marker and the token when `dtype` is not an integer dtype or `token`
// is outside its range (-1 in U16 tokens, 70000 in U16 tokens).
std::vector<std::int64_t> scan_document_starts(const std::byte* data, std::uint64_t tokens, DType dtype,
                                               std::int64_t token, DocumentMarker marker, GatherPool& pool);

// The same with the loop and the chunk size chosen, for the tests and the
// benchmark to reach both loops and many chunks on one machine: kVector is
// SSE2 where the compiler targets it (x86-64 always), the portable loop
// elsewhere. `chunk_bytes` is rounded down to whole 64-byte blocks (at
// least one).
enum class ScanLoop { kVector, kPortable };
struct ScanTuning {
  ScanLoop loop = ScanLoop::kVector;
  std::uint64_t chunk_bytes = kDocumentScanChunkBytes;
};
std::vector<std::int64_t> scan_document_starts(const std::byte* data, std::uint64_t tokens, DType dtype,
                                               std::int64_t token, DocumentMarker marker, GatherPool& pool,
                                               const ScanTuning& tuning);

}  // namespace backplane::detail
