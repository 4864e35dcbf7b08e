// The scan compares whole blocks of 64 bytes against the marker and looks at
// single tokens only in a block that holds one: markers are rare (one in
// ~1,000 tokens), so the compare is the loop that must keep up with memory.
#include "batches/document_scan.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace backplane::detail {
namespace {

constexpr std::size_t kBlockBytes = 64;

std::string_view marker_name(DocumentMarker marker) { return marker == DocumentMarker::kBos ? "bos" : "eos"; }

template <class T>
T load(const std::byte* at) noexcept {
  T value;
  std::memcpy(&value, at, sizeof(T));  // the source may be unaligned (a safetensors data offset)
  return value;
}

// Appends begin + i + shift for every token i of [begin, end) equal to `mark`.
template <class T>
void scan_tokens(const std::byte* data, std::uint64_t begin, std::uint64_t end, T mark, std::int64_t shift,
                 std::vector<std::int64_t>& out) {
  for (std::uint64_t index = begin; index < end; ++index) {
    if (load<T>(data + index * sizeof(T)) == mark) out.push_back(static_cast<std::int64_t>(index) + shift);
  }
}

// Whole blocks from `begin` (block-aligned in elements, not necessarily in
// memory); returns where the tail of less than a block starts.
template <class T>
std::uint64_t scan_blocks_portable(const std::byte* data, std::uint64_t begin, std::uint64_t end, T mark,
                                   std::int64_t shift, std::vector<std::int64_t>& out) {
  constexpr std::size_t kPerBlock = kBlockBytes / sizeof(T);
  std::uint64_t index = begin;
  for (; end - index >= kPerBlock; index += kPerBlock) {
    const std::byte* block = data + index * sizeof(T);
    // A reduction of fixed length without early exit, whose compare gives
    // all-ones lanes: GCC vectorises it at -O2 into compares and ORs.
    T hits = 0;
    for (std::size_t element = 0; element < kPerBlock; ++element) {
      hits |= load<T>(block + element * sizeof(T)) == mark ? static_cast<T>(~T{0}) : T{0};
    }
    if (hits != 0) scan_tokens<T>(data, index, index + kPerBlock, mark, shift, out);
  }
  return index;
}

#ifdef __SSE2__
// Equal lanes of `sizeof(T)` bytes are all ones.
template <class T>
__m128i equal_lanes(__m128i values, __m128i mark) noexcept {
  if constexpr (sizeof(T) == 1) return _mm_cmpeq_epi8(values, mark);
  if constexpr (sizeof(T) == 2) return _mm_cmpeq_epi16(values, mark);
  if constexpr (sizeof(T) == 4) return _mm_cmpeq_epi32(values, mark);
  if constexpr (sizeof(T) == 8) {
    // SSE2 has no 64-bit compare: both 32-bit halves must match.
    const __m128i halves = _mm_cmpeq_epi32(values, mark);
    return _mm_and_si128(halves, _mm_shuffle_epi32(halves, _MM_SHUFFLE(2, 3, 0, 1)));
  }
}

template <class T>
__m128i broadcast(T mark) noexcept {
  if constexpr (sizeof(T) == 1) return _mm_set1_epi8(static_cast<char>(mark));
  if constexpr (sizeof(T) == 2) return _mm_set1_epi16(static_cast<short>(mark));
  if constexpr (sizeof(T) == 4) return _mm_set1_epi32(static_cast<int>(mark));
  if constexpr (sizeof(T) == 8) return _mm_set1_epi64x(static_cast<long long>(mark));
}

// One bit per lane of sizeof(T) bytes in a byte mask: its lowest.
template <class T>
constexpr std::uint64_t lane_low_bits() noexcept {
  if constexpr (sizeof(T) == 1) return ~std::uint64_t{0};
  if constexpr (sizeof(T) == 2) return 0x5555'5555'5555'5555;
  if constexpr (sizeof(T) == 4) return 0x1111'1111'1111'1111;
  if constexpr (sizeof(T) == 8) return 0x0101'0101'0101'0101;
}

template <class T>
std::uint64_t scan_blocks_sse2(const std::byte* data, std::uint64_t begin, std::uint64_t end, T mark,
                               std::int64_t shift, std::vector<std::int64_t>& out) {
  static_assert(kBlockBytes == 64, "four vectors make one 64-bit byte mask");
  constexpr std::size_t kPerBlock = kBlockBytes / sizeof(T);
  const __m128i marks = broadcast(mark);
  std::uint64_t index = begin;
  for (; end - index >= kPerBlock; index += kPerBlock) {
    const auto* block = reinterpret_cast<const __m128i*>(data + index * sizeof(T));
    const __m128i equal0 = equal_lanes<T>(_mm_loadu_si128(block + 0), marks);
    const __m128i equal1 = equal_lanes<T>(_mm_loadu_si128(block + 1), marks);
    const __m128i equal2 = equal_lanes<T>(_mm_loadu_si128(block + 2), marks);
    const __m128i equal3 = equal_lanes<T>(_mm_loadu_si128(block + 3), marks);
    const __m128i any = _mm_or_si128(_mm_or_si128(equal0, equal1), _mm_or_si128(equal2, equal3));
    if (_mm_movemask_epi8(any) == 0) continue;
    // The block's 64 byte flags as one mask, walked once: a branch per
    // marker rather than one per vector, which would mispredict at random.
    std::uint64_t mask = std::uint64_t{static_cast<std::uint16_t>(_mm_movemask_epi8(equal0))} |
                         std::uint64_t{static_cast<std::uint16_t>(_mm_movemask_epi8(equal1))} << 16 |
                         std::uint64_t{static_cast<std::uint16_t>(_mm_movemask_epi8(equal2))} << 32 |
                         std::uint64_t{static_cast<std::uint16_t>(_mm_movemask_epi8(equal3))} << 48;
    mask &= lane_low_bits<T>();
    do {
      const auto lane = static_cast<std::uint64_t>(__builtin_ctzll(mask)) / sizeof(T);
      out.push_back(static_cast<std::int64_t>(index + lane) + shift);
      mask &= mask - 1;
    } while (mask != 0);
  }
  return index;
}
#endif

template <class T>
void scan_chunk(const std::byte* data, std::uint64_t begin, std::uint64_t end, T mark, std::int64_t shift,
                ScanLoop loop, std::vector<std::int64_t>& out) {
#ifdef __SSE2__
  const std::uint64_t tail = loop == ScanLoop::kVector ? scan_blocks_sse2<T>(data, begin, end, mark, shift, out)
                                                       : scan_blocks_portable<T>(data, begin, end, mark, shift, out);
#else
  (void)loop;
  const std::uint64_t tail = scan_blocks_portable<T>(data, begin, end, mark, shift, out);
#endif
  scan_tokens<T>(data, tail, end, mark, shift, out);
}

// The marker as the tokens' bits (T unsigned, as wide as the dtype), after
// the check that `token` is one of the dtype's values.
template <class T>
T mark_of(std::int64_t token, DType dtype, DocumentMarker marker) {
  using Signed = std::make_signed_t<T>;
  const bool is_signed = dtype == DType::kI8 || dtype == DType::kI16 || dtype == DType::kI32 || dtype == DType::kI64;
  const std::int64_t low = is_signed ? std::int64_t{std::numeric_limits<Signed>::min()} : 0;
  const std::uint64_t high =
      is_signed ? std::uint64_t{std::numeric_limits<Signed>::max()} : std::numeric_limits<T>::max();
  if (token < low || (token > 0 && static_cast<std::uint64_t>(token) > high)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("documents {{\"{}\": {}}}: token {} is outside {}'s range [{}, {}]", marker_name(marker),
                            token, token, dtype_name(dtype), low, high));
  }
  return static_cast<T>(token);  // modulo 2^bits: a negative token has the bits of its signed dtype
}

