"""The names a PyTorch or NumPy user reaches for first: set_default_device and
is_available at module level, devices() of an unavailable backend, len() of
a stream with steps=, a dir() of the package's own names, array() with a
dtype converting values as NumPy does, and x, y typed for editors (the types
themselves are checked by mypy in typed_batches.py)."""
import inspect
import os
import tempfile
import unittest

import backplane
from support import optional_module, plugin_runtime, sim_runtime

numpy = optional_module("numpy")


class ModuleFunctionsTest(unittest.TestCase):
    def test_set_default_device_and_is_available_at_module_level(self):
        self.assertTrue(backplane.is_available("cpu"))
        self.assertFalse(backplane.is_available("no_such_backend"))
        before = backplane.default_device()
        try:
            backplane.set_default_device("cpu:0")
            chosen = backplane.default_device()
            self.assertEqual((str(chosen), chosen.source), ("cpu:0", "set in code"))
        finally:
            backplane.set_default_device(None)
        self.assertEqual(backplane.default_device(), before)
        with self.assertRaises(backplane.NotFoundError) as caught:
            backplane.set_default_device("no_such_backend:0")
        self.assertIn("no_such_backend", str(caught.exception))

    def test_dir_lists_the_packages_own_names(self):
        names = dir(backplane)
        for leaked in ("Any", "List", "Optional", "annotations"):
            self.assertNotIn(leaked, names)
        for public in backplane.__all__:
            self.assertIn(public, names)


class TypedBatchesTest(unittest.TestCase):
    def test_the_typed_options_are_the_signatures_keywords(self):
        # BatchOptions types batches()' options for editors; a keyword added
        # to the signature but not there would be an error in every caller's
        # type checker, one there but not in the signature a TypeError.
        from backplane._batches import BatchOptions
        keywords = {name for name, parameter in inspect.signature(backplane.BatchStream.__init__).parameters.items()
                    if parameter.kind is inspect.Parameter.KEYWORD_ONLY}
        # sharding= makes global jax.Arrays: typed by the overload for Any.
        typed_by_overloads = {"device", "documents", "to", "sharding"}
        self.assertEqual(set(BatchOptions.__annotations__) | typed_by_overloads, keywords)

    @unittest.skipIf(numpy is None, "numpy is not installed")
    def test_the_class_takes_the_item_type(self):
        # BatchStream[...] in a user's annotation must not fail at run time.
        self.assertIsNotNone(backplane.BatchStream[tuple])
        tokens = backplane.array(numpy.arange(64, dtype=numpy.uint16), device="cpu:0")
        with backplane.batches(tokens, 2, 4, device="cpu:0", seed=1) as stream:
            x, y = next(stream)
        self.assertIsInstance(x, numpy.ndarray)
        self.assertIsInstance(y, numpy.ndarray)


class UnavailableDevicesTest(unittest.TestCase):
    def test_an_unavailable_backend_has_no_devices_and_an_unknown_one_raises(self):
        fixtures = os.environ["BACKPLANE_TEST_PLUGIN_DIRS"].split(os.pathsep)[-1]
        with tempfile.TemporaryDirectory() as scratch:
            runtime = plugin_runtime(scratch, os.environ["BACKPLANE_TEST_CPU_PLUGIN"],
                                     os.path.join(fixtures, "backplane-unavailable.so"))
            unavailable = [backend.name for backend in runtime.backends() if not backend.available]
            self.assertEqual(len(unavailable), 1, runtime.backends())
            self.assertEqual(runtime.devices(unavailable[0]), [])
            self.assertEqual(runtime.devices("cpu"), [backplane.Device("cpu", 0)])
            self.assertEqual(runtime.devices(), [backplane.Device("cpu", 0)])
            with self.assertRaises(backplane.NotFoundError) as caught:
                runtime.devices("no_such_backend")
            self.assertIn("no backend 'no_such_backend'", str(caught.exception))
            runtime.close()


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class NumpyLikeTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        self.runtime = sim_runtime(self.scratch.name)

    def tearDown(self):
        self.runtime.close()
        self.scratch.cleanup()

    def test_array_with_a_dtype_converts_values_like_numpy(self):
        for data, dtype in (([1, 2, 3], "uint8"), ([1.5, -2.0], "int32"), ([1, 2], numpy.float32),
                            (numpy.arange(4, dtype=numpy.int64), "int16"), ([[1, 2], [3, 4]], "uint16")):
            with self.subTest(data=data, dtype=dtype):
                expected = numpy.array(data, dtype=dtype)
                made = backplane.array(data, dtype=dtype, device="cpu")
                self.assertEqual(made.shape, expected.shape)
                self.assertEqual(numpy.asarray(made).dtype, expected.dtype)
                self.assertEqual(numpy.asarray(made).tolist(), expected.tolist())
        on_device = self.runtime.array([1, 2, 3], dtype="uint8", device="sim:0")
        self.assertEqual(on_device.to_bytes(), bytes([1, 2, 3]))

    def test_a_dtype_numpy_lacks_takes_the_bits(self):
        one = self.runtime.array(numpy.array([0x3F80], dtype=numpy.uint16), dtype="BF16", device="cpu")
        self.assertEqual((one.dtype, one.to_bytes()), ("BF16", b"\x80\x3f"))

    def test_len_of_a_stream_is_the_steps_left(self):
        tokens = self.runtime.array(numpy.arange(1000, dtype=numpy.uint16), device="cpu:0")
        stream = backplane.batches(tokens, 2, 8, device="cpu:0", steps=5)
        self.assertEqual(len(stream), 5)
        next(stream)
        self.assertEqual(len(stream), 4)
        resumed = backplane.batches(tokens, 2, 8, device="cpu:0", steps=5, state=stream.state_dict())
        self.assertEqual(len(resumed), 4)
        self.assertEqual(len(list(resumed)), 4)
        self.assertEqual(len(resumed), 0)
        self.assertTrue(resumed)  # truth is not the length: an exhausted stream is still a stream
        endless = backplane.batches(tokens, 2, 8, device="cpu:0")
        with self.assertRaises(TypeError) as caught:
            len(endless)
        self.assertIn("without steps=", str(caught.exception))
        self.assertTrue(endless)
        for each in (stream, resumed, endless):
            each.close()


if __name__ == "__main__":
    unittest.main()
