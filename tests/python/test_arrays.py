"""Arrays: creation from buffers, queries, device_put, take_windows, memory."""
import array as pyarray
import struct
import unittest

import backplane
from support import isolated_runtime, optional_module

numpy = optional_module("numpy")


class ArrayTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()

    def tearDown(self):
        self.runtime.close()

    def test_from_bytes_and_buffers(self):
        data = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
        a = self.runtime.array(data, "F32", (2, 3), device="cpu")
        self.assertEqual(a.dtype, "F32")
        self.assertEqual(a.shape, (2, 3))
        self.assertEqual(a.ndim, 2)
        self.assertEqual(a.nbytes, 24)
        self.assertEqual(a.device, backplane.Device("cpu", 0))
        self.assertEqual(a.to_bytes(), data)
        b = self.runtime.array(pyarray.array("H", [1, 2, 3]), "uint16")  # default device: sim
        self.assertEqual(b.device.backend, "sim")
        self.assertEqual(b.shape, (3,))
        self.assertEqual(b.to_bytes(), struct.pack("<3H", 1, 2, 3))
        scalar = self.runtime.array(struct.pack("<q", -5), "I64", ())
        self.assertEqual(scalar.shape, ())
        self.assertEqual(scalar.to_bytes(), struct.pack("<q", -5))

    @unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
    def test_numpy_arrays_give_dtype_and_shape(self):
        values = numpy.arange(12, dtype=numpy.int32).reshape(3, 4)
        a = self.runtime.array(values, device="cpu")
        self.assertEqual((a.dtype, a.shape), ("I32", (3, 4)))
        self.assertEqual(a.to_bytes(), values.tobytes())
        self.assertEqual(a[1:3].to_bytes(), values[1:3].tobytes())
        self.assertTrue(a[1:3].shares_buffer_with(a))

    def test_bad_dtype_and_shape_raise_with_code_and_message(self):
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.runtime.array(b"\0" * 4, "float33", (1,))
        self.assertEqual(caught.exception.status, 1)
        self.assertIn("'float33' is not a dtype", caught.exception.message)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.runtime.array(b"\0" * 4, "U8", (5,))
        self.assertIn("5", caught.exception.message)
        with self.assertRaises(backplane.NotFoundError):
            self.runtime.array(b"\0", "U8", (1,), device="tpu")

    def test_device_put_wait_and_progress(self):
        data = bytes(range(256)) * (17 * 4096 + 1)  # 17 MiB + 256 bytes: three staging chunks
        source = self.runtime.array(data, "U8", device="cpu")
        reports = []
        moved = source.device_put(progress=lambda done, total: reports.append((done, total)))
        self.assertEqual(moved.device.backend, "sim")
        moved.wait()
        self.assertTrue(moved.is_ready)
        self.assertEqual(len(reports), 3)
        self.assertEqual(reports[-1], (len(data), len(data)))
        self.assertEqual(moved.to_bytes(), data)
        same = source.device_put("cpu")
        self.assertTrue(same.shares_buffer_with(source))

    def test_take_windows(self):
        tokens = self.runtime.array(struct.pack("<100H", *range(1000, 1100)), "U16", device="cpu")
        batch = self.runtime.take_windows(tokens, [0, 10, 95], 5, dtype="I64")
        self.assertEqual((batch.shape, batch.dtype, batch.device.backend), ((3, 5), "I64", "sim"))
        values = struct.unpack("<15q", batch.wait().to_bytes())
        self.assertEqual(values[0], 1000)
        self.assertEqual(values[5:10], tuple(range(1010, 1015)))
        self.assertEqual(values[14], 1099)
        with self.assertRaises(backplane.OutOfRangeError) as caught:
            self.runtime.take_windows(tokens, [96], 5)
        self.assertEqual(caught.exception.status, 7)
        self.assertIn("96", caught.exception.message)

    def test_memory_stats_and_empty_cache(self):
        a = self.runtime.array(b"\0" * 4096, "U8", device="sim")
        stats = self.runtime.memory_stats("sim")
        self.assertGreaterEqual(stats.in_use, 4096)
        del a
        self.assertGreater(self.runtime.memory_stats().cached, 0)
        self.runtime.empty_cache()
        self.assertEqual(self.runtime.memory_stats().cached, 0)

    def test_arrays_outlive_a_closed_runtime_for_reading(self):
        a = self.runtime.array(b"abc", "U8", device="cpu")
        self.runtime.close()
        self.assertEqual(a.to_bytes(), b"abc")
        with self.assertRaises(backplane.InvalidArgumentError):
            a.device_put("cpu")
        a.close()
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            a.to_bytes()
        self.assertIn("used after close()", str(caught.exception))
        self.assertIsInstance(caught.exception, ValueError)  # as it was before the class said so


if __name__ == "__main__":
    unittest.main()
