// BatchStream: what it hands out, resume and elasticity, many sources, the
// bounded memory of a steady loop, stats, and every bad option's message.
#include "support/placement_fixture.hpp"
#include "support/temp_dir.hpp"

#include <backplane/batch_stream.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

using namespace backplane;
using namespace backplane::testing;

namespace {

// token[i] = i % 65521 (a prime): a window's first token names its start.
std::vector<std::uint16_t> counting_tokens(std::size_t count, std::uint16_t offset = 0) {
  std::vector<std::uint16_t> tokens(count);
  for (std::size_t index = 0; index < count; ++index) {
    tokens[index] = static_cast<std::uint16_t>((index + offset) % 65521);
  }
  return tokens;
}

Array host_tokens(Runtime& runtime, const std::vector<std::uint16_t>& tokens) {
  return Array::from_host(runtime, kCpu0, DType::kU16, {static_cast<std::int64_t>(tokens.size())}, tokens.data(),
                          tokens.size() * 2);
}

BatchStreamOptions options_for(std::int64_t batch, std::int64_t context, Device device = kCpu1) {
  BatchStreamOptions options;
  options.batch_size = batch;
  options.context = context;
  options.devices = {device};
  options.seed = 11;
  return options;
}

std::string message_of(Runtime& runtime, std::vector<Array> sources, const BatchStreamOptions& options,
                       const BatchStreamState* resume = nullptr) {
  return error_from([&] { BatchStream stream(runtime, std::move(sources), options, resume); }).what();
}

}  // namespace

TEST_CASE("[batches] a stream hands out the windows it reports, widened, on cpu and sim devices") {
  Runtime runtime(placement_options());
  const auto tokens = counting_tokens(20000);
  Array source = host_tokens(runtime, tokens);
  for (const Device& device : {kCpu1, kSim0}) {
    CAPTURE(device.selector());
    BatchStreamOptions options = options_for(8, 31, device);
    options.dtype = DType::kI64;
    BatchStream stream(runtime, {source}, options);
    for (std::int64_t step = 0; step < 5; ++step) {
      const std::vector<Window> windows = stream.windows(step);
      std::vector<Array> batch = stream.next();
      REQUIRE(batch.size() == 1);
      CHECK(batch[0].device() == device);
      CHECK(batch[0].dtype() == DType::kI64);
      CHECK(batch[0].shape() == std::vector<std::int64_t>{8, 32});
      const std::vector<std::int64_t> values = batch[0].to_vector<std::int64_t>();
      for (std::size_t row = 0; row < 8; ++row) {
        for (std::size_t column = 0; column < 32; ++column) {
          REQUIRE(values[row * 32 + column] == tokens[static_cast<std::size_t>(windows[row].start) + column]);
        }
      }
    }
    CHECK(stream.step() == 5);
  }
}

TEST_CASE("[batches] a batch split over two devices keeps the order of the windows") {
  Runtime runtime(placement_options());
  const auto tokens = counting_tokens(5000);
  BatchStreamOptions options = options_for(6, 9);
  options.devices = {kSim0, kCpu2};
  BatchStream stream(runtime, {host_tokens(runtime, tokens)}, options);
  const std::vector<Window> windows = stream.windows(0);
  std::vector<Array> batch = stream.next();
  REQUIRE(batch.size() == 2);
  CHECK(batch[0].device() == kSim0);
  CHECK(batch[1].device() == kCpu2);
  for (std::size_t device = 0; device < 2; ++device) {
    const auto values = batch[device].to_vector<std::uint16_t>();
    for (std::size_t row = 0; row < 3; ++row) {
      CHECK(values[row * 10] == tokens[static_cast<std::size_t>(windows[device * 3 + row].start)]);
    }
  }
}

