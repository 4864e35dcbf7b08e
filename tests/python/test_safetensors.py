"""safetensors from Python: save, inspect, load (zero-copy on cpu, streamed
elsewhere), with errors carrying codes and messages."""
import os
import pathlib
import struct
import tempfile
import unittest

import backplane
from support import isolated_runtime, optional_module

numpy = optional_module("numpy")


class SafetensorsTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()
        self.directory = tempfile.TemporaryDirectory()
        self.path = pathlib.Path(self.directory.name) / "model.safetensors"
        self.weights = self.runtime.array(struct.pack("<6f", *range(6)), "F32", (2, 3), device="sim")
        self.tokens = self.runtime.array(struct.pack("<5H", 9, 8, 7, 6, 5), "U16", (5,), device="cpu")
        backplane.safetensors.save(self.path, {"weights": self.weights, "tokens": self.tokens},
                                   metadata={"format": "pt"})

    def tearDown(self):
        self.runtime.close()
        self.directory.cleanup()

    def test_inspect_reads_the_header(self):
        header = backplane.safetensors.inspect(self.path)
        self.assertEqual(header.metadata, {"format": "pt"})
        by_name = {tensor.name: tensor for tensor in header.tensors}
        self.assertEqual((by_name["weights"].dtype, by_name["weights"].shape), ("F32", (2, 3)))
        self.assertEqual(by_name["tokens"].end - by_name["tokens"].begin, 10)
        self.assertEqual(header.file_size, os.path.getsize(self.path))
        self.assertEqual(header.data_offset, 8 + header.header_size)

    def test_load_on_cpu_and_on_the_default_device(self):
        with self.runtime.default_device_scope("cpu"):
            loaded = backplane.safetensors.load(self.path, runtime=self.runtime)
        self.assertEqual(loaded.metadata, {"format": "pt"})
        self.assertEqual(sorted(loaded.tensors), ["tokens", "weights"])
        self.assertEqual(loaded["tokens"].device, backplane.Device("cpu", 0))
        self.assertEqual(loaded["tokens"].to_bytes(), self.tokens.to_bytes())
        reports = []
        streamed = backplane.safetensors.load(self.path, names=["weights"], runtime=self.runtime,
                                              progress=lambda done, total: reports.append((done, total)))
        self.assertEqual(list(streamed.tensors), ["weights"])
        self.assertEqual(streamed["weights"].device.backend, "sim")
        self.assertEqual(streamed["weights"].to_bytes(), self.weights.to_bytes())
        self.assertEqual(reports[-1], (24, 24))

    def test_the_earlier_runtime_first_form_still_loads_and_warns(self):
        with self.assertWarns(DeprecationWarning) as caught:
            loaded = backplane.safetensors.load(self.runtime, self.path, "cpu", ["tokens"])
        self.assertIn("use load(path, ..., runtime=runtime)", str(caught.warning))
        self.assertEqual(list(loaded.tensors), ["tokens"])
        self.assertEqual(loaded["tokens"].device, backplane.Device("cpu", 0))
        with self.assertWarns(DeprecationWarning):
            with self.runtime.default_device_scope("cpu"):
                self.assertEqual(backplane.safetensors.load(None, self.path)["tokens"].to_bytes(),
                                 self.tokens.to_bytes())

    def test_load_takes_only_the_path_positionally(self):
        with self.assertRaises(TypeError) as caught:
            backplane.safetensors.load(self.path, "cpu")
        self.assertIn("one positional argument, the path", str(caught.exception))
        with self.assertRaises(TypeError) as caught:
            backplane.safetensors.load(self.runtime, self.path, runtime=self.runtime)
        self.assertIn("the runtime only first", str(caught.exception))

    @unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
    def test_a_loaded_cpu_tensor_reaches_numpy_without_a_copy(self):
        tokens = backplane.safetensors.load(self.path, device="cpu", runtime=self.runtime)["tokens"]
        view = numpy.from_dlpack(tokens)
        self.assertEqual(view.ctypes.data, tokens.data_ptr)
        self.assertEqual(view.tolist(), [9, 8, 7, 6, 5])

    def test_save_without_metadata(self):
        backplane.safetensors.save(self.path, {"tokens": self.tokens})
        self.assertIsNone(backplane.safetensors.inspect(self.path).metadata)
        backplane.safetensors.save(self.path, {"tokens": self.tokens}, metadata={})
        self.assertEqual(backplane.safetensors.inspect(self.path).metadata, {})

    @unittest.skipIf(numpy is None, "numpy is not installed")
    def test_numpy_arrays_of_every_layout_save_as_numpy_reads_them(self):
        # Contiguous arrays are saved in place; read-only, strided and
        # big-endian ones through a copy: the file is the same either way.
        base = numpy.arange(24, dtype=numpy.uint16).reshape(4, 6)
        readonly = base.copy()
        readonly.flags.writeable = False
        cases = {"contiguous": base, "readonly": readonly, "strided": base[:, ::2],
                 "big_endian": base.astype(">u2"), "empty": numpy.zeros((0, 3), dtype=numpy.int32)}
        for durable in (True, False):
            with self.subTest(durable=durable):
                backplane.safetensors.save(self.path, cases, durable=durable, runtime=self.runtime)
                loaded = backplane.safetensors.load(self.path, device="cpu", runtime=self.runtime)
                for name, value in cases.items():
                    got = numpy.from_dlpack(loaded[name])
                    self.assertEqual(got.shape, value.shape, name)
                    numpy.testing.assert_array_equal(got, value, name)

    def test_errors_carry_codes_and_messages(self):
        with self.assertRaises(backplane.NotFoundError) as caught:
            backplane.safetensors.inspect(self.path.with_name("missing.safetensors"))
        self.assertEqual(caught.exception.status, 8)
        self.assertIn("missing.safetensors", caught.exception.message)
        broken = self.path.with_name("broken.safetensors")
        broken.write_bytes(b"\x02\0\0\0\0\0\0\0{}" + b"x")
        with self.assertRaises(backplane.InvalidFileError) as caught:
            backplane.safetensors.load(broken, runtime=self.runtime)
        self.assertEqual(caught.exception.status, 10)
        self.assertIn("broken.safetensors", caught.exception.message)
        with self.assertRaises(backplane.NotFoundError) as caught:
            backplane.safetensors.load(self.path, names=["nope"], runtime=self.runtime)
        self.assertIn("nope", caught.exception.message)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            backplane.safetensors.save(self.path, {"__metadata__": self.tokens})
        self.assertIn("__metadata__", caught.exception.message)


if __name__ == "__main__":
    unittest.main()
