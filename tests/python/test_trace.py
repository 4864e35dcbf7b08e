"""backplane.trace(): a `with` block writes a Chrome trace with its transfers."""
import json
import os
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


if __name__ == "__main__":
    unittest.main()
