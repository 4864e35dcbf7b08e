// The BOS/EOS scan against a token-at-a-time loop: every integer dtype, both
// compare loops, markers on chunk and block boundaries, unaligned sources,
// and the tokens a dtype cannot hold.
#include "batches/document_scan.hpp"

#include "support/errors.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace backplane;
using namespace backplane::detail;
using namespace backplane::testing;

namespace {

constexpr DType kTokenDTypes[] = {DType::kU8,  DType::kI8,  DType::kU16, DType::kI16,
                                  DType::kU32, DType::kI32, DType::kU64, DType::kI64};
constexpr DocumentMarker kMarkers[] = {DocumentMarker::kBos, DocumentMarker::kEos};
constexpr ScanLoop kLoops[] = {ScanLoop::kVector, ScanLoop::kPortable};

std::size_t size_of(DType dtype) { return static_cast<std::size_t>(dtype_bits(dtype) / 8); }

// Tokens as the low bytes of int64 values (two's complement: a negative
// value has the bits of its signed dtype), little-endian as x86-64 stores them.
class Tokens {
 public:
  Tokens(DType dtype, std::size_t count, std::size_t misalign = 0)
      : dtype_(dtype), misalign_(misalign), bytes_(misalign + count * size_of(dtype)) {}

  void set(std::size_t index, std::int64_t value) {
    std::memcpy(bytes_.data() + misalign_ + index * size_of(dtype_), &value, size_of(dtype_));
  }
  std::int64_t get(std::size_t index) const {
    std::uint64_t bits = 0;
    std::memcpy(&bits, bytes_.data() + misalign_ + index * size_of(dtype_), size_of(dtype_));
    return static_cast<std::int64_t>(bits);
  }
  const std::byte* data() const { return bytes_.data() + misalign_; }
  std::size_t count() const { return (bytes_.size() - misalign_) / size_of(dtype_); }
  DType dtype() const { return dtype_; }

 private:
  DType dtype_;
  std::size_t misalign_;
  std::vector<std::byte> bytes_;
};

// The low bits of `token` as the dtype holds them, for comparing stored tokens.
std::int64_t bits_of(std::int64_t token, DType dtype) {
  const std::size_t bits = size_of(dtype) * 8;
  return bits == 64 ? token : static_cast<std::int64_t>(static_cast<std::uint64_t>(token) & ((1ULL << bits) - 1));
}

std::vector<std::int64_t> naive(const Tokens& tokens, std::int64_t token, DocumentMarker marker) {
  std::vector<std::int64_t> starts;
  const std::int64_t mark = bits_of(token, tokens.dtype());
  const auto count = static_cast<std::int64_t>(tokens.count());
  if (marker == DocumentMarker::kEos && count > 0) starts.push_back(0);
  for (std::int64_t index = 0; index < count; ++index) {
    if (tokens.get(static_cast<std::size_t>(index)) != mark) continue;
    if (marker == DocumentMarker::kBos) starts.push_back(index);
    if (marker == DocumentMarker::kEos && index + 1 < count) starts.push_back(index + 1);
  }
  return starts;
}

// Small chunks by default: many chunks (and their boundaries) in a small source.
constexpr std::uint64_t kSmallChunkBytes = 4096;

std::vector<std::int64_t> scan(const Tokens& tokens, std::int64_t token, DocumentMarker marker, GatherPool& pool,
                               ScanLoop loop = ScanLoop::kVector, std::uint64_t chunk_bytes = kSmallChunkBytes) {
  return scan_document_starts(tokens.data(), tokens.count(), tokens.dtype(), token, marker, pool,
                              ScanTuning{loop, chunk_bytes});
}

// Markers at random (one in 1,000) among filler, and on both ends, both
// sides of every boundary of chunks of `chunk` tokens, and a block's edges.
Tokens marked_tokens(DType dtype, std::size_t count, std::size_t chunk, std::size_t misalign, std::mt19937_64& random);

// A marker for each dtype (negative for the signed ones) and filler that
// shares half its bits with it, so a compare of one 32-bit half of a 64-bit
// token, or of one byte of a wider one, would find it where it is not.
std::int64_t marker_for(DType dtype) {
  switch (dtype) {
    case DType::kU8: return 200;
    case DType::kI8: return -3;
    case DType::kU16: return 50256;
    case DType::kI16: return -2;
    case DType::kU32: return 128000;
    case DType::kI32: return -7;
    case DType::kU64: return (std::int64_t{5} << 32) | 11;
    default: return -(std::int64_t{3} << 32) - 9;
  }
}

std::int64_t filler(std::mt19937_64& random, std::int64_t mark, DType dtype) {
  const std::size_t bits = size_of(dtype) * 8;
  for (;;) {
    std::int64_t value = 0;
    switch (random() % 3) {
      case 0: value = static_cast<std::int64_t>(random()); break;                              // anything
      case 1: value = mark ^ static_cast<std::int64_t>(1ULL << (random() % bits)); break;      // one bit off
      default: value = mark ^ static_cast<std::int64_t>((random() | 1) << (bits / 2)); break;  // low half the same
    }
    if (bits_of(value, dtype) != bits_of(mark, dtype)) return value;
  }
}

Tokens marked_tokens(DType dtype, std::size_t count, std::size_t chunk, std::size_t misalign, std::mt19937_64& random) {
  const std::int64_t mark = marker_for(dtype);
  Tokens tokens(dtype, count, misalign);
  for (std::size_t index = 0; index < count; ++index) {
    tokens.set(index, random() % 1000 == 0 ? mark : filler(random, mark, dtype));
  }
  for (std::size_t boundary = chunk; boundary < count; boundary += chunk) {
    tokens.set(boundary - 1, mark);
    tokens.set(boundary, mark);
    if (boundary + 1 < count) tokens.set(boundary + 1, mark);
  }
  for (const std::size_t at : {std::size_t{0}, std::size_t{63}, std::size_t{64}, count - 1}) tokens.set(at, mark);
  return tokens;
}

}  // namespace

