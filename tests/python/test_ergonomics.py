"""What a Python user reaches for first: dtype spellings, NumPy in and out,
odd shapes and byte orders, the loaded-file mapping, saving anything,
progress and cancellation, missing files."""
import ctypes
import gc
import os
import tempfile
import unittest

import backplane
from support import isolated_runtime, optional_module

numpy = optional_module("numpy")
torch = optional_module("torch")


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class ErgonomicsTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()
        self.scratch = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.runtime.close()
        self.scratch.cleanup()

    def path(self, name):
        return os.path.join(self.scratch.name, name)

    def test_every_dtype_spelling_is_accepted(self):
        tokens = self.runtime.array(numpy.arange(64, dtype=numpy.uint16), device="cpu")
        spellings = [numpy.int64, numpy.dtype("int64"), numpy.dtype("<i8"), "int64", "I64"]
        if torch is not None:
            spellings.append(torch.int64)
        for spelling in spellings:
            with self.subTest(spelling=spelling):
                batch = self.runtime.take_windows(tokens, [1, 2], 3, "cpu", dtype=spelling)
                self.assertEqual(batch.dtype, "I64")
                self.assertEqual(batch.numpy().tolist(), [[1, 2, 3], [2, 3, 4]])
        self.assertEqual(backplane.dtype_bits(numpy.float16), 16)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.runtime.take_windows(tokens, [0], 2, "cpu", dtype="int65")
        self.assertIn("int65", caught.exception.message)

    def test_big_endian_input_is_byte_swapped_never_stored_wrong(self):
        values = numpy.array([1, 258, 65535], dtype=">u2")
        array = self.runtime.array(values, device="cpu")
        self.assertEqual(array.dtype, "U16")
        self.assertEqual(array.numpy().tolist(), [1, 258, 65535])
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.runtime.take_windows(array, [0], 2, "cpu", dtype=numpy.dtype(">i8"))
        self.assertIn("big-endian", caught.exception.message)

    def test_empty_arrays_of_any_shape(self):
        for shape in [(0,), (2, 0, 3), (0, 5)]:
            with self.subTest(shape=shape):
                array = self.runtime.array(numpy.zeros(shape, dtype=numpy.float32), device="cpu")
                self.assertEqual(array.shape, shape)
                self.assertEqual(array.nbytes, 0)
                self.assertEqual(numpy.asarray(array).shape, shape)
                self.assertEqual(array.to_bytes(), b"")

    def test_numpy_views_share_memory_and_keep_the_data_alive(self):
        array = self.runtime.array(numpy.arange(6, dtype=numpy.int32).reshape(2, 3), device="cpu")
        view = numpy.asarray(array)
        self.assertEqual(view.tolist(), [[0, 1, 2], [3, 4, 5]])
        self.assertEqual(view.__array_interface__["data"][0], array.data_ptr)
        self.assertFalse(view.flags.writeable)  # arrays are immutable from Python
        del array
        gc.collect()
        self.assertEqual(view.sum(), 15)  # still readable: the view holds the data
        self.assertEqual(numpy.array(self.runtime.array([1.5, 2.5], device="cpu"), dtype=numpy.float64).tolist(), [1.5, 2.5])

    def test_a_numpy_view_outlives_close_of_its_array(self):
        array = self.runtime.array(numpy.arange(1 << 16, dtype=numpy.int64), device="cpu")
        view = array.numpy()
        array.close()
        self.runtime.empty_cache("cpu")
        self.runtime.array(numpy.full(1 << 16, -1, dtype=numpy.int64), device="cpu")  # would reuse freed memory
        self.assertEqual(int(view[12345]), 12345)

    def test_repr_previews_values(self):
        text = repr(self.runtime.array(numpy.arange(100, dtype=numpy.int64), device="cpu"))
        self.assertIn("I64[100] on cpu:0", text)
        self.assertIn("97 98 99", text)
        self.assertIn("...", text)
        on_device = self.runtime.array(numpy.arange(4, dtype=numpy.int32), device="sim")
        self.assertIn("[0 1 2 3]", repr(on_device))  # small device arrays are copied for the preview

    def test_device_arrays_refuse_a_numpy_view_with_a_reason(self):
        on_device = self.runtime.array(numpy.arange(4, dtype=numpy.int32), device="sim")
        with self.assertRaises(TypeError) as caught:
            numpy.asarray(on_device)
        self.assertIn("not in host memory", str(caught.exception))

    def save_and_load(self, arrays, **load_options):
        path = self.path("file.safetensors")
        backplane.safetensors.save(path, arrays, runtime=self.runtime)
        return backplane.safetensors.load(path, device="cpu", **load_options, runtime=self.runtime)

    def test_loaded_is_a_read_only_mapping(self):
        loaded = self.save_and_load({"a": numpy.arange(3, dtype=numpy.int8), "b": numpy.ones(2, numpy.float32)})
        self.assertIn("a", loaded)
        self.assertNotIn("c", loaded)
        self.assertEqual(len(loaded), 2)
        self.assertEqual(sorted(loaded), ["a", "b"])
        self.assertEqual(sorted(name for name, _ in loaded.items()), ["a", "b"])
        self.assertEqual(loaded.get("c"), None)
        with self.assertRaises(TypeError):
            loaded["c"] = loaded["a"]
        with self.assertRaises(KeyError) as caught:
            loaded["c"]
        self.assertIn("'c'", str(caught.exception))
        self.assertIsNone(loaded.metadata)

    def test_names_takes_one_string_or_an_iterable(self):
        arrays = {"tokens": numpy.arange(4, dtype=numpy.uint16), "other": numpy.zeros(1, numpy.uint8)}
        self.assertEqual(list(self.save_and_load(arrays, names="tokens")), ["tokens"])
        self.assertEqual(sorted(self.save_and_load(arrays, names=iter(["tokens", "other"]))), ["other", "tokens"])
        with self.assertRaises(backplane.NotFoundError) as caught:
            self.save_and_load(arrays, names="tok")
        self.assertIn("tok", caught.exception.message)

    def test_save_takes_numpy_arrays_backplane_arrays_and_dlpack_producers(self):
        arrays = {"numpy": numpy.arange(3, dtype=numpy.int16),
                  "backplane": self.runtime.array(numpy.arange(2, dtype=numpy.float64), device="sim")}
        if torch is not None:
            arrays["torch"] = torch.arange(4, dtype=torch.int32)
        loaded = self.save_and_load(arrays)
        self.assertEqual(loaded["numpy"].numpy().tolist(), [0, 1, 2])
        self.assertEqual(loaded["backplane"].numpy().tolist(), [0.0, 1.0])
        if torch is not None:
            self.assertEqual(loaded["torch"].numpy().tolist(), [0, 1, 2, 3])
        with self.assertRaises(TypeError) as caught:
            backplane.safetensors.save(self.path("x.safetensors"), {"bad": object()}, runtime=self.runtime)
        self.assertIn("'bad'", str(caught.exception))

    def test_a_failing_progress_callback_cancels_the_load_and_chains_its_error(self):
        path = self.path("big.safetensors")
        backplane.safetensors.save(path, {"t": numpy.zeros(1 << 20, numpy.uint8)}, runtime=self.runtime)
        calls = []

        def progress(done, total):
            calls.append((done, total))
            raise KeyError("stop here")

        with self.assertRaises(backplane.CancelledError) as caught:
            backplane.safetensors.load(path, device="sim", progress=progress, runtime=self.runtime)
        self.assertIsInstance(caught.exception.__cause__, KeyError)
        self.assertIn("load cancelled by the progress callback", caught.exception.message)
        self.assertIn("it raised KeyError", caught.exception.message)
        self.assertEqual(len(calls), 1)  # no report after the failure

    def test_progress_true_without_a_terminal_loads_quietly(self):
        path = self.path("p.safetensors")
        backplane.safetensors.save(path, {"t": numpy.zeros(16, numpy.uint8)}, runtime=self.runtime)
        self.assertEqual(len(backplane.safetensors.load(path, device="cpu", progress=True, runtime=self.runtime)), 1)

    def test_a_missing_file_is_a_file_not_found_error(self):
        missing = self.path("nope.safetensors")
        for call in (lambda: backplane.safetensors.load(missing, runtime=self.runtime),
                     lambda: backplane.safetensors.inspect(missing)):
            with self.assertRaises(FileNotFoundError) as caught:
                call()
            self.assertIsInstance(caught.exception, backplane.Error)
            self.assertEqual(caught.exception.filename, missing)
            self.assertIn("nope.safetensors", str(caught.exception))

    def test_a_rejected_capsule_reaches_the_user_and_leaks_nothing(self):
        array = self.runtime.array(numpy.arange(4, dtype=numpy.int32), device="cpu")
        before = self.runtime.memory_stats("cpu").in_use

        class Rejecting:
            def __dlpack__(self, **_):
                capsule = array.__dlpack__()
                raise ValueError("consumer says no")

            def __dlpack_device__(self):
                return array.__dlpack_device__()

        with self.assertRaises(ValueError) as caught:
            numpy.from_dlpack(Rejecting())
        self.assertIn("consumer says no", str(caught.exception))
        del array
        gc.collect()
        self.assertLessEqual(self.runtime.memory_stats("cpu").in_use, before)

    def test_a_consumed_capsule_cannot_be_imported_twice(self):
        capsule = self.runtime.array(numpy.arange(2, dtype=numpy.int8), device="cpu").__dlpack__()
        self.runtime.from_dlpack(capsule)
        with self.assertRaises(ValueError):
            self.runtime.from_dlpack(capsule)

    def test_offsets_take_any_integer_sequence(self):
        tokens = self.runtime.array(numpy.arange(32, dtype=numpy.uint16), device="cpu")
        for offsets in ([3, 4], (3, 4), numpy.array([3, 4], dtype=numpy.int32), range(3, 5),
                        numpy.array([3, 4], dtype=numpy.int64)[::1]):
            with self.subTest(offsets=offsets):
                self.assertEqual(self.runtime.take_windows(tokens, offsets, 2, "cpu").numpy().tolist(),
                                 [[3, 4], [4, 5]])
        readonly = numpy.array([3, 4], dtype=numpy.int64)
        readonly.flags.writeable = False
        self.assertEqual(self.runtime.take_windows(tokens, readonly, 1, "cpu").numpy().tolist(), [[3], [4]])
        self.assertEqual(self.runtime.take_windows(tokens, [], 2, "cpu").shape, (0, 2))
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.runtime.take_windows(tokens, [[1, 2]], 2, "cpu")
        self.assertIn("offsets must be 1-D", caught.exception.message)
        with self.assertRaises(backplane.OutOfRangeError) as caught:
            self.runtime.take_windows(tokens, [31], 2, "cpu")
        self.assertIn("31", caught.exception.message)


if __name__ == "__main__":
    unittest.main()
