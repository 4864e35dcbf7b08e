"""The batch stream against a second implementation of its sampling, written
in pure Python from docs/batch-stream.md ("How windows are drawn") and not
from the library's code: Philox4x64-10 (checked against numpy.random.Philox
and the guide's test vector), the keyed Feistel permutation with cycle
walking, the unweighted epoch order, the weighted source choice, ranks.
The windows the stream reports (windows(step)) and the tokens it hands out
must both equal the reference's, bit for bit.

With documents the guide ("Documents") draws the same way over each source's
eligible document starts; the pieces each batch carries (cu_seqlens,
position_ids, max_seqlen) are computed here again from the windows and the
document starts alone."""
import math
import os
import tempfile
import unittest

import backplane
from support import optional_module, plugin_dirs

numpy = optional_module("numpy")

MASK64 = (1 << 64) - 1


# --- Philox4x64-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as
# easy as 1, 2, 3", SC 2011) ---------------------------------------------------
PHILOX_M0 = 0xD2E7470EE14C6C93
PHILOX_M1 = 0xCA5A826395121157
PHILOX_W0 = 0x9E3779B97F4A7C15  # the golden ratio
PHILOX_W1 = 0xBB67AE8584CAA73B  # sqrt(3) - 1


def philox(seed, c0, c1, c2, c3):
    """The four output words for counter (c0, c1, c2, c3) and key (seed, 0)."""
    counter = [c0 & MASK64, c1 & MASK64, c2 & MASK64, c3 & MASK64]
    k0, k1 = seed & MASK64, 0
    for round_index in range(10):
        if round_index > 0:
            k0, k1 = (k0 + PHILOX_W0) & MASK64, (k1 + PHILOX_W1) & MASK64
        product0 = PHILOX_M0 * counter[0]
        product1 = PHILOX_M1 * counter[2]
        hi0, lo0 = product0 >> 64, product0 & MASK64
        hi1, lo1 = product1 >> 64, product1 & MASK64
        counter = [hi1 ^ counter[1] ^ k0, lo1, hi0 ^ counter[3] ^ k1, lo0]
    return counter


def random(seed, c0, c1, c2, c3):
    return philox(seed, c0, c1, c2, c3)[0]


