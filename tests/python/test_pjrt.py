"""A PJRT device from Python: the pjrt adapter over the CPU PJRT plugin, on
both data paths, puts, gathers, streams batches and loads safetensors onto
it, each equal to the same work on cpu:0, and DLPack shares the host path's
arrays. Skipped with the reason when the adapter was not built or the
xla-cpu-pjrt wheel is not installed for the python3 on PATH."""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import backplane
from support import optional_module, plugin_runtime

numpy = optional_module("numpy")
HOST_ADDRESSABLE = 1  # BP_CAPABILITY_HOST_ADDRESSABLE


def cpu_pjrt_library():
    """The CPU PJRT plugin xla-cpu-pjrt installed for the python3 on PATH, or (None, why)."""
    finder = os.path.join(os.environ.get("BACKPLANE_TEST_SOURCE_DIR", ""), "plugins", "pjrt", "find_pjrt.py")
    python = shutil.which("python3")
    if python is None:
        return None, "no python3 on PATH"
    found = subprocess.run([python, finder, "--library", "xla-cpu-pjrt"], capture_output=True, text=True)
    if found.returncode != 0:
        return None, found.stderr.strip()
    return found.stdout.splitlines()[0], ""


ADAPTER = os.environ.get("BACKPLANE_TEST_PJRT_PLUGIN", "")
LIBRARY, MISSING = cpu_pjrt_library() if ADAPTER else (None, "the pjrt plugin was not built")


def pjrt_runtime(directory, data_path):
    """The Python form of tests/pjrt/pjrt_support.hpp's one place a PJRT
    backend is made: [pjrt.test] names the library, so the backend is
    pjrt_test, and [backend.pjrt_test] gives its options."""
    config = (f'[pjrt.test]\nlibrary = "{LIBRARY}"\noptions = {{ cpu_device_count = 2 }}\n'
              f'[backend.pjrt_test]\ndata_path = "{data_path}"\n')
    return plugin_runtime(directory, ADAPTER, os.environ["BACKPLANE_TEST_CPU_PLUGIN"], config=config)


def site_directories_of_path_python():
    """The site directories of the python3 on PATH, where pip-test-packages
    installed the PJRT wheels (this interpreter may be another one)."""
    python = shutil.which("python3")
    if python is None:
        return []
    found = subprocess.run([python, "-c", "import site, sys; print('\\n'.join(site.getsitepackages()))"],
                           capture_output=True, text=True, check=True)
    return found.stdout.split()


def tokens(count):
    return struct.pack(f"<{count}H", *((1 + index * 7919) % 65535 for index in range(count)))


@unittest.skipIf(LIBRARY is None, f"skipped: {MISSING}")
class PjrtDeviceTest(unittest.TestCase):
    def each_data_path(self):
        for data_path in ("host", "copy"):
            with self.subTest(data_path=data_path), tempfile.TemporaryDirectory() as directory:
                runtime = pjrt_runtime(directory, data_path)
                try:
                    pjrt = [backend for backend in runtime.backends() if backend.name == "pjrt_test"][0]
                    self.assertEqual(pjrt.status, "available", pjrt.reason)
                    yield runtime, data_path
                finally:
                    runtime.close()

    def test_device_put_round_trips(self):
        for runtime, _ in self.each_data_path():
            data = tokens(50000)
            host = runtime.array(data, "U16", (50000,), device="cpu:0")
            on_pjrt = runtime.device_put(host, "pjrt_test:1")
            self.assertEqual(str(on_pjrt.device), "pjrt_test:1")
            self.assertEqual(on_pjrt.device_put("pjrt_test:0").device_put("cpu:0").to_bytes(), data)

    def test_take_windows_equals_cpu(self):
        for runtime, _ in self.each_data_path():
            host = runtime.array(tokens(10000), "U16", (10000,), device="cpu:0")
            offsets = [0, 17, 9000, 4000]
            on_pjrt = runtime.take_windows(host, offsets, 65, device="pjrt_test:0", dtype="int64")
            on_cpu = runtime.take_windows(host, offsets, 65, device="cpu:0", dtype="int64")
            self.assertEqual(on_pjrt.to_bytes(), on_cpu.to_bytes())

    @unittest.skipIf(numpy is None, "skipped: numpy is not installed")
    def test_batches_equal_cpu(self):
        for runtime, _ in self.each_data_path():
            host = runtime.array(tokens(100000), "U16", (100000,), device="cpu:0")
            devices = []

            # Each batch read back through the library (the copy path's cannot be shared through DLPack).
            def read_back(array):
                devices.append(str(array.device))
                return numpy.frombuffer(array.to_bytes(), dtype=numpy.int64).reshape(array.shape)

            onto_pjrt = backplane.batches(host, 4, 32, device="pjrt_test:1", seed=9, steps=8, to=read_back,
                                          runtime=runtime)
            onto_cpu = backplane.batches(host, 4, 32, device="cpu:0", seed=9, steps=8, to=read_back,
                                         runtime=runtime)
            for (x, y), (x_cpu, y_cpu) in zip(onto_pjrt, onto_cpu):
                self.assertEqual(x.tobytes(), x_cpu.tobytes())
                self.assertEqual(y.tobytes(), y_cpu.tobytes())
            self.assertEqual(devices[::2], ["pjrt_test:1"] * 8)

    def test_safetensors_load_equals_cpu(self):
        for runtime, _ in self.each_data_path():
            with tempfile.TemporaryDirectory() as directory:
                path = os.path.join(directory, "model.safetensors")
                host = runtime.array(tokens(9 << 19), "U16", (9 << 19,), device="cpu:0")  # 9 MiB: several chunks
                backplane.safetensors.save(path, {"tokens": host}, runtime=runtime)
                on_pjrt = backplane.safetensors.load(path, device="pjrt_test:0", runtime=runtime)
                on_cpu = backplane.safetensors.load(path, device="cpu:0", runtime=runtime)
                self.assertEqual(on_pjrt["tokens"].to_bytes(), on_cpu["tokens"].to_bytes())

    @unittest.skipIf(numpy is None, "skipped: numpy is not installed")
    def test_dlpack_shares_the_host_path(self):
        for runtime, data_path in self.each_data_path():
            data = tokens(4096)
            on_pjrt = runtime.device_put(runtime.array(data, "U16", (4096,), device="cpu:0"), "pjrt_test:1")
            pjrt = [backend for backend in runtime.backends() if backend.name == "pjrt_test"][0]
            self.assertEqual(bool(pjrt.capabilities & HOST_ADDRESSABLE), data_path == "host")
            if data_path == "host":
                self.assertEqual(on_pjrt.__dlpack_device__(), (1, 0))  # kDLCPU: host memory is device 0
                self.assertEqual(numpy.from_dlpack(on_pjrt).tobytes(), data)
            else:
                with self.assertRaisesRegex(backplane.UnsupportedError, "pjrt_test:1 cannot be exported"):
                    numpy.from_dlpack(on_pjrt)


