// Document-aligned windows: every window starts at a document start whose
// window fits, and each device's batch carries its pieces (cu_seqlens,
// position_ids, max_seqlen), checked here against a token-by-token
// computation from the document starts that shares no code with the stream.
#include "support/errors.hpp"
#include "support/placement_fixture.hpp"

#include <backplane/batch_stream.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

using namespace backplane;
using namespace backplane::testing;

namespace {

constexpr std::uint16_t kBos = 1;

// `count` tokens in documents of random lengths, each opened by kBos; other
// tokens are >= 2. Returns the tokens; `starts` gets where documents begin.
std::vector<std::uint16_t> documents_of(std::size_t count, std::vector<std::int64_t>& starts, std::uint32_t seed = 3) {
  std::mt19937 random(seed);
  std::vector<std::uint16_t> tokens(count);
  std::size_t at = 0;
  while (at < count) {
    starts.push_back(static_cast<std::int64_t>(at));
    const std::size_t length = 1 + random() % 40;
    for (std::size_t index = 0; index < length && at < count; ++index, ++at) {
      tokens[at] = index == 0 ? kBos : static_cast<std::uint16_t>(2 + random() % 1000);
    }
  }
  return tokens;
}

Array host_tokens(Runtime& runtime, const std::vector<std::uint16_t>& tokens) {
  return Array::from_host(runtime, kCpu0, DType::kU16, {static_cast<std::int64_t>(tokens.size())}, tokens.data(),
                          tokens.size() * sizeof(std::uint16_t));
}

BatchStreamOptions document_stream(std::int64_t batch, std::int64_t context, DocumentBoundaries documents) {
  BatchStreamOptions options;
  options.batch_size = batch;
  options.context = context;
  options.devices = {kCpu1};
  options.seed = 9;
  options.documents = std::move(documents);
  return options;
}

// What one device's pieces must be, token by token: a token opens a piece
// when it is a row's first or a document starts at it.
struct ExpectedPieces {
  std::vector<std::int32_t> cu_seqlens;
  std::vector<std::int32_t> position_ids;
  std::int64_t max_seqlen = 0;
};

ExpectedPieces expected_pieces(const std::vector<Window>& windows, const std::vector<std::set<std::int64_t>>& starts,
                               std::int64_t context, std::int64_t capacity) {
  ExpectedPieces expected;
  expected.cu_seqlens.push_back(0);
  std::int32_t position = 0;
  std::int64_t flat = 0;
  for (const Window& window : windows) {
    for (std::int64_t offset = 0; offset < context; ++offset, ++flat) {
      const bool opens = offset == 0 || starts[static_cast<std::size_t>(window.source)].count(window.start + offset);
      if (opens && flat > 0) expected.cu_seqlens.push_back(static_cast<std::int32_t>(flat));
      position = opens ? 0 : position + 1;
      expected.position_ids.push_back(position);
      expected.max_seqlen = std::max<std::int64_t>(expected.max_seqlen, position + 1);
    }
  }
  while (static_cast<std::int64_t>(expected.cu_seqlens.size()) < capacity + 1) {
    expected.cu_seqlens.push_back(static_cast<std::int32_t>(flat));
  }
  return expected;
}

}  // namespace