# --- the keyed permutation P(n, e, q) --------------------------------------------
def mix(z):
    """SplitMix64's finaliser."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class Permutation:
    """P(n, e, q): a bijection of [0, n) for epoch e and stream q."""

    def __init__(self, seed, n, epoch, stream):
        bits = (n - 1).bit_length() or 1
        self.n = n
        self.half = max(1, math.ceil(bits / 2))
        self.mask = (1 << self.half) - 1
        self.keys = [random(seed, epoch, r, 1, stream) for r in range(6)]

    def feistel(self, x):
        left, right = x >> self.half, x & self.mask
        for key in self.keys:
            left, right = right, left ^ (mix((right ^ key) & MASK64) & self.mask)
        return (left << self.half) | right

    def __call__(self, x):
        x = self.feistel(x)
        while x >= self.n:  # cycle walking back into [0, n)
            x = self.feistel(x)
        return x


class Reference:
    """The windows of the guide's algorithm for one stream's parameters; with
    `documents` (each source's document starts), the document-aligned ones."""

    def __init__(self, lengths, context, batch_size, world_size=1, seed=0, weights=None, documents=None):
        # With documents, source j's window starts are D_j, its document
        # starts d with d + T + 1 <= len(source j), in increasing order.
        self.eligible = None if documents is None else [
            [start for start in sorted(starts) if start + context + 1 <= length]
            for starts, length in zip(documents, lengths)]
        self.starts = ([max(0, length - context) for length in lengths] if self.eligible is None
                       else [len(starts) for starts in self.eligible])
        self.total = sum(self.starts)
        self.global_batch = batch_size * world_size
        self.batch_size = batch_size
        self.seed = seed
        self.permutations = {}
        self.cumulative = None
        if weights:
            total = 0.0
            for weight in weights:
                total += weight
            running, cumulative = 0.0, []
            for weight in weights:
                running += weight
                cumulative.append(running / total)
            last_positive = max(index for index, weight in enumerate(weights) if weight > 0)
            for index in range(last_positive, len(weights)):
                cumulative[index] = 1.0
            self.cumulative = cumulative

    def permutation(self, n, epoch, stream):
        key = (n, epoch, stream)
        if key not in self.permutations:
            self.permutations[key] = Permutation(self.seed, n, epoch, stream)
        return self.permutations[key]

    def sample(self, step, index):
        """(source, start) of sample `index` of global step `step`."""
        g = self.global_batch
        if self.cumulative is None:
            steps_per_epoch = self.total // g
            epoch = step // steps_per_epoch
            position = (step % steps_per_epoch) * g + index
            x = self.permutation(self.total, epoch, 0)(position)
            for source, count in enumerate(self.starts):
                if x < count:
                    return source, self.start(source, x)
                x -= count
            raise AssertionError("x outside [0, N)")
        u = (random(self.seed, step, index, 2, 0) >> 11) * 2.0 ** -53
        source = next(j for j, bound in enumerate(self.cumulative) if u < bound)
        steps_per_epoch = self.starts[source] // g
        epoch = step // steps_per_epoch
        position = (step % steps_per_epoch) * g + index
        return source, self.start(source, self.permutation(self.starts[source], epoch, source + 1)(position))

    def start(self, source, x):
        """The start that position x of source `source` names."""
        return x if self.eligible is None else self.eligible[source][x]

    def windows(self, step, rank=0):
        first = rank * self.batch_size
        return [self.sample(step, index) for index in range(first, first + self.batch_size)]


def pieces(windows, documents, context, max_documents=0):
    """(cu_seqlens, position_ids, max_seqlen) of one device's windows, from
    the guide's definition: x's rows * T tokens, flattened, cut at every row
    start and at every document start inside a row; cu_seqlens padded to
    max_documents + 1 (0: rows * T + 1) by repeating the total. None when
    the pieces do not fit in max_documents."""
    ends, position_ids, offset = [], [], 0
    for source, start in windows:
        cuts = sorted(d for d in documents[source] if start < d < start + context) + [start + context]
        first, row = start, []
        for cut in cuts:
            row.extend(range(cut - first))
            ends.append(offset + cut - start)
            first = cut
        position_ids.append(row)
        offset += context
    limit = max_documents or offset
    if len(ends) > limit:
        return None
    lengths = [end - begin for begin, end in zip([0] + ends, ends)]
    return [0] + ends + [offset] * (limit - len(ends)), position_ids, max(lengths)


def bos_starts(tokens, marker):
    """A document starts at every marker."""
    return [int(index) for index in numpy.flatnonzero(numpy.asarray(tokens) == marker)]


def eos_starts(tokens, marker):
    """A document starts at 0 and after every marker."""
    after = [int(index) + 1 for index in numpy.flatnonzero(numpy.asarray(tokens) == marker)]
    return sorted({0, *[start for start in after if start < len(tokens)]})


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class PhiloxTest(unittest.TestCase):
    def test_the_guides_test_vector(self):
        self.assertEqual(philox(0, 1, 0, 0, 0),
                         [0x02F4BA6408E4D89B, 0x3DD62B0B9CA8C5B2, 0x1C8667A55D902E79, 0x907D7A052FD5B4DC])

    def test_philox_equals_numpys(self):
        # NumPy increments its 256-bit counter before each block: counter c
        # there gives this function's block c + 1.
        cases = [(0, (1, 0, 0, 0)), (11, (5, 7, 1, 0)), (2**64 - 1, (2**63, 2**64 - 1, 2, 3)),
                 (0x9F0C0E5B8A2D4471, (123456789, 42, 1, 9))]
        for seed, counter in cases:
            with self.subTest(seed=seed, counter=counter):
                below = [counter[0] - 1, counter[1], counter[2], counter[3]]
                generator = numpy.random.Philox(key=numpy.array([seed, 0], dtype=numpy.uint64),
                                                counter=numpy.array(below, dtype=numpy.uint64))
                self.assertEqual([int(value) for value in generator.random_raw(4)], philox(seed, *counter))

    def test_the_permutation_is_a_bijection(self):
        for n in (1, 2, 3, 5, 64, 65, 1000):
            permutation = Permutation(7, n, 3, 1)
            self.assertEqual(sorted(permutation(x) for x in range(n)), list(range(n)))


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class StreamAgainstReferenceTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        config = os.path.join(self.scratch.name, "reference.toml")
        with open(config, "w", encoding="utf-8") as file:
            file.write("[backend.cpu]\ndevices = 2\n")
        self.runtime = backplane.Runtime(plugin_paths=plugin_dirs(), config_file=config, ignore_environment=True,
                                         skip_default_paths=True)

    def tearDown(self):
        self.runtime.close()
        self.scratch.cleanup()

    def sources(self, lengths):
        """Token arrays whose token i of source j is j * 10000 + i."""
        return [self.runtime.array(numpy.arange(length, dtype=numpy.int32) + 10_000 * source, device="cpu:0")
                for source, length in enumerate(lengths)]

    def check(self, lengths, context, batch_size, steps, world_size=1, seed=0, weights=None, batches=3):
        reference = Reference(lengths, context, batch_size, world_size, seed, weights)
        arrays = self.sources(lengths)
        for rank in range(world_size):
            with self.subTest(rank=rank):
                stream = backplane.batches(arrays, batch_size, context, device="cpu:0", seed=seed, rank=rank,
                                           world_size=world_size, weights=weights)
                for step in steps:
                    expected = reference.windows(step, rank)
                    self.assertEqual([tuple(window) for window in stream.windows(step)], expected, f"step {step}")
                # What the batches hold: the reference's windows' tokens.
                for step in range(batches):
                    x, y = next(stream)
                    for (source, start), row_x, row_y in zip(reference.windows(step, rank), x, y):
                        first = 10_000 * source + start
                        self.assertEqual(row_x.tolist(), list(range(first, first + context)))
                        self.assertEqual(row_y.tolist(), list(range(first + 1, first + context + 1)))
                stream.close()

    def test_one_source_across_epochs(self):
        # N = 984 starts, G = 8: 123 steps per epoch; steps on both sides of
        # two epoch boundaries and one far away.
        self.check([1000], 16, 8, steps=[0, 1, 2, 122, 123, 124, 245, 246, 1_000_000])

    def test_several_sources_one_without_a_window(self):
        # The middle source is shorter than a window: it has no starts, and the
        # later source's starts follow the first's.
        self.check([500, 10, 800], 16, 6, steps=[0, 1, 2, 3, 100, 207, 208, 5_000_000], seed=99)

    def test_ranks_take_their_slice_of_the_global_batch(self):
        self.check([3000, 2000], 32, 4, steps=[0, 1, 17, 9_999], world_size=3, seed=2**64 - 1)

    def test_weighted_sources(self):
        self.check([2000, 700, 1500], 8, 5, steps=[0, 1, 2, 3, 4, 138, 139, 140, 2_000_000], seed=11,
                   weights=[0.5, 0.2, 0.3])

    def test_a_source_of_weight_zero_is_never_drawn(self):
        self.check([900, 900, 900], 8, 4, steps=[0, 1, 2, 50, 51, 52], seed=5, weights=[0.7, 0.3, 0.0],
                   world_size=2)

    def test_a_single_window_start(self):
        self.check([17], 16, 1, steps=[0, 1, 2, 12345])


MARKER = 7  # the document marker of the document tests; no other token equals it


def documented_tokens(length, seed, marker=MARKER, mean=40):
    """int32 tokens i + 100 (source-unique, never the marker) with the marker
    at the first token of each document; documents of random lengths around
    `mean` (some shorter than a window, some longer)."""
    generator = numpy.random.default_rng(seed)
    tokens = numpy.arange(length, dtype=numpy.int32) + 100 + 1_000_000 * seed
    position = 0
    while position < length:
        tokens[position] = marker
        position += int(generator.integers(1, 2 * mean))
    return tokens


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class DocumentsAgainstReferenceTest(unittest.TestCase):
    """Document-aligned windows and their pieces against the reference."""

    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        config = os.path.join(self.scratch.name, "reference.toml")
        with open(config, "w", encoding="utf-8") as file:
            file.write("[backend.cpu]\ndevices = 2\n")
        self.runtime = backplane.Runtime(plugin_paths=plugin_dirs(), config_file=config, ignore_environment=True,
                                         skip_default_paths=True)

    def tearDown(self):
        self.runtime.close()
        self.scratch.cleanup()

    def check(self, tokens, starts, documents, context, batch_size, steps, world_size=1, seed=0, weights=None,
              max_documents=0, devices=("cpu:0",), batches=4):
        """The stream over `tokens` (a list of int32 arrays) with `documents`
        draws the reference's windows at `steps` (its windows(step)) and
        hands out, for the first `batches` steps, those windows' tokens with
        the reference's pieces per device. `starts`: each source's document
        starts, as the test computes them."""
        lengths = [len(source) for source in tokens]
        reference = Reference(lengths, context, batch_size, world_size, seed, weights, documents=starts)
        arrays = [self.runtime.array(source, device="cpu:0") for source in tokens]
        rows = batch_size // len(devices)
        for rank in range(world_size):
            with self.subTest(rank=rank), backplane.batches(
                    arrays, batch_size, context, device=list(devices), seed=seed, rank=rank,
                    world_size=world_size, weights=weights, documents=documents,
                    max_documents=max_documents) as stream:
                for step in steps:
                    expected = reference.windows(step, rank)
                    self.assertEqual([tuple(window) for window in stream.windows(step)], expected, f"step {step}")
                    self.assertTrue(all(start in starts[source] for source, start in expected))
                for step in range(batches):
                    windows = reference.windows(step, rank)
                    for device, (x, y, docs) in enumerate(next(stream)):
                        mine = windows[device * rows:(device + 1) * rows]
                        for (source, start), row_x, row_y in zip(mine, x, y):
                            self.assertEqual(row_x.tolist(), tokens[source][start:start + context].tolist())
                            self.assertEqual(row_y.tolist(), tokens[source][start + 1:start + context + 1].tolist())
                        cu_seqlens, position_ids, max_seqlen = pieces(mine, starts, context, max_documents)
                        self.assertEqual(docs.cu_seqlens.dtype, numpy.int32)
                        self.assertEqual(docs.position_ids.dtype, numpy.int32)
                        self.assertEqual(docs.cu_seqlens.tolist(), cu_seqlens, f"step {step} device {device}")
                        self.assertEqual(docs.position_ids.tolist(), position_ids, f"step {step} device {device}")
                        self.assertEqual(docs.max_seqlen, max_seqlen)
                        self.assertIs(type(docs.max_seqlen), int)

    def test_bos_one_source_across_epochs(self):
        tokens = [documented_tokens(3000, 1)]
        starts = [bos_starts(tokens[0], MARKER)]
        reference = Reference([3000], 16, 4, documents=starts)
        per_epoch = reference.total // 4
        self.check(tokens, starts, {"bos": MARKER}, 16, 4,
                   steps=[0, 1, per_epoch - 1, per_epoch, per_epoch + 1, 1_000_000])

    def test_eos_two_sources(self):
        tokens = [documented_tokens(2000, 2), documented_tokens(1500, 3, mean=10)]
        starts = [eos_starts(source, MARKER) for source in tokens]
        self.check(tokens, starts, {"eos": MARKER}, 24, 6, steps=[0, 1, 2, 50, 3_000_000], seed=9)

    def test_given_starts_with_weights(self):
        generator = numpy.random.default_rng(5)
        tokens = [numpy.arange(length, dtype=numpy.int32) + 1000 * index
                  for index, length in enumerate((1200, 900, 2500))]
        starts = [sorted({0, *generator.integers(1, len(source), size=count).tolist()})
                  for source, count in zip(tokens, (40, 30, 90))]
        given = [numpy.array(source_starts, dtype=numpy.int64) for source_starts in starts]
        given[1] = starts[1]  # a plain list works as well as an array
        self.check(tokens, starts, given, 16, 4, steps=[0, 1, 2, 3, 7, 500_000], seed=3, weights=[0.5, 0.2, 0.3])

    def test_ranks_and_devices_take_their_slices(self):
        tokens = [documented_tokens(4000, 4), documented_tokens(3000, 5)]
        starts = [bos_starts(source, MARKER) for source in tokens]
        self.check(tokens, starts, {"bos": MARKER}, 32, 4, steps=[0, 1, 17, 9_999], world_size=3, seed=2**64 - 1,
                   devices=("cpu:0", "cpu:1"))

    def test_fewer_pieces_than_max_documents_pad_cu_seqlens(self):
        # Documents longer than a window: mostly one or two pieces a row,
        # far fewer than 64, so cu_seqlens ends in 64 + 1 - pieces copies of rows * T.
        tokens = [documented_tokens(5000, 6, mean=200)]
        starts = [bos_starts(tokens[0], MARKER)]
        self.check(tokens, starts, {"bos": MARKER}, 32, 4, steps=[0, 1], max_documents=64)
        with backplane.batches([self.runtime.array(tokens[0], device="cpu:0")], 4, 32, device="cpu:0",
                               documents={"bos": MARKER}, max_documents=64, to="numpy") as stream:
            _, _, docs = next(stream)
            self.assertEqual(docs.cu_seqlens.shape, (65,))
            self.assertEqual(docs.cu_seqlens[-1], 4 * 32)
            self.assertEqual(docs.position_ids.shape, (4, 32))

    def test_more_pieces_than_max_documents_fail_naming_the_step(self):
        # Short documents: each row of 32 tokens holds several; with C = 5 a
        # batch of 2 rows overflows at the first step the reference says it does.
        tokens = [documented_tokens(3000, 7, mean=8)]
        starts = [bos_starts(tokens[0], MARKER)]
        reference = Reference([3000], 32, 2, documents=starts)
        counts = [len(pieces(reference.windows(step), starts, 32)[0]) - 1 for step in range(20)]
        failing = next(step for step, count in enumerate(counts) if count > 5)
        with backplane.batches([self.runtime.array(tokens[0], device="cpu:0")], 2, 32, device="cpu:0",
                               documents={"bos": MARKER}, max_documents=5) as stream:
            for step in range(failing):
                _, _, docs = next(stream)
                self.assertEqual(docs.cu_seqlens.tolist(), pieces(reference.windows(step), starts, 32, 5)[0])
            with self.assertRaises(backplane.OutOfRangeError) as caught:
                next(stream)
            message = caught.exception.message
            self.assertIn(f"step {failing}", message)
            self.assertIn(str(counts[failing]), message)
            self.assertIn("5", message)


if __name__ == "__main__":
    unittest.main()
