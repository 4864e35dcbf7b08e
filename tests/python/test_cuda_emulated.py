"""The cuda plugin from Python over the libcuda.so.1 emulator (no GPU
needed): DLPack export and import of CUDA device memory, and fork after CUDA
use. The emulator must be on LD_LIBRARY_PATH when the process starts, so
each case runs a child interpreter."""
import os
import subprocess
import sys
import textwrap
import unittest

EMULATOR = os.environ.get("BACKPLANE_TEST_CUDA_EMULATOR_DIR", "")
PREAMBLE = """
import os, sys
import backplane
from support import plugin_dirs
runtime = backplane.Runtime(plugin_paths=plugin_dirs(), ignore_environment=True, skip_default_paths=True)
assert runtime.is_available("cuda"), [(b.name, b.status, b.reason) for b in runtime.backends()]
"""


@unittest.skipUnless(EMULATOR and os.path.isdir(EMULATOR), "the cuda plugin and its driver emulator were not built")
@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "a child interpreter under a preloaded sanitizer runtime")
class CudaEmulatedTest(unittest.TestCase):
    def run_child(self, body, devices=2):
        environment = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(
            [EMULATOR] + [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]),
            BP_FAKE_CUDA_DEVICES=str(devices))
        environment["PYTHONPATH"] = os.pathsep.join(
            [os.path.dirname(os.path.abspath(__file__))] +
            [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
        result = subprocess.run([sys.executable, "-c", PREAMBLE + textwrap.dedent(body)], env=environment,
                                capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        return result.stdout

    def test_dlpack_exports_and_imports_cuda_memory_without_a_copy(self):
        output = self.run_child("""
            original = runtime.array(bytes(range(24)), "U8", (4, 6), device="cuda:1")
            print(original.__dlpack_device__())
            imported = runtime.from_dlpack(original.__dlpack__())
            print(imported.device, imported.shape, imported.data_ptr == original.data_ptr)
            print(imported.to_bytes() == bytes(range(24)))
        """)
        self.assertEqual(output.split("\n")[:3], ["(2, 1)", "cuda:1 (4, 6) True", "True"])

    def test_batches_land_on_cuda(self):
        output = self.run_child("""
            import numpy
            tokens = runtime.array(numpy.arange(5000, dtype=numpy.uint16), device="cpu")
            batch = runtime.take_windows(tokens, numpy.array([7, 70]), 5, "cuda:0", "int64")
            print(batch.device, numpy.frombuffer(batch.to_bytes(), dtype=numpy.int64).tolist())
        """)
        self.assertEqual(output.strip(), "cuda:0 [7, 8, 9, 10, 11, 70, 71, 72, 73, 74]")

    def test_fork_after_cuda_use_gives_the_clear_error(self):
        output = self.run_child("""
            on_gpu = runtime.array(b"abcd", "U8", (4,), device="cuda:0")
            assert on_gpu.to_bytes() == b"abcd"
            pid = os.fork()
            if pid == 0:
                code = 3
                try:
                    runtime.array(b"x", "U8", (1,), device="cuda:0")
                except backplane.UnavailableError as error:
                    print(error.message, flush=True)
                    code = 0
                os._exit(code)
            _, status = os.waitpid(pid, 0)
            print("child exit", os.waitstatus_to_exitcode(status))
            print(runtime.array(b"y", "U8", (1,), device="cuda:0").to_bytes())  # the parent still works
        """, devices=1)
        self.assertIn("before fork()", output)
        self.assertIn("'spawn'", output)
        self.assertIn("child exit 0", output)
        self.assertIn("b'y'", output)


if __name__ == "__main__":
    unittest.main()