TEST_CASE("[batches] the document scan finds what a token-at-a-time loop finds, in every dtype") {
  GatherPool one(1);
  GatherPool three(3);
  std::mt19937_64 random(17);
  for (const DType dtype : kTokenDTypes) {
    CAPTURE(dtype_name(dtype));
    const std::size_t chunk = kSmallChunkBytes / size_of(dtype);
    const std::size_t count = 40 * chunk + 37;  // the last chunk not a whole block
    const std::int64_t mark = marker_for(dtype);
    for (const std::size_t misalign : {std::size_t{0}, std::size_t{1}}) {
      CAPTURE(misalign);
      const Tokens tokens = marked_tokens(dtype, count, chunk, misalign, random);
      for (const DocumentMarker marker : kMarkers) {
        const std::vector<std::int64_t> expected = naive(tokens, mark, marker);
        REQUIRE(expected.size() > 80);
        for (const ScanLoop loop : kLoops) {
          CAPTURE(static_cast<int>(marker));
          CAPTURE(static_cast<int>(loop));
          CHECK(scan(tokens, mark, marker, one, loop) == expected);
          CHECK(scan(tokens, mark, marker, three, loop) == expected);
        }
      }
    }
  }
}

TEST_CASE("[batches] the document scan's own chunks of 8 MiB split a source without losing a marker") {
  GatherPool three(3);
  std::mt19937_64 random(23);
  const std::size_t chunk = kDocumentScanChunkBytes / 2;
  const Tokens tokens = marked_tokens(DType::kU16, 2 * chunk + 37, chunk, 1, random);
  for (const DocumentMarker marker : kMarkers) {
    const std::vector<std::int64_t> expected = naive(tokens, marker_for(DType::kU16), marker);
    CHECK(scan_document_starts(tokens.data(), tokens.count(), DType::kU16, marker_for(DType::kU16), marker, three) ==
          expected);
  }
}

TEST_CASE("[batches] a marker on the first and the last token: kEos never gives the end as a start") {
  GatherPool pool(2);
  for (const DType dtype : kTokenDTypes) {
    for (const ScanLoop loop : kLoops) {
      CAPTURE(dtype_name(dtype));
      Tokens tokens(dtype, 300);
      for (std::size_t index = 0; index < 300; ++index) tokens.set(index, 1);
      tokens.set(0, 9);
      tokens.set(150, 9);
      tokens.set(299, 9);
      CHECK(scan(tokens, 9, DocumentMarker::kBos, pool, loop) == std::vector<std::int64_t>{0, 150, 299});
      CHECK(scan(tokens, 9, DocumentMarker::kEos, pool, loop) == std::vector<std::int64_t>{0, 1, 151});
    }
  }
}

