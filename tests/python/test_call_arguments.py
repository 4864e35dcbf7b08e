"""Arguments the Python package turns into C: text that C would cut at a NUL
byte or that has no UTF-8 form, numbers no double holds, and output dtypes
that would change tokens. Each is refused as a backplane error naming the
argument, in the words the C++ API uses, never a raw Python exception or a
silently different call."""
import os
import pathlib
import tempfile
import unittest

import backplane
from support import isolated_runtime, optional_module

numpy = optional_module("numpy")


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class CallArgumentsTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()
        self.directory = tempfile.TemporaryDirectory()
        self.root = pathlib.Path(self.directory.name)

    def tearDown(self):
        self.runtime.close()
        self.directory.cleanup()

    def refused(self, call, words):
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            call()
        self.assertEqual(caught.exception.message, words)

    def test_a_nul_byte_in_a_token_path_name_or_pattern_is_refused_naming_it(self):
        evil = self.root / "evil.u16"
        numpy.arange(4, dtype=numpy.uint16).tofile(evil)
        numpy.arange(4, dtype=numpy.uint16).tofile(self.root / "evil.u16good.u16")
        load = backplane.load_tokens
        # The words of the C++ API (tests/tokens/test_token_arguments.cpp).
        self.refused(lambda: load(f"{evil}\0good.u16", dtype="uint16", runtime=self.runtime),
                     f"load_tokens: path holds a NUL byte at offset {len(str(evil))}")
        self.refused(lambda: load(pathlib.Path(f"{evil}\0x"), dtype="uint16", runtime=self.runtime),
                     f"load_tokens: path holds a NUL byte at offset {len(str(evil))}")
        self.refused(lambda: load([evil, f"{evil}\0"], dtype="uint16", runtime=self.runtime),
                     f"load_tokens: path holds a NUL byte at offset {len(str(evil))}")
        self.refused(lambda: load(evil, name="a\0b", runtime=self.runtime),
                     "load_tokens: name holds a NUL byte at offset 1")
        pattern = str(self.root / "*.u16")
        self.refused(lambda: load(pattern + "\0x", dtype="uint16", runtime=self.runtime),
                     f"load_token_files: pattern holds a NUL byte at offset {len(pattern)}")

    def test_a_nul_byte_in_a_selector_backend_name_or_plugin_path_is_refused_naming_it(self):
        # "cpu\0:3" would reach C as "cpu" and resolve cpu:0.
        self.refused(lambda: self.runtime.device("cpu\0:3"), "device: selector holds a NUL byte at offset 3")
        self.refused(lambda: self.runtime.is_available("cpu\0x"), "is_available: backend holds a NUL byte at offset 3")
        self.refused(lambda: self.runtime.devices("cpu\0"), "devices: backend holds a NUL byte at offset 3")
        self.refused(lambda: backplane.Runtime(plugin_paths=[f"{self.root}\0/x"]),
                     f"Runtime: plugin_paths[0] holds a NUL byte at offset {len(str(self.root))}")

    def test_a_name_with_no_utf8_form_is_a_backplane_error_naming_it(self):
        path = self.root / "t.safetensors"
        backplane.safetensors.save(path, {"tokens": numpy.arange(4, dtype=numpy.uint16)}, runtime=self.runtime)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            backplane.load_tokens(path, name="a\udcff", runtime=self.runtime)
        self.assertIn("load_tokens: name is not valid text: character 1 is '\\udcff'", caught.exception.message)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            backplane.safetensors.save(self.root / "u.safetensors", {"x\ud800": numpy.zeros(2, numpy.uint8)},
                                       runtime=self.runtime)
        self.assertIn("safetensors.save: tensor name 'x\\ud800' is not valid text", caught.exception.message)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            backplane.safetensors.load(path, names=["\udc80"], runtime=self.runtime)
        self.assertIn("safetensors.load: tensor name '\\udc80' is not valid text", caught.exception.message)
        # A stray byte that os.fsdecode turned into a surrogate is a path the
        # file system holds: it reaches the library as that byte.
        stray = os.fsdecode(b"\xff.u16")
        with self.assertRaises(backplane.MissingFileError):
            backplane.load_tokens(self.root / stray, dtype="uint16", runtime=self.runtime)

    def test_weights_past_any_double_are_refused_naming_the_weight(self):
        tokens = self.runtime.array(numpy.arange(1000, dtype=numpy.uint16), device="cpu:0")
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            backplane.batches([tokens, tokens], 4, 15, weights=[10**400, 1], device="cpu:0", runtime=self.runtime)
        # Past any double it arrives as inf, and the core refuses it in the
        # words every face uses.
        self.assertEqual(caught.exception.message, "BatchStream: weight inf (of source 0) is not a finite number >= 0")
        with self.assertRaises(backplane.InvalidArgumentError):
            backplane.batches([tokens, tokens], 4, 15, weights=[1, 10**5000], device="cpu:0", runtime=self.runtime)

    def test_a_dtype_that_cannot_hold_every_token_is_refused_at_the_call(self):
        wide = self.runtime.array(numpy.full(1000, 70000, dtype=numpy.uint32), device="cpu:0")
        for dtype in ("uint16", "int8", "int32"):
            with self.subTest(dtype=dtype):
                with self.assertRaises(backplane.InvalidArgumentError) as caught:
                    backplane.batches(wide, 4, 15, dtype=dtype, device="cpu:0", runtime=self.runtime)
                self.assertIn("cannot hold every U32 token", caught.exception.message)
                with self.assertRaises(backplane.InvalidArgumentError) as caught:
                    self.runtime.take_windows(wide, [0, 5], 16, "cpu:0", dtype)
                self.assertIn("take_windows: dtype", caught.exception.message)
        negative = self.runtime.array(numpy.full(100, -5, dtype=numpy.int64), device="cpu:0")
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.runtime.take_windows(negative, [0], 8, "cpu:0", "uint64")
        self.assertIn("dtype U64 cannot hold every I64 token (I64 holds [-9223372036854775808, "
                      "9223372036854775807], U64 only [0, 18446744073709551615])", caught.exception.message)
        x, _ = next(iter(backplane.batches(wide, 4, 15, dtype="int64", device="cpu:0", runtime=self.runtime)))
        self.assertTrue((x == 70000).all())


class VersionTest(unittest.TestCase):
    def test_dunder_version_is_the_library_version(self):
        self.assertEqual(backplane.__version__, backplane.version())
        self.assertRegex(backplane.__version__, r"^\d+\.\d+\.\d+")


if __name__ == "__main__":
    unittest.main()