TEST_CASE("[batches] resuming from a saved state gives bit-identical batches") {
  Runtime runtime(placement_options());
  const auto tokens = counting_tokens(30000);
  Array source = host_tokens(runtime, tokens);
  BatchStreamOptions options = options_for(4, 63);
  BatchStream first(runtime, {source}, options);
  for (int step = 0; step < 7; ++step) (void)first.next();
  const std::string saved = first.state().to_json();
  std::vector<std::vector<std::uint16_t>> expected;
  for (int step = 0; step < 5; ++step) expected.push_back(first.next()[0].to_vector<std::uint16_t>());

  const BatchStreamState state = BatchStreamState::from_json(saved);
  CHECK(state.step == 7);
  options.prefetch = 5;  // how the stream runs may change; what it draws may not
  options.devices = {kSim1};
  BatchStream resumed(runtime, {source}, options, &state);
  CHECK(resumed.step() == 7);
  for (int step = 0; step < 5; ++step) CHECK(resumed.next()[0].to_vector<std::uint16_t>() == expected[step]);
}

TEST_CASE("[batches] elastic: 4 ranks resumed as 2 draw the same windows at every step") {
  Runtime runtime(placement_options());
  const auto tokens = counting_tokens(40000);
  Array source = host_tokens(runtime, tokens);
  std::optional<BatchStreamState> saved;
  std::vector<std::set<std::pair<int, std::int64_t>>> four(6);
  for (std::int64_t rank = 0; rank < 4; ++rank) {
    BatchStreamOptions options = options_for(8, 15);
    options.rank = rank;
    options.world_size = 4;
    BatchStream stream(runtime, {source}, options);
    for (int step = 0; step < 3; ++step) (void)stream.next();
    if (rank == 2) saved = stream.state();  // any rank's state resumes any rank
    for (std::int64_t step = 3; step < 9; ++step) {
      for (const Window& window : stream.windows(step))
        four[static_cast<std::size_t>(step - 3)].insert({window.source, window.start});
    }
  }
  std::vector<std::set<std::pair<int, std::int64_t>>> two(6);
  for (std::int64_t rank = 0; rank < 2; ++rank) {
    BatchStreamOptions options = options_for(16, 15);
    options.rank = rank;
    options.world_size = 2;
    BatchStream stream(runtime, {source}, options, &*saved);
    for (std::size_t step = 0; step < 6; ++step) {
      const std::vector<Window> windows = stream.windows(stream.step());
      const auto values = stream.next()[0].to_vector<std::uint16_t>();
      for (std::size_t row = 0; row < windows.size(); ++row) {
        CHECK(values[row * 16] == tokens[static_cast<std::size_t>(windows[row].start)]);
        two[step].insert({windows[row].source, windows[row].start});
      }
    }
  }
  for (std::size_t step = 0; step < 6; ++step) {
    CAPTURE(step);
    CHECK(four[step].size() == 32);
    CHECK(four[step] == two[step]);
  }
}

TEST_CASE("[batches] many sources: no window straddles two, and each comes from its own source") {
  Runtime runtime(placement_options());
  // Three shards whose tokens say which shard they are: 10000 + shard.
  std::vector<std::vector<std::uint16_t>> shards;
  std::vector<Array> sources;
  for (std::uint16_t shard = 0; shard < 3; ++shard) {
    shards.push_back(std::vector<std::uint16_t>(static_cast<std::size_t>(100 + 50 * shard), 10000 + shard));
    sources.push_back(host_tokens(runtime, shards.back()));
  }
  BatchStream stream(runtime, sources, options_for(16, 20));
  for (int step = 0; step < 20; ++step) {
    const std::vector<Window> windows = stream.windows(stream.step());
    const auto values = stream.next()[0].to_vector<std::uint16_t>();
    for (std::size_t row = 0; row < 16; ++row) {
      const auto source = static_cast<std::size_t>(windows[row].source);
      CHECK(windows[row].start + 21 <= static_cast<std::int64_t>(shards[source].size()));
      for (std::size_t column = 0; column < 21; ++column) REQUIRE(values[row * 21 + column] == 10000 + source);
    }
  }
}