TEST_CASE("[batches] a source without its marker, and an empty one") {
  GatherPool pool(2);
  for (const DType dtype : kTokenDTypes) {
    CAPTURE(dtype_name(dtype));
    Tokens tokens(dtype, 1000);
    for (std::size_t index = 0; index < 1000; ++index) tokens.set(index, static_cast<std::int64_t>(index % 7));
    for (const ScanLoop loop : kLoops) {
      CHECK(scan(tokens, 7, DocumentMarker::kBos, pool, loop).empty());
      CHECK(scan(tokens, 7, DocumentMarker::kEos, pool, loop) == std::vector<std::int64_t>{0});
      // One token, the marker: kBos starts at it; after it is the end.
      Tokens single(dtype, 1);
      single.set(0, 7);
      CHECK(scan(single, 7, DocumentMarker::kBos, pool, loop) == std::vector<std::int64_t>{0});
      CHECK(scan(single, 7, DocumentMarker::kEos, pool, loop) == std::vector<std::int64_t>{0});
    }
    // No tokens: no document, not even one at 0 (0 is the end).
    for (const DocumentMarker marker : kMarkers) {
      CHECK(scan_document_starts(nullptr, 0, dtype, 7, marker, pool).empty());
    }
  }
}

TEST_CASE("[batches] negative markers in signed tokens are the bits of the signed value") {
  GatherPool pool(2);
  for (const DType dtype : {DType::kI8, DType::kI16, DType::kI32, DType::kI64}) {
    CAPTURE(dtype_name(dtype));
    Tokens tokens(dtype, 500);
    for (std::size_t index = 0; index < 500; ++index) tokens.set(index, index % 100 == 5 ? -1 : 1);
    const std::vector<std::int64_t> expected{5, 105, 205, 305, 405};
    CHECK(scan(tokens, -1, DocumentMarker::kBos, pool) == expected);
    CHECK(scan(tokens, -1, DocumentMarker::kBos, pool, ScanLoop::kPortable) == expected);
    CHECK(scan(tokens, 1, DocumentMarker::kBos, pool).size() == 495);
  }
  // The same byte is 255 as U8 and -1 as I8.
  Tokens bytes(DType::kU8, 10);
  bytes.set(4, 255);
  CHECK(scan(bytes, 255, DocumentMarker::kBos, pool) == std::vector<std::int64_t>{4});
}

TEST_CASE("[batches] a marker the dtype cannot hold is refused, naming documents, the marker and the range") {
  GatherPool pool(1);
  const std::byte none[8]{};
  const auto message = [&](DType dtype, std::int64_t token, DocumentMarker marker) {
    const Error error = error_from([&] { (void)scan_document_starts(none, 1, dtype, token, marker, pool); });
    CHECK(error.code() == ErrorCode::kInvalidArgument);
    return std::string(error.what());
  };
  CHECK(message(DType::kU16, 70000, DocumentMarker::kBos) ==
        "documents {\"bos\": 70000}: token 70000 is outside U16's range [0, 65535]");
  CHECK(message(DType::kU16, -1, DocumentMarker::kEos) ==
        "documents {\"eos\": -1}: token -1 is outside U16's range [0, 65535]");
  CHECK(message(DType::kI8, 128, DocumentMarker::kBos) ==
        "documents {\"bos\": 128}: token 128 is outside I8's range [-128, 127]");
  CHECK(message(DType::kI16, -32769, DocumentMarker::kBos) ==
        "documents {\"bos\": -32769}: token -32769 is outside I16's range [-32768, 32767]");
  CHECK(message(DType::kU32, std::int64_t{1} << 32, DocumentMarker::kBos) ==
        "documents {\"bos\": 4294967296}: token 4294967296 is outside U32's range [0, 4294967295]");
  CHECK(message(DType::kU64, -5, DocumentMarker::kEos) ==
        "documents {\"eos\": -5}: token -5 is outside U64's range [0, 18446744073709551615]");
  // The edges of each range are markers.
  for (const auto& [dtype, low, high] :
       {std::tuple{DType::kU8, 0LL, 255LL}, std::tuple{DType::kI8, -128LL, 127LL},
        std::tuple{DType::kU16, 0LL, 65535LL}, std::tuple{DType::kI32, -2147483648LL, 2147483647LL}}) {
    CHECK_NOTHROW((void)scan_document_starts(none, 1, dtype, low, DocumentMarker::kBos, pool));
    CHECK_NOTHROW((void)scan_document_starts(none, 1, dtype, high, DocumentMarker::kBos, pool));
  }
  CHECK(contains(message(DType::kF32, 5, DocumentMarker::kBos),
                 "documents {\"bos\": 5}: the tokens are F32, and markers are looked for in integer tokens only"));
  CHECK(contains(message(DType::kBool, 1, DocumentMarker::kEos), "the tokens are BOOL"));
}
