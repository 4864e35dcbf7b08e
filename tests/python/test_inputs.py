"""Python inputs that used to give wrong answers silently: scalars kept as
shape (), offsets and lengths that must be integers."""
import os
import tempfile
import unittest

import backplane
from support import isolated_runtime, optional_module

numpy = optional_module("numpy")


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class ScalarTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()

    def tearDown(self):
        self.runtime.close()

    def test_scalars_keep_shape_empty(self):
        for value in [numpy.float32(3.5), numpy.array(7, dtype=numpy.int64), 9, 2.5]:
            with self.subTest(value=repr(value)):
                array = self.runtime.array(value, device="cpu")
                self.assertEqual(array.shape, ())
                self.assertEqual(numpy.from_dlpack(array).shape, ())
                self.assertEqual(numpy.from_dlpack(array).item(), numpy.asarray(value).item())

    def test_a_saved_scalar_has_shape_empty_as_the_reference_writes(self):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "scalar.safetensors")
            backplane.safetensors.save(path, {"s": numpy.float32(1.5), "v": numpy.zeros(2, numpy.uint8)},
                                       runtime=self.runtime)
            header = backplane.safetensors.inspect(path)
            shapes = {tensor.name: tensor.shape for tensor in header.tensors}
            self.assertEqual(shapes, {"s": (), "v": (2,)})

    def test_a_zero_d_import_stays_zero_d(self):
        imported = self.runtime.from_dlpack(numpy.array(4, dtype=numpy.int32))
        self.assertEqual(imported.shape, ())


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class OffsetsTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()
        self.tokens = self.runtime.array(numpy.arange(100, dtype=numpy.uint16), device="cpu")

    def tearDown(self):
        self.runtime.close()

    def take(self, offsets, length=4):
        return self.runtime.take_windows(self.tokens, offsets, length, "cpu").wait()

    def test_integer_offsets_in_any_integer_form_work(self):
        for offsets in [[3, 9], (3, 9), numpy.array([3, 9], numpy.int32), numpy.array([3, 9], numpy.uint64),
                        numpy.array([[3, 9]], numpy.int64)[0], []]:
            with self.subTest(offsets=repr(offsets)):
                windows = numpy.from_dlpack(self.take(offsets))
                self.assertEqual(windows.shape, (len(offsets), 4))
                if len(offsets):
                    self.assertEqual(windows[:, 0].tolist(), [3, 9])

    def test_offsets_that_are_not_integers_are_refused(self):
        for offsets, kind in [([0.9, 1.9], "float64 values"), (numpy.array([1.0]), "float64 values"),
                              ([True, False], "booleans"), (["1", "2"], "<U1 values")]:
            with self.subTest(offsets=repr(offsets)):
                with self.assertRaises(backplane.InvalidArgumentError) as raised:
                    self.take(offsets)
                self.assertIn(f"offsets must be integers (a NumPy integer array or Python ints), got {kind}",
                              str(raised.exception))

    def test_an_offset_beyond_int64_is_refused_not_wrapped(self):
        with self.assertRaises(backplane.OutOfRangeError) as raised:
            self.take(numpy.array([2**64 - 1], numpy.uint64))
        self.assertIn("offset 18446744073709551615 is beyond the int64 range", str(raised.exception))
        with self.assertRaises(backplane.OutOfRangeError):
            self.take([2**64 - 1])

    def test_a_length_that_is_not_an_integer_is_refused_clearly(self):
        for length in [2.5, 4.0, True, "4"]:
            with self.subTest(length=repr(length)):
                with self.assertRaises(backplane.InvalidArgumentError) as raised:
                    self.take([1], length)
                self.assertIn("take_windows: length must be an integer", str(raised.exception))
        self.assertEqual(numpy.from_dlpack(self.take([1], numpy.int64(4))).shape, (1, 4))
