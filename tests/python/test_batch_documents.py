"""batches(documents=...): what Python alone checks of the argument (with
messages naming it), the Documents each step carries converted as x is (to=
numpy, torch, jax, a callable; one per device), documents="index" from the
sources' document_starts, a failed conversion that hands the same step out
again, and a state that resumes with the same pieces. The pieces' values are
checked against the reference in test_batch_stream_reference.py."""
import os
import pathlib
import tempfile
import unittest

import backplane
from support import optional_module, plugin_dirs

numpy = optional_module("numpy")

MARKER = 3


def marked_tokens(length, every):
    """int32 tokens 10 + i, with the marker at each multiple of `every`."""
    tokens = numpy.arange(length, dtype=numpy.int32) + 10
    tokens[::every] = MARKER
    return tokens


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class DocumentsArgumentTest(unittest.TestCase):
    def setUp(self):
        self.runtime = backplane.Runtime(plugin_paths=plugin_dirs(), ignore_environment=True,
                                         skip_default_paths=True)
        self.tokens = self.runtime.array(marked_tokens(2000, 37), device="cpu:0")

    def tearDown(self):
        self.runtime.close()

    def refused(self, message, error=backplane.InvalidArgumentError, **options):
        with self.assertRaises(error) as caught:
            backplane.batches(self.tokens, 4, 16, device="cpu:0", **options)
        self.assertEqual(caught.exception.message, message)
        return caught.exception

    def test_values_no_c_field_holds_are_refused_naming_documents(self):
        wanted = ("None, 'index' (the sources' document_starts), {'bos': token}, {'eos': token}, or a list of "
                  "document starts (one 1-D integer array per source)")
        self.refused(f"batches(): documents='bos': expected {wanted}", documents="bos")
        self.refused(f"batches(): documents must be {wanted}, got 42", documents=42)
        self.refused(f"batches(): documents must be {wanted}, got {{1, 2}}", documents={1, 2})
        self.refused("batches(): documents={'bos': 1, 'eos': 2}: expected {'bos': token} or {'eos': token} (one "
                     "key: the marker that begins or ends each document)", documents={"bos": 1, "eos": 2})
        self.refused("batches(): documents={'pad': 1}: expected {'bos': token} or {'eos': token} (one key: the "
                     "marker that begins or ends each document)", documents={"pad": 1})
        self.refused("batches(): documents['bos'] must be an int token below 2**63, got 9223372036854775808",
                     documents={"bos": 2**63})
        self.refused("batches(): documents['eos'] must be an int token, got 1.0", documents={"eos": 1.0})
        self.refused("batches(): documents[0] must be 1-D, got shape (1, 2)", documents=[[[0, 40]]])
        self.refused("batches(): documents[0] must hold integers, got dtype float64", documents=[[0.0, 40.5]])
        self.refused("batches(): documents[0] must be a 1-D array or sequence of integer token offsets, got '0 40'",
                     documents=["0 40"])
        self.refused("batches(): documents[0] holds 9223372036854775808, beyond a token offset (below 2**63)",
                     documents=[numpy.array([0, 2**63], dtype=numpy.uint64)])
        self.refused("batches(): max_documents must be an int >= 0, got '8'", documents={"bos": MARKER},
                     max_documents="8")
        self.refused("batches(): max_documents must be an int >= 0 below 2**63, got 9223372036854775808",
                     documents={"bos": MARKER}, max_documents=2**63)

    def test_index_without_recorded_documents_says_what_to_pass(self):
        error = self.refused("batches(): documents='index': source 0 records no documents (only Megatron .idx "
                             "files do); pass documents={'bos': token} or {'eos': token}, or the starts themselves",
                             documents="index")
        self.assertIsInstance(error, ValueError)

    def test_documents_none_is_the_stream_of_before(self):
        with backplane.batches(self.tokens, 4, 16, device="cpu:0", seed=2) as plain, \
                backplane.batches(self.tokens, 4, 16, device="cpu:0", seed=2, documents=None, max_documents=0) as same:
            first, second = next(plain), next(same)
            self.assertEqual(len(second), 2)
            self.assertTrue(numpy.array_equal(first[0], second[0]))
            self.assertEqual(plain.state_dict(), same.state_dict())


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class DocumentsOutputTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        config = os.path.join(self.scratch.name, "cpu.toml")
        with open(config, "w", encoding="utf-8") as file:
            file.write("[backend.cpu]\ndevices = 2\n")
        self.runtime = backplane.Runtime(plugin_paths=plugin_dirs(), config_file=config, ignore_environment=True,
                                         skip_default_paths=True)
        self.values = marked_tokens(3000, 23)
        self.tokens = self.runtime.array(self.values, device="cpu:0")

    def tearDown(self):
        self.runtime.close()
        self.scratch.cleanup()

    def stream(self, **options):
        options = {"device": "cpu:0", "seed": 4, "documents": {"bos": MARKER}, **options}
        return backplane.batches(self.tokens, 4, 32, **options)

    def test_each_step_is_x_y_and_its_documents(self):
        with self.stream(max_documents=20) as stream:
            x, y, documents = next(stream)
            self.assertIsInstance(documents, backplane.Documents)
            self.assertEqual(documents._fields, ("cu_seqlens", "max_seqlen", "position_ids"))
            self.assertIsInstance(documents.cu_seqlens, numpy.ndarray)
            self.assertEqual((documents.cu_seqlens.dtype, documents.cu_seqlens.shape), (numpy.int32, (21,)))
            self.assertEqual((documents.position_ids.dtype, documents.position_ids.shape), (numpy.int32, (4, 32)))
            self.assertIs(type(documents.max_seqlen), int)
            self.assertTrue((x[:, 0] == MARKER).all(), "every window starts at a document")
            self.assertTrue(numpy.array_equal(x[:, 1:], y[:, :-1]))
            # Documents 23 tokens long: each row of 32 holds two pieces or more.
            self.assertLessEqual(documents.max_seqlen, 23)

    def test_several_devices_give_one_triple_each(self):
        with self.stream(device=["cpu:0", "cpu:1"]) as stream:
            step = next(stream)
            self.assertEqual(len(step), 2)
            for (x, _, documents), device in zip(step, ("cpu:0", "cpu:1")):
                self.assertEqual(x.shape, (2, 32))
                self.assertEqual(documents.cu_seqlens.shape, (2 * 32 + 1,))  # max_documents 0: rows * T
                self.assertEqual(documents.cu_seqlens[-1], 2 * 32)
                self.assertEqual(documents.position_ids.shape, (2, 32))

    def test_a_callable_converts_the_pieces_as_it_converts_x(self):
        seen = []

        def convert(array):
            seen.append((array.dtype, array.shape))
            return numpy.from_dlpack(array)

        with self.stream(to=convert, max_documents=9) as stream:
            next(stream)
        self.assertEqual(sorted(seen), sorted([("I64", (4, 33)), ("I32", (10,)), ("I32", (4, 32))]))

    def test_a_failed_conversion_hands_the_same_step_out_again(self):
        calls = []

        def flaky(array):
            calls.append(array.dtype)
            if len(calls) == 2:  # the first piece array of step 0
                raise RuntimeError("conversion failed")
            return numpy.from_dlpack(array)

        with self.stream(to=flaky) as stream, self.stream() as plain:
            with self.assertRaises(RuntimeError):
                next(stream)
            self.assertEqual(stream.step, 0)
            self.assertEqual(stream.state_dict()["step"], 0)
            again, expected = next(stream), next(plain)
            self.assertEqual(stream.step, 1)
            for got, want in ((again[0], expected[0]), (again[2].cu_seqlens, expected[2].cu_seqlens),
                              (again[2].position_ids, expected[2].position_ids)):
                self.assertTrue(numpy.array_equal(got, want))

    def test_a_state_resumes_with_the_same_pieces(self):
        with self.stream() as stream:
            for _ in range(3):
                next(stream)
            state = stream.state_dict()
            self.assertEqual(state["documents"], {"bos": MARKER})
            expected = [next(stream) for _ in range(2)]
        with self.stream(state=state) as resumed:
            for want in expected:
                got = next(resumed)
                self.assertTrue(numpy.array_equal(got[0], want[0]))
                self.assertTrue(numpy.array_equal(got[2].cu_seqlens, want[2].cu_seqlens))
                self.assertEqual(got[2].max_seqlen, want[2].max_seqlen)

    def test_index_reads_each_sources_document_starts(self):
        # Megatron-Core datasets record their documents (tests/tokens/megatron).
        fixtures = pathlib.Path(os.environ["BACKPLANE_TEST_SOURCE_DIR"]) / "tests" / "tokens" / "megatron"
        arrays = [backplane.load_tokens(fixtures / name, runtime=self.runtime)
                  for name in ("gpt2_uint16", "gpt2_uint16")]  # one dtype for every source
        starts = [array.document_starts for array in arrays]
        self.assertTrue(all(len(found) > 5 for found in starts))
        options = dict(device="cpu:0", seed=1, dtype="int64")
        with backplane.batches(arrays, 2, 16, documents="index", **options) as from_index, \
                backplane.batches(arrays, 2, 16, documents=starts, **options) as given:
            for step in (0, 1, 7):
                self.assertEqual(from_index.windows(step), given.windows(step))
                self.assertTrue(all(window.start in starts[window.source] for window in given.windows(step)))
            for _ in range(3):
                (x, _, got), (_, _, want) = next(from_index), next(given)
                self.assertTrue(numpy.array_equal(got.cu_seqlens, want.cu_seqlens))
                self.assertTrue(numpy.array_equal(got.position_ids, want.position_ids))
        # A source that records none is named.
        with self.assertRaises(ValueError) as caught:
            backplane.batches([arrays[0], self.tokens], 2, 16, documents="index", **options)
        self.assertIn("documents='index': source 1 records no documents", str(caught.exception))

    @unittest.skipIf(optional_module("torch") is None, "torch is not installed for this interpreter")
    def test_torch_pieces_are_tensors_on_xs_device(self):
        import torch
        with self.stream(to="torch") as stream:
            x, _, documents = next(stream)
            self.assertIsInstance(documents.cu_seqlens, torch.Tensor)
            self.assertEqual(documents.cu_seqlens.dtype, torch.int32)
            self.assertEqual(documents.position_ids.dtype, torch.int32)
            self.assertEqual(documents.cu_seqlens.device, x.device)
            self.assertEqual(int(documents.cu_seqlens[0]), 0)

    @unittest.skipIf(optional_module("jax") is None, "jax is not installed for this interpreter")
    def test_jax_pieces_are_jax_arrays(self):
        import jax
        with self.stream(to="jax") as stream:
            x, _, documents = next(stream)
            self.assertIsInstance(documents.cu_seqlens, jax.Array)
            self.assertIsInstance(documents.position_ids, jax.Array)
            self.assertEqual(str(documents.cu_seqlens.dtype), "int32")
            self.assertEqual(documents.position_ids.shape, x.shape)


if __name__ == "__main__":
    unittest.main()