TEST_CASE("[batches] a steady loop allocates nothing per step and keeps prefetch + 1 batches at most") {
  Runtime runtime(placement_options());
  Array source = host_tokens(runtime, counting_tokens(50000));
  for (const Device& device : {kCpu3, kSim1}) {
    CAPTURE(device.selector());
    BatchStreamOptions options = options_for(16, 127, device);
    options.prefetch = 3;
    BatchStream stream(runtime, {source}, options);
    // A slow consumer that holds its batch (the queue fills behind it), then
    // a fast one (several steps gather and move at once): how many buffers a
    // full pipeline needs depends on how the threads interleave, but never
    // passes prefetch + 1 batches, whatever the number of steps. A loop that
    // allocated per step would have made hundreds.
    for (int step = 0; step < 10; ++step) {
      const std::vector<Array> held = stream.next();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (int step = 0; step < 300; ++step) (void)stream.next();
    const MemoryStats after = memory_stats(runtime, device);
    const auto pipeline = static_cast<std::uint64_t>(options.prefetch + 1);
    CHECK(after.backend_allocations <= pipeline);
    CHECK(after.pinned_backend_allocations <= pipeline);
    // One batch is 16 x 128 x 2 bytes; widening or rounding may add a block.
    CHECK(after.peak <= 2 * (3 + 1) * std::uint64_t{16 * 128 * 2} + 4096);
  }
}

TEST_CASE("[batches] stats count steps, windows and bytes, and the stall is a fraction") {
  Runtime runtime(placement_options());
  BatchStreamOptions options = options_for(8, 63);
  options.dtype = DType::kI32;
  BatchStream stream(runtime, {host_tokens(runtime, counting_tokens(10000))}, options);
  for (int step = 0; step < 12; ++step) (void)stream.next();
  const BatchStreamStats stats = stream.stats();
  CHECK(stats.steps == 12);
  CHECK(stats.windows == 96);
  CHECK(stats.bytes == 12 * 8 * 64 * 4);
  CHECK(stats.data_stall_fraction >= 0);
  CHECK(stats.data_stall_fraction <= 1);
  CHECK(stats.wait_seconds <= stats.elapsed_seconds);
  CHECK(stats.gather_seconds > 0);
  CHECK(stats.windows_per_second > 0);
  CHECK(stream.resident_bytes() == 0);  // heap memory is no file mapping
}

TEST_CASE("[batches] stats name the step handed out last and the epoch it draws in, resumed too") {
  // 48 tokens, T = 8: 40 window starts, 8 a step, so an epoch is 5 steps.
  Runtime runtime(placement_options());
  Array source = host_tokens(runtime, counting_tokens(48));
  const BatchStreamOptions options = options_for(8, 8);
  BatchStream stream(runtime, {source}, options);
  CHECK(stream.stats().step == -1);  // nothing handed out yet
  CHECK(stream.stats().epoch == 0);
  std::set<std::int64_t> first_pass;
  for (std::int64_t step = 0; step < 5; ++step) {
    (void)stream.next();
    CHECK(stream.stats().step == step);
    CHECK(stream.stats().epoch == 0);
    for (const Window& window : stream.windows(step)) first_pass.insert(window.start);
  }
  CHECK(first_pass.size() == 40);  // epoch 0 took every start once
  (void)stream.next();
  CHECK(stream.stats().step == 5);
  CHECK(stream.stats().epoch == 1);

  const BatchStreamState state = stream.state();
  BatchStream resumed(runtime, {source}, options, &state);
  CHECK(resumed.stats().step == 5);  // where the saved stream stood, before its first next()
  CHECK(resumed.stats().epoch == 1);
  for (int step = 0; step < 5; ++step) (void)resumed.next();
  CHECK(resumed.stats().step == 10);
  CHECK(resumed.stats().epoch == 2);
}

TEST_CASE("[batches] release_pages keeps a file mapping's resident memory bounded") {
  Runtime runtime(placement_options());
  TempDir directory;
  const std::filesystem::path path = directory / "tokens.bin";
  // 128 MiB of U16: 64 blocks of 2 MiB, the largest folio the kernel maps a
  // file in (one fault can make a whole block resident).
  const std::size_t count = 64 << 20;
  {
    std::FILE* file = std::fopen(path.c_str(), "wb");
    REQUIRE(file != nullptr);
    const std::size_t piece = 1 << 20;
    for (std::size_t first = 0; first < count; first += piece) {
      const auto tokens = counting_tokens(piece, static_cast<std::uint16_t>(first % 65521));
      REQUIRE(std::fwrite(tokens.data(), 2, piece, file) == piece);
    }
    std::fclose(file);
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  void* mapped = ::mmap(nullptr, count * 2, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  REQUIRE(mapped != MAP_FAILED);
  const std::shared_ptr<const void> mapping(
      mapped, [count](const void* address) { ::munmap(const_cast<void*>(address), count * 2); });
  Array source = Array::wrap_host(runtime, kCpu0, DType::kU16, {static_cast<std::int64_t>(count)}, mapped, mapping);
  // 400 steps x 4 windows of 2 KiB touch nearly every block of the file.
  const auto resident_after = [&](bool release) {
    BatchStreamOptions options = options_for(4, 1023);
    options.release_pages = release;
    options.seed = release ? 1 : 2;
    BatchStream stream(runtime, {source}, options);
    for (int step = 0; step < 400; ++step) (void)stream.next();
    return stream.resident_bytes();
  };
  const std::uint64_t released = resident_after(true);
  ::madvise(mapped, count * 2, MADV_DONTNEED);
  const std::uint64_t kept = resident_after(false);
  CAPTURE(released);
  CAPTURE(kept);
  constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
  CHECK(kept > 96 * kMiB);
  // Left resident at most: the step being gathered when resident_bytes() looked
  // (4 windows, each in at most two blocks) and the blocks the fingerprint
  // read (the file's first and last), 2 MiB each.
  CHECK(released <= (4 * 2 + 2) * 2 * kMiB);

  Array heap = host_tokens(runtime, counting_tokens(10000));
  BatchStreamOptions options = options_for(4, 15);
  options.release_pages = true;
  CHECK(contains(message_of(runtime, {heap}, options), "source 0 is not in a shared mapping"));
}

TEST_CASE("[batches] bad options are refused when the stream is made, naming the problem") {
  Runtime runtime(placement_options());
  Array source = host_tokens(runtime, counting_tokens(1000));
  const auto with = [&](auto change) {
    BatchStreamOptions options = options_for(4, 15);
    change(options);
    return message_of(runtime, {source}, options);
  };
  CHECK(contains(with([](auto& o) { o.batch_size = 0; }), "batch_size must be at least 1, got 0"));
  CHECK(contains(with([](auto& o) { o.context = 0; }), "context must be at least 1"));
  CHECK(contains(with([](auto& o) { o.context = INT64_MAX; }),
                 "context must be below 2^63 - 1 (a window is context + 1 tokens), got 9223372036854775807"));
  CHECK(contains(with([](auto& o) { o.rank = 4, o.world_size = 4; }), "rank 4 is not in [0, world_size = 4)"));
  CHECK(contains(with([](auto& o) { o.prefetch = 0; }), "prefetch must be in [1, 64], got 0"));
  CHECK(contains(with([](auto& o) { o.weights = {1.0, 2.0}; }), "2 weights for 1 sources"));
  CHECK(contains(with([](auto& o) { o.weights = {-1.0}; }), "weight -1 (of source 0) is not a finite number >= 0"));
  CHECK(contains(with([](auto& o) { o.weights = {0.0}; }), "the weights are all zero"));
  CHECK(contains(with([](auto& o) { o.context = 1000; }), "longer than every source (the longest has 1000)"));
  CHECK(contains(with([](auto& o) { o.batch_size = 986; }), "986 distinct windows per global step"));
  CHECK(contains(with([](auto& o) { o.devices = {kCpu1, kCpu1}; }), "device cpu:1 is listed twice"));
  CHECK(contains(with([](auto& o) {
                   o.batch_size = 5, o.devices = {kCpu1, kCpu2};
                 }),
                 "batch_size 5 does not split evenly over 2 devices"));
  CHECK(contains(with([](auto& o) { o.dtype = DType::kF32; }), "only integer dtypes convert"));
  CHECK(contains(message_of(runtime, {}, options_for(4, 15)), "no token sources given"));

  BatchStream stream(runtime, {source}, options_for(4, 15));
  BatchStreamState state = stream.state();
  BatchStreamOptions changed = options_for(4, 15);
  changed.seed = 12;
  CHECK(contains(message_of(runtime, {source}, changed, &state), "saved with seed 11, this stream has 12"));
  BatchStreamState far = state;
  far.step = INT64_MAX - 1;  // steps ahead of it would overflow
  CHECK(contains(message_of(runtime, {source}, options_for(4, 15), &far), "cannot resume at step 9223372036854775806"));
  CHECK(contains(message_of(runtime, {source}, options_for(8, 15), &state), "global batch"));
  Array other = host_tokens(runtime, counting_tokens(1000, 1));
  CHECK(contains(message_of(runtime, {other}, options_for(4, 15), &state), "source 0 differs"));
}

TEST_CASE("[batches] concurrency: stats and state read from other threads while next() runs, then teardown") {
  Runtime runtime(placement_options());
  Array source = host_tokens(runtime, counting_tokens(50000));
  for (const Device& device : {kCpu1, kSim0}) {
    CAPTURE(device.selector());
    BatchStreamOptions options = options_for(16, 63, device);
    options.prefetch = 4;
    options.threads = 3;
    auto stream = std::make_unique<BatchStream>(runtime, std::vector<Array>{source}, options);
    std::atomic<bool> done{false};
    std::thread reader([&] {
      std::int64_t last = 0;
      while (!done.load()) {
        const BatchStreamState state = stream->state();
        CHECK(state.step >= last);
        last = state.step;
        CHECK(stream->stats().steps <= 200);
      }
    });
    for (int step = 0; step < 100; ++step) CHECK(stream->next().size() == 1);
    done = true;
    reader.join();
    CHECK(stream->stats().steps == 100);
    stream.reset();  // with up to 4 steps prepared or in flight
  }
}

TEST_CASE("[batches] next() from two threads hands each step to exactly one of them") {
  // Whatever the interleaving: together the two callers get steps 0..79,
  // each once. A batch's first token names its first window's start, which
  // names its step (the windows of the steps are distinct here).
  Runtime runtime(placement_options());
  const auto tokens = counting_tokens(60000);
  Array source = host_tokens(runtime, tokens);
  BatchStreamOptions options = options_for(4, 15, kCpu1);
  BatchStream reference(runtime, {source}, options);
  std::map<std::int64_t, std::int64_t> step_of_start;
  for (std::int64_t step = 0; step < 80; ++step) {
    REQUIRE(step_of_start.emplace(reference.windows(step)[0].start, step).second);
  }
  BatchStream stream(runtime, {source}, options);
  std::vector<std::int64_t> got[2];
  const auto take = [&](std::vector<std::int64_t>& into) {
    for (int call = 0; call < 40; ++call) into.push_back(stream.next()[0].to_vector<std::uint16_t>()[0]);
  };
  std::thread other(take, std::ref(got[1]));
  take(got[0]);
  other.join();
  std::set<std::int64_t> steps;
  for (const auto& firsts : got) {
    for (const std::int64_t first : firsts) {
      const auto found = step_of_start.find(first);
      REQUIRE(found != step_of_start.end());
      CHECK(steps.insert(found->second).second);
    }
  }
  CHECK(steps.size() == 80);
  CHECK(*steps.rbegin() == 79);
  CHECK(stream.step() == 80);
}

TEST_CASE("[batches] a failed copy surfaces at the next() of its step, and the state still names that step") {
  // The sim device fails its 4th copy: step 3's batch.
  Runtime runtime(placement_options({{"fail_copy_at", "4"}}));
  const auto tokens = counting_tokens(20000);
  Array source = host_tokens(runtime, tokens);
  BatchStreamOptions options = options_for(4, 31, kSim0);
  BatchStream stream(runtime, {source}, options);
  for (int step = 0; step < 3; ++step) (void)stream.next();
  const Error error = error_from([&] { (void)stream.next(); });
  CHECK(contains(error.what(), "batch stream step 3"));
  CHECK(contains(error.what(), "injected device fault"));
  CHECK(stream.state().step == 3);
  CHECK(contains(error_from([&] { (void)stream.next(); }).what(), "injected device fault"));  // stays failed

  // A new stream from that state retries step 3, on a device that works.
  const BatchStreamState state = stream.state();
  options.devices = {kCpu1};
  BatchStream retry(runtime, {source}, options, &state);
  const std::vector<Window> windows = stream.windows(3);
  const auto values = retry.next()[0].to_vector<std::uint16_t>();
  for (std::size_t row = 0; row < 4; ++row) {
    CHECK(values[row * 32] == tokens[static_cast<std::size_t>(windows[row].start)]);
  }
}
