"""A step that fails hands out nothing and consumes nothing: a converter that
raises (for one device of several too) leaks no array and the next next()
hands the same step out; to="numpy" onto device memory is refused when
batches() is called; a closed stream stays closed."""
import tempfile
import unittest

import backplane
from support import optional_module, sim_runtime

numpy = optional_module("numpy")


class Flaky:
    """A converter that raises for `device` while `failures` lasts, and
    otherwise reads the batch back through the library."""

    def __init__(self, device=None, failures=1):
        self.device, self.failures = device, failures

    def __call__(self, array):
        if self.failures and (self.device is None or array.device == self.device):
            self.failures -= 1
            raise RuntimeError(f"converter failed for {array.device}")
        return numpy.frombuffer(array.to_bytes(), dtype=numpy.int64).reshape(array.shape)


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class StreamFailuresTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        self.runtime = sim_runtime(self.scratch.name)
        self.tokens = self.runtime.array(numpy.arange(20_000, dtype=numpy.uint16), device="cpu:0")

    def tearDown(self):
        self.runtime.close()
        self.scratch.cleanup()

    def stream(self, **options):
        options.setdefault("device", "cpu:0")
        return backplane.batches(self.tokens, 4, 16, seed=5, **options)

    def reference(self, count, **options):
        return [pair for pair in self.stream(steps=count, **options)]

    def test_a_converter_that_raises_for_one_device_leaks_nothing(self):
        devices = ["sim:0", "sim:1"]
        stream = self.stream(device=devices, to=Flaky(device=backplane.Device("sim", 0)))
        with self.assertRaisesRegex(RuntimeError, "converter failed for sim:0"):
            next(stream)
        stream.close()
        for device in devices:
            self.assertEqual(self.runtime.memory_stats(device).in_use, 0, device)

    def test_a_failed_conversion_does_not_consume_the_step(self):
        expected = self.reference(3, to=Flaky(failures=0))
        stream = self.stream(to=Flaky(failures=2))
        for _ in range(2):
            with self.assertRaisesRegex(RuntimeError, "converter failed"):
                next(stream)
            self.assertEqual(stream.step, 0)
            self.assertEqual(stream.state_dict()["step"], 0)
        saved = stream.state_dict()
        for step in range(3):
            x, y = next(stream)
            self.assertEqual(x.tolist(), expected[step][0].tolist(), step)
            self.assertEqual(y.tolist(), expected[step][1].tolist(), step)
        self.assertEqual(stream.step, 3)
        self.assertEqual(stream.state_dict()["step"], 3)
        resumed = self.stream(state=saved, to=Flaky(failures=0))
        self.assertEqual(next(resumed)[0].tolist(), expected[0][0].tolist())  # the state named the failed step
        stream.close()
        resumed.close()

    def test_a_failed_step_of_several_devices_is_handed_out_whole(self):
        devices = ["sim:0", "sim:1"]
        expected = next(self.stream(device=devices, to=Flaky(failures=0)))
        stream = self.stream(device=devices, to=Flaky(device=backplane.Device("sim", 1)))
        with self.assertRaisesRegex(RuntimeError, "converter failed for sim:1"):
            next(stream)
        shards = next(stream)
        self.assertEqual([x.tolist() for x, _ in shards], [x.tolist() for x, _ in expected])
        self.assertEqual(stream.step, 1)
        stream.close()

    def test_numpy_onto_device_memory_is_refused_at_the_call(self):
        cases = [dict(device="sim:1"), dict(device=["sim:0", "sim:1"]), dict(device="sim:0", to="numpy")]
        for options in cases:
            with self.subTest(options=options), self.assertRaises(backplane.InvalidArgumentError) as caught:
                self.stream(**options)
            message = str(caught.exception)
            self.assertIn("to='numpy' needs host memory", message)
            self.assertIn("sim:", message)
            self.assertIn("DLPack device type 12", message)
        self.runtime.set_default_device("sim:1")  # the default device decides, when no device is given
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.stream(device=None)
        self.assertIn("but sim:1 is not host memory", str(caught.exception))
        self.runtime.set_default_device("cpu:0")
        x, _ = next(self.stream(device=None))
        self.assertEqual(x.shape, (4, 16))
        self.stream(device="sim:1", to=Flaky(failures=0)).close()  # a converter of its own is the caller's call

    def test_load_state_dict_after_close_raises_and_stays_closed(self):
        stream = self.stream()
        saved = stream.state_dict()
        stream.close()
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            stream.load_state_dict(saved)
        self.assertIn("used after close()", str(caught.exception))
        with self.assertRaises(backplane.InvalidArgumentError):
            next(stream)
        self.assertIn("closed", repr(stream))


if __name__ == "__main__":
    unittest.main()
