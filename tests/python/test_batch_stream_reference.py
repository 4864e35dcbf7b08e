"""The batch stream held to the reference implementation of its sampling
(batch_stream_reference.py, written from docs/batch-stream.md and not from
the library's code): the windows the stream reports (windows(step)) and the
tokens it hands out must both equal the reference's, bit for bit, across
schedules, weight schedules, ranks, resumes (elastic ones and those of a
version 2 state) and documents, whose pieces (cu_seqlens, position_ids,
max_seqlen) are computed again from the windows and the starts alone."""
import json
import os
import tempfile
import unittest

import backplane
from batch_stream_reference import Reference, bos_starts, eos_starts, pieces
from support import optional_module, plugin_dirs

numpy = optional_module("numpy")


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
