// The gather pool: made without threads, started once (by start() or the
// first run()), and shared by a stream's document scan and its gather, so a
// stream with documents runs on no more threads than one without. Threads
// are counted in /proc/self/task, and only where none is exiting, so the
// counts are exact.
#include "batches/gather_pool.hpp"

#include "support/placement_fixture.hpp"
#include "support/plugin_harness.hpp"

#include <backplane/batch_stream.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <vector>

using namespace backplane;
using namespace backplane::testing;
using backplane::detail::GatherPool;

TEST_CASE("[batches] a gather pool starts its threads when first asked, and once") {
  const int before = thread_count();
  GatherPool pool(4);
  CHECK(thread_count() == before);  // made, not started
  pool.start();
  CHECK(thread_count() == before + 3);  // the caller of run() is the fourth
  pool.start();
  std::atomic<std::size_t> done{0};
  pool.run(100, [&](std::size_t begin, std::size_t end) { done += end - begin; });
  CHECK(done == 100);
  CHECK(thread_count() == before + 3);
}

TEST_CASE("[batches] a gather pool's first run() starts it") {
  const int before = thread_count();
  GatherPool pool(3);
  std::atomic<std::size_t> done{0};
  pool.run(10, [&](std::size_t begin, std::size_t end) { done += end - begin; });
  CHECK(done == 10);
  CHECK(thread_count() == before + 2);
}

TEST_CASE("[batches] a stream with BOS documents scans them on its own gather threads, starting no others") {
  Runtime runtime(placement_options());
  std::vector<std::uint16_t> tokens(20000, 7);
  for (std::size_t at = 0; at < tokens.size(); at += 50) tokens[at] = 1;
  const Array source = Array::from_host(runtime, kCpu0, DType::kU16, {static_cast<std::int64_t>(tokens.size())},
                                        tokens.data(), tokens.size() * sizeof(std::uint16_t));
  auto stream = [&](bool documents) {
    BatchStreamOptions options;
    options.batch_size = 2;
    options.context = 16;
    options.devices = {kCpu0};
    options.threads = 4;
    if (documents) options.documents = DocumentBoundaries::bos(1);
    return std::make_unique<BatchStream>(runtime, std::vector<Array>{source}, options);
  };
  // The first stream starts what the runtime keeps for every stream after it.
  const auto first = stream(false);
  const int before = thread_count();
  const auto plain = stream(false);
  const int plain_threads = thread_count() - before;
  CHECK(plain_threads >= 3);  // its gather pool's three, and its producer
  // Nothing exits between the counts, so they are exact. (A scan on a pool
  // of the plan's own, joined before the constructor returned, would leave
  // the same count behind: the pool tests above hold the rest.)
  const auto with_documents = stream(true);
  CHECK(thread_count() - before == 2 * plain_threads);
  CHECK(with_documents->next().size() == 1);
}