TEST_CASE("[batches] document windows start at document starts and carry their pieces, on host and device") {
  Runtime runtime(placement_options());
  std::vector<std::int64_t> starts0;
  std::vector<std::int64_t> starts1;
  const std::vector<std::uint16_t> tokens0 = documents_of(5000, starts0, 3);
  const std::vector<std::uint16_t> tokens1 = documents_of(3000, starts1, 4);
  const std::int64_t context = 48;
  const std::vector<std::set<std::int64_t>> sets{{starts0.begin(), starts0.end()}, {starts1.begin(), starts1.end()}};
  struct Case {
    const char* name;
    DocumentBoundaries documents;
  };
  for (const Case& test :
       {Case{"bos", DocumentBoundaries::bos(kBos)}, Case{"given", DocumentBoundaries::given({starts0, starts1})}}) {
    CAPTURE(test.name);
    BatchStreamOptions options = document_stream(8, context, test.documents);
    options.devices = {kCpu1, kSim0};
    const std::int64_t capacity = 40;
    options.max_documents = capacity;
    BatchStream stream(runtime, {host_tokens(runtime, tokens0), host_tokens(runtime, tokens1)}, options);
    for (std::int64_t step = 0; step < 6; ++step) {
      const std::vector<Window> windows = stream.windows(step);
      const StreamBatch batch = stream.next_batch();
      REQUIRE(batch.tokens.size() == 2);
      REQUIRE(batch.documents.size() == 2);
      for (const Window& window : windows) {
        const std::set<std::int64_t>& source = sets[static_cast<std::size_t>(window.source)];
        CHECK(source.count(window.start) == 1);
        const std::size_t length = window.source == 0 ? tokens0.size() : tokens1.size();
        CHECK(static_cast<std::size_t>(window.start + context + 1) <= length);
      }
      for (std::size_t device = 0; device < 2; ++device) {
        const std::vector<Window> rows(windows.begin() + static_cast<std::ptrdiff_t>(device * 4),
                                       windows.begin() + static_cast<std::ptrdiff_t>(device * 4 + 4));
        const ExpectedPieces expected = expected_pieces(rows, sets, context, capacity);
        const DocumentPieces& pieces = batch.documents[device];
        CHECK(pieces.cu_seqlens.device() == batch.tokens[device].device());
        CHECK(pieces.position_ids.shape() == std::vector<std::int64_t>{4, context});
        CHECK(pieces.cu_seqlens.to_vector<std::int32_t>() == expected.cu_seqlens);
        CHECK(pieces.position_ids.to_vector<std::int32_t>() == expected.position_ids);
        CHECK(pieces.max_seqlen == expected.max_seqlen);
        CHECK(expected.cu_seqlens[static_cast<std::size_t>(pieces.pieces)] == 4 * context);
        CHECK((pieces.pieces == capacity ||
               expected.cu_seqlens[static_cast<std::size_t>(pieces.pieces) - 1] < 4 * context));
      }
    }
  }
}

TEST_CASE("[batches] an unweighted document epoch visits every document start whose window fits once") {
  Runtime runtime(placement_options());
  std::vector<std::int64_t> starts;
  const std::vector<std::uint16_t> tokens = documents_of(4000, starts, 5);
  const std::int64_t context = 30;
  std::vector<std::int64_t> eligible;
  for (const std::int64_t start : starts) {
    if (start + context + 1 <= static_cast<std::int64_t>(tokens.size())) eligible.push_back(start);
  }
  // B divides the eligible count only by chance: take the epoch's whole steps.
  const std::int64_t batch = 4;
  const auto steps = static_cast<std::int64_t>(eligible.size()) / batch;
  BatchStream stream(runtime, {host_tokens(runtime, tokens)},
                     document_stream(batch, context, DocumentBoundaries::eos(kBos)));
  // With eos = kBos, documents start at 0 and just after each kBos.
  std::set<std::int64_t> after;
  after.insert(0);
  for (const std::int64_t start : starts) {
    if (start + 1 + context + 1 <= static_cast<std::int64_t>(tokens.size())) after.insert(start + 1);
  }
  std::multiset<std::int64_t> seen;
  for (std::int64_t step = 0; step < static_cast<std::int64_t>(after.size()) / batch; ++step) {
    for (const Window& window : stream.windows(step)) seen.insert(window.start);
  }
  CHECK(seen.size() == after.size() / batch * batch);
  CHECK(std::set<std::int64_t>(seen.begin(), seen.end()).size() == seen.size());
  for (const std::int64_t start : seen) CHECK(after.count(start) == 1);
  (void)steps;
}

TEST_CASE("[batches] a step with more pieces than max_documents fails at its next(), naming the count") {
  Runtime runtime(placement_options());
  std::vector<std::int64_t> starts;
  const std::vector<std::uint16_t> tokens = documents_of(4000, starts, 6);
  BatchStreamOptions options = document_stream(4, 64, DocumentBoundaries::given({starts}));
  options.max_documents = 4;  // documents are 1 to 40 tokens: 4 rows of 64 hold more pieces
  BatchStream stream(runtime, {host_tokens(runtime, tokens)}, options);
  const std::string message = error_from([&] { (void)stream.next_batch(); }).what();
  CHECK(contains(message, "BatchStream: step 0 on cpu:1: its 4 windows cut into "));
  CHECK(contains(message,
                 "document pieces, more than max_documents = 4; raise max_documents (at most rows x "
                 "context = 256, which no step exceeds)"));
  CHECK(stream.state().step == 0);
}

