"""Global arrays across processes: two jax.distributed processes of two CPU
devices each (no RANK or WORLD_SIZE in their environment) lay a ("data",
"seq") mesh over the four devices and draw batches(sharding=...) with
P("data", "seq") and P("data"). Each process fills only its own shards;
every shard is its slice of the one-process batch of the same seed, the two
processes together cover the global batch, and a jitted weighted sum over
the global array (run across both processes) equals the same sum of the
reference."""
import json
import os
import unittest

import backplane
from support import free_port, isolated_runtime, optional_module, run_processes, worker_environment

numpy = optional_module("numpy")
jax = optional_module("jax")
# Two JAX processes starting on a loaded 2-core machine: generous, and the
# failure names what did not finish.
JOB_TIMEOUT_S = 300
PROCESSES = 2
BATCH_SIZE = 4  # global: the arrays' first dimension
CONTEXT = 32
SPEC = {
    "tokens": 100_000,
    "batch_size": BATCH_SIZE,
    "context": CONTEXT,
    "seed": 11,
    "steps": 3,
    # Small and different at every position, so that a shard in the wrong
    # place changes the sum.
    "weights": [[(row * CONTEXT + column) % 13 + 1 for column in range(CONTEXT)] for row in range(BATCH_SIZE)],
    "specs": {"data_seq": ["data", "seq"], "data": ["data"]},
}


@unittest.skipIf(jax is None or numpy is None, "jax and numpy are needed (scripts/pip-test-packages installs jax)")
@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "JAX under a preloaded sanitizer runtime")
class JaxProcessesShardingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.reports = cls._launch()
        cls.reference = cls._reference()

    @classmethod
    def _launch(cls):
        environment = worker_environment(drop=("RANK", "WORLD_SIZE", "LOCAL_RANK"), JAX_PLATFORMS="cpu",
                                         XLA_FLAGS="--xla_force_host_platform_device_count=2")
        coordinator = f"127.0.0.1:{free_port()}"
        return run_processes("jax_processes_sharding_worker.py", PROCESSES,
                             lambda index, out: [coordinator, str(index), out, json.dumps(SPEC)], environment,
                             JOB_TIMEOUT_S, "JAX process")

    @staticmethod
    def _reference():
        """The one-process batch of the same global size and seed: per step,
        (x, y) as NumPy arrays."""
        runtime = isolated_runtime()
        try:
            tokens = runtime.array(numpy.arange(SPEC["tokens"], dtype=numpy.uint16), device="cpu:0")
            single = backplane.batches(tokens, BATCH_SIZE, CONTEXT, device="cpu:0", seed=SPEC["seed"],
                                       steps=SPEC["steps"], rank=0, world_size=1, runtime=runtime)
            return [(numpy.array(x), numpy.array(y)) for x, y in single]
        finally:
            runtime.close()

    def steps(self, process, spec):
        return self.reports[process]["specs"][spec]["steps"]

    def test_two_processes_of_two_devices_each(self):
        for index, report in enumerate(self.reports):
            self.assertEqual((report["process_index"], report["process_count"]), (index, PROCESSES))
            self.assertEqual(len(report["devices"]), 4)
            mine = [device for device, process in report["devices"] if process == index]
            self.assertEqual(sorted(report["local_devices"]), sorted(mine))
            self.assertEqual(len(mine), 2)
            for spec in SPEC["specs"]:
                self.assertEqual(report["specs"][spec]["rank_source"], "jax sharding")
                self.assertEqual(len(self.steps(index, spec)), SPEC["steps"])

    def test_every_shard_is_its_slice_of_the_reference_and_only_local_shards_are_filled(self):
        for spec in SPEC["specs"]:
            for process in range(PROCESSES):
                local = set(self.reports[process]["local_devices"])
                for step, pieces in enumerate(self.steps(process, spec)):
                    for which, whole in zip(("x", "y"), self.reference[step]):
                        array = pieces[which]
                        where = f"{spec}, process {process}, step {step}, {which}"
                        self.assertEqual(array["shape"], [BATCH_SIZE, CONTEXT], where)
                        self.assertTrue(array["same_sharding"], where)
                        self.assertEqual(sorted(shard["device"] for shard in array["shards"]), sorted(local), where)
                        for shard in array["shards"]:
                            self.assertEqual(shard["process"], process, where)
                            (top, bottom), (left, right) = shard["index"]
                            # The mesh's rows are the processes: process p holds rows [2p, 2p + 2).
                            self.assertEqual((top, bottom), (2 * process, 2 * process + 2), where)
                            numpy.testing.assert_array_equal(numpy.array(shard["data"]), whole[top:bottom, left:right],
                                                             f"{where}, device {shard['device']}")

    def test_the_processes_together_cover_the_global_batch(self):
        expected_columns = {"data_seq": {(0, CONTEXT // 2), (CONTEXT // 2, CONTEXT)}, "data": {(0, CONTEXT)}}
        for spec in SPEC["specs"]:
            for step in range(SPEC["steps"]):
                for which, whole in zip(("x", "y"), self.reference[step]):
                    where = f"{spec}, step {step}, {which}"
                    covered = numpy.full((BATCH_SIZE, CONTEXT), -1, dtype=numpy.int64)
                    by_device = {}
                    for process in range(PROCESSES):
                        for shard in self.steps(process, spec)[step][which]["shards"]:
                            (top, bottom), (left, right) = shard["index"]
                            self.assertIn((left, right), expected_columns[spec], where)
                            covered[top:bottom, left:right] = shard["data"]
                            by_device[shard["device"]] = shard
                    # Every device of the mesh (JAX numbers another process's devices from 2048 on CPU).
                    self.assertEqual(sorted(by_device), sorted(device for device, _ in self.reports[0]["devices"]),
                                     where)
                    numpy.testing.assert_array_equal(covered, whole, where)
                    places = [tuple(map(tuple, shard["index"])) for shard in by_device.values()]
                    # P("data", "seq"): four disjoint shards; P("data"): two, each on both devices of its process.
                    self.assertEqual(len(set(places)), 4 if spec == "data_seq" else 2, where)

    def test_a_jitted_global_weighted_sum_equals_the_references(self):
        weights = numpy.array(SPEC["weights"], dtype=numpy.int64)
        for spec in SPEC["specs"]:
            for step in range(SPEC["steps"]):
                for which, whole in zip(("x", "y"), self.reference[step]):
                    expected = int((whole.astype(numpy.int64) * weights).sum())
                    self.assertLess(expected, 2 ** 31)
                    for process in range(PROCESSES):
                        self.assertEqual(self.steps(process, spec)[step][which]["weighted_sum"], expected,
                                         f"{spec}, process {process}, step {step}, {which}")


if __name__ == "__main__":
    unittest.main()
