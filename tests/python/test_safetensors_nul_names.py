"""safetensors names and metadata with NUL bytes ("\\u0000" in the file's
JSON, which the format allows): inspect, load and save keep them whole, so
tensors "a\\0b", "a\\0c" and "a" stay three tensors with their own data."""
import importlib
import json
import pathlib
import struct
import tempfile
import unittest

import backplane
from support import isolated_runtime, optional_module

numpy = optional_module("numpy")
reference = importlib.import_module("safetensors.numpy") if numpy and optional_module("safetensors") else None

NAMES = ["a\0b", "a\0c", "a"]
DATA = {"a\0b": b"\x01\x02", "a\0c": b"\x03\x04", "a": b"\x05\x06"}


def write_by_hand(path, metadata):
    """The file as the reference writer lays it out, written without backplane."""
    header = {"__metadata__": metadata}
    offset = 0
    payload = b""
    for name in sorted(DATA):
        header[name] = {"dtype": "U8", "shape": [2], "data_offsets": [offset, offset + 2]}
        payload += DATA[name]
        offset += 2
    text = json.dumps(header, separators=(",", ":")).encode()  # NUL spelled \\u0000
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + payload)


class NulNamesTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()
        self.directory = tempfile.TemporaryDirectory()
        self.path = pathlib.Path(self.directory.name) / "nul.safetensors"
        self.metadata = {"k\0x": "v", "plain": "w\0y"}
        write_by_hand(self.path, self.metadata)

    def tearDown(self):
        self.runtime.close()
        self.directory.cleanup()

    def test_inspect_lists_three_tensors_with_whole_names(self):
        header = backplane.safetensors.inspect(self.path)
        self.assertEqual(sorted(tensor.name for tensor in header.tensors), sorted(NAMES))
        self.assertEqual(header.metadata, self.metadata)

    def test_load_returns_three_tensors_with_their_own_data(self):
        loaded = backplane.safetensors.load(self.path, device="cpu", runtime=self.runtime)
        self.assertEqual(sorted(loaded), sorted(NAMES))
        for name in NAMES:
            self.assertEqual(loaded[name].to_bytes(), DATA[name], name)
        self.assertEqual(loaded.metadata, self.metadata)

    def test_load_selects_a_name_with_a_nul_byte(self):
        loaded = backplane.safetensors.load(self.path, device="cpu", names=["a\0c"], runtime=self.runtime)
        self.assertEqual(list(loaded), ["a\0c"])
        self.assertEqual(loaded["a\0c"].to_bytes(), b"\x03\x04")
        with self.assertRaises(backplane.NotFoundError) as raised:
            backplane.safetensors.load(self.path, device="cpu", names=["a\0d"], runtime=self.runtime)
        self.assertIn("'a\\u0000d'", str(raised.exception))

    def test_save_round_trips_names_and_metadata_with_nul_bytes(self):
        out = pathlib.Path(self.directory.name) / "saved.safetensors"
        arrays = {name: self.runtime.array(DATA[name], "U8", (2,), device="cpu") for name in NAMES}
        arrays["p\0q"] = self.runtime.array(b"\x07\x08", "U8", (2,), device="cpu")
        backplane.safetensors.save(out, arrays, metadata=self.metadata, runtime=self.runtime)
        text = out.read_bytes()
        self.assertIn(b'"p\\u0000q":{', text)
        loaded = backplane.safetensors.load(out, device="cpu", runtime=self.runtime)
        self.assertEqual(sorted(loaded), sorted(NAMES + ["p\0q"]))
        self.assertEqual(loaded["p\0q"].to_bytes(), b"\x07\x08")
        self.assertEqual(loaded["a"].to_bytes(), b"\x05\x06")
        self.assertEqual(loaded.metadata, self.metadata)

    @unittest.skipIf(reference is None, "the reference safetensors package (and numpy) is not importable")
    def test_the_reference_implementation_agrees(self):
        # It reads our file with the same three tensors...
        out = pathlib.Path(self.directory.name) / "ours.safetensors"
        arrays = {name: self.runtime.array(DATA[name], "U8", (2,), device="cpu") for name in NAMES}
        backplane.safetensors.save(out, arrays, metadata=self.metadata, runtime=self.runtime)
        theirs = reference.load_file(str(out))
        self.assertEqual(sorted(theirs), sorted(NAMES))
        for name in NAMES:
            self.assertEqual(theirs[name].tobytes(), DATA[name], name)
        # ...and we read its file the same way, metadata included.
        written = pathlib.Path(self.directory.name) / "theirs.safetensors"
        reference.save_file({name: numpy.frombuffer(DATA[name], numpy.uint8) for name in NAMES}, str(written),
                            metadata=self.metadata)
        loaded = backplane.safetensors.load(written, device="cpu", runtime=self.runtime)
        self.assertEqual({name: array.to_bytes() for name, array in loaded.items()}, DATA)
        self.assertEqual(loaded.metadata, self.metadata)


if __name__ == "__main__":
    unittest.main()
