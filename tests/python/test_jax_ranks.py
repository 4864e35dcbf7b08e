"""Ranks from jax.distributed: two processes that called
jax.distributed.initialize() and left rank and world_size out (no RANK in
their environment) draw different windows, which together are the one
process batch of twice the size at every step."""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

import backplane
from support import free_port, isolated_runtime, optional_module

numpy = optional_module("numpy")
jax = optional_module("jax")
HERE = pathlib.Path(__file__).resolve().parent
# Two JAX processes starting on a loaded 2-core machine: generous, and the
# failure names what did not finish.
JOB_TIMEOUT_S = 300


@unittest.skipIf(jax is None or numpy is None, "jax and numpy are needed (scripts/pip-test-packages installs jax)")
@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "JAX under a preloaded sanitizer runtime")
class JaxRanksTest(unittest.TestCase):
    def test_two_jax_processes_draw_the_halves_of_one_batch(self):
        with tempfile.TemporaryDirectory() as scratch:
            environment = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join(
                [str(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
            for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
                environment.pop(name, None)
            coordinator = f"127.0.0.1:{free_port()}"
            outs = [os.path.join(scratch, f"process{index}.json") for index in range(2)]
            logs = [open(os.path.join(scratch, f"process{index}.log"), "w+", encoding="utf-8") for index in range(2)]
            processes = [subprocess.Popen([sys.executable, str(HERE / "jax_ranks_worker.py"), coordinator, str(index),
                                           outs[index]], env=environment, stdout=logs[index], stderr=subprocess.STDOUT)
                         for index in range(2)]
            try:
                for index, process in enumerate(processes):
                    try:
                        code = process.wait(timeout=JOB_TIMEOUT_S)
                    except subprocess.TimeoutExpired:
                        code = None
                    logs[index].seek(0)
                    output = logs[index].read()
                    self.assertIsNotNone(code, f"JAX process {index} did not finish in {JOB_TIMEOUT_S} s:\n{output}")
                    self.assertEqual(code, 0, f"JAX process {index}:\n{output}")
            finally:
                for process in processes:
                    if process.poll() is None:
                        process.kill()
                        process.wait()
                for log in logs:
                    log.close()
            reports = []
            for out in outs:
                with open(out, encoding="utf-8") as file:
                    reports.append(json.load(file))
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
