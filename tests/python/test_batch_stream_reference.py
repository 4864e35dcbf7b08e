"""The batch stream against a second implementation of its sampling, written
in pure Python from docs/batch-stream.md ("How windows are drawn",
"Schedules", "The state") and not from the library's code: Philox4x64-10
(checked against numpy.random.Philox and the guide's test vector), the keyed
Feistel permutation with cycle walking, segments and ordinals, the
unweighted epoch cursor, the golden-ratio deal of a weighted mixture with a
cursor per source, the per-sample rule of version 1 and 2 states, ranks.
The windows the stream reports (windows(step)) and the tokens it hands out
must both equal the reference's, bit for bit.

Each closed form of the guide (an unweighted cursor per segment, a source's
count of samples by a floor sum) is checked here against the guide's rules
walked one step or one sample at a time, without the library.

With documents the guide ("Documents") draws the same way over each source's
eligible document starts; the pieces each batch carries (cu_seqlens,
position_ids, max_seqlen) are computed here again from the windows and the
document starts alone."""
import bisect
import itertools
import json
import math
import os
import random as pyrandom
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


# --- the golden-ratio deal --------------------------------------------------------
TWO64 = 1 << 64
GOLDEN = 0x9E3779B97F4A7C15  # phi: 2^64 over the golden ratio, rounded down (odd)


