// Layouts from C++: each rank's piece of a step is the block of the global
// batch the layout names, held against a stream without a layout (same seed,
// batch_size = G): rows by the batch axes (row-major over the axes as listed,
// wherever they sit in the mesh), columns by the sequence axes (contiguous or
// head_tail, each chunk with y's one extra token), replicas byte-identical,
// several ranks in one process as in separate ones, the pieces covering the
// whole batch; states resume across layouts and from rank / world_size
// streams; a rank that takes half of each window reads about half the bytes;
// schedules; and every bad layout refused with a message that names it.
#include "support/placement_fixture.hpp"

#include <backplane/batch_stream.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

using namespace backplane;
using namespace backplane::testing;

namespace {

constexpr std::uint64_t kSeed = 7;

// token[i] = i % 65521 (a prime): every column of a window differs, so a
// chunk taken from the wrong columns cannot pass.
std::vector<std::uint16_t> counting_tokens(std::size_t count) {
  std::vector<std::uint16_t> tokens(count);
  for (std::size_t index = 0; index < count; ++index) tokens[index] = static_cast<std::uint16_t>(index % 65521);
  return tokens;
}

Array host_tokens(Runtime& runtime, std::size_t count = 20000) {
  const std::vector<std::uint16_t> tokens = counting_tokens(count);
  return Array::from_host(runtime, kCpu0, DType::kU16, {static_cast<std::int64_t>(tokens.size())}, tokens.data(),
                          tokens.size() * 2);
}

Layout::Axis axis(std::string name, std::int64_t size) { return {std::move(name), size}; }

// A layout stream's options: batch_size per batch coordinate, one piece per
// rank, each on cpu:1 (devices: one entry per rank).
BatchStreamOptions laid_out(Layout layout, std::int64_t batch_size, std::int64_t context) {
  BatchStreamOptions options;
  options.batch_size = batch_size;
  options.context = context;
  options.seed = kSeed;
  options.devices.assign(layout.ranks.size(), kCpu1);
  options.layout = std::move(layout);
  return options;
}

Layout mesh_of(std::vector<Layout::Axis> mesh, std::vector<std::string> batch, std::vector<std::string> sequence,
               std::vector<std::int64_t> ranks, Layout::SequenceOrder order = Layout::SequenceOrder::kContiguous) {
  Layout layout;
  layout.mesh = std::move(mesh);
  layout.batch = std::move(batch);
  layout.sequence = std::move(sequence);
  layout.sequence_order = order;
  layout.ranks = std::move(ranks);
  return layout;
}

// The global batch of steps [0, steps) from a stream without a layout: one
// [G, T + 1] block per step, row-major.
std::vector<std::vector<std::uint16_t>> reference(Runtime& runtime, const Array& source, std::int64_t global_batch,
                                                  std::int64_t context, std::int64_t steps) {
  BatchStreamOptions options;
  options.batch_size = global_batch;
  options.context = context;
  options.seed = kSeed;
  options.devices = {kCpu2};
  BatchStream stream(runtime, {source}, options);
  std::vector<std::vector<std::uint16_t>> out;
  for (std::int64_t step = 0; step < steps; ++step) {
    const std::vector<Array> arrays = stream.next();
    REQUIRE(arrays.size() == 1);
    REQUIRE(arrays[0].shape() == std::vector<std::int64_t>{global_batch, context + 1});
    out.push_back(arrays[0].to_vector<std::uint16_t>());
  }
  return out;
}

// What a piece holds, from the reference block of one step ([G, T + 1]): rows
// [first_row, first_row + rows), and of each the chunks listed (of
// chunk_count equal chunks of T), each chunk with the token after it.
std::vector<std::uint16_t> expected_piece(const std::vector<std::uint16_t>& block, std::int64_t context,
                                          std::int64_t first_row, std::int64_t rows,
                                          const std::vector<std::int64_t>& chunks, std::int64_t chunk_count) {
  const std::int64_t length = context / chunk_count;
  std::vector<std::uint16_t> out;
  for (std::int64_t row = first_row; row < first_row + rows; ++row) {
    for (const std::int64_t chunk : chunks) {
      for (std::int64_t column = chunk * length; column <= chunk * length + length; ++column) {
        out.push_back(block[static_cast<std::size_t>(row * (context + 1) + column)]);
      }
    }
  }
  return out;
}

// Where a rank's piece lies: its batch coordinate (a block of batch_size
// rows) and its chunks of T.
struct Place {
  std::int64_t batch = 0;
  std::vector<std::int64_t> chunks;
};

// Checks each of `ranks`' pieces over `steps` steps against the reference,
// one stream per rank; `place` says where the rank's piece lies.
template <class PlaceOf>
void check_pieces(Runtime& runtime, const Array& source, const Layout& layout, std::int64_t batch_size,
                  std::int64_t context, std::int64_t global_batch, std::int64_t chunk_count,
                  const std::vector<std::int64_t>& shape, PlaceOf&& place) {
  constexpr std::int64_t kSteps = 4;
  const auto blocks = reference(runtime, source, global_batch, context, kSteps);
  for (const std::int64_t rank : layout.ranks) {
    CAPTURE(rank);
    Layout one = layout;
    one.ranks = {rank};
    BatchStream stream(runtime, {source}, laid_out(one, batch_size, context));
    const Place at = place(rank);
    for (std::int64_t step = 0; step < kSteps; ++step) {
      CAPTURE(step);
      const std::vector<Array> arrays = stream.next();
      REQUIRE(arrays.size() == 1);
      CHECK(arrays[0].device() == kCpu1);
      CHECK(arrays[0].shape() == shape);
      CHECK(arrays[0].to_vector<std::uint16_t>() == expected_piece(blocks[static_cast<std::size_t>(step)], context,
                                                                   at.batch * batch_size, batch_size, at.chunks,
                                                                   chunk_count));
    }
  }
}

std::vector<std::uint16_t> next_piece(BatchStream& stream) {
  const std::vector<Array> arrays = stream.next();
  REQUIRE(arrays.size() == 1);
  return arrays[0].to_vector<std::uint16_t>();
}

}  // namespace

