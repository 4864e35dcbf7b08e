"""A backend the program does not use leaves the process as it was: the
opencl plugin is probed in the probe helper, so the OpenCL driver (PoCL, with
LLVM, which replaces the process's SIGSEGV, SIGBUS and SIGXFSZ handlers) is
loaded only when an opencl device is first used."""
import json
import os
import subprocess
import sys
import unittest

from support import plugin_dirs

# Runs in a fresh interpreter: what it loaded and which signals it catches,
# read from the kernel, before and after the runtime is used on cpu, and
# after the first use of an opencl device.
PROGRAM = r"""
import json, sys
import backplane

# The signals whose handlers a driver replaces (PoCL: these), out of the set
# the kernel says have one; glibc's own (32 and 33) come with threads.
WATCHED = {"SIGSEGV": 11, "SIGBUS": 7, "SIGILL": 4, "SIGFPE": 8, "SIGXFSZ": 25, "SIGXCPU": 24, "SIGUSR1": 10,
           "SIGUSR2": 12}

def caught():
    for line in open("/proc/self/status"):
        if line.startswith("SigCgt:"):
            mask = int(line.split()[1], 16)
            return sorted(name for name, number in WATCHED.items() if mask >> (number - 1) & 1)

def driver_loaded():
    maps = open("/proc/self/maps").read()
    return "libpocl" in maps or "libOpenCL" in maps

report = {"caught_before": caught()}
runtime = backplane.Runtime(plugin_paths=[sys.argv[1]], ignore_environment=True, skip_default_paths=True)
statuses = {backend.name: backend.status for backend in runtime.backends()}
report["opencl"] = statuses.get("opencl")
report["opencl_devices"] = [str(device) for device in runtime.devices("opencl")] if statuses.get("opencl") == "available" else []
cpu = runtime.array(bytes(range(16)), device="cpu")
report["cpu_bytes"] = cpu.device_put("cpu").wait().to_bytes().hex()
report["caught_after_cpu"] = caught()
report["driver_after_cpu"] = driver_loaded()
if report["opencl"] == "available":
    on_opencl = runtime.array(bytes(range(16)), device="opencl")
    report["opencl_bytes"] = on_opencl.to_bytes().hex()
    report["driver_after_opencl"] = driver_loaded()
print(json.dumps(report))
"""


def build_plugin_dir():
    for directory in plugin_dirs():
        if os.path.exists(os.path.join(directory, "backplane-cpu.so")):
            return directory
    return None


class UnusedBackendTest(unittest.TestCase):
    def test_an_unused_opencl_backend_loads_no_driver_and_keeps_the_signal_handlers(self):
        directory = build_plugin_dir()
        if directory is None or not os.path.exists(os.path.join(directory, "backplane-opencl.so")):
            self.skipTest("the opencl plugin is not built")
        done = subprocess.run([sys.executable, "-c", PROGRAM, directory], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "BACKPLANE_LOG": "off"})
        self.assertEqual(done.returncode, 0, done.stderr)
        report = json.loads(done.stdout.strip().splitlines()[-1])
        if report["opencl"] != "available":
            self.skipTest(f"opencl is {report['opencl']} here (no OpenCL driver such as PoCL)")
        self.assertTrue(report["opencl_devices"], report)  # listed from the helper's snapshot
        self.assertEqual(report["cpu_bytes"], bytes(range(16)).hex())
        self.assertFalse(report["driver_after_cpu"], "the OpenCL driver was loaded by a program that used only cpu")
        self.assertEqual(report["caught_after_cpu"], report["caught_before"],
                         "signals got a handler (SigCgt) without any opencl use")
        self.assertEqual(report["opencl_bytes"], bytes(range(16)).hex())
        self.assertTrue(report["driver_after_opencl"], "the opencl device worked without its driver loaded?")


if __name__ == "__main__":
    unittest.main()
