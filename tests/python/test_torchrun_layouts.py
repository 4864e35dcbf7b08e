"""Layouts under torchrun: four processes (gloo) leave rank out of
backplane.Layout, so it comes from torch.distributed, and draw three
layouts of one launch: dp x tp (rows split, tp replicas), dp x cp
contiguous and dp x cp head_tail. Every piece is its slice of the
one-process batch of the same seed; tp replicas are identical; a row's cp
pieces put back together are that row. A mesh of another size than the
process group is refused, naming both sizes."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import unittest

import backplane
from support import isolated_runtime, optional_module, worker_environment

numpy = optional_module("numpy")
torch = optional_module("torch")
HERE = pathlib.Path(__file__).resolve().parent
# Four torch processes starting on a loaded 2-core machine: generous.
JOB_TIMEOUT_S = 300
SPEC = {
    "tokens": 100_000,
    "batch_size": 2,  # per batch coordinate: dp=2 makes the global batch 4 rows
    "context": 32,
    "seed": 11,
    "steps": 3,
    "layouts": {
        "dp_tp": {"mesh": {"dp": 2, "tp": 2}, "batch": "dp"},
        "dp_cp_contiguous": {"mesh": {"dp": 2, "cp": 2}, "batch": "dp", "sequence": "cp"},
        "dp_cp_head_tail": {"mesh": {"dp": 2, "cp": 2}, "batch": "dp", "sequence": "cp",
                            "sequence_order": "head_tail"},
    },
}
RANKS = 4
DP = CP = 2


@unittest.skipIf(torch is None or numpy is None,
                 "torch and numpy are needed (Debian: python3-torch, python3-numpy)")
@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "torchrun under a preloaded sanitizer runtime")
class TorchrunLayoutsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ranks = cls._launch()
        cls.reference = cls._reference()

    @classmethod
    def _launch(cls):
        with tempfile.TemporaryDirectory() as scratch:
            environment = worker_environment(drop=("LOCAL_RANK", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                                   "SLURM_LOCALID", "BACKPLANE_DEFAULT_DEVICE", "BACKPLANE_PLUGIN_PATH",
                                                   "BACKPLANE_BACKENDS"))
            command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={RANKS}",
                       # Debian's torch 1.13 on Python 3.11 maps only the single-stream values of
                       # these flags (see test_torchrun.py): stderr to logs here, stdout teed.
                       "--redirects=2", "--tee=1", f"--log_dir={scratch}",
                       str(HERE / "torchrun_layouts_worker.py"), scratch, json.dumps(SPEC)]
            # Its own session, so that a launch that hangs goes with all its workers.
            launch = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, cwd=scratch, start_new_session=True)
            timed_out = False
            try:
                output, _ = launch.communicate(timeout=JOB_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(launch.pid, signal.SIGKILL)
                output, _ = launch.communicate()
            outs = [os.path.join(scratch, f"rank{rank}.json") for rank in range(RANKS)]
            missing = [rank for rank, out in enumerate(outs) if not os.path.exists(out)]
            if launch.returncode != 0 or missing:
                what = f"did not finish in {JOB_TIMEOUT_S} s" if timed_out else f"exited {launch.returncode}"
                raise AssertionError(f"torchrun with {RANKS} layout workers {what}; ranks {missing} wrote no report:\n"
                                     f"{output}\n{cls._logs(scratch)}")
            reports = []
            for out in outs:
                with open(out, encoding="utf-8") as file:
                    reports.append(json.load(file))
            return reports

    @staticmethod
    def _logs(scratch):
        """The workers' stderr logs that torchrun wrote under --log_dir."""
        texts = []
        for path in sorted(pathlib.Path(scratch).rglob("*.log")):
            texts.append(f"--- {path.relative_to(scratch)}:\n{path.read_text(encoding='utf-8', errors='replace')}")
        return "\n".join(texts)

    @staticmethod
    def _reference():
        """The one-process batch of the global size (batch_size per
        coordinate times dp), same seed: per step, (x, y) as NumPy arrays."""
        runtime = isolated_runtime()
        try:
            tokens = runtime.array(numpy.arange(SPEC["tokens"], dtype=numpy.uint16), device="cpu:0")
            single = backplane.batches(tokens, SPEC["batch_size"] * DP, SPEC["context"], device="cpu:0",
                                       seed=SPEC["seed"], steps=SPEC["steps"], rank=0, world_size=1, runtime=runtime)
            return [(numpy.array(x), numpy.array(y)) for x, y in single]
        finally:
            runtime.close()

    def drawn(self, layout, rank, step, which):
        return numpy.array(self.ranks[rank]["layouts"][layout][which][step])

    def rows(self, d):
        return slice(d * SPEC["batch_size"], (d + 1) * SPEC["batch_size"])

    def test_the_launch_had_four_ranks_that_took_torch_distributeds_rank(self):
        self.assertEqual([r["rank"] for r in self.ranks], list(range(RANKS)))
        self.assertEqual({r["world_size"] for r in self.ranks}, {RANKS})
        for report in self.ranks:
            self.assertEqual(sorted(report["layouts"]), sorted(SPEC["layouts"]))
            for name, drawn in report["layouts"].items():
                self.assertEqual(drawn["rank_source"], "torch.distributed", f"rank {report['rank']}, {name}")
                self.assertEqual(len(drawn["x"]), SPEC["steps"], f"rank {report['rank']}, {name}")
                self.assertEqual(len(drawn["y"]), SPEC["steps"], f"rank {report['rank']}, {name}")

    def test_dp_tp_ranks_take_their_rows_and_tp_replicas_are_identical(self):
        for step, (x, y) in enumerate(self.reference):
            for rank in range(RANKS):
                d, _ = divmod(rank, 2)  # row-major over (dp, tp)
                where = f"step {step}, rank {rank}"
                numpy.testing.assert_array_equal(self.drawn("dp_tp", rank, step, "x"), x[self.rows(d)], where)
                numpy.testing.assert_array_equal(self.drawn("dp_tp", rank, step, "y"), y[self.rows(d)], where)
            for d in range(DP):
                for which in ("x", "y"):
                    self.assertEqual(self.drawn("dp_tp", 2 * d, step, which).tolist(),
                                     self.drawn("dp_tp", 2 * d + 1, step, which).tolist(),
                                     f"step {step}, dp {d}: the tp replicas differ in {which}")
            # The dp coordinates draw different windows.
            self.assertNotEqual(self.drawn("dp_tp", 0, step, "x").tolist(), self.drawn("dp_tp", 2, step, "x").tolist())

    def test_dp_cp_contiguous_ranks_take_their_columns_which_cover_each_row(self):
        length = SPEC["context"] // CP
        for step, (x, y) in enumerate(self.reference):
            for rank in range(RANKS):
                d, c = divmod(rank, CP)  # row-major over (dp, cp)
                columns = slice(c * length, (c + 1) * length)
                where = f"step {step}, rank {rank} (dp {d}, cp {c})"
                piece_x = self.drawn("dp_cp_contiguous", rank, step, "x")
                self.assertEqual(piece_x.shape, (SPEC["batch_size"], length), where)
                numpy.testing.assert_array_equal(piece_x, x[self.rows(d), columns], where)
                numpy.testing.assert_array_equal(self.drawn("dp_cp_contiguous", rank, step, "y"),
                                                 y[self.rows(d), columns], where)
            for d in range(DP):
                for which, whole in (("x", x), ("y", y)):
                    joined = numpy.concatenate([self.drawn("dp_cp_contiguous", d * CP + c, step, which)
                                                for c in range(CP)], axis=1)
                    numpy.testing.assert_array_equal(joined, whole[self.rows(d)],
                                                     f"step {step}, dp {d}: the cp pieces of {which} joined")

    def test_dp_cp_head_tail_ranks_take_a_head_and_a_tail_chunk_which_cover_each_row(self):
        chunks = 2 * CP
        length = SPEC["context"] // chunks

        def chunk(array, index):
            return array[:, index * length:(index + 1) * length]

        for step, (x, y) in enumerate(self.reference):
            for rank in range(RANKS):
                d, c = divmod(rank, CP)
                where = f"step {step}, rank {rank} (dp {d}, cp {c})"
                for which, whole in (("x", x), ("y", y)):
                    piece = self.drawn("dp_cp_head_tail", rank, step, which)
                    self.assertEqual(piece.shape, (SPEC["batch_size"], 2 * length), where)
                    rows = whole[self.rows(d)]
                    # Chunk c first, then chunk 2 cp - 1 - c, each row on its own.
                    numpy.testing.assert_array_equal(piece[:, :length], chunk(rows, c), f"{where}: {which}'s head")
                    numpy.testing.assert_array_equal(piece[:, length:], chunk(rows, chunks - 1 - c),
                                                     f"{where}: {which}'s tail")
            for d in range(DP):
                for which, whole in (("x", x), ("y", y)):
                    # Put each row back in order from the heads and tails of its pieces.
                    parts = [None] * chunks
                    for c in range(CP):
                        piece = self.drawn("dp_cp_head_tail", d * CP + c, step, which)
                        parts[c], parts[chunks - 1 - c] = piece[:, :length], piece[:, length:]
                    numpy.testing.assert_array_equal(numpy.concatenate(parts, axis=1), whole[self.rows(d)],
                                                     f"step {step}, dp {d}: the cp chunks of {which} in order")
            # The tokens are an arange, so a row of x counts up by one: the
            # head is the earlier chunk and the tail the later, every rank.
            for rank in range(RANKS):
                c = rank % CP
                piece = self.drawn("dp_cp_head_tail", rank, step, "x").astype(numpy.int64)
                gap = (piece[:, length] - piece[:, length - 1]) % 65536
                self.assertTrue((gap == (chunks - 2 - 2 * c) * length + 1).all(),
                                f"step {step}, rank {rank}: head to tail jumps by {gap.tolist()}")

    def test_a_mesh_that_does_not_cover_the_process_group_is_refused_naming_both_sizes(self):
        for report in self.ranks:
            message = report["mismatch"]
            self.assertIsNotNone(message, f"rank {report['rank']}: a mesh of 2 in a group of 4 was taken")
            self.assertIn("2 ranks", message)
            self.assertIn("world size is 4", message)
            self.assertIn("dp=2", message)


if __name__ == "__main__":
    unittest.main()