TEST_CASE("[batches] layout (dp=2, tp=2): each rank takes its dp block of rows, and the tp replicas are identical") {
  Runtime runtime(placement_options());
  const Array source = host_tokens(runtime);
  const Layout layout = mesh_of({axis("dp", 2), axis("tp", 2)}, {"dp"}, {}, {0, 1, 2, 3});
  // Row-major: rank = dp x 2 + tp.
  check_pieces(runtime, source, layout, 3, 15, 6, 1, {3, 16}, [](std::int64_t rank) { return Place{rank / 2, {0}}; });
  // Replicas: ranks 2 and 3 (dp 1, tp 0 and 1) hand out the same bytes.
  Layout first = layout;
  first.ranks = {2};
  Layout second = layout;
  second.ranks = {3};
  BatchStream one(runtime, {source}, laid_out(first, 3, 15));
  BatchStream other(runtime, {source}, laid_out(second, 3, 15));
  for (int step = 0; step < 3; ++step) CHECK(next_piece(one) == next_piece(other));
  CHECK(one.state().global_batch == 6);
}

TEST_CASE("[batches] layout (dp=2, cp=2) contiguous: rank (b, c) takes rows b and columns [c L, c L + L + 1)") {
  Runtime runtime(placement_options());
  const Array source = host_tokens(runtime);
  const Layout layout = mesh_of({axis("dp", 2), axis("cp", 2)}, {"dp"}, {"cp"}, {0, 1, 2, 3});
  // T = 16, L = 8: x of c = 0 is columns 0..7, y ends at 8; c = 1 starts at 8.
  check_pieces(runtime, source, layout, 3, 16, 6, 2, {3, 9}, [](std::int64_t rank) {
    return Place{rank / 2, {rank % 2}};
  });
  // cp = 4 over a 3-axis mesh, the replicated axis between.
  const Layout wide = mesh_of({axis("dp", 2), axis("tp", 2), axis("cp", 4)}, {"dp"}, {"cp"}, {0, 5, 6, 11, 15});
  check_pieces(runtime, source, wide, 2, 16, 4, 4, {2, 5}, [](std::int64_t rank) {
    return Place{rank / 8, {rank % 4}};
  });
}

TEST_CASE("[batches] layout head_tail (cp=2): rank c takes chunks c and 3 - c of four, as [rows, 2, T / 4 + 1]") {
  Runtime runtime(placement_options());
  const Array source = host_tokens(runtime);
  const Layout layout =
      mesh_of({axis("dp", 2), axis("cp", 2)}, {"dp"}, {"cp"}, {0, 1, 2, 3}, Layout::SequenceOrder::kHeadTail);
  // T = 16, Tc = 4: c = 0 takes columns [0, 5) and [12, 17); c = 1 [4, 9) and [8, 13).
  check_pieces(runtime, source, layout, 3, 16, 6, 4, {3, 2, 5}, [](std::int64_t rank) {
    return Place{rank / 2, {rank % 2, 3 - rank % 2}};
  });
  // cp = 3: chunks c and 5 - c of six.
  const Layout three = mesh_of({axis("cp", 3)}, {}, {"cp"}, {0, 1, 2}, Layout::SequenceOrder::kHeadTail);
  check_pieces(runtime, source, three, 4, 24, 4, 6, {4, 2, 5}, [](std::int64_t rank) {
    return Place{0, {rank, 5 - rank}};
  });
  // A sequence axis of size 1 splits nothing: head_tail is a plain [rows, T + 1].
  const Layout single =
      mesh_of({axis("dp", 2), axis("cp", 1)}, {"dp"}, {"cp"}, {0, 1}, Layout::SequenceOrder::kHeadTail);
  check_pieces(runtime, source, single, 3, 15, 6, 1, {3, 16}, [](std::int64_t rank) { return Place{rank, {0}}; });
}

