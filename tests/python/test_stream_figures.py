"""A stream's figures from Python: stats() is counters only (cheap enough
to log every step; bench/python/bench_stats.py measures it), and the
resident size of the sources is its own call, which reads /proc/self/smaps."""
import pathlib
import tempfile
import unittest

import backplane
from support import isolated_runtime, optional_module

numpy = optional_module("numpy")


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class StreamFiguresTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()
        self.directory = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.runtime.close()
        self.directory.cleanup()

    def test_stats_are_counters_and_resident_bytes_is_asked_for_separately(self):
        path = pathlib.Path(self.directory.name) / "tokens.u16"
        numpy.arange(1 << 20, dtype=numpy.uint16).tofile(path)
        tokens = backplane.load_tokens(path, dtype="uint16", runtime=self.runtime)
        with backplane.batches(tokens, 8, 255, device="cpu:0", steps=20, runtime=self.runtime) as stream:
            for _ in stream:
                pass
            stats = stream.stats()
            self.assertEqual(stats.steps, 20)
            self.assertNotIn("resident_bytes", backplane.BatchStats.__dataclass_fields__)
            resident = stream.resident_bytes()
            # The windows' pages were read through the mapping: some are resident,
            # never more than the file.
            self.assertGreater(resident, 0)
            self.assertLessEqual(resident, path.stat().st_size + (2 << 20))

        heap = self.runtime.array(numpy.arange(4096, dtype=numpy.uint16), device="cpu:0")
        with backplane.batches(heap, 4, 15, device="cpu:0", runtime=self.runtime) as stream:
            next(iter(stream))
            self.assertEqual(stream.resident_bytes(), 0)  # heap memory is no file mapping


if __name__ == "__main__":
    unittest.main()
