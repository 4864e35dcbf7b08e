"""backplane.load_tokens against NumPy: files written with numpy.save, raw
tofile and an llm.c header built from numpy int32 load as the values NumPy
reads back, on cpu whatever the default device, as views of the file."""
import json
import os
import pathlib
import tempfile
import unittest

import backplane
from support import isolated_runtime, optional_module

numpy = optional_module("numpy")


def write_llmc_shard(path, tokens, magic=20240520, version=1, count=None):
    """An llm.c shard as llm.c's Python writers make it: a numpy int32 header of 256, then the tokens."""
    header = numpy.zeros(256, dtype=numpy.int32)
    header[0], header[1] = magic, version
    header[2] = len(tokens) if count is None else count
    with open(path, "wb") as file:
        file.write(header.tobytes())
        file.write(tokens.tobytes())


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class TokenFilesTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()
        self.directory = tempfile.TemporaryDirectory()
        self.root = pathlib.Path(self.directory.name)
        self.random = numpy.random.default_rng(7)

    def tearDown(self):
        self.runtime.close()
        self.directory.cleanup()

    def load(self, path, **options):
        return backplane.load_tokens(path, runtime=self.runtime, **options)

    def check_same(self, array, expected):
        self.assertEqual(array.shape, (expected.size,))
        self.assertEqual(array.numpy().dtype, expected.dtype.newbyteorder("="))
        numpy.testing.assert_array_equal(array.numpy(), expected.reshape(-1))

    def test_numpy_save_round_trips_in_every_integer_dtype(self):
        for dtype in ("<u1", "<i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8"):
            with self.subTest(dtype=dtype):
                info = numpy.iinfo(dtype)
                expected = self.random.integers(info.min, info.max, size=(3, 5), dtype=dtype, endpoint=True)
                path = self.root / f"tokens-{dtype[1:]}.npy"
                numpy.save(path, expected)
                self.check_same(self.load(path), expected)

    def test_numpy_format_versions_1_2_and_3(self):
        expected = self.random.integers(0, 50257, size=1000, dtype=numpy.uint16)
        for version in ((1, 0), (2, 0), (3, 0)):
            with self.subTest(version=version):
                path = self.root / f"v{version[0]}.npy"
                with open(path, "wb") as file:
                    numpy.lib.format.write_array(file, expected, version=version)
                self.check_same(self.load(path), expected)

    def test_an_llm_c_shard_and_raw_tofile_match_numpy(self):
        gpt2 = self.random.integers(0, 50257, size=4096, dtype=numpy.uint16)
        write_llmc_shard(self.root / "gpt2.bin", gpt2)
        array = self.load(self.root / "gpt2.bin")
        self.assertEqual(array.dtype, "U16")
        self.check_same(array, gpt2)
        # llm.c's own reader: numpy.memmap after the 1024-byte header.
        numpy.testing.assert_array_equal(array.numpy(),
                                         numpy.memmap(self.root / "gpt2.bin", dtype=numpy.uint16, mode="r",
                                                      offset=1024))
        llama = self.random.integers(0, 128256, size=100, dtype=numpy.uint32)
        write_llmc_shard(self.root / "llama.bin", llama, magic=20240801, version=7)
        self.check_same(self.load(self.root / "llama.bin", dtype="uint32"), llama)
        raw = self.random.integers(-2**31, 2**31 - 1, size=777, dtype=numpy.int32)
        raw.tofile(self.root / "tokens.i32")
        self.check_same(self.load(self.root / "tokens.i32", dtype=numpy.int32), raw)

    def test_a_safetensors_tensor_by_name(self):
        tokens = self.random.integers(0, 1000, size=(4, 8), dtype=numpy.int64)
        path = self.root / "data.safetensors"
        backplane.safetensors.save(path, {"tokens": tokens, "mask": numpy.ones(3, dtype=numpy.float32)},
                                   runtime=self.runtime)
        self.check_same(self.load(path, name="tokens"), tokens)
        with self.assertRaises(backplane.InvalidFileError) as caught:
            self.load(path, name="mask")
        self.assertIn("F32", caught.exception.message)
        with self.assertRaises(backplane.InvalidArgumentError):
            self.load(path)

    def test_megatron_datasets_load_as_megatron_core_reads_them(self):
        # Written and read back by megatron-core itself (tests/tokens/megatron/write_fixtures.py).
        fixtures = pathlib.Path(os.environ["BACKPLANE_TEST_SOURCE_DIR"]) / "tests" / "tokens" / "megatron"
        with open(fixtures / "expected.json", encoding="utf-8") as file:
            expected = json.load(file)
        for name, want in expected.items():
            for given in (fixtures / name, fixtures / f"{name}.bin", str(fixtures / f"{name}.idx")):
                with self.subTest(given=str(given)):
                    self.check_same(self.load(given), numpy.array(want["tokens"], dtype=want["dtype"]))
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.load(fixtures / "gpt2_uint16.idx", dtype="uint32")
        self.assertIn("dtype U32 was asked for, but the Megatron-Core indexed dataset header says U16",
                      caught.exception.message)

    def test_megatron_datasets_give_their_document_starts(self):
        fixtures = pathlib.Path(os.environ["BACKPLANE_TEST_SOURCE_DIR"]) / "tests" / "tokens" / "megatron"
        with open(fixtures / "expected.json", encoding="utf-8") as file:
            expected = json.load(file)
        for name, want in expected.items():
            # Each document's first sequence's offset, from what megatron-core's reader gave back.
            offsets = numpy.concatenate([[0], numpy.cumsum(want["sequence_lengths"])])
            starts = offsets[want["document_indices"][:-1]]
            for given in (fixtures / name, str(fixtures / name), fixtures / f"{name}.bin",
                          str(fixtures / f"{name}.idx"), str(fixtures / f"{name}.id[x]")):
                with self.subTest(given=str(given)):
                    found = self.load(given)
                    if isinstance(found, list):  # the pattern
                        [found] = found
                    self.assertEqual(found.document_starts.dtype, numpy.int64)
                    numpy.testing.assert_array_equal(found.document_starts, starts)
                    self.assertFalse(found.document_starts.flags.writeable)
                    with self.assertRaises(ValueError):
                        found.document_starts[0] = 1
        [listed] = self.load([fixtures / "llama_int32"])
        self.assertEqual(len(listed.document_starts), len(expected["llama_int32"]["document_indices"]) - 1)

    def test_formats_without_documents_have_none(self):
        tokens = numpy.arange(20, dtype=numpy.uint16)
        numpy.save(self.root / "plain.npy", tokens)
        write_llmc_shard(self.root / "shard.bin", tokens)
        self.assertIsNone(self.load(self.root / "plain.npy").document_starts)
        self.assertIsNone(self.load(str(self.root / "shard.b[i]n"))[0].document_starts)
        self.assertIsNone(self.runtime.array(tokens).document_starts)  # not from a token file

    def test_a_leading_tilde_is_the_home_directory(self):
        expected = numpy.arange(50, dtype=numpy.uint16)
        numpy.save(self.root / "home.npy", expected)
        saved_home = os.environ.get("HOME")
        os.environ["HOME"] = str(self.root)
        try:
            self.check_same(self.load("~/home.npy"), expected)
            self.check_same(self.load(pathlib.Path("~") / "home.npy"), expected)
            path = os.path.join("~", "model.safetensors")
            backplane.safetensors.save(path, {"tokens": expected}, runtime=self.runtime)
            self.assertTrue((self.root / "model.safetensors").exists())
            self.assertEqual(list(backplane.safetensors.inspect(path).tensors)[0].name, "tokens")
            with self.assertRaises(FileNotFoundError):
                self.load("~/missing.npy")
        finally:
            if saved_home is None:
                del os.environ["HOME"]
            else:
                os.environ["HOME"] = saved_home

    def test_tokens_stay_on_cpu_as_views_of_the_file(self):
        expected = numpy.arange(100, dtype=numpy.uint16)
        numpy.save(self.root / "a.npy", expected)
        with self.runtime.default_device_scope("sim"):
            array = self.load(str(self.root / "a.npy"))
        self.assertEqual(array.device, backplane.Device("cpu", 0))
        view = array.numpy()
        self.assertFalse(view.flags.writeable)
        self.assertEqual(view.ctypes.data, array.data_ptr)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.load(self.root / "a.npy", device="sim")
        self.assertIn("not host-addressable", caught.exception.message)

    def test_a_pattern_gives_a_sorted_list_and_a_list_keeps_its_order(self):
        shards = {}
        for name in ("train_002.bin", "train_010.bin", "train_001.bin", "Train_999.bin"):
            shards[name] = self.random.integers(0, 50257, size=64, dtype=numpy.uint16)
            write_llmc_shard(self.root / name, shards[name])
        (self.root / "val_000.bin").write_bytes(b"not a shard")
        arrays = self.load(str(self.root / "*train_*.bin"))
        self.assertIsInstance(arrays, list)
        self.assertEqual(len(arrays), 3)
        for array, name in zip(arrays, ["train_001.bin", "train_002.bin", "train_010.bin"]):
            self.check_same(array, shards[name])
        arrays = self.load(str(self.root / "[Tt]rain_*.bin"))
        self.check_same(arrays[0], shards["Train_999.bin"])  # bytewise: "T" < "t"
        given = [self.root / "train_010.bin", str(self.root / "train_001.bin")]
        arrays = self.load(given)
        self.check_same(arrays[0], shards["train_010.bin"])
        self.check_same(arrays[1], shards["train_001.bin"])
        self.assertIsInstance(self.load(self.root / "train_001.bin"), backplane.Array)

    def test_errors_name_the_file_and_the_problem(self):
        with self.assertRaises(FileNotFoundError) as caught:
            self.load(self.root / "missing.bin")
        self.assertIsInstance(caught.exception, backplane.NotFoundError)
        self.assertIn("missing.bin", caught.exception.message)
        with self.assertRaises(FileNotFoundError) as caught:
            self.load(str(self.root / "shard_*.bin"))
        self.assertIn("no file matches", caught.exception.message)
        write_llmc_shard(self.root / "lying.bin", numpy.zeros(10, dtype=numpy.uint16), count=1000)
        with self.assertRaises(backplane.InvalidFileError) as caught:
            self.load(self.root / "lying.bin")
        self.assertIn("lying.bin: llm.c shard header says 1000 tokens (3024 bytes with the header) but the file is "
                      "1044 bytes", caught.exception.message)
        numpy.save(self.root / "big.npy", numpy.arange(4, dtype=">u2"))
        with self.assertRaises(backplane.InvalidFileError) as caught:
            self.load(self.root / "big.npy")
        self.assertIn("big-endian", caught.exception.message)
        numpy.arange(4, dtype=numpy.uint16).tofile(self.root / "raw.bin")
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.load(self.root / "raw.bin")
        self.assertIn("needs a dtype", caught.exception.message)
        write_llmc_shard(self.root / "gpt2.bin", numpy.zeros(10, dtype=numpy.uint16))
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.load(self.root / "gpt2.bin", dtype="int64")
        self.assertIn("I64 was asked for", caught.exception.message)
        with self.assertRaises(TypeError):
            self.load(self.root / "raw.bin", dtype="uint16", name=3)
        self.assertEqual(os.path.getsize(self.root / "raw.bin"), 8)


if __name__ == "__main__":
    unittest.main()