@unittest.skipIf(LIBRARY is None, f"skipped: {MISSING}")
class PjrtWheelTest(unittest.TestCase):
    """The question JAX answers only by initialising every backend: which
    PJRT plugins are installed, and which work. Answered from the wheels'
    entry points, without importing JAX or creating a client here."""

    def test_installed_pjrt_wheels_are_backends_with_their_status(self):
        runtime = backplane.Runtime(plugin_paths=[ADAPTER, os.environ["BACKPLANE_TEST_CPU_PLUGIN"]],
                                    ignore_environment=True, skip_default_paths=True,
                                    python_paths=site_directories_of_path_python())
        try:
            backends = {backend.name: backend for backend in runtime.backends()}
            cpu = backends.get("pjrt_xla_cpu_pjrt")
            self.assertIsNotNone(cpu, sorted(backends))
            self.assertEqual(cpu.status, "available", cpu.reason)
            self.assertEqual(cpu.origin_detail, "xla_cpu_pjrt 0.0.1 (entry point xla_plugins:xla_cpu_pjrt)")
            self.assertEqual(cpu.library, LIBRARY)
            self.assertNotIn("pjrt", backends)  # the adapter is listed through its libraries
            cuda = backends.get("pjrt_xla_cuda12")
            if cuda is not None and not os.path.exists("/dev/nvidiactl"):
                self.assertEqual(cuda.status, "unavailable", cuda.reason)
                self.assertIn("No visible GPU devices.", cuda.reason)
        finally:
            runtime.close()


class HeaderPinTest(unittest.TestCase):
    """The wheel that ships pjrt_c_api.h is pinned once, in pyproject.toml's
    build requirements: pip's builds install it from there, scripts/build
    installs what find_pjrt.py --requirement reads there. The tests install
    it by hash from scripts/pjrt-test-wheels.txt, which must pin the same
    version, or the build and the tests would use two headers."""

    def test_the_build_requirement_is_the_test_wheels_pin(self):
        source = os.environ.get("BACKPLANE_TEST_SOURCE_DIR", "")
        found = subprocess.run([sys.executable, os.path.join(source, "plugins", "pjrt", "find_pjrt.py"),
                                "--requirement"], capture_output=True, text=True)
        self.assertEqual(found.returncode, 0, found.stderr)
        self.assertRegex(found.stdout, r"^xla-cpu-pjrt==[0-9][^\s]*\n$")
        with open(os.path.join(source, "scripts", "pjrt-test-wheels.txt"), encoding="utf-8") as wheels:
            pins = re.findall(r"^([A-Za-z0-9_.-]+==\S+)", wheels.read(), re.MULTILINE)
        self.assertIn(found.stdout.strip(), pins)


if __name__ == "__main__":
    unittest.main()
