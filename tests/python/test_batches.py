"""backplane.batches(): the training loop's sampler."""
import os
import tempfile
import unittest

import backplane
from support import optional_module, plugin_dirs

numpy = optional_module("numpy")
torch = optional_module("torch")


def runtime_with_cpu_devices(directory, devices):
    config = os.path.join(directory, "batches.toml")
    with open(config, "w", encoding="utf-8") as file:
        file.write(f"[backend.cpu]\ndevices = {devices}\n")
    return backplane.Runtime(plugin_paths=plugin_dirs(), config_file=config, ignore_environment=True,
                             skip_default_paths=True)


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class BatchesTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        self.runtime = runtime_with_cpu_devices(self.scratch.name, 2)
        self.values = numpy.arange(10_000, dtype=numpy.uint16)
        self.tokens = self.runtime.array(self.values, device="cpu:0")

    def tearDown(self):
        self.runtime.close()
        self.scratch.cleanup()

    def take(self, count, **options):
        options.setdefault("device", "cpu:0")
        return list(backplane.batches(self.tokens, 4, 16, steps=count, **options))

    def test_x_and_y_are_windows_shifted_by_one_token(self):
        for x, y in self.take(5):
            self.assertEqual(x.shape, (4, 16))
            self.assertEqual(y.shape, (4, 16))
            self.assertEqual(x.dtype, numpy.int64)
            for row_x, row_y in zip(x, y):
                start = int(row_x[0])
                self.assertEqual(row_x.tolist(), self.values[start:start + 16].tolist())
                self.assertEqual(row_y.tolist(), self.values[start + 1:start + 17].tolist())

    def test_a_seed_gives_the_same_stream_and_another_seed_another(self):
        first = [x.tolist() for x, _ in self.take(4, seed=7)]
        again = [x.tolist() for x, _ in self.take(4, seed=7)]
        other = [x.tolist() for x, _ in self.take(4, seed=8)]
        self.assertEqual(first, again)
        self.assertNotEqual(first, other)

    def test_prefetch_depth_does_not_change_the_stream(self):
        shallow = [x.tolist() for x, _ in self.take(6, prefetch=1)]
        deep = [x.tolist() for x, _ in self.take(6, prefetch=4)]
        self.assertEqual(shallow, deep)

    def test_the_next_step_is_issued_before_a_step_is_handed_out(self):
        issued = []
        original = self.runtime.take_windows

        def recording(*arguments, **options):
            issued.append(len(issued))
            return original(*arguments, **options)

        self.runtime.take_windows = recording
        try:
            iterator = backplane.batches(self.tokens, 4, 16, device="cpu:0", prefetch=2, steps=10)
            next(iterator)
            self.assertEqual(len(issued), 3)  # steps 0, 1 and 2 issued when step 0 is handed out
            next(iterator)
            self.assertEqual(len(issued), 4)
        finally:
            del self.runtime.take_windows

    def test_a_steady_loop_makes_no_backend_allocation_per_step(self):
        iterator = backplane.batches(self.tokens, 8, 64, device="cpu:1", prefetch=2)
        for _ in range(5):  # warm-up: the cache fills
            next(iterator)
        before = self.runtime.memory_stats("cpu:1").backend_allocations
        for _ in range(50):
            x, y = next(iterator)
            del x, y
        after = self.runtime.memory_stats("cpu:1").backend_allocations
        self.assertEqual(after, before)

    def test_a_list_of_devices_splits_the_batch(self):
        for shards in backplane.batches(self.tokens, 4, 16, device=["cpu:0", "cpu:1"], steps=2):
            self.assertEqual(len(shards), 2)
            for x, y in shards:
                self.assertEqual(x.shape, (2, 16))
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            next(backplane.batches(self.tokens, 3, 16, device=["cpu:0", "cpu:1"]))
        self.assertIn("does not split evenly", caught.exception.message)

    def test_ranks_draw_disjoint_deterministic_windows(self):
        def starts(rank):
            return [set(int(row[0]) for row in x) for x, _ in self.take(20, rank=rank, world_size=2, seed=3)]

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

    def test_bad_arguments_name_the_problem(self):
        cases = [
            (dict(rank=2, world_size=2), "rank 2 is not in [0, world_size=2)"),
            (dict(prefetch=0), "prefetch must be at least 1"),
            (dict(to="tensorflow"), "to='tensorflow'"),
        ]
        for options, words in cases:
            with self.subTest(options=options):
                with self.assertRaises(backplane.InvalidArgumentError) as caught:
                    next(backplane.batches(self.tokens, 4, 16, **options))
                self.assertIn(words, caught.exception.message)
        short = self.runtime.array(numpy.arange(10, dtype=numpy.uint16), device="cpu:0")
        with self.assertRaises(backplane.OutOfRangeError) as caught:
            next(backplane.batches(short, 1, 16))
        self.assertIn("fewer than one window", caught.exception.message)

    @unittest.skipIf(torch is None, "torch is not installed for this interpreter (Debian: python3-torch)")
    def test_torch_tensors(self):
        x, y = next(backplane.batches(self.tokens, 4, 16, device="cpu:0", to="torch"))
        self.assertIsInstance(x, torch.Tensor)
        self.assertEqual(x.dtype, torch.int64)
        self.assertTrue(torch.equal(x[:, 1:], y[:, :-1]))


if __name__ == "__main__":
    unittest.main()