template <class T>
std::vector<std::int64_t> scan_typed(const std::byte* data, std::uint64_t tokens, DType dtype, std::int64_t token,
                                     DocumentMarker marker, GatherPool& pool, const ScanTuning& tuning) {
  const T mark = mark_of<T>(token, dtype, marker);
  const std::int64_t shift = marker == DocumentMarker::kEos ? 1 : 0;
  // Whole blocks, so that only a source's last chunk has a tail.
  const std::uint64_t chunk_blocks = std::max<std::uint64_t>(tuning.chunk_bytes / kBlockBytes, 1);
  const std::uint64_t chunk_tokens = chunk_blocks * (kBlockBytes / sizeof(T));
  const std::uint64_t chunks = (tokens + chunk_tokens - 1) / chunk_tokens;
  std::vector<std::vector<std::int64_t>> found(static_cast<std::size_t>(chunks));
  pool.run(static_cast<std::size_t>(chunks), [&](std::size_t first, std::size_t last) {
    for (std::size_t chunk = first; chunk < last; ++chunk) {
      const std::uint64_t begin = chunk * chunk_tokens;
      scan_chunk<T>(data, begin, std::min(tokens, begin + chunk_tokens), mark, shift, tuning.loop, found[chunk]);
    }
  });
  std::size_t total = marker == DocumentMarker::kEos ? 1 : 0;
  for (const auto& starts : found) total += starts.size();
  std::vector<std::int64_t> starts;
  starts.reserve(total);
  if (marker == DocumentMarker::kEos && tokens > 0) starts.push_back(0);
  for (const auto& chunk : found) starts.insert(starts.end(), chunk.begin(), chunk.end());
  // An EOS on the last token ends the last document; nothing starts after it.
  if (marker == DocumentMarker::kEos && !starts.empty() && static_cast<std::uint64_t>(starts.back()) == tokens) {
    starts.pop_back();
  }
  return starts;
}

}  // namespace

std::vector<std::int64_t> scan_document_starts(const std::byte* data, std::uint64_t tokens, DType dtype,
                                               std::int64_t token, DocumentMarker marker, GatherPool& pool,
                                               const ScanTuning& tuning) {
  switch (dtype) {
    case DType::kU8:
    case DType::kI8: return scan_typed<std::uint8_t>(data, tokens, dtype, token, marker, pool, tuning);
    case DType::kU16:
    case DType::kI16: return scan_typed<std::uint16_t>(data, tokens, dtype, token, marker, pool, tuning);
    case DType::kU32:
    case DType::kI32: return scan_typed<std::uint32_t>(data, tokens, dtype, token, marker, pool, tuning);
    case DType::kU64:
    case DType::kI64: return scan_typed<std::uint64_t>(data, tokens, dtype, token, marker, pool, tuning);
    default: break;
  }
  const std::string_view name = dtype_name(dtype);
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("documents {{\"{}\": {}}}: the tokens are {}, and markers are looked for in integer tokens "
                          "only (U8, I8, U16, I16, U32, I32, U64, I64)",
                          marker_name(marker), token,
                          name.empty() ? fmt::format("dtype {}", static_cast<int>(dtype)) : std::string(name)));
}

std::vector<std::int64_t> scan_document_starts(const std::byte* data, std::uint64_t tokens, DType dtype,
                                               std::int64_t token, DocumentMarker marker, GatherPool& pool) {
  return scan_document_starts(data, tokens, dtype, token, marker, pool, ScanTuning{});
}

}  // namespace backplane::detail
