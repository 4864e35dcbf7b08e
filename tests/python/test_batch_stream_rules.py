"""The reference implementation of the batch stream's sampling
(batch_stream_reference.py) held to the guide without the library: Philox
against NumPy's and the guide's test vector, the permutation a bijection,
each closed form against its rule walked one step or one sample at a time,
the floor sum against its definition, the epoch and mixture properties the
guide promises, and the per-sample rule against the windows the version 1
and 2 fixtures saved."""
import itertools
import json
import os
import random as pyrandom
import unittest

from batch_stream_reference import (GOLDEN, TWO64, Permutation, Reference, dealt_below, floor_sum, golden_floor_sum,
                                    philox)
from support import optional_module

numpy = optional_module("numpy")


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


if __name__ == "__main__":
    unittest.main()