TEST_CASE("[batches] layout: batch over two axes is row-major in the order listed, wherever the axes sit") {
  Runtime runtime(placement_options());
  const Array source = host_tokens(runtime);
  // rank = dp x 2 + fsdp.
  const Layout listed = mesh_of({axis("dp", 2), axis("fsdp", 2)}, {"dp", "fsdp"}, {}, {0, 1, 2, 3});
  check_pieces(runtime, source, listed, 2, 15, 8, 1, {2, 16}, [](std::int64_t rank) { return Place{rank, {0}}; });
  // Listed the other way, fsdp is the major coordinate: b = fsdp x 2 + dp.
  const Layout swapped = mesh_of({axis("dp", 2), axis("fsdp", 2)}, {"fsdp", "dp"}, {}, {0, 1, 2, 3});
  check_pieces(runtime, source, swapped, 2, 15, 8, 1, {2, 16}, [](std::int64_t rank) {
    return Place{(rank % 2) * 2 + rank / 2, {0}};
  });
  // The batch axis last: mesh (cp=2, dp=3), rank = cp x 3 + dp.
  const Layout last = mesh_of({axis("cp", 2), axis("dp", 3)}, {"dp"}, {"cp"}, {0, 1, 2, 3, 4, 5});
  check_pieces(runtime, source, last, 2, 16, 6, 2, {2, 9}, [](std::int64_t rank) {
    return Place{rank % 3, {rank / 3}};
  });
  // A batch axis of size 1 in the middle of three.
  const Layout middle = mesh_of({axis("tp", 2), axis("pp", 1), axis("dp", 2)}, {"pp", "dp"}, {}, {0, 1, 2, 3});
  check_pieces(runtime, source, middle, 2, 15, 4, 1, {2, 16}, [](std::int64_t rank) { return Place{rank % 2, {0}}; });
}

TEST_CASE("[batches] layout: several ranks in one stream hand out what each rank's own stream does") {
  Runtime runtime(placement_options());
  const Array source = host_tokens(runtime);
  for (const Layout::SequenceOrder order : {Layout::SequenceOrder::kContiguous, Layout::SequenceOrder::kHeadTail}) {
    CAPTURE(static_cast<int>(order));
    const Layout layout = mesh_of({axis("dp", 2), axis("cp", 2)}, {"dp"}, {"cp"}, {0, 1, 2, 3}, order);
    BatchStreamOptions options = laid_out(layout, 3, 16);
    options.devices.clear();  // each rank gets the default device: four pieces on one device
    BatchStream together(runtime, {source}, options);
    std::vector<std::vector<std::vector<std::uint16_t>>> apart(4);
    for (std::int64_t rank = 0; rank < 4; ++rank) {
      Layout one = layout;
      one.ranks = {rank};
      BatchStreamOptions single = laid_out(one, 3, 16);
      single.devices.clear();
      BatchStream stream(runtime, {source}, single);
      for (int step = 0; step < 3; ++step) apart[static_cast<std::size_t>(rank)].push_back(next_piece(stream));
    }
    for (std::size_t step = 0; step < 3; ++step) {
      CAPTURE(step);
      const std::vector<Array> arrays = together.next();
      REQUIRE(arrays.size() == 4);
      for (std::size_t rank = 0; rank < 4; ++rank) {
        CAPTURE(rank);
        CHECK(arrays[rank].device() == arrays[0].device());
        CHECK(arrays[rank].to_vector<std::uint16_t>() == apart[rank][step]);
      }
    }
    // windows(): the rows from the first piece's first to the last's last, here all of them.
    CHECK(together.windows(3).size() == 6);
  }
}

