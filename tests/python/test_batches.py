"""backplane.batches(): the training loop's data path over the library's
batch stream: batches against the windows the stream reports, resuming (in
this process and in another), elastic resume across world sizes, weighted
sources, statistics, allocation-free steady state, and every refused
argument, refused when batches() is called."""
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import unittest

import backplane
from support import optional_module, plugin_dirs

numpy = optional_module("numpy")
torch = optional_module("torch")

TOKENS = 10_000
SECOND_BASE = 20_000  # the second source's tokens are SECOND_BASE + i: a row names its source


def runtime_with_cpu_devices(directory, devices):
    config = os.path.join(directory, "batches.toml")
    with open(config, "w", encoding="utf-8") as file:
        file.write(f"[backend.cpu]\ndevices = {devices}\n")
    return backplane.Runtime(plugin_paths=plugin_dirs(), config_file=config, ignore_environment=True,
                             skip_default_paths=True)


def starts_of(x):
    """The first token of each row: with tokens 0, 1, 2, ... its start."""
    return [int(row[0]) for row in x]


# What a process resuming from a saved state runs: the same runtime and
# tokens, the state from stdin, the batches' rows as JSON on stdout.
RESUME_SCRIPT = """
import json, os, sys, tempfile
import numpy
import backplane
sys.path.insert(0, sys.argv[1])
from test_batches import TOKENS, runtime_with_cpu_devices
state = json.loads(sys.stdin.read())
with tempfile.TemporaryDirectory() as scratch:
    runtime = runtime_with_cpu_devices(scratch, 2)
    tokens = runtime.array(numpy.arange(TOKENS, dtype=numpy.uint16), device="cpu:0")
    stream = backplane.batches(tokens, 4, 16, device="cpu:0", state=state, steps=int(sys.argv[2]))
    print(json.dumps([x.tolist() for x, _ in stream]))
    stream.close()
    runtime.close()
"""


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class BatchesTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        self.runtime = runtime_with_cpu_devices(self.scratch.name, 2)
        self.values = numpy.arange(TOKENS, dtype=numpy.uint16)
        self.tokens = self.runtime.array(self.values, device="cpu:0")

    def tearDown(self):
        self.runtime.close()
        self.scratch.cleanup()

    def stream(self, batch_size=4, context=16, **options):
        options.setdefault("device", "cpu:0")
        return backplane.batches(self.tokens, batch_size, context, **options)

    def take(self, count, **options):
        return list(self.stream(steps=count, **options))

    def test_x_and_y_are_windows_shifted_by_one_token(self):
        for x, y in self.take(5):
            self.assertEqual(x.shape, (4, 16))
            self.assertEqual(y.shape, (4, 16))
            self.assertEqual(x.dtype, numpy.int64)
            for row_x, row_y in zip(x, y):
                start = int(row_x[0])
                self.assertEqual(row_x.tolist(), self.values[start:start + 16].tolist())
                self.assertEqual(row_y.tolist(), self.values[start + 1:start + 17].tolist())

    def test_the_batches_hold_the_windows_the_stream_reports(self):
        stream = self.stream(seed=4)
        for step in range(6):
            expected = stream.windows(step)
            self.assertEqual(len(expected), 4)
            self.assertEqual(stream.step, step)
            x, _ = next(stream)
            self.assertEqual([backplane.Window(0, start) for start in starts_of(x)], expected)
            self.assertEqual(len(set(expected)), 4)  # the windows of a step are distinct
        self.assertEqual(stream.windows(2), stream.windows(2))
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            stream.windows(-1)
        self.assertIn("step must be an int >= 0, got -1", caught.exception.message)

    def test_a_seed_gives_the_same_stream_and_another_seed_another(self):
        first = [x.tolist() for x, _ in self.take(4, seed=7)]
        again = [x.tolist() for x, _ in self.take(4, seed=7)]
        other = [x.tolist() for x, _ in self.take(4, seed=8)]
        self.assertEqual(first, again)
        self.assertNotEqual(first, other)
        self.assertEqual([x.tolist() for x, _ in self.take(4)], [x.tolist() for x, _ in self.take(4, seed=0)])

    def test_prefetch_depth_and_threads_do_not_change_the_stream(self):
        shallow = [x.tolist() for x, _ in self.take(6, prefetch=1, threads=1)]
        deep = [x.tolist() for x, _ in self.take(6, prefetch=4, threads=3)]
        self.assertEqual(shallow, deep)

    def test_steps_bounds_the_global_step(self):
        self.assertEqual(len(self.take(0)), 0)
        self.assertEqual(len(self.take(3)), 3)
        stream = self.stream(steps=5)
        next(stream)
        next(stream)
        # Resumed at step 2 with the same bound: the three steps left.
        self.assertEqual(len(list(self.stream(steps=5, state=stream.state_dict()))), 3)

    # --- (b) resume ----------------------------------------------------------
    def test_a_saved_state_resumes_with_bit_identical_batches(self):
        stream = self.stream(seed=11)
        for _ in range(3):
            next(stream)
        state = stream.state_dict()
        self.assertEqual(state, json.loads(json.dumps(state)))  # plain JSON values
        self.assertEqual(state["step"], 3)
        expected = [x.tolist() for x, _ in (next(stream) for _ in range(5))]

        resumed = self.stream(state=json.loads(json.dumps(state)))  # seed None: the state's
        self.assertEqual(resumed.step, 3)
        self.assertEqual([x.tolist() for x, _ in (next(resumed) for _ in range(5))], expected)
        self.assertEqual(self.stream(state=json.dumps(state)).windows(3), stream.windows(3))

        # load_state_dict rewinds a running stream to the saved step.
        stream.load_state_dict(state)
        self.assertEqual(stream.step, 3)
        self.assertEqual([x.tolist() for x, _ in (next(stream) for _ in range(5))], expected)

    def test_a_saved_state_resumes_in_another_process(self):
        stream = self.stream(seed=0)
        for _ in range(4):
            next(stream)
        state = json.dumps(stream.state_dict())
        expected = [x.tolist() for x, _ in (next(stream) for _ in range(3))]
        here = os.path.dirname(os.path.abspath(__file__))
        result = subprocess.run([sys.executable, "-c", RESUME_SCRIPT, here, "7"], input=state, capture_output=True,
                                text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(json.loads(result.stdout), expected)

    def test_a_state_of_another_stream_is_refused_naming_what_differs(self):
        stream = self.stream(seed=5)
        next(stream)
        state = stream.state_dict()
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.stream(seed=6, state=state)
        self.assertIn("seed 5, this stream has 6", caught.exception.message)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.stream(context=8, state=state)
        self.assertIn("context 16, this stream has 8", caught.exception.message)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.stream(batch_size=8, state=state)
        self.assertIn("global batch (batch_size x world_size) 4, this stream has 8", caught.exception.message)
        with self.assertRaises(backplane.InvalidFileError) as caught:
            self.stream(state="{ not json")
        self.assertIn("not valid JSON", caught.exception.message)
        with self.assertRaises(backplane.InvalidFileError) as caught:
            self.stream(state={"step": 3})
        self.assertIn("no field", caught.exception.message)
        # A failed load leaves the stream as it was.
        with self.assertRaises(backplane.InvalidFileError):
            stream.load_state_dict({"step": 3})
        self.assertEqual(stream.step, 1)
        self.assertEqual(starts_of(next(stream)[0]), [window.start for window in stream.windows(1)])

    # --- (c) elastic resume ---------------------------------------------------
    def test_an_elastic_resume_keeps_every_global_batch(self):
        # Four ranks of 8, then two ranks of 16 resumed from rank 2's state:
        # each global step holds the same 32 windows, in the same order.
        four = [self.stream(batch_size=8, rank=rank, world_size=4, seed=3) for rank in range(4)]
        for _ in range(2):
            for stream in four:
                next(stream)
        state = four[2].state_dict()
        two = [self.stream(batch_size=16, rank=rank, world_size=2, state=state) for rank in range(2)]
        for step in range(2, 8):
            before = [start for stream in four for start in starts_of(next(stream)[0])]
            after = [start for stream in two for start in starts_of(next(stream)[0])]
            self.assertEqual(set(before), set(after))
            self.assertEqual(before, after)
            self.assertEqual(len(set(before)), 32)
            self.assertEqual([w for stream in four for w in stream.windows(step)],
                             [w for stream in two for w in stream.windows(step)])
        for stream in four + two:
            stream.close()

    def test_ranks_draw_disjoint_deterministic_windows(self):
        def starts(rank):
            return [set(starts_of(x)) for x, _ in self.take(20, rank=rank, world_size=2, seed=3)]

        zero, one = starts(0), starts(1)
        self.assertEqual(zero, starts(0))
        for mine, theirs in zip(zero, one):
            self.assertFalse(mine & theirs)

    def test_ranks_come_from_the_environment_when_not_given(self):
        saved = {name: os.environ.get(name) for name in ("RANK", "WORLD_SIZE")}
        os.environ.update(RANK="1", WORLD_SIZE="2")
        try:
            from_environment = [x.tolist() for x, _ in self.take(3, seed=5)]
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        self.assertEqual(from_environment, [x.tolist() for x, _ in self.take(3, seed=5, rank=1, world_size=2)])

    # --- (d) weights -----------------------------------------------------------
    def test_weights_set_each_sources_share(self):
        second = self.runtime.array(SECOND_BASE + numpy.arange(TOKENS, dtype=numpy.uint16), device="cpu:0")
        stream = backplane.batches([self.tokens, second], 100, 16, device="cpu:0", weights=[0.8, 0.2], seed=1)
        # 10,000 windows, each from source 0 with probability 0.8: the count
        # is binomial, standard deviation sqrt(10000 * 0.8 * 0.2) = 40. Five
        # of them (200 windows, a share of +-0.02) leave a false failure at
        # odds below one in a million.
        windows = [window for step in range(100) for window in stream.windows(step)]
        self.assertEqual(len(windows), 10_000)
        first = sum(1 for window in windows if window.source == 0)
        self.assertLessEqual(abs(first - 8000), 5 * math.sqrt(10_000 * 0.8 * 0.2))
        # The batches hold those sources' tokens.
        for step in range(3):
            x, _ = next(stream)
            for window, row in zip(stream.windows(step), x):
                base = 0 if window.source == 0 else SECOND_BASE
                self.assertEqual(int(row[0]), base + window.start)
        stream.close()

    # --- (e) refused arguments --------------------------------------------------
    def test_bad_arguments_are_refused_when_batches_is_called_naming_the_problem(self):
        cases = [
            (dict(steps=-1), "steps must be an int >= 0, got -1"),
            (dict(steps=2.5), "steps must be an int >= 0, got 2.5"),
            (dict(steps=True), "steps must be an int >= 0, got True"),
            (dict(batch_size=0), "BatchStream: batch_size must be at least 1, got 0"),
            (dict(batch_size=True), "batch_size must be a positive int, got True"),
            (dict(batch_size=2**63), "batch_size must be a positive int below 2**63, got 9223372036854775808"),
            (dict(context=-3), "BatchStream: context must be at least 1, got -3"),
            (dict(context="16"), "context must be a positive int, got '16'"),
            (dict(prefetch=0), "BatchStream: prefetch must be in [1, 64], got 0"),
            (dict(prefetch=65), "BatchStream: prefetch must be in [1, 64], got 65"),
            (dict(seed=-1), "seed must be an int in [0, 2**64), got -1"),
            (dict(threads=-1), "threads must be an int in [0, 4294967295], got -1"),
            (dict(release_pages="yes"), "release_pages must be True or False"),
            (dict(rank=2, world_size=2), "BatchStream: rank 2 is not in [0, world_size = 2)"),
            (dict(world_size=0), "BatchStream: world_size must be at least 1, got 0"),
            (dict(device=["cpu:0", "cpu:0"]), "device cpu:0 is listed twice"),
            (dict(device=[]), "the device list is empty"),
            (dict(batch_size=3, device=["cpu:0", "cpu:1"]), "does not split evenly over 2 devices"),
            (dict(weights=[1.0, 2.0]), "BatchStream: 2 weights for 1 sources"),
            (dict(weights=[math.nan]), "BatchStream: weight nan (of source 0) is not a finite number >= 0"),
            (dict(weights="1"), "weights must be a list of numbers"),
            (dict(to="tensorflow"), "to='tensorflow'"),
            (dict(state=3), "state must be a dict from state_dict() or its JSON text"),
        ]
        for options, words in cases:
            with self.subTest(options=options):
                options = dict(options)
                size = options.pop("batch_size", 4)
                context = options.pop("context", 16)
                with self.assertRaises(backplane.InvalidArgumentError) as caught:
                    self.stream(size, context, **options)
                self.assertIn(words, caught.exception.message)
        # What the library checks, still at the call.
        library_cases = [
            (dict(weights=[-1.0]), backplane.InvalidArgumentError, "weight -1 (of source 0) is not a finite number"),
            (dict(weights=[0.0]), backplane.InvalidArgumentError, "the weights are all zero"),
            (dict(threads=1000), backplane.InvalidArgumentError, "threads must be at most 256, got 1000"),
            (dict(dtype="float32"), backplane.UnsupportedError, "only integer dtypes convert"),
            (dict(release_pages=True), backplane.InvalidArgumentError, "release_pages: source 0 is not in a shared "
                                                                       "mapping"),
        ]
        for options, error, words in library_cases:
            with self.subTest(options=options):
                with self.assertRaises(error) as caught:
                    self.stream(**options)
                self.assertIn(words, caught.exception.message)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            backplane.batches([self.tokens, "tokens"], 4, 16)
        self.assertIn("tokens must be an Array or a non-empty list of Arrays, got builtins.str",
                      caught.exception.message)
        with self.assertRaises(backplane.InvalidArgumentError):
            backplane.batches([], 4, 16)
        # A NumPy array where an Array belongs: the message says how to make one.
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            backplane.batches(numpy.arange(100, dtype=numpy.uint16), 4, 16)
        self.assertIn("got numpy.ndarray; make one with backplane.from_dlpack(tokens) (shares its memory) or "
                      "backplane.array(tokens) (copies it), or load a token file with backplane.load_tokens(path)",
                      caught.exception.message)
        short = self.runtime.array(numpy.arange(10, dtype=numpy.uint16), device="cpu:0")
        with self.assertRaises(backplane.OutOfRangeError) as caught:
            backplane.batches(short, 1, 16, device="cpu:0")
        self.assertIn("a window of context + 1 = 17 tokens is longer than every source", caught.exception.message)

    def test_a_closed_stream_says_so(self):
        with self.stream() as stream:
            next(stream)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            next(stream)
        self.assertIn("used after close()", caught.exception.message)
        with self.assertRaises(backplane.InvalidArgumentError):
            stream.state_dict()
        stream.close()  # twice: nothing

    # --- (f) no allocation per step ------------------------------------------------
    def test_a_steady_loop_makes_no_backend_allocation_per_step(self):
        # The pipeline holds at most `prefetch` steps (ready or being
        # gathered) and the one next() hands out, one buffer each: with
        # copies the loop holds none after next() returns, with views it
        # holds that one. How many of those prefetch + 1 buffers a run needs
        # depends on how the threads interleave, so the check is the bound
        # after many steps (a buffer per step would break it at the fourth),
        # not equality with a warm-up.
        prefetch = 2
        for device, xy in (("cpu:1", "copies"), ("cpu:0", "views")):
            with self.subTest(xy=xy):
                stream = self.stream(8, 64, device=device, prefetch=prefetch, xy=xy)
                before = self.runtime.memory_stats(device).backend_allocations
                for _ in range(300):
                    x, y = next(stream)
                    del x, y
                made = self.runtime.memory_stats(device).backend_allocations - before
                self.assertLessEqual(made, prefetch + 1)
                stream.close()

    # --- (g) statistics ------------------------------------------------------------
    def test_stats_count_steps_windows_and_bytes(self):
        stream = self.stream(8, 32, seed=2)
        self.assertEqual(stream.stats().steps, 0)
        for _ in range(7):
            next(stream)
        stats = stream.stats()
        self.assertIsInstance(stats, backplane.BatchStats)
        self.assertEqual(stats.steps, 7)
        self.assertEqual(stats.windows, 7 * 8)
        self.assertEqual(stats.bytes, 7 * 8 * 33 * 8)  # int64
        self.assertGreaterEqual(stats.data_stall_fraction, 0.0)
        self.assertLessEqual(stats.data_stall_fraction, 1.0)
        self.assertGreater(stats.elapsed_seconds, 0.0)
        self.assertGreater(stats.windows_per_second, 0.0)
        # uint16 sources: whole steps of 8 x 33 tokens, the 7 handed out and
        # at most the 2 prefetched after them (however far the producer got).
        self.assertEqual(stats.read_bytes % (8 * 33 * 2), 0)
        self.assertGreaterEqual(stats.read_bytes, 7 * 8 * 33 * 2)
        self.assertLessEqual(stats.read_bytes, 9 * 8 * 33 * 2)
        with self.assertRaises(Exception):
            stats.steps = 0  # frozen
        u16 = self.stream(8, 32, dtype=None, steps=3)
        list(u16)
        self.assertEqual(u16.stats().bytes, 3 * 8 * 33 * 2)

    def test_stats_name_the_step_handed_out_last_and_its_epoch(self):
        # 48 tokens, T = 8: 40 window starts, 8 a step, so an epoch is 5 steps.
        tokens = self.runtime.array(numpy.arange(48, dtype=numpy.uint16), device="cpu:0")
        stream = backplane.batches(tokens, 8, 8, device="cpu:0", seed=4)
        self.assertEqual((stream.stats().step, stream.stats().epoch), (-1, 0))
        first_pass = set()
        for step in range(5):
            x, _ = next(stream)
            first_pass.update(int(row[0]) for row in x)
            self.assertEqual((stream.stats().step, stream.stats().epoch), (step, 0))
            self.assertEqual(stream.stats().step, stream.step - 1)
        self.assertEqual(first_pass, set(range(40)))  # epoch 0 took every start once
        next(stream)
        self.assertEqual((stream.stats().step, stream.stats().epoch), (5, 1))
        resumed = backplane.batches(tokens, 8, 8, device="cpu:0", state=stream.state_dict())
        self.assertEqual((resumed.stats().step, resumed.stats().epoch), (5, 1))

    # --- devices and frameworks ---------------------------------------------------
    def test_a_list_of_devices_splits_the_batch(self):
        stream = self.stream(device=["cpu:0", "cpu:1"], steps=2, seed=9)
        for step, shards in enumerate(stream):
            self.assertEqual(len(shards), 2)
            rows = []
            for x, y in shards:
                self.assertEqual(x.shape, (2, 16))
                rows += starts_of(x)
            self.assertEqual(rows, [window.start for window in stream.windows(step)])

    def test_the_default_device_follows_a_python_scope(self):
        seen = []

        def convert(array):
            seen.append(array.device)
            return numpy.from_dlpack(array)

        with self.runtime.default_device_scope("cpu:1"):
            stream = self.stream(device=None, to=convert)
        next(stream)  # outside the scope: the device was decided by batches()
        self.assertEqual(seen, [backplane.Device("cpu", 1)])
        stream.close()

    @unittest.skipIf(torch is None, "torch is not installed for this interpreter (Debian: python3-torch)")
    def test_torch_tensors(self):
        x, y = next(self.stream(to="torch"))
        self.assertIsInstance(x, torch.Tensor)
        self.assertEqual(x.dtype, torch.int64)
        self.assertTrue(torch.equal(x[:, 1:], y[:, :-1]))


if __name__ == "__main__":
    unittest.main()
