"""batches(sharding=...) in one process with 4 CPU devices: the cases of
sharding_cases.py, run in a process of their own because JAX reads the
device count (XLA_FLAGS) once, when its backend starts, and this test
process may have started it already."""
import os
import pathlib
import subprocess
import sys
import unittest

from support import optional_module, worker_environment

jax = optional_module("jax")
numpy = optional_module("numpy")
HERE = pathlib.Path(__file__).resolve().parent
TIMEOUT_S = 300  # JAX's start on a loaded 2-core machine, generously


@unittest.skipIf(jax is None or numpy is None, "jax and numpy are needed (scripts/pip-test-packages installs jax)")
@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "JAX under a preloaded sanitizer runtime")
class JaxShardingTest(unittest.TestCase):
    def test_the_sharding_cases_pass_with_four_cpu_devices(self):
        environment = worker_environment(drop=("RANK", "WORLD_SIZE", "JAX_NUM_CPU_DEVICES"), JAX_PLATFORMS="cpu",
                                         XLA_FLAGS="--xla_force_host_platform_device_count=4")
        result = subprocess.run([sys.executable, "-m", "unittest", "-v", "sharding_cases"], cwd=HERE,
                                env=environment, capture_output=True, text=True, timeout=TIMEOUT_S)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("Ran 6 tests", result.stderr)


if __name__ == "__main__":
    unittest.main()