TEST_CASE("[batches] document options that cannot work are refused at the call, naming documents") {
  Runtime runtime(placement_options());
  std::vector<std::int64_t> starts;
  const std::vector<std::uint16_t> tokens = documents_of(2000, starts, 7);
  const auto refusal = [&](BatchStreamOptions options) {
    return std::string(
        error_from([&] { BatchStream stream(runtime, {host_tokens(runtime, tokens)}, options); }).what());
  };
  CHECK(refusal(document_stream(2, 16, DocumentBoundaries::given({starts, starts}))) ==
        "BatchStream: documents: 2 lists of starts for 1 sources");
  CHECK(refusal(document_stream(2, 16, DocumentBoundaries::given({{0, 5, 5}}))) ==
        "BatchStream: documents: the starts of source 0 do not increase: start 2 is 5, after 5");
  CHECK(refusal(document_stream(2, 16, DocumentBoundaries::given({{0, 2000}}))) ==
        "BatchStream: documents: start 1 of source 0 is 2000, outside its 2000 tokens");
  CHECK(refusal(document_stream(2, 16, DocumentBoundaries::given({{-1}}))) ==
        "BatchStream: documents: start 0 of source 0 is -1, outside its 2000 tokens");
  CHECK(refusal(document_stream(2, 16, DocumentBoundaries::given({{1990}}))) ==
        "BatchStream: documents: no document of source 0 starts a window of context + 1 = 17 tokens that fits (it "
        "has 2000 tokens and 1 document starts, the first at 1990)");
  CHECK(refusal(document_stream(4, 16, DocumentBoundaries::given({{0, 10, 20}}))) ==
        "BatchStream: 4 distinct windows per global step (batch_size 4 x world_size 1) do not fit in the 3 document "
        "starts whose window fits of the sources");
  CHECK(refusal(document_stream(2, 16, DocumentBoundaries::bos(70000))) ==
        "BatchStream: documents {\"bos\": 70000}: token 70000 is outside U16's range [0, 65535]");
  CHECK(refusal(document_stream(2, 16, DocumentBoundaries::eos(-1))) ==
        "BatchStream: documents {\"eos\": -1}: token -1 is outside U16's range [0, 65535]");
  BatchStreamOptions plain = document_stream(2, 16, {});
  plain.max_documents = 8;
  CHECK(refusal(plain) ==
        "BatchStream: max_documents = 8 without documents: pass documents too, or leave "
        "max_documents 0");
  BatchStreamOptions negative = document_stream(2, 16, DocumentBoundaries::bos(kBos));
  negative.max_documents = -1;
  CHECK(refusal(negative) == "BatchStream: max_documents must be at least 0 (0: rows x context), got -1");
}

TEST_CASE("[batches] a document stream resumes exactly, and only with the same documents") {
  Runtime runtime(placement_options());
  std::vector<std::int64_t> starts;
  const std::vector<std::uint16_t> tokens = documents_of(6000, starts, 8);
  const BatchStreamOptions options = document_stream(4, 32, DocumentBoundaries::given({starts}));
  BatchStream first(runtime, {host_tokens(runtime, tokens)}, options);
  for (int step = 0; step < 3; ++step) (void)first.next_batch();
  const BatchStreamState saved = BatchStreamState::from_json(first.state().to_json());
  CHECK(saved.documents.kind == DocumentBoundaries::Kind::kStarts);
  BatchStream resumed(runtime, {host_tokens(runtime, tokens)}, options, &saved);
  for (std::int64_t step = 3; step < 6; ++step) {
    CHECK(resumed.next_batch().documents[0].cu_seqlens.to_vector<std::int32_t>() ==
          first.next_batch().documents[0].cu_seqlens.to_vector<std::int32_t>());
  }
  std::vector<std::int64_t> fewer(starts.begin(), starts.end() - 1);
  const std::string other = error_from([&] {
                              BatchStream stream(runtime, {host_tokens(runtime, tokens)},
                                                 document_stream(4, 32, DocumentBoundaries::given({fewer})), &saved);
                            }).what();
  CHECK(contains(other, "BatchStream: cannot resume: the state was saved with documents {\"starts\":\""));
  const std::string plain =
      error_from([&] {
        BatchStream stream(runtime, {host_tokens(runtime, tokens)}, document_stream(4, 32, {}), &saved);
      }).what();
  CHECK(contains(plain, "this stream has null"));
}