TEST_CASE("[batches] layout: the pieces of all ranks cover the reference batch, every element") {
  Runtime runtime(placement_options());
  const Array source = host_tokens(runtime);
  constexpr std::int64_t kContext = 16;
  constexpr std::int64_t kBatch = 2;
  constexpr std::int64_t kGlobal = 4;  // dp = 2
  const auto blocks = reference(runtime, source, kGlobal, kContext, 2);
  for (const Layout::SequenceOrder order : {Layout::SequenceOrder::kContiguous, Layout::SequenceOrder::kHeadTail}) {
    const bool head_tail = order == Layout::SequenceOrder::kHeadTail;
    CAPTURE(head_tail);
    // (dp=2, tp=2, cp=2): rank = dp x 4 + tp x 2 + cp; every rank, tp replicas included.
    const Layout layout =
        mesh_of({axis("dp", 2), axis("tp", 2), axis("cp", 2)}, {"dp"}, {"cp"}, {0, 1, 2, 3, 4, 5, 6, 7}, order);
    BatchStreamOptions options = laid_out(layout, kBatch, kContext);
    options.devices.clear();
    BatchStream stream(runtime, {source}, options);
    const std::int64_t chunk_count = head_tail ? 4 : 2;
    const std::int64_t length = kContext / chunk_count;
    for (std::size_t step = 0; step < 2; ++step) {
      CAPTURE(step);
      std::vector<std::optional<std::uint16_t>> covered(static_cast<std::size_t>(kGlobal * (kContext + 1)));
      int disagreements = 0;
      const std::vector<Array> arrays = stream.next();
      REQUIRE(arrays.size() == 8);
      for (std::int64_t rank = 0; rank < 8; ++rank) {
        const std::vector<std::uint16_t> values = arrays[static_cast<std::size_t>(rank)].to_vector<std::uint16_t>();
        const std::int64_t dp = rank / 4;
        const std::int64_t cp = rank % 2;
        std::vector<std::int64_t> chunks{cp};
        if (head_tail) chunks.push_back(3 - cp);
        REQUIRE(values.size() == static_cast<std::size_t>(kBatch) * chunks.size() * (length + 1));
        std::size_t at = 0;
        for (std::int64_t row = dp * kBatch; row < dp * kBatch + kBatch; ++row) {
          for (const std::int64_t chunk : chunks) {
            for (std::int64_t column = chunk * length; column <= chunk * length + length; ++column) {
              std::optional<std::uint16_t>& cell = covered[static_cast<std::size_t>(row * (kContext + 1) + column)];
              if (cell && *cell != values[at]) ++disagreements;  // an overlap token two pieces disagree on
              cell = values[at++];
            }
          }
        }
      }
      CHECK(disagreements == 0);
      int missing = 0;
      int wrong = 0;
      for (std::size_t index = 0; index < covered.size(); ++index) {
        if (!covered[index]) {
          ++missing;
        } else if (*covered[index] != blocks[step][index]) {
          ++wrong;
        }
      }
      CHECK(missing == 0);
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("[batches] layout: a state resumes across layouts, and from a rank / world_size stream") {
  Runtime runtime(placement_options());
  const Array source = host_tokens(runtime);
  constexpr std::int64_t kContext = 16;
  constexpr std::int64_t kAt = 3;
  const auto blocks = reference(runtime, source, 8, kContext, kAt + 3);
  const auto check_resumed = [&](const BatchStreamState& state) {
    CHECK(state.step == kAt);
    CHECK(state.global_batch == 8);
    // Resumed as (dp=2, cp=2): batch_size 4 per dp coordinate keeps G = 8.
    for (std::int64_t rank = 0; rank < 4; ++rank) {
      CAPTURE(rank);
      const Layout layout = mesh_of({axis("dp", 2), axis("cp", 2)}, {"dp"}, {"cp"}, {rank});
      BatchStream resumed(runtime, {source}, laid_out(layout, 4, kContext), &state);
      CHECK(resumed.step() == kAt);
      for (std::int64_t step = kAt; step < kAt + 3; ++step) {
        CAPTURE(step);
        CHECK(next_piece(resumed) ==
              expected_piece(blocks[static_cast<std::size_t>(step)], kContext, (rank / 2) * 4, 4, {rank % 2}, 2));
      }
    }
  };
  SUBCASE("saved by a (dp=4) layout stream") {
    BatchStream saved(runtime, {source}, laid_out(mesh_of({axis("dp", 4)}, {"dp"}, {}, {1}), 2, kContext));
    for (std::int64_t step = 0; step < kAt; ++step) {
      CHECK(next_piece(saved) == expected_piece(blocks[static_cast<std::size_t>(step)], kContext, 2, 2, {0}, 1));
    }
    check_resumed(saved.state());
  }
  SUBCASE("saved by rank 1 of world_size 2") {
    BatchStreamOptions options;
    options.batch_size = 4;
    options.context = kContext;
    options.seed = kSeed;
    options.rank = 1;
    options.world_size = 2;
    options.devices = {kCpu1};
    BatchStream saved(runtime, {source}, options);
    for (std::int64_t step = 0; step < kAt; ++step) (void)saved.next();
    check_resumed(saved.state());
  }
  SUBCASE("a layout stream's state resumed by a stream without one") {
    BatchStream saved(runtime, {source},
                      laid_out(mesh_of({axis("dp", 2), axis("cp", 2)}, {"dp"}, {"cp"}, {2}), 4, kContext));
    for (std::int64_t step = 0; step < kAt; ++step) (void)saved.next();
    const BatchStreamState state = saved.state();
    BatchStreamOptions options;
    options.batch_size = 8;
    options.context = kContext;
    options.devices = {kCpu1};
    BatchStream plain(runtime, {source}, options, &state);  // the seed comes from the state
    for (std::int64_t step = kAt; step < kAt + 3; ++step) {
      CHECK(next_piece(plain) == blocks[static_cast<std::size_t>(step)]);
    }
  }
}

// read_bytes counts the steps gathered so far, prepared-ahead ones included.
// The producer keeps at most `prefetch` steps ready, so after k next() calls
// a one-piece stream has gathered between k and k + prefetch steps, each of
// the same bytes: the figure is a multiple of the per-step bytes in that
// range whatever the timing, and with k = 16 and prefetch 1 the bounds alone
// keep cp = 2's figure under 0.55 x cp = 1's: (17 x 33) / (16 x 65) < 0.54.
// (No check here depends on how far the producer got.)
TEST_CASE("[batches] layout: with cp=2 each rank reads about half the bytes of a rank that takes whole windows") {
  Runtime runtime(placement_options());
  const Array source = host_tokens(runtime, 40000);
  constexpr std::int64_t kSteps = 16;
  constexpr std::int64_t kBatch = 4;
  constexpr std::int64_t kContext = 64;
  const auto read_after = [&](const Layout& layout) {
    BatchStreamOptions options = laid_out(layout, kBatch, kContext);
    options.prefetch = 1;
    BatchStream stream(runtime, {source}, options);
    for (std::int64_t step = 0; step < kSteps; ++step) (void)stream.next();
    return stream.stats().read_bytes;
  };
  const auto check_steps = [&](std::uint64_t read, std::uint64_t per_step) {
    CAPTURE(read);
    CAPTURE(per_step);
    CHECK(read % per_step == 0);
    CHECK(read >= kSteps * per_step);
    CHECK(read <= (kSteps + 1) * per_step);
  };
  // U16 tokens: a whole window is 65 of them, a cp = 2 chunk 33, a head_tail chunk 17.
  const std::uint64_t whole = read_after(mesh_of({axis("dp", 2), axis("cp", 1)}, {"dp"}, {"cp"}, {1}));
  check_steps(whole, kBatch * 65 * 2);
  for (const std::int64_t rank : {0, 1, 2, 3}) {
    CAPTURE(rank);
    const std::uint64_t half = read_after(mesh_of({axis("dp", 2), axis("cp", 2)}, {"dp"}, {"cp"}, {rank}));
    check_steps(half, kBatch * 33 * 2);
    CHECK(static_cast<double>(half) <= 0.55 * static_cast<double>(whole));
    const std::uint64_t head_tail =
        read_after(mesh_of({axis("dp", 2), axis("cp", 2)}, {"dp"}, {"cp"}, {rank}, Layout::SequenceOrder::kHeadTail));
    check_steps(head_tail, kBatch * 2 * 17 * 2);
  }
  // Replicas each read their own piece: two ranks in one stream read twice
  // one's. The pieces of a step are counted one after the other, so the
  // figure may stop between them: a whole number of pieces.
  const std::uint64_t two = read_after(mesh_of({axis("dp", 2), axis("tp", 2)}, {"dp"}, {}, {2, 3}));
  CAPTURE(two);
  CHECK(two % (kBatch * 65 * 2) == 0);
  CHECK(two >= kSteps * 2 * kBatch * 65 * 2);
  CHECK(two <= (kSteps + 1) * 2 * kBatch * 65 * 2);
}

TEST_CASE("[batches] layout with a schedule: each step's pieces have that step's batch size and context") {
  Runtime runtime(placement_options());
  const Array source = host_tokens(runtime);
  // Per dp coordinate: 2 windows of 16 + 1, 4 from step 2, 4 of 32 + 1 from step 4.
  BatchStreamOptions plain;
  plain.schedule = {{0, 4, 16}, {2, 8, 16}, {4, 8, 32}};
  plain.seed = kSeed;
  plain.devices = {kCpu2};
  BatchStream whole(runtime, {source}, plain);
  std::vector<std::vector<std::uint16_t>> blocks;
  for (int step = 0; step < 6; ++step) blocks.push_back(next_piece(whole));
  for (const Layout::SequenceOrder order : {Layout::SequenceOrder::kContiguous, Layout::SequenceOrder::kHeadTail}) {
    const bool head_tail = order == Layout::SequenceOrder::kHeadTail;
    for (std::int64_t rank = 0; rank < 4; ++rank) {
      CAPTURE(head_tail);
      CAPTURE(rank);
      BatchStreamOptions options =
          laid_out(mesh_of({axis("dp", 2), axis("cp", 2)}, {"dp"}, {"cp"}, {rank}, order), 0, 0);
      options.schedule = {{0, 2, 16}, {2, 4, 16}, {4, 4, 32}};
      BatchStream stream(runtime, {source}, options);
      CHECK(stream.state().global_batch == 4);
      CHECK(stream.state().schedule == std::vector<BatchStreamState::Stage>{{2, 8, 16}, {4, 8, 32}});
      for (std::int64_t step = 0; step < 6; ++step) {
        CAPTURE(step);
        const std::int64_t batch = step < 2 ? 2 : 4;
        const std::int64_t context = step < 4 ? 16 : 32;
        const std::int64_t c = rank % 2;
        const std::vector<std::int64_t> chunks =
            head_tail ? std::vector<std::int64_t>{c, 3 - c} : std::vector<std::int64_t>{c};
        const std::vector<std::int64_t> shape = head_tail ? std::vector<std::int64_t>{batch, 2, context / 4 + 1}
                                                          : std::vector<std::int64_t>{batch, context / 2 + 1};
        const std::vector<Array> arrays = stream.next();
        REQUIRE(arrays.size() == 1);
        CHECK(arrays[0].shape() == shape);
        CHECK(arrays[0].to_vector<std::uint16_t>() == expected_piece(blocks[static_cast<std::size_t>(step)], context,
                                                                     (rank / 2) * batch, batch, chunks,
                                                                     head_tail ? 4 : 2));
      }
    }
  }
}

TEST_CASE("[batches] a bad layout is refused with a message that names the problem") {
  Runtime runtime(placement_options());
  const Array source = host_tokens(runtime);
  const auto base = [] { return laid_out(mesh_of({axis("dp", 2), axis("cp", 2)}, {"dp"}, {"cp"}, {0}), 2, 16); };
  const auto layout_message = [&](auto&& change) {
    BatchStreamOptions options = base();
    change(options);
    const Error error = error_from([&] { BatchStream stream(runtime, {source}, options); });
    CHECK(error.code() == ErrorCode::kInvalidArgument);
    return std::string(error.what());
  };
  CHECK(layout_message([](BatchStreamOptions& o) { o.layout->batch = {"dq"}; }) ==
        "BatchStream: layout: batch axis 'dq' is not an axis of the mesh (dp=2 x cp=2)");
  CHECK(layout_message([](BatchStreamOptions& o) { o.layout->sequence = {"sp"}; }) ==
        "BatchStream: layout: sequence axis 'sp' is not an axis of the mesh (dp=2 x cp=2)");
  CHECK(layout_message([](BatchStreamOptions& o) { o.layout->sequence = {"dp"}; }) ==
        "BatchStream: layout: axis 'dp' is in both batch and sequence");
  CHECK(layout_message([](BatchStreamOptions& o) {
          o.layout->batch = {"dp", "dp"};
        }) == "BatchStream: layout: batch axis 'dp' is listed twice");
  CHECK(layout_message([](BatchStreamOptions& o) {
          o.layout->mesh = {axis("dp", 2), axis("dp", 2)};
        }) == "BatchStream: layout: mesh axis 'dp' is named twice");
  CHECK(layout_message([](BatchStreamOptions& o) { o.layout->mesh[1].size = 0; }) ==
        "BatchStream: layout: mesh axis 'cp' has size 0; sizes are at least 1");
  CHECK(layout_message([](BatchStreamOptions& o) { o.layout->mesh[0].name = ""; }) ==
        "BatchStream: layout: mesh axis 0 has no name");
  CHECK(layout_message([](BatchStreamOptions& o) { o.layout->mesh.clear(); }) ==
        "BatchStream: layout: the mesh has no axes");
  CHECK(layout_message([](BatchStreamOptions& o) { o.layout->ranks = {4}; }) ==
        "BatchStream: layout: rank 4 is not in [0, 4), the positions of the mesh dp=2 x cp=2");
  CHECK(layout_message([](BatchStreamOptions& o) { o.layout->ranks = {-1}; }) ==
        "BatchStream: layout: rank -1 is not in [0, 4), the positions of the mesh dp=2 x cp=2");
  CHECK(layout_message([](BatchStreamOptions& o) {
          o.layout->ranks = {0, 1};
        }) == "BatchStream: layout: 2 ranks for 1 devices: give one mesh position per device");
  CHECK(layout_message([](BatchStreamOptions& o) {
          o.layout->ranks.clear();
          o.devices.clear();
        }) == "BatchStream: layout: ranks is empty: give the mesh position of each piece this process takes");
  CHECK(layout_message([](BatchStreamOptions& o) { o.world_size = 2; }) ==
        "BatchStream: layout: rank 0 and world_size 2 are given with a layout, whose ranks say where this process "
        "is; leave them 0 and 1");
  CHECK(layout_message([](BatchStreamOptions& o) { o.rank = 1; }) ==
        "BatchStream: layout: rank 1 and world_size 1 are given with a layout, whose ranks say where this process "
        "is; leave them 0 and 1");
  CHECK(layout_message([](BatchStreamOptions& o) { o.context = 15; }) ==
        "BatchStream: context 15 does not split into the 2 chunks of sequence axes cp");
  // head_tail needs T to split into 2 cp chunks: 18 splits in 2, not in 4.
  CHECK(layout_message([](BatchStreamOptions& o) {
          o.context = 18;
          o.layout->sequence_order = Layout::SequenceOrder::kHeadTail;
        }) ==
        "BatchStream: context 18 does not split into the 2 x 2 = 4 chunks of sequence_order head_tail (sequence axes "
        "cp = 2)");
  CHECK(layout_message([](BatchStreamOptions& o) {
          o.batch_size = 0;
          o.context = 0;
          o.schedule = {{0, 2, 16}, {3, 2, 17}};
        }) ==
        "BatchStream: schedule entry 1 (step 3): context 17 does not split into the 2 chunks of sequence axes "
        "cp");
}

TEST_CASE(
    "[batches] layout with documents: a piece's position_ids are its columns' in the whole window, and "
    "cu_seqlens cut its own tokens") {
  Runtime runtime(placement_options());
  const Array source = host_tokens(runtime);
  std::vector<std::int64_t> starts;  // documents of 7 tokens: several cut every chunk
  for (std::int64_t start = 0; start < 20000; start += 7) starts.push_back(start);
  BatchStreamOptions whole;
  whole.batch_size = 4;
  whole.context = 16;
  whole.seed = kSeed;
  whole.devices = {kCpu1};
  whole.documents = DocumentBoundaries::given({starts});
  BatchStream reference_stream(runtime, {source}, whole);
  const StreamBatch reference_batch = reference_stream.next_batch();
  const std::vector<std::int32_t> positions = reference_batch.documents[0].position_ids.to_vector<std::int32_t>();
  for (const auto order : {Layout::SequenceOrder::kContiguous, Layout::SequenceOrder::kHeadTail}) {
    for (const std::int64_t rank : {0, 1, 2, 3}) {
      CAPTURE(static_cast<int>(order));
      CAPTURE(rank);
      BatchStreamOptions options =
          laid_out(mesh_of({axis("dp", 2), axis("cp", 2)}, {"dp"}, {"cp"}, {rank}, order), 2, 16);
      options.documents = DocumentBoundaries::given({starts});
      BatchStream stream(runtime, {source}, options);
      const StreamBatch batch = stream.next_batch();
      REQUIRE(batch.documents.size() == 1);
      const DocumentPieces& pieces = batch.documents[0];
      CHECK(pieces.position_ids.shape() == std::vector<std::int64_t>{2, 8});
      // The piece's columns: chunk c of 2 (8 tokens), or chunks c and 3 - c of 4.
      const std::int64_t c = rank % 2;
      std::vector<std::int64_t> columns;
      const auto add = [&](std::int64_t from, std::int64_t count) {
        for (std::int64_t column = from; column < from + count; ++column) columns.push_back(column);
      };
      if (order == Layout::SequenceOrder::kContiguous) {
        add(c * 8, 8);
      } else {
        add(c * 4, 4);
        add((3 - c) * 4, 4);
      }
      const std::vector<std::int32_t> got = pieces.position_ids.to_vector<std::int32_t>();
      std::vector<std::int32_t> expected_cu{0};
      std::int64_t max_seqlen = 0;
      std::int64_t run = 0;
      for (std::int64_t row = 0; row < 2; ++row) {
        const std::int64_t global_row = rank / 2 * 2 + row;
        for (std::size_t at = 0; at < columns.size(); ++at) {
          const std::int32_t want = positions[static_cast<std::size_t>(global_row * 16 + columns[at])];
          CHECK(got[static_cast<std::size_t>(row * 8) + at] == want);
          // A piece starts at a row's first column, at a document start, and
          // where the columns jump (head_tail's second chunk).
          const bool cut = at > 0 && (want == 0 || columns[at] != columns[at - 1] + 1);
          if (cut || (at == 0 && row > 0)) {
            expected_cu.push_back(static_cast<std::int32_t>(row * 8 + static_cast<std::int64_t>(at)));
            run = 0;
          }
          max_seqlen = std::max(max_seqlen, ++run);
        }
      }
      expected_cu.push_back(16);
      const std::vector<std::int32_t> cu = pieces.cu_seqlens.to_vector<std::int32_t>();
      REQUIRE(static_cast<std::int64_t>(expected_cu.size()) - 1 == pieces.pieces);
      CHECK(std::vector<std::int32_t>(cu.begin(), cu.begin() + pieces.pieces + 1) == expected_cu);
      CHECK(cu.size() == 17);  // max_documents 0: rows x the piece's 8 columns, + 1
      CHECK(cu.back() == 16);
      CHECK(pieces.max_seqlen == max_seqlen);
    }
  }
}

TEST_CASE("[batches] layout: a schedule entry that ended before the resume step need not split (batch_size 0)") {
  // A ramp trained on one rank: G = 3 for steps 0-3, then G = 8. Resumed at
  // step 5 as (dp=2), G = 3 cannot split, but that entry is over: given as
  // batch_size 0 it takes the state's G, and the steps from 5 on are the
  // single rank's.
  Runtime runtime(placement_options());
  const Array source = host_tokens(runtime);
  BatchStreamOptions single;
  single.context = 16;
  single.seed = kSeed;
  single.devices = {kCpu2};
  single.schedule = {{0, 3, 16}, {4, 8, 16}};
  BatchStream reference_stream(runtime, {source}, single);
  std::vector<std::vector<std::uint16_t>> blocks;
  for (int step = 0; step < 8; ++step) blocks.push_back(reference_stream.next()[0].to_vector<std::uint16_t>());
  BatchStream saver(runtime, {source}, single);
  for (int step = 0; step < 5; ++step) saver.next();
  const BatchStreamState state = saver.state();
  for (const std::int64_t rank : {0, 1}) {
    CAPTURE(rank);
    BatchStreamOptions options = laid_out(mesh_of({axis("dp", 2)}, {"dp"}, {}, {rank}), 0, 16);
    options.schedule = {{0, 0, 16}, {4, 4, 16}};
    BatchStream resumed(runtime, {source}, options, &state);
    for (std::int64_t step = 5; step < 8; ++step) {
      CHECK(next_piece(resumed) == expected_piece(blocks[static_cast<std::size_t>(step)], 16, rank * 4, 4, {0}, 1));
    }
    CHECK(resumed.state().global_batch == 3);  // the state it saves is the job's, as before
    const Error before = error_from([&] { (void)resumed.windows(2); });
    CHECK(before.code() == ErrorCode::kOutOfRange);
    CHECK(std::string(before.what()) ==
          "BatchStream: step 2 is in schedule entry 0, which ended before this stream's first step and whose global "
          "batch of 3 batch axes dp = 2 cannot split");
  }
  // Given as a batch size, the ended entry is refused with the way out.
  BatchStreamOptions options = laid_out(mesh_of({axis("dp", 2)}, {"dp"}, {}, {0}), 0, 16);
  options.schedule = {{0, 1, 16}, {4, 4, 16}};
  CHECK(std::string(error_from([&] { BatchStream stream(runtime, {source}, options, &state); }).what()) ==
        "BatchStream: cannot resume: schedule entry 0 (step 0) of the state has a global batch of 3, which batch axes "
        "dp = 2 cannot split; it ended before the resume step 5: give its batch_size as 0 to take the state's global "
        "batch");
  // batch_size 0 is only for an entry that has ended: not the current one, nor without a state.
  options.schedule = {{0, 0, 16}, {4, 4, 16}, {6, 0, 16}};
  CHECK(contains(error_from([&] { BatchStream stream(runtime, {source}, options, &state); }).what(),
                 "schedule entry 2 (step 6): batch_size must be at least 1, got 0"));
  options.schedule = {{0, 0, 16}, {4, 4, 16}};
  CHECK(contains(error_from([&] { BatchStream stream(runtime, {source}, options); }).what(),
                 "schedule entry 0 (step 0): batch_size must be at least 1, got 0"));
}
