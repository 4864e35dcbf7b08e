"""Where batches() takes rank and world_size from when they are left out:
arguments, then an initialised engine (test_torchrun.py and
test_jax_ranks.py run those in several processes), then RANK and
WORLD_SIZE, then 0 and 1. stream.rank_source says which."""
import os
import unittest
from unittest import mock

import backplane
from support import free_port, isolated_runtime, optional_module

numpy = optional_module("numpy")
torch = optional_module("torch")


@unittest.skipIf(numpy is None, "numpy is needed")
class RankPrecedenceTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()
        self.tokens = self.runtime.array(numpy.arange(50_000, dtype=numpy.uint16), device="cpu:0")

    def tearDown(self):
        self.runtime.close()

    def starts(self, environment, **options):
        """(rank_source, the window starts of step 0) with `environment` as
        the only rank variables."""
        clean = {name: value for name, value in os.environ.items() if name not in ("RANK", "WORLD_SIZE")}
        with mock.patch.dict(os.environ, dict(clean, **environment), clear=True):
            with backplane.batches(self.tokens, 4, 8, device="cpu:0", seed=3, steps=1, runtime=self.runtime,
                                   **options) as stream:
                return stream.rank_source, [int(row[0]) for row in next(stream)[0]]

    def test_without_variables_or_arguments_a_process_is_rank_0_of_1(self):
        self.assertEqual(self.starts({}), ("default", self.starts({}, rank=0, world_size=1)[1]))

    def test_the_variables_choose_the_share(self):
        source, starts = self.starts({"RANK": "1", "WORLD_SIZE": "2"})
        self.assertEqual(source, "environment")
        self.assertEqual(starts, self.starts({}, rank=1, world_size=2)[1])
        self.assertNotEqual(starts, self.starts({}, rank=0, world_size=2)[1])

    def test_arguments_win_over_the_variables(self):
        self.assertEqual(self.starts({"RANK": "1", "WORLD_SIZE": "2"}, rank=0, world_size=2),
                         ("argument", self.starts({}, rank=0, world_size=2)[1]))
        # One argument: the other value still comes from its variable.
        self.assertEqual(self.starts({"RANK": "1", "WORLD_SIZE": "2"}, rank=0),
                         ("environment", self.starts({}, rank=0, world_size=2)[1]))

    def test_a_variable_that_is_no_integer_is_named(self):
        with self.assertRaisesRegex(backplane.InvalidArgumentError, r"batches\(\): RANK='one' is not an integer"):
            self.starts({"RANK": "one"})


@unittest.skipIf(torch is None or numpy is None, "torch is not installed for this interpreter (Debian: python3-torch)")
@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "torch.distributed under a preloaded sanitizer runtime")
class TorchProcessGroupTest(unittest.TestCase):
    """A real gloo process group of one process: it is the truth, and a
    variable that contradicts it is refused naming both values."""

    def setUp(self):
        import torch.distributed as dist
        if dist.is_initialized():
            self.skipTest("a process group is already initialised in this process")
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
        self.addCleanup(dist.destroy_process_group)
        self.runtime = isolated_runtime()
        self.addCleanup(self.runtime.close)
        self.tokens = self.runtime.array(numpy.arange(50_000, dtype=numpy.uint16), device="cpu:0")

    def stream(self, environment, **options):
        clean = {name: value for name, value in os.environ.items() if name not in ("RANK", "WORLD_SIZE")}
        with mock.patch.dict(os.environ, dict(clean, **environment), clear=True):
            return backplane.batches(self.tokens, 4, 8, device="cpu:0", steps=1, runtime=self.runtime, **options)

    def test_the_process_group_gives_the_ranks(self):
        with self.stream({}) as stream:
            self.assertEqual(stream.rank_source, "torch.distributed")
        with self.stream({"RANK": "0", "WORLD_SIZE": "1"}) as stream:  # agreeing variables are fine
            self.assertEqual(stream.rank_source, "torch.distributed")

    def test_a_contradicting_variable_is_an_error_naming_both(self):
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.stream({"RANK": "1", "WORLD_SIZE": "2"})
        self.assertIn("$RANK=1 but torch.distributed says rank 0 (rank 0 of world size 1)", str(caught.exception))
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.stream({"WORLD_SIZE": "4"})
        self.assertIn("$WORLD_SIZE=4 but torch.distributed says world_size 1", str(caught.exception))
        # Arguments are a choice: the variables are not read for them.
        with self.stream({"RANK": "1", "WORLD_SIZE": "2"}, rank=1, world_size=2) as stream:
            self.assertEqual(stream.rank_source, "argument")


if __name__ == "__main__":
    unittest.main()
