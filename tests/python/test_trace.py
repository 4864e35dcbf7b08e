"""backplane.trace(): a `with` block writes a Chrome trace with its transfers."""
import json
import os
import pathlib
import tempfile
import unittest

import backplane
from support import isolated_runtime


class TraceTest(unittest.TestCase):
    def test_with_block_writes_transfer_events(self):
        runtime = isolated_runtime()
        try:
            with tempfile.TemporaryDirectory() as directory:
                path = os.path.join(directory, "out.json")
                with backplane.trace(path):
                    a = runtime.array(bytes(range(256)) * 64, "U8", (16384,), device="cpu")
                    runtime.device_put(a, "sim:0").to_bytes()
                with open(path, encoding="utf-8") as file:
                    trace = json.load(file)
                uploads = [event for event in trace["traceEvents"] if event["cat"] == "host_to_device"]
                self.assertTrue(uploads, "no host_to_device event in the trace")
                self.assertEqual(uploads[0]["args"]["bytes"], 16384)
                self.assertEqual(uploads[0]["args"]["target"], "sim:0")
                self.assertEqual(trace["displayTimeUnit"], "ms")
        finally:
            runtime.close()

    def test_a_second_trace_while_recording_is_an_error(self):
        with tempfile.TemporaryDirectory() as directory:
            with backplane.trace(os.path.join(directory, "first.json")):
                with self.assertRaises(backplane.InvalidArgumentError):
                    backplane.trace(os.path.join(directory, "second.json"))
            with self.assertRaises(backplane.FileSystemError):
                backplane.trace(os.path.join(directory, "missing", "out.json"))

    def test_bytes_and_path_objects_name_the_file(self):
        with tempfile.TemporaryDirectory() as directory:
            for path in (os.fsencode(os.path.join(directory, "bytes.json")),
                         pathlib.Path(directory) / "pathlib.json"):
                with backplane.trace(path) as recording:
                    pass
                self.assertTrue(os.path.isfile(path), path)
                self.assertEqual(recording.path, os.fsdecode(path))

    def test_bad_arguments_are_refused_by_name(self):
        with tempfile.TemporaryDirectory() as directory:
            good = os.path.join(directory, "out.json")
            with self.assertRaisesRegex(backplane.InvalidArgumentError, "path .* holds a NUL byte"):
                backplane.trace(os.path.join(directory, "a\0b.json"))
            with self.assertRaisesRegex(backplane.InvalidArgumentError, "path .* holds a NUL byte"):
                backplane.trace(b"a\0b.json")
            self.assertFalse(os.path.exists(os.path.join(directory, "a")))  # not cut at the NUL
            for capacity in (-1, 2**64):
                with self.assertRaisesRegex(backplane.InvalidArgumentError, f"capacity .*got {capacity}"):
                    backplane.trace(good, capacity=capacity)
            with self.assertRaisesRegex(TypeError, "capacity must be an int, got float"):
                backplane.trace(good, capacity=1.5)
            with self.assertRaisesRegex(TypeError, "path must be str, bytes or os.PathLike, got int"):
                backplane.trace(3)
            with self.assertRaisesRegex(backplane.InvalidArgumentError, "'%x'"):
                backplane.trace(os.path.join(directory, "t-%x.json"))
            self.assertEqual(os.listdir(directory), [])  # nothing was started

    def test_capacity_0_is_the_default_capacity(self):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "out.json")
            with backplane.trace(path, capacity=0):
                pass
            with open(path, encoding="utf-8") as file:
                capacity = json.load(file)["otherData"]["capacity"]
            self.assertEqual(capacity, backplane.Trace.DEFAULT_CAPACITY)
            self.assertEqual(capacity, 1048576)

    def test_a_fifo_is_refused_at_once(self):
        with tempfile.TemporaryDirectory() as directory:
            fifo = os.path.join(directory, "trace.fifo")
            os.mkfifo(fifo)
            with self.assertRaisesRegex(backplane.InvalidArgumentError, "FIFO"):
                backplane.trace(fifo)  # a hang here is the bug this guards against

    def test_chdir_inside_the_block_does_not_move_the_file(self):
        before = os.getcwd()
        with tempfile.TemporaryDirectory() as first, tempfile.TemporaryDirectory() as second:
            try:
                os.chdir(first)
                with backplane.trace("out.json"):
                    os.chdir(second)
            finally:
                os.chdir(before)
            self.assertTrue(os.path.isfile(os.path.join(first, "out.json")))
            self.assertEqual(os.listdir(second), [])

    def test_file_names_per_process(self):
        with tempfile.TemporaryDirectory() as directory:
            with backplane.trace(os.path.join(directory, "trace-%p.json")):
                pass
            self.assertEqual(os.listdir(directory), [f"trace-{os.getpid()}.json"])


if __name__ == "__main__":
    unittest.main()
