"""Data-parallel ranks: two processes under torchrun (gloo, cpu with two
devices) each default to cpu:<local rank>, take their rank from
torch.distributed and draw the two halves of one global batch."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

import backplane
from support import isolated_runtime, optional_module, worker_environment

numpy = optional_module("numpy")
torch = optional_module("torch")
HERE = pathlib.Path(__file__).resolve().parent


@unittest.skipIf(torch is None, "torch is not installed for this interpreter (Debian: python3-torch)")
@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "torchrun under a preloaded sanitizer runtime")
class TorchrunTest(unittest.TestCase):
    def test_each_rank_defaults_to_its_local_device_and_draws_disjoint_batches(self):
        with tempfile.TemporaryDirectory() as scratch:
            config = os.path.join(scratch, "ranks.toml")
            with open(config, "w", encoding="utf-8") as file:
                file.write("[backend.cpu]\ndevices = 2\n")
            out = os.path.join(scratch, "ranks.json")
            environment = worker_environment(drop=("LOCAL_RANK", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                                   "SLURM_LOCALID", "BACKPLANE_DEFAULT_DEVICE", "BACKPLANE_PLUGIN_PATH",
                                                   "BACKPLANE_BACKENDS"))
            result = subprocess.run(
                [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                 # Debian's torch 1.13 on Python 3.11 maps only the single-stream values of
                 # these flags (its enum lookup skips 0 and the 3 alias): stderr goes to a
                 # log in the scratch directory, stdout is teed.
                 "--redirects=2", "--tee=1", f"--log_dir={scratch}",
                 str(HERE / "torchrun_worker.py"), out, config],
                env=environment, capture_output=True, text=True, timeout=300, cwd=scratch)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            with open(out, encoding="utf-8") as file:
                ranks = sorted(json.load(file), key=lambda report: report["rank"])
        self.assertEqual([r["device"] for r in ranks], ["cpu:0", "cpu:1"])
        self.assertEqual([r["source"] for r in ranks], ["LOCAL_RANK=0", "LOCAL_RANK=1"])
        for step, (zero, one) in enumerate(zip(ranks[0]["starts"], ranks[1]["starts"])):
            self.assertEqual(len(zero), 8)
            self.assertFalse(set(zero) & set(one), f"step {step}: both ranks drew {set(zero) & set(one)}")
        self.assertNotEqual(ranks[0]["starts"], ranks[1]["starts"])
        self.assertEqual([r["rank_source"] for r in ranks], ["torch.distributed", "torch.distributed"])
        # Together the two ranks hold the one-process batch of 16, rank 0's half first.
        runtime = isolated_runtime()
        try:
            tokens = runtime.array(numpy.arange(100_000, dtype=numpy.uint16), device="cpu:0")
            single = backplane.batches(tokens, 16, 32, device="cpu:0", seed=11, steps=5, rank=0, world_size=1,
                                       runtime=runtime)
            for step, (x, _) in enumerate(single):
                self.assertEqual(ranks[0]["starts"][step] + ranks[1]["starts"][step], [int(row[0]) for row in x],
                                 f"step {step}")
        finally:
            runtime.close()


if __name__ == "__main__":
    unittest.main()