def floor_sum(count, modulus, multiplier, offset):
    """sum over r < count of floor((multiplier * r + offset) / modulus), in
    exact integers, by the Euclid-like reduction: O(log) rounds. count >= 0,
    modulus >= 1, multiplier and offset >= 0."""
    total = 0
    while count > 0:
        if multiplier >= modulus:
            total += count * (count - 1) // 2 * (multiplier // modulus)
            multiplier %= modulus
        if offset >= modulus:
            total += count * (offset // modulus)
            offset %= modulus
        top = multiplier * count + offset
        if top < modulus:
            break
        count, offset = divmod(top, modulus)
        modulus, multiplier = multiplier, modulus
    return total


def golden_floor_sum(count, offset):
    """The guide's F(R, b) = sum over r < R of floor((r * phi + b) / 2^64)."""
    return floor_sum(count, TWO64, GOLDEN, offset)


def dealt_below(key, first, count, bound):
    """How many ordinals n of [first, first + count) have v_n < bound, where
    v_n = (n * phi + key) mod 2^64: the guide's closed form
    R - (F(R, beta + 2^64 - K) - F(R, beta)), beta = (a * phi + k) mod 2^64,
    in exact integers (beta + 2^64 - K is not reduced mod 2^64); each full
    period of 2^64 ordinals holds exactly K of them."""
    periods, count = divmod(count, TWO64)
    beta = (first * GOLDEN + key) % TWO64
    return periods * bound + count - (golden_floor_sum(count, beta + TWO64 - bound) - golden_floor_sum(count, beta))


def cumulative_weights(weights):
    """c_j = (w_0 + ... + w_j) / (w_0 + ... + w_{S-1}) in doubles, summed left
    to right; 1.0 exactly from the last source of positive weight on."""
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
    return cumulative


def weight_entries(weights):
    """None -> [] (unweighted); [w, ...] -> [(0, [w, ...])]; [(step, [w, ...]), ...] as given."""
    if not weights:
        return []
    if all(isinstance(weight, (int, float)) for weight in weights):
        return [(0, [float(weight) for weight in weights])]
    return [(int(step), [float(weight) for weight in entry]) for step, entry in weights]


class Segment:
    """A run of steps [begin, end) (end None: the last, endless) with one
    batch size B (per rank), one G = B x world_size, one T and, weighted,
    one set of weights; `ordinal` is O_m, the samples of every step before it."""

    def __init__(self, begin, batch_size, global_batch, context, weights, ordinal, counts):
        self.begin, self.end = begin, None
        self.batch_size, self.global_batch, self.context = batch_size, global_batch, context
        self.weights = weights
        self.ordinal = ordinal
        self.counts = counts  # N_j for this T
        self.total = sum(counts)  # N
        self.firsts = [sum(counts[:index]) for index in range(len(counts))]  # C_j
        self.cumulative = None if weights is None else cumulative_weights(weights)  # c_j
        # K_{j-1}, K_j of source j are bounds[j], bounds[j + 1] (K_{-1} = 0).
        self.bounds = None if weights is None else [0] + [int(c * 2.0**64) for c in self.cumulative]

    def end_ordinal(self):
        return None if self.end is None else self.ordinal + (self.end - self.begin) * self.global_batch


class Reference:
    """The windows of the guide's algorithm for one stream's parameters.

    schedule: entries (step, batch_size per rank, context), steps strictly
    increasing from 0. weights: None (unweighted), [w, ...] or entries
    (step, [w, ...]), steps strictly increasing from 0. documents: each
    source's document starts (windows then start at the ones whose window
    fits). mixture: "interleaved" (the golden-ratio deal with per-source
    cursors) or "per_sample" (the rule of version 1 and 2 states; one
    segment only). Every count is an exact Python integer."""

    def __init__(self, lengths, schedule, world_size=1, seed=0, weights=None, documents=None,
                 mixture="interleaved"):
        if mixture not in ("interleaved", "per_sample"):
            raise ValueError(f"mixture {mixture!r}")
        self.lengths = list(lengths)
        self.world_size = world_size
        self.seed = seed
        self.mixture = mixture
        self.documents = None if documents is None else [sorted(int(start) for start in starts)
                                                         for starts in documents]
        self.schedule = [(int(step), int(batch_size), int(context)) for step, batch_size, context in schedule]
        self.weight_schedule = weight_entries(weights)
        self.weighted = bool(self.weight_schedule)
        for name, steps in (("schedule", [entry[0] for entry in self.schedule]),
                            ("weights", [entry[0] for entry in self.weight_schedule])):
            if steps and (steps[0] != 0 or any(b <= a for a, b in zip(steps, steps[1:]))):
                raise ValueError(f"{name} steps must increase strictly from 0: {steps}")
        if not self.schedule:
            raise ValueError("an empty schedule")
        # Segments start wherever an entry of either schedule starts.
        begins = sorted({entry[0] for entry in self.schedule} | {entry[0] for entry in self.weight_schedule})
        self.segments, ordinal = [], 0
        for index, begin in enumerate(begins):
            _, batch_size, context = [entry for entry in self.schedule if entry[0] <= begin][-1]
            weights_now = ([entry for entry in self.weight_schedule if entry[0] <= begin][-1][1]
                           if self.weighted else None)
            segment = Segment(begin, batch_size, batch_size * world_size, context, weights_now, ordinal,
                              self.counts(context))
            if index + 1 < len(begins):
                segment.end = begins[index + 1]
                ordinal += (segment.end - begin) * segment.global_batch
            self.segments.append(segment)
        self.begins = begins
        if self.weighted and mixture == "per_sample" and len(self.segments) > 1:
            raise ValueError("the per_sample mixture has one segment (no schedule, no weight schedule)")
        for segment in self.segments:  # what the stream refuses; here a mistake in a test's parameters
            g = segment.global_batch
            if not self.weighted and segment.total < g:
                raise ValueError(f"N = {segment.total} < G = {g} at step {segment.begin}")
            if self.weighted and any(w > 0 and n < g for w, n in zip(segment.weights, segment.counts)):
                raise ValueError(f"a source of positive weight has fewer than G = {g} starts at step {segment.begin}")
        self.deal_key = random(seed, 0, 0, 3, 0)  # k
        self.permutations = {}

    @classmethod
    def fixed(cls, lengths, context, batch_size, world_size=1, seed=0, weights=None, documents=None,
              mixture="interleaved"):
        """A stream without a schedule: one entry (0, batch_size, context)."""
        return cls(lengths, [(0, batch_size, context)], world_size, seed, weights, documents, mixture)

    # --- sources -------------------------------------------------------------
    def counts(self, context):
        """N_j for context T: max(0, L_j - T) starts, or with documents the
        document starts d with d + T + 1 <= L_j (a prefix of the sorted starts)."""
        if self.documents is None:
            return [max(0, length - context) for length in self.lengths]
        return [bisect.bisect_right(starts, length - context - 1)
                for starts, length in zip(self.documents, self.lengths)]

    def start(self, source, x):
        """The start that place x of source `source` names: x, or D_j[x]."""
        return x if self.documents is None else self.documents[source][x]

    def locate(self, segment, x):
        """(source, start) of place x of the unweighted permutation: source j
        with C_j <= x < C_{j+1}, place x - C_j."""
        for source, (first, count) in enumerate(zip(segment.firsts, segment.counts)):
            if x < first + count:
                return source, self.start(source, x - first)
        raise AssertionError("x outside [0, N)")

    def permutation(self, n, epoch, stream):
        key = (n, epoch, stream)
        if key not in self.permutations:
            if len(self.permutations) > 4096:
                self.permutations.clear()
            self.permutations[key] = Permutation(self.seed, n, epoch, stream)
        return self.permutations[key]

    # --- segments and ordinals -------------------------------------------------
    def segment_at(self, step):
        return self.segments[bisect.bisect_right(self.begins, step) - 1]

    def ordinal(self, step, index):
        """n = O_m + (s - b_m) x G_m + i."""
        segment = self.segment_at(step)
        return segment.ordinal + (step - segment.begin) * segment.global_batch + index

    # --- unweighted: the cursor (e, p) ------------------------------------------
    @staticmethod
    def advance(epoch, place, total, global_batch, offset):
        """The cursor of the step `offset` steps into a segment that starts
        with cursor (epoch, place) (after its context rule): the steps left
        in that epoch, then N / G steps an epoch."""
        left = max(0, (total - place) // global_batch)
        if offset < left:
            return epoch, place + offset * global_batch
        offset -= left
        per_epoch = total // global_batch
        return epoch + 1 + offset // per_epoch, (offset % per_epoch) * global_batch

    def cursor(self, step):
        """(e, p) that step `step` draws from, in closed form per segment."""
        epoch, place, previous = 0, 0, None
        for segment in self.segments:
            if previous is not None and segment.context != previous.context and place > 0:
                epoch, place = epoch + 1, 0
            last = step if segment.end is None or step < segment.end else segment.end - 1
            epoch, place = self.advance(epoch, place, segment.total, segment.global_batch, last - segment.begin)
            if last == step:
                return epoch, place
            place += segment.global_batch
            previous = segment
        raise AssertionError("unreachable")

    def cursor_walk(self, step):
        """The same cursor by the guide's rules 1-3, one step at a time."""
        epoch, place = 0, 0
        for s in range(step + 1):
            index = bisect.bisect_right(self.begins, s) - 1
            segment = self.segments[index]
            # 1. a context change ends the epoch
            if index > 0 and s == segment.begin and segment.context != self.segments[index - 1].context \
                    and place > 0:
                epoch, place = epoch + 1, 0
            # 2. a step that does not fit ends it
            if place + segment.global_batch > segment.total:
                epoch, place = epoch + 1, 0
            if s == step:
                return epoch, place
            # 3. the step takes G places
            place += segment.global_batch
        raise AssertionError("unreachable")

    # --- weighted, interleaved: the deal and each source's cursor (e_j, p_j) -----
    def source_of(self, segment, ordinal):
        """The first source j with v_n < K_j."""
        value = (ordinal * GOLDEN + self.deal_key) % TWO64
        return next(j for j in range(len(self.lengths)) if value < segment.bounds[j + 1])

    def dealt(self, segment, source, first, count):
        """How many of the ordinals [first, first + count) of `segment` go to
        `source`: those with K_{j-1} <= v_n < K_j, counted in closed form."""
        return (dealt_below(self.deal_key, first, count, segment.bounds[source + 1])
                - dealt_below(self.deal_key, first, count, segment.bounds[source]))

    def source_cursor(self, source, ordinal):
        """(e_j, p_j) of source j before the sample of ordinal `ordinal`: per
        segment, the context rule, then the segment's samples before it that
        went to j (closed form)."""
        epoch, place, previous = 0, 0, None
        for segment in self.segments:
            if segment.ordinal > ordinal:
                break
            if previous is not None and segment.context != previous.context and place > 0:
                epoch, place = epoch + 1, 0
            end = segment.end_ordinal()
            last = ordinal if end is None else min(ordinal, end)
            taken = self.dealt(segment, source, segment.ordinal, last - segment.ordinal)
            if taken:
                count = segment.counts[source]
                epoch, place = epoch + (place + taken) // count, (place + taken) % count
            previous = segment
        return epoch, place

    # --- the windows ---------------------------------------------------------------
    def sample(self, step, index):
        """(source, start) of sample `index` of global step `step`."""
        segment = self.segment_at(step)
        g = segment.global_batch
        if not self.weighted:
            epoch, place = self.cursor(step)
            return self.locate(segment, self.permutation(segment.total, epoch, 0)(place + index))
        if self.mixture == "per_sample":
            u = (random(self.seed, step, index, 2, 0) >> 11) * 2.0**-53
            source = next(j for j, bound in enumerate(segment.cumulative) if u < bound)
            n = segment.counts[source]
            steps_per_epoch = n // g
            epoch = step // steps_per_epoch
            place = (step % steps_per_epoch) * g + index
            return source, self.start(source, self.permutation(n, epoch, source + 1)(place))
        ordinal = self.ordinal(step, index)
        source = self.source_of(segment, ordinal)
        epoch, place = self.source_cursor(source, ordinal)
        return source, self.start(source, self.permutation(segment.counts[source], epoch, source + 1)(place))

    def global_windows(self, step):
        """All G samples of a step, every rank's, in order."""
        return [self.sample(step, index) for index in range(self.segment_at(step).global_batch)]

    def windows(self, step, rank=0):
        """This rank's windows: samples r x B ... r x B + B - 1, with this step's B."""
        batch_size = self.segment_at(step).batch_size
        first = rank * batch_size
        return [self.sample(step, index) for index in range(first, first + batch_size)]

    def walk(self, steps):
        """The windows of global steps 0 ... steps - 1 (every rank's) and the
        cursors they drew from, by the guide's rules taken one sample at a
        time in ordinal order: the check of the closed forms. Returns
        (windows per step, cursor per step) where a cursor is (e, p) when
        unweighted, else the list of (e_j, p_j) before each sample."""
        if self.weighted and self.mixture == "per_sample":
            raise ValueError("the per_sample rule is a closed form already")
        drawn, cursors = [], []
        if not self.weighted:
            epoch, place = 0, 0
            for step in range(steps):
                index = bisect.bisect_right(self.begins, step) - 1
                segment = self.segments[index]
                if index > 0 and step == segment.begin and segment.context != self.segments[index - 1].context \
                        and place > 0:
                    epoch, place = epoch + 1, 0
                if place + segment.global_batch > segment.total:
                    epoch, place = epoch + 1, 0
                permutation = self.permutation(segment.total, epoch, 0)
                drawn.append([self.locate(segment, permutation(place + i)) for i in range(segment.global_batch)])
                cursors.append((epoch, place))
                place += segment.global_batch
            return drawn, cursors
        sources = len(self.lengths)
        state = [(0, 0)] * sources
        ordinal = 0  # counted here, not by the formula
        for step in range(steps):
            index = bisect.bisect_right(self.begins, step) - 1
            segment = self.segments[index]
            if index > 0 and step == segment.begin and segment.context != self.segments[index - 1].context:
                state = [(epoch + 1, 0) if place > 0 else (epoch, place) for epoch, place in state]
            row, row_cursors = [], []
            for _ in range(segment.global_batch):
                value = (ordinal * GOLDEN + self.deal_key) % TWO64
                source = 0
                while not value < segment.bounds[source + 1]:
                    source += 1
                epoch, place = state[source]
                row_cursors.append(list(state))
                x = self.permutation(segment.counts[source], epoch, source + 1)(place)
                row.append((source, self.start(source, x)))
                place += 1
                state[source] = (epoch + 1, 0) if place == segment.counts[source] else (epoch, place)
                ordinal += 1
            drawn.append(row)
            cursors.append(row_cursors)
        return drawn, cursors


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


HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.environ.get("BACKPLANE_TEST_SOURCE_DIR") or os.path.join(HERE, "..", ".."), "tests",
                        "batches")


def random_reference(generator, weighted, documents):
    """A small random stream for the walk-against-closed-form checks: 1-4
    sources of 30-200 tokens (so N_j is small and epochs, the whole one and
    each source's, turn within a few steps, often inside one), 1-3 ranks, a
    schedule of 1-4 entries (G and T change), and when weighted 1-4 weight
    entries (or one plain list) with zeros among them. None when no draw of
    parameters is a valid stream."""
    sources = generator.randint(1, 4)
    lengths = [generator.randint(30, 200) for _ in range(sources)]
    starts = None
    if documents:
        starts = [sorted({0, *(generator.randrange(length) for _ in range(generator.randint(5, 40)))})
                  for length in lengths]
    for _ in range(100):
        schedule, step = [], 0
        for _ in range(generator.randint(1, 4)):
            schedule.append((step, generator.randint(1, 3), generator.randint(1, 20)))
            step += generator.randint(1, 12)
        weights = None
        if weighted:
            weights, step = [], 0
            for _ in range(generator.randint(1, 4)):
                entry = [generator.choice([0.0, generator.random(), 1.0]) for _ in range(sources)]
                if not any(entry):
                    entry[generator.randrange(sources)] = 0.5
                weights.append((step, entry))
                step += generator.randint(1, 12)
            if generator.random() < 0.25:
                weights = weights[0][1]  # a plain list: one entry
        try:
            return Reference(lengths, schedule, generator.randint(1, 3), generator.getrandbits(64), weights, starts)
        except ValueError:  # some source of positive weight (or the whole) has fewer than G starts
            continue
    return None


class ReferenceSelfTest(unittest.TestCase):
    """The reference's closed forms against the guide's rules walked one
    step (unweighted) or one sample (weighted) at a time; no library."""

    def test_floor_sum_against_its_definition(self):
        generator = pyrandom.Random(1)
        for _ in range(2000):
            count, modulus = generator.randrange(0, 60), generator.randrange(1, 50)
            multiplier, offset = generator.randrange(0, 200), generator.randrange(0, 200)
            self.assertEqual(floor_sum(count, modulus, multiplier, offset),
                             sum((multiplier * r + offset) // modulus for r in range(count)))

    def test_the_deal_count_against_counting_one_by_one(self):
        generator = pyrandom.Random(2)
        for _ in range(300):
            key = generator.getrandbits(64)
            first = generator.choice([generator.randrange(100), generator.getrandbits(64), generator.getrandbits(70)])
            count = generator.randrange(300)
            bound = generator.choice([0, TWO64, generator.getrandbits(64)])
            expected = sum(1 for n in range(first, first + count) if (n * GOLDEN + key) % TWO64 < bound)
            self.assertEqual(dealt_below(key, first, count, bound), expected)

    def test_each_period_of_2_64_ordinals_holds_exactly_k(self):
        # phi is odd, so n -> n * phi + k is a bijection mod 2^64. The
        # reference's period rule against the floor sum taken over R >= 2^64.
        generator = pyrandom.Random(3)
        for _ in range(50):
            key, first, bound = generator.getrandbits(64), generator.getrandbits(66), generator.getrandbits(64)
            count = generator.getrandbits(70)
            beta = (first * GOLDEN + key) % TWO64
            whole = count - (golden_floor_sum(count, beta + TWO64 - bound) - golden_floor_sum(count, beta))
            self.assertEqual(dealt_below(key, first, count, bound), whole)
            self.assertEqual(dealt_below(key, first, TWO64, bound), bound)
            self.assertEqual(dealt_below(key, first, 3 * TWO64 + 5, bound),
                             3 * bound + dealt_below(key, first, 5, bound))

    def check_walks(self, weighted, documents, cases, seed):
        generator = pyrandom.Random(seed)
        seen = {"segments": 0, "epoch turns": 0, "context changes with places taken": 0}
        checked = 0
        while checked < cases:
            reference = random_reference(generator, weighted, documents)
            if reference is None:
                continue
            checked += 1
            steps = 30
            drawn, cursors = reference.walk(steps)
            seen["segments"] += len(reference.segments) > 1
            for step in range(steps):
                if not weighted:
                    self.assertEqual(reference.cursor(step), cursors[step])
                    self.assertEqual(reference.cursor_walk(step), cursors[step])
                    seen["epoch turns"] += step > 0 and cursors[step][0] > cursors[step - 1][0]
                else:
                    for index, before in enumerate(cursors[step]):
                        ordinal = reference.ordinal(step, index)
                        for source, expected in enumerate(before):
                            self.assertEqual(reference.source_cursor(source, ordinal), expected,
                                             f"step {step} sample {index} source {source}")
                    after = cursors[step + 1][0] if step + 1 < steps else None
                    seen["epoch turns"] += after is not None and any(
                        b[0] > a[0] for a, b in zip(cursors[step][0], after))
                segment = reference.segment_at(step)
                if step == segment.begin and step > 0 and segment.context != reference.segment_at(step - 1).context:
                    seen["context changes with places taken"] += 1
                self.assertEqual(reference.global_windows(step), drawn[step], f"step {step}")
                # Ranks take consecutive slices of B, this step's B.
                self.assertEqual(sum((reference.windows(step, rank) for rank in range(reference.world_size)), []),
                                 drawn[step])
        for what, count in seen.items():  # the random cases reach every rule
            self.assertGreater(count, 0, what)

    def test_the_unweighted_cursor_in_closed_form_equals_the_walk(self):
        self.check_walks(weighted=False, documents=False, cases=40, seed=10)

    def test_the_interleaved_deal_in_closed_form_equals_the_walk(self):
        self.check_walks(weighted=True, documents=False, cases=20, seed=11)

    def test_with_documents_both_equal_their_walks(self):
        self.check_walks(weighted=False, documents=True, cases=12, seed=12)
        self.check_walks(weighted=True, documents=True, cases=10, seed=13)

    def test_ordinals_past_2_64(self):
        # A step far enough that its ordinals pass 2^64: the closed form
        # equals a walk started from the cursors the closed form gives for
        # the step before (the walk itself cannot get there).
        reference = Reference([300, 90, 500], [(0, 4, 8), (10, 6, 8)], 1, 77,
                              [(0, [0.3, 0.2, 0.5]), (20, [0.1, 0.4, 0.5])])
        step = 2**62 + 3
        self.assertGreater(reference.ordinal(step, 0), TWO64)
        segment = reference.segment_at(step)
        state = [reference.source_cursor(source, reference.ordinal(step, 0)) for source in range(3)]
        for index in range(segment.global_batch):
            ordinal = reference.ordinal(step, index)
            source = reference.source_of(segment, ordinal)
            self.assertEqual([reference.source_cursor(j, ordinal) for j in range(3)], state)
            epoch, place = state[source]
            x = reference.permutation(segment.counts[source], epoch, source + 1)(place)
            self.assertEqual(reference.sample(step, index), (source, x))
            place += 1
            state[source] = (epoch + 1, 0) if place == segment.counts[source] else (epoch, place)

    def test_the_per_sample_rule_reproduces_the_saved_fixtures(self):
        # tests/batches/state_v1 and state_v2 hold the windows streams of
        # versions 1 and 2 drew (weighted, without and with documents); the
        # guide's per-sample rule must give them again.
        lengths = [20000, 7000]
        for name, starts in (("state_v1", None), ("state_v2", [list(range(0, 20000, 37)), list(range(0, 7000, 23))])):
            with self.subTest(fixture=name), open(os.path.join(FIXTURES, name, "windows.json"),
                                                  encoding="utf-8") as file:
                fixture = json.load(file)
                options = fixture["options"]
                reference = Reference.fixed(lengths, options["context"], options["batch_size"], seed=options["seed"],
                                            weights=options["weights"], documents=starts, mixture="per_sample")
                for step, windows in fixture["windows"].items():
                    self.assertEqual([list(window) for window in reference.windows(int(step))], windows, step)


# The guide says the deal after R samples of a segment is within 3 of
# w_j / sum(w) x R, and a step's share within 2 of w_j / sum(w) x G. Measured
# with this reference (random weights, seeds and segment offsets) it is not:
# up to 4.2 after R <= 10^5 samples (4.5 up to 10^6), and up to 3.3 in one
# step (weights [1, 1, 1], seed 11, a segment starting at ordinal 777:
# source 1 has 29,905 of the first 89,726 samples, 3.67 short of its third).
# The golden-ratio sequence's error grows like log R. These bounds are the
# measured ones rounded up; see the report on the spec.
DEAL_SLACK = 5
STEP_SLACK = 4


class ReferencePropertiesTest(unittest.TestCase):
    """What the guide promises of its rules, held to the reference alone."""

    def test_an_epoch_across_batch_size_changes_repeats_no_start(self):
        # N = 292 + 142 = 434 starts; G goes 4 -> 6 -> 5 inside epoch 0 and later ones.
        reference = Reference([300, 150], [(0, 4, 8), (7, 6, 8), (20, 5, 8), (95, 7, 8)], seed=3)
        total = reference.segments[0].total
        epochs, step = {}, 0
        while len(epochs) < 5:
            epoch, _ = reference.cursor(step)
            epochs.setdefault(epoch, []).append(step)
            step += 1
        for epoch in range(4):
            steps = epochs[epoch]
            drawn = [window for s in steps for window in reference.global_windows(s)]
            self.assertEqual(len(set(drawn)), len(drawn), f"epoch {epoch}")  # no start repeats
            following = reference.segment_at(epochs[epoch + 1][0]).global_batch  # the step that did not fit
            self.assertLess(total - len(drawn), following, f"epoch {epoch}")  # fewer than G left out
            self.assertEqual(reference.cursor(epochs[epoch + 1][0]), (epoch + 1, 0))
        self.assertGreater(len(epochs[0]), 20)  # epoch 0 spans the first two changes

    def test_a_context_change_starts_a_new_epoch(self):
        reference = Reference([1500, 700], [(0, 4, 16), (3, 4, 32), (40, 6, 64)], seed=7)
        self.assertEqual(reference.cursor(2), (0, 8))
        self.assertEqual(reference.cursor(3), (1, 0))
        self.assertEqual(reference.cursor(39), (1, 36 * 4))
        self.assertEqual(reference.cursor(40), (2, 0))
        # With documents the starts that fit are a prefix that shrinks as T grows.
        starts = [list(range(0, 1500, 13)), list(range(5, 700, 7))]
        documented = Reference([1500, 700], [(0, 4, 16), (3, 4, 32), (40, 6, 64)], documents=starts)
        counts = [segment.counts for segment in documented.segments]
        self.assertEqual(counts, [[sum(1 for d in s if d + t + 1 <= n) for s, n in zip(starts, [1500, 700])]
                                  for t in (16, 32, 64)])
        self.assertTrue(all(a >= b for earlier, later in zip(counts, counts[1:]) for a, b in zip(earlier, later)))

    def test_each_source_visits_each_start_once_per_epoch_across_weight_changes(self):
        # Weights and G change mid-run (a source's weight drops to 0 and comes
        # back); each source's draws, in ordinal order, run through whole
        # epochs of distinct starts: its first N_j draws, its next N_j, ...
        lengths = [100, 60, 80]
        reference = Reference(lengths, [(0, 4, 8), (9, 7, 8), (70, 5, 8)], seed=21,
                              weights=[(0, [0.5, 0.2, 0.3]), (5, [0.1, 0.6, 0.3]), (30, [0.0, 1.0, 2.0]),
                                       (50, [1.0, 1.0, 1.0])])
        per_source = [[] for _ in lengths]
        for step in range(140):
            for source, start in reference.global_windows(step):
                per_source[source].append(start)
        for source, starts in enumerate(per_source):
            count = lengths[source] - 8
            self.assertGreaterEqual(len(starts), 2 * count, f"source {source}")  # epochs turn, some inside a step
            for epoch in range(len(starts) // count):
                drawn = starts[epoch * count:(epoch + 1) * count]
                self.assertEqual(sorted(drawn), list(range(count)), f"source {source} epoch {epoch}")

    def test_the_deal_gives_each_source_its_share(self):
        cases = [([0.5, 0.2, 0.3], 11, 0), ([0.7, 0.3, 0.0], 5, 777), ([1.0, 1.0, 1.0], 11, 777),
                 ([0.01, 0.99], 2**64 - 1, 2**70 + 5), ([3.0, 0.0, 1e-3, 5.0], 0, 2**64 - 3)]
        for weights, seed, first in cases:
            with self.subTest(weights=weights, seed=seed, first=first):
                reference = Reference([10**6] * len(weights), [(0, 1, 1)], seed=seed, weights=weights)
                segment = reference.segments[0]
                dealt = [reference.source_of(segment, first + r) for r in range(10**5)]
                counts = [dealt.count(j) for j in range(len(weights))]
                for j, weight in enumerate(weights):
                    share = weight / sum(weights)
                    running = list(itertools.accumulate(source == j for source in dealt))
                    # after R samples of the segment
                    self.assertLessEqual(max(abs(c - share * r) for r, c in enumerate(running, 1)), DEAL_SLACK)
                    # in each step of G = 64 from the segment's start
                    steps = [c - b for b, c in zip([0] + running[63::64], running[63::64])]
                    self.assertLessEqual(max(abs(c - share * 64) for c in steps), STEP_SLACK)
                    for r in (1, 9973, 65536, 10**5):  # the closed form counts the same
                        self.assertEqual(reference.dealt(segment, j, first, r), running[r - 1])
                self.assertEqual([c for c, w in zip(counts, weights) if w == 0], [0] * weights.count(0.0))


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

    def check_stream(self, stream, reference, rank, steps, batches, first=0):
        """The stream's windows at `steps` are the reference's, and its next
        `batches` batches (from global step `first`) are [B, T] of that
        step's B and T holding the reference's windows' tokens."""
        for step in steps:
            self.assertEqual([tuple(window) for window in stream.windows(step)], reference.windows(step, rank),
                             f"step {step}")
        for step in range(first, first + batches):
            x, y = next(stream)
            segment = reference.segment_at(step)
            self.assertEqual(tuple(x.shape), (segment.batch_size, segment.context), f"step {step}")
            self.assertEqual(tuple(y.shape), (segment.batch_size, segment.context), f"step {step}")
            for (source, start), row_x, row_y in zip(reference.windows(step, rank), x, y):
                token = 10_000 * source + start
                self.assertEqual(row_x.tolist(), list(range(token, token + segment.context)), f"step {step}")
                self.assertEqual(row_y.tolist(), list(range(token + 1, token + segment.context + 1)), f"step {step}")

    def check(self, lengths, context, batch_size, steps, world_size=1, seed=0, weights=None, batches=3):
        """A stream without a schedule (batch_size and context as before)."""
        reference = Reference.fixed(lengths, context, batch_size, world_size, seed, weights)
        arrays = self.sources(lengths)
        for rank in range(world_size):
            with self.subTest(rank=rank):
                stream = backplane.batches(arrays, batch_size, context, device="cpu:0", seed=seed, rank=rank,
                                           world_size=world_size, weights=weights)
                self.check_stream(stream, reference, rank, steps, batches)
                stream.close()

    def check_schedule(self, lengths, schedule, steps, world_size=1, seed=0, weights=None, batches=3):
        """A stream with `schedule` ((step, batch_size, context) entries) and
        `weights` (a list or (step, list) entries), on every rank."""
        reference = Reference(lengths, schedule, world_size, seed, weights)
        arrays = self.sources(lengths)
        for rank in range(world_size):
            with self.subTest(rank=rank):
                stream = backplane.batches(arrays, schedule=schedule, device="cpu:0", seed=seed, rank=rank,
                                           world_size=world_size, weights=weights)
                self.check_stream(stream, reference, rank, steps, batches)
                stream.close()
        return reference

    # --- one segment ----------------------------------------------------------------
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
        # The interleaved deal; at step 2^62 the ordinals pass 2^64.
        self.check([2000, 700, 1500], 8, 5, steps=[0, 1, 2, 3, 4, 138, 139, 140, 2_000_000, 2**62], seed=11,
                   weights=[0.5, 0.2, 0.3])

    def test_a_source_of_weight_zero_is_never_drawn(self):
        self.check([900, 900, 900], 8, 4, steps=[0, 1, 2, 50, 51, 52], seed=5, weights=[0.7, 0.3, 0.0],
                   world_size=2)
        reference = Reference.fixed([900, 900, 900], 8, 4, 2, 5, [0.7, 0.3, 0.0])
        self.assertTrue(all(source != 2 for step in range(300) for source, _ in reference.global_windows(step)))

    def test_a_single_window_start(self):
        self.check([17], 16, 1, steps=[0, 1, 2, 12345])

    # --- schedules ------------------------------------------------------------------
    def test_a_batch_size_change_keeps_the_epoch_going(self):
        # N = 184, G 4 for steps 0-2 (places 0-11), then 8: (184 - 12) / 8 =
        # 21 more steps end epoch 0 at step 23 (4 places left out); epoch 1
        # starts at step 24 and lasts 184 / 8 = 23 steps; at step 60 G drops
        # to 3 in the middle of epoch 2.
        schedule = [(0, 4, 16), (3, 8, 16), (60, 3, 16)]
        reference = Reference([200], schedule, seed=4)
        self.assertEqual(reference.cursor(23), (0, 12 + 20 * 8))
        self.assertEqual(reference.cursor(24), (1, 0))
        self.assertEqual(reference.cursor(47), (2, 0))
        self.assertEqual(reference.cursor(60), (2, 13 * 8))
        self.assertEqual(reference.cursor(61), (2, 13 * 8 + 3))
        turns = [step for step in range(61, 200) if reference.cursor(step)[0] != reference.cursor(step - 1)[0]]
        self.check_schedule([200], schedule, seed=4, batches=6,
                            steps=[0, 1, 2, 3, 4, 22, 23, 24, 25, 46, 47, 59, 60, 61] + turns[:2]
                            + [turn - 1 for turn in turns[:2]] + [1_000_000])

    def test_a_batch_size_change_over_two_sources(self):
        self.check_schedule([1000, 300], [(0, 2, 32), (2, 6, 32), (5, 1, 32)], seed=8, batches=7,
                            steps=[0, 1, 2, 3, 4, 5, 6, 100, 1_000_000])

    def test_a_context_change_ends_the_epoch(self):
        # T 16 -> 32 at step 3 and -> 64 at step 40 (with G 4 -> 6): each
        # change starts a new permutation of the new N starts.
        schedule = [(0, 4, 16), (3, 4, 32), (40, 6, 64)]
        reference = Reference([1500, 700], schedule, seed=7)
        self.assertEqual([reference.cursor(step) for step in (2, 3, 4, 39, 40, 41)],
                         [(0, 8), (1, 0), (1, 4), (1, 144), (2, 0), (2, 6)])
        per_epoch = reference.segments[2].total // 6
        self.check_schedule([1500, 700], schedule, seed=7, batches=5,
                            steps=[0, 1, 2, 3, 4, 38, 39, 40, 41, 40 + per_epoch - 1, 40 + per_epoch, 2_000_000])

    def test_a_weight_schedule_with_three_sources(self):
        # Source 1 has N_1 = 52 starts: its epochs turn every ~52 of its
        # samples, some inside a step. Weights with a zero; G changes at 6.
        lengths = [2000, 60, 1500]
        schedule = [(0, 5, 8), (6, 7, 8)]
        weights = [(0, [0.5, 0.2, 0.3]), (4, [0.1, 0.0, 0.9]), (9, [1.0, 1.0, 1.0]), (30, [0.2, 0.5, 0.3])]
        reference = Reference(lengths, schedule, seed=11, weights=weights)
        turning = [step for step in range(9, 400)
                   if reference.source_cursor(1, reference.ordinal(step + 1, 0))[0]
                   > reference.source_cursor(1, reference.ordinal(step, 0))[0]
                   and reference.source_cursor(1, reference.ordinal(step + 1, 0))[1] > 0][:3]
        self.assertTrue(turning)  # source 1's epoch turns inside these steps
        self.check_schedule(lengths, schedule, seed=11, weights=weights, batches=12,
                            steps=list(range(13)) + [29, 30, 31] + turning + [2_000_000, 2**62])

    def test_ranks_take_their_slices_of_a_schedule(self):
        schedule = [(0, 2, 16), (5, 4, 16), (9, 4, 32)]
        steps = [0, 4, 5, 8, 9, 10, 9_999]
        self.check_schedule([3000, 2000], schedule, steps=steps, world_size=3, seed=2**64 - 1, batches=11)
        self.check_schedule([3000, 2000], schedule, steps=steps, world_size=3, seed=2**64 - 1, batches=11,
                            weights=[(0, [0.3, 0.7]), (7, [0.8, 0.2])])

    # --- the state --------------------------------------------------------------------
    def test_a_version_2_state_with_weights_keeps_the_per_sample_rule(self):
        lengths, weights, seed = [2000, 700, 1500], [0.5, 0.2, 0.3], 11
        arrays = self.sources(lengths)
        with backplane.batches(arrays, 5, 8, device="cpu:0", seed=seed, weights=weights) as fresh:
            state = fresh.state_dict()
            self.assertEqual(state["version"], 3)
            self.assertEqual(state["mixture"], "interleaved")
            sources = state["sources"]
        saved = {"format": "backplane.batch_stream", "version": 2, "seed": seed, "step": 3, "global_batch": 5,
                 "context": 8, "weights": weights, "sources": sources, "documents": None}
        legacy = Reference.fixed(lengths, 8, 5, seed=seed, weights=weights, mixture="per_sample")
        interleaved = Reference.fixed(lengths, 8, 5, seed=seed, weights=weights)
        self.assertNotEqual([legacy.windows(step) for step in range(3, 8)],
                            [interleaved.windows(step) for step in range(3, 8)])
        with backplane.batches(arrays, 5, 8, device="cpu:0", weights=weights, state=saved) as stream:
            self.assertEqual(stream.step, 3)
            state = stream.state_dict()
            self.assertEqual((state["version"], state["mixture"], state["step"]), (3, "per_sample", 3))
            self.check_stream(stream, legacy, 0, [3, 4, 5, 100, 139, 140, 2_000_000], batches=4, first=3)
            # Its state resumes the per-sample rule again.
            again = stream.state_dict()
        with backplane.batches(arrays, 5, 8, device="cpu:0", weights=weights, state=again) as stream:
            self.assertEqual(stream.step, 7)
            self.check_stream(stream, legacy, 0, [7, 8, 1000], batches=2, first=7)
        # Ranks of a resumed legacy stream share its global batch (G = 5 x 1).
        for rank in range(5):
            with backplane.batches(arrays, 1, 8, device="cpu:0", weights=weights, state=saved, rank=rank,
                                   world_size=5) as stream:
                self.assertEqual([tuple(window) for window in stream.windows(9)], legacy.windows(9)[rank:rank + 1])
        # With no per-source places to carry, it refuses a schedule and a weight schedule.
        with self.assertRaises(backplane.InvalidArgumentError):
            backplane.batches(arrays, schedule=[(0, 5, 8), (10, 10, 8)], device="cpu:0", weights=weights,
                              state=saved)
        with self.assertRaises(backplane.InvalidArgumentError):
            backplane.batches(arrays, 5, 8, device="cpu:0", weights=[(0, weights), (10, [0.1, 0.1, 0.8])],
                              state=saved)

    def test_resume_inside_a_schedule(self):
        lengths, seed = [2000, 700, 1500], 5
        schedule = [(0, 3, 16), (4, 5, 16), (8, 5, 24), (12, 2, 24)]
        weights = [(0, [0.5, 0.2, 0.3]), (6, [0.2, 0.0, 0.8])]
        reference = Reference(lengths, schedule, seed=seed, weights=weights)
        arrays = self.sources(lengths)
        saved = {}
        with backplane.batches(arrays, schedule=schedule, device="cpu:0", seed=seed, weights=weights) as stream:
            for step in range(14):
                if step in (0, 2, 4, 7, 8, 13):
                    saved[step] = stream.state_dict()
                next(stream)
        for step, state in saved.items():
            with self.subTest(step=step):
                self.assertEqual(state["version"], 3)
                self.assertEqual(state["step"], step)
                self.assertEqual((state["global_batch"], state["context"]), (3, 16))
                self.assertEqual(state["weights"], [0.5, 0.2, 0.3])
                self.assertEqual(state["schedule"], [[4, 5, 16], [8, 5, 24], [12, 2, 24]])
                self.assertEqual(state["weight_schedule"], [[6, [0.2, 0.0, 0.8]]])
                self.assertEqual(state["mixture"], "interleaved")
                with backplane.batches(arrays, schedule=schedule, device="cpu:0", weights=weights,
                                       state=json.loads(json.dumps(state))) as resumed:
                    self.assertEqual(resumed.step, step)
                    self.check_stream(resumed, reference, 0, [step, step + 1, step + 5, 1000, 3_000_000], batches=3,
                                      first=step)
        # Entries after the saved step may differ: the resumed stream draws
        # by its own plan from there on.
        later_schedule = [(0, 3, 16), (4, 5, 16), (8, 5, 24), (10, 4, 40)]
        later_weights = [(0, [0.5, 0.2, 0.3]), (6, [0.2, 0.0, 0.8]), (11, [1.0, 1.0, 1.0])]
        extended = Reference(lengths, later_schedule, seed=seed, weights=later_weights)
        with backplane.batches(arrays, schedule=later_schedule, device="cpu:0", weights=later_weights,
                               state=saved[8]) as resumed:
            self.check_stream(resumed, extended, 0, [8, 9, 10, 11, 12, 500], batches=5, first=8)
        # An entry at or before it may not.
        with self.assertRaises(backplane.InvalidArgumentError):
            backplane.batches(arrays, schedule=[(0, 3, 16), (4, 5, 16), (7, 5, 24)], device="cpu:0",
                              weights=weights, state=saved[8])
        with self.assertRaises(backplane.InvalidArgumentError):
            backplane.batches(arrays, schedule=schedule, device="cpu:0", weights=[(0, [0.5, 0.2, 0.3])],
                              state=saved[8])

    def test_an_elastic_resume_inside_a_schedule(self):
        # Two ranks, then one with every batch size doubled: rank 0 of the
        # new run takes, at each step, rank 0's windows then rank 1's.
        lengths, seed = [2500, 900], 13
        weights = [(0, [0.6, 0.4]), (6, [0.2, 0.8])]
        two = [(0, 3, 16), (4, 5, 16), (8, 5, 24)]
        one = [(step, 2 * batch_size, context) for step, batch_size, context in two]
        arrays = self.sources(lengths)
        old = [backplane.batches(arrays, schedule=two, device="cpu:0", seed=seed, weights=weights, rank=rank,
                                 world_size=2) for rank in range(2)]
        for _ in range(5):
            for stream in old:
                next(stream)
        state = old[1].state_dict()
        self.assertEqual(state["schedule"], [[4, 10, 16], [8, 10, 24]])  # global batches
        reference = Reference(lengths, one, seed=seed, weights=weights)
        with backplane.batches(arrays, schedule=one, device="cpu:0", weights=weights, state=state) as new:
            for step in range(5, 13):
                union = old[0].windows(step) + old[1].windows(step)
                mine = new.windows(step)
                self.assertEqual([tuple(window) for window in mine], [tuple(window) for window in union],
                                 f"step {step}")
                self.assertEqual([tuple(window) for window in mine], reference.windows(step))
            for step in range(5, 12):
                x, _ = next(new)
                halves = [next(stream)[0] for stream in old]
                self.assertEqual(x.tolist(), halves[0].tolist() + halves[1].tolist(), f"step {step}")
        for stream in old:
            stream.close()


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
              max_documents=0, devices=("cpu:0",), batches=4, schedule=None):
        """The stream over `tokens` (a list of int32 arrays) with `documents`
        draws the reference's windows at `steps` (its windows(step)) and
        hands out, for the first `batches` steps, those windows' tokens with
        the reference's pieces per device. `starts`: each source's document
        starts, as the test computes them. With `schedule` ((step,
        batch_size, context) entries), context and batch_size are None and
        each step has its entry's; cu_seqlens then has, by default, the
        largest rows x context of all entries + 1 entries."""
        lengths = [len(source) for source in tokens]
        entries = schedule or [(0, batch_size, context)]
        reference = Reference(lengths, entries, world_size, seed, weights, documents=starts)
        arrays = [self.runtime.array(source, device="cpu:0") for source in tokens]
        sizes = dict(schedule=schedule) if schedule else dict(batch_size=batch_size, context=context)
        limit = max_documents or max(entry[1] // len(devices) * entry[2] for entry in entries)
        for rank in range(world_size):
            with self.subTest(rank=rank), backplane.batches(
                    arrays, device=list(devices), seed=seed, rank=rank, world_size=world_size, weights=weights,
                    documents=documents, max_documents=max_documents, **sizes) as stream:
                for step in steps:
                    expected = reference.windows(step, rank)
                    self.assertEqual([tuple(window) for window in stream.windows(step)], expected, f"step {step}")
                    window = reference.segment_at(step).context + 1
                    self.assertTrue(all(start in starts[source] and start + window <= lengths[source]
                                        for source, start in expected))
                for step in range(batches):
                    windows = reference.windows(step, rank)
                    segment = reference.segment_at(step)
                    rows, width = segment.batch_size // len(devices), segment.context
                    for device, (x, y, docs) in enumerate(next(stream)):
                        self.assertEqual(tuple(x.shape), (rows, width), f"step {step} device {device}")
                        mine = windows[device * rows:(device + 1) * rows]
                        for (source, start), row_x, row_y in zip(mine, x, y):
                            self.assertEqual(row_x.tolist(), tokens[source][start:start + width].tolist())
                            self.assertEqual(row_y.tolist(), tokens[source][start + 1:start + width + 1].tolist())
                        cu_seqlens, position_ids, max_seqlen = pieces(mine, starts, width, limit)
                        self.assertEqual(docs.cu_seqlens.dtype, numpy.int32)
                        self.assertEqual(docs.position_ids.dtype, numpy.int32)
                        self.assertEqual(docs.cu_seqlens.tolist(), cu_seqlens, f"step {step} device {device}")
                        self.assertEqual(docs.position_ids.tolist(), position_ids, f"step {step} device {device}")
                        self.assertEqual(docs.max_seqlen, max_seqlen)
                        self.assertIs(type(docs.max_seqlen), int)

    def test_bos_one_source_across_epochs(self):
        tokens = [documented_tokens(3000, 1)]
        starts = [bos_starts(tokens[0], MARKER)]
        reference = Reference.fixed([3000], 16, 4, documents=starts)
        per_epoch = reference.segments[0].total // 4
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

    def test_bos_with_a_context_change(self):
        # T 16 -> 48 -> 96: each change ends the epoch, and the starts whose
        # window fits shrink to a prefix; rows 2, 2, 1 on two devices.
        tokens = [documented_tokens(4000, 8), documented_tokens(2500, 9)]
        starts = [bos_starts(source, MARKER) for source in tokens]
        schedule = [(0, 4, 16), (3, 4, 48), (6, 2, 96)]
        reference = Reference([4000, 2500], schedule, documents=starts)
        self.assertEqual([reference.cursor(step) for step in (2, 3, 5, 6)], [(0, 8), (1, 0), (1, 8), (2, 0)])
        self.check(tokens, starts, {"bos": MARKER}, None, None, schedule=schedule, devices=("cpu:0", "cpu:1"),
                   batches=8, steps=[0, 1, 2, 3, 4, 5, 6, 7, 1000, 1_000_000], seed=17)
        self.check(tokens, starts, {"bos": MARKER}, None, None, schedule=schedule, devices=("cpu:0", "cpu:1"),
                   batches=8, steps=[0, 2, 3, 5, 6, 7, 1000, 1_000_000], seed=17,
                   weights=[(0, [0.5, 0.5]), (4, [0.9, 0.1])])

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
        reference = Reference.fixed([3000], 32, 2, documents=starts)
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
