"""Runtime.memory_stats and reset_peak_memory_stats: the caching allocator's
peak between phases, and the device's total and free memory."""
import os
import tempfile
import unittest

import backplane
from support import plugin_runtime


def meminfo_total():
    """/proc/meminfo's MemTotal in bytes, or None where it is missing."""
    try:
        with open("/proc/meminfo", encoding="ascii") as file:
            for line in file:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class MemoryTest(unittest.TestCase):
    def runtime(self, config):
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        runtime = plugin_runtime(directory.name, os.environ["BACKPLANE_TEST_CPU_PLUGIN"],
                                 os.environ["BACKPLANE_TEST_SIM_PLUGIN"], config=config)
        self.addCleanup(runtime.close)
        return runtime

    def test_reset_peak_starts_a_new_phase(self):
        runtime = self.runtime("[backend.sim]\ndevices = 2\n")
        kept = runtime.array(b"\1" * 4096, "U8", device="sim:0")
        phase = runtime.array(b"\1" * 65536, "U8", device="sim:0")
        del phase
        self.assertEqual(runtime.memory_stats("sim:0").peak, 4096 + 65536)
        runtime.reset_peak_memory_stats("sim:0")
        stats = runtime.memory_stats("sim:0")
        self.assertEqual(stats.peak, 4096)
        self.assertEqual(stats.in_use, 4096)
        later = runtime.array(b"\1" * 8192, "U8", device="sim:0")
        self.assertEqual(runtime.memory_stats("sim:0").peak, 4096 + 8192)
        del kept, later
        runtime.reset_peak_memory_stats("sim:0")
        self.assertEqual(runtime.memory_stats("sim:0").peak, 0)

    def test_total_and_free_are_taken_at_the_call(self):
        runtime = self.runtime("[backend.sim]\nmemory_limit = 1048576\n")
        held = runtime.array(b"\1" * 4096, "U8", device="sim")
        stats = runtime.memory_stats("sim")
        self.assertEqual(stats.memory_total, 1 << 20)
        self.assertEqual(stats.memory_free, (1 << 20) - 4096)
        del held
        runtime.empty_cache("sim")
        self.assertEqual(runtime.memory_stats("sim").memory_free, 1 << 20)

    def test_cpu_reports_the_host_memory(self):
        runtime = self.runtime("")
        stats = runtime.memory_stats("cpu")
        total = meminfo_total()
        if total is not None:
            self.assertEqual(stats.memory_total, total)
        self.assertIsNotNone(stats.memory_free)
        assert stats.memory_free is not None
        self.assertGreater(stats.memory_free, 0)
        self.assertLessEqual(stats.memory_free, stats.memory_total)

    def test_an_unknown_free_figure_is_none(self):
        runtime = self.runtime("[backend.sim]\nreport_free = 0\nmemory_limit = 65536\n")
        stats = runtime.memory_stats("sim")
        self.assertEqual(stats.memory_total, 65536)
        self.assertIsNone(stats.memory_free)
        self.assertIsNone(runtime.device_info("sim").memory_free)

    def test_a_device_that_does_not_exist_is_named(self):
        runtime = self.runtime("")
        for call in (runtime.memory_stats, runtime.reset_peak_memory_stats):
            with self.assertRaises(backplane.OutOfRangeError) as caught:
                call("sim:5")
            self.assertIn("sim:5", caught.exception.message)
            with self.assertRaises(backplane.NotFoundError) as caught:
                call("tpu:0")
            self.assertIn("tpu", caught.exception.message)


if __name__ == "__main__":
    unittest.main()
