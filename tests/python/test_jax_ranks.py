"""Ranks from jax.distributed: two processes that called
jax.distributed.initialize() and left rank and world_size out (no RANK in
their environment) draw different windows, which together are the one
process batch of twice the size at every step."""
import os
import unittest

import backplane
from support import free_port, isolated_runtime, optional_module, run_processes, worker_environment

numpy = optional_module("numpy")
jax = optional_module("jax")
# Two JAX processes starting on a loaded 2-core machine: generous, and the
# failure names what did not finish.
JOB_TIMEOUT_S = 300


@unittest.skipIf(jax is None or numpy is None, "jax and numpy are needed (scripts/pip-test-packages installs jax)")
@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "JAX under a preloaded sanitizer runtime")
class JaxRanksTest(unittest.TestCase):
    def test_two_jax_processes_draw_the_halves_of_one_batch(self):
        environment = worker_environment(drop=("RANK", "WORLD_SIZE", "LOCAL_RANK"), JAX_PLATFORMS="cpu")
        coordinator = f"127.0.0.1:{free_port()}"
        reports = run_processes("jax_ranks_worker.py", 2, lambda index, out: [coordinator, str(index), out],
                                environment, JOB_TIMEOUT_S, "JAX process")
        for index, report in enumerate(reports):
            self.assertEqual(report["rank_source"], "jax.distributed")
            self.assertEqual((report["process_index"], report["process_count"]), (index, 2))
            self.assertIn(f"$RANK={1 - index} but jax.distributed says rank {index}", report["contradiction"] or "")
        runtime = isolated_runtime()
        try:
            tokens = runtime.array(numpy.arange(100_000, dtype=numpy.uint16), device="cpu:0")
            single = backplane.batches(tokens, 8, 16, device="cpu:0", seed=11, steps=3, rank=0, world_size=1,
                                       runtime=runtime)
            for step, (x, _) in enumerate(single):
                zero, one = reports[0]["x"][step], reports[1]["x"][step]
                self.assertNotEqual(zero, one, f"step {step}: both processes drew the same windows")
                self.assertEqual(zero + one, x.tolist(), f"step {step}")
        finally:
            runtime.close()


if __name__ == "__main__":
    unittest.main()
