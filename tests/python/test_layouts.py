"""batches(layout=Layout(...)): each rank's piece of a step's global batch
over a mesh with data, tensor and context parallel axes, in one process
(the ranks given explicitly, or from $RANK); torchrun's ranks are
test_torchrun_layouts.py's. Every piece is the slice of the batch that one
process draws alone, and a state saved under one layout resumes under
another."""
import os
import unittest
from unittest import mock

import backplane
from support import isolated_runtime, optional_module

numpy = optional_module("numpy")


@unittest.skipIf(numpy is None, "numpy is needed")
class LayoutTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()
        self.tokens = self.runtime.array(numpy.arange(60_000, dtype=numpy.uint16) * 3 % 40_000, device="cpu:0")

    def tearDown(self):
        self.runtime.close()

    def stream(self, batch_size, context=16, **options):
        options.setdefault("steps", 3)
        return backplane.batches(self.tokens, batch_size, context, device="cpu:0", seed=9, runtime=self.runtime,
                                 **options)

    def reference(self, batch_size, context=16, steps=3, **options):
        return list(self.stream(batch_size, context, steps=steps, rank=0, world_size=1, **options))

    def test_data_and_tensor_parallel_ranks_get_their_rows_and_replicas_the_same_bytes(self):
        reference = self.reference(8)
        mesh = {"dp": 2, "tp": 2}
        pieces = [list(self.stream(4, layout=backplane.Layout(mesh, batch="dp", rank=rank))) for rank in range(4)]
        for step, (x, y) in enumerate(reference):
            for rank in range(4):
                rows = slice(rank // 2 * 4, rank // 2 * 4 + 4)
                numpy.testing.assert_array_equal(pieces[rank][step][0], x[rows], f"step {step} rank {rank}")
                numpy.testing.assert_array_equal(pieces[rank][step][1], y[rows], f"step {step} rank {rank}")

    def test_context_parallel_ranks_get_their_columns_contiguous_and_head_tail(self):
        reference = self.reference(8)
        mesh = {"dp": 2, "cp": 2}
        for order in ("contiguous", "head_tail"):
            # Of 4 chunks of 4 columns, head_tail gives cp rank 0 chunks 0
            # and 3, cp rank 1 chunks 1 and 2: equal causal-attention work.
            chunks = {"contiguous": [[0, 1], [2, 3]], "head_tail": [[0, 3], [1, 2]]}[order]
            for rank in range(4):
                layout = backplane.Layout(mesh, batch="dp", sequence="cp", rank=rank, sequence_order=order)
                stream = self.stream(4, layout=layout)
                for step, (x, y) in enumerate(stream):
                    rows = slice(rank // 2 * 4, rank // 2 * 4 + 4)
                    columns = numpy.concatenate([numpy.arange(chunk * 4, chunk * 4 + 4) for chunk in chunks[rank % 2]])
                    with self.subTest(order=order, rank=rank, step=step):
                        self.assertEqual(x.shape, (4, 8))
                        numpy.testing.assert_array_equal(x, reference[step][0][rows][:, columns])
                        numpy.testing.assert_array_equal(y, reference[step][1][rows][:, columns])
                        self.assertTrue(x.flags["C_CONTIGUOUS"] and y.flags["C_CONTIGUOUS"])
                        self.assertFalse(numpy.shares_memory(x, y))

    def test_head_tail_pieces_in_torch_and_jax_equal_numpy(self):
        layout = backplane.Layout({"cp": 2}, sequence="cp", rank=1, sequence_order="head_tail")
        expected = list(self.stream(4, layout=layout))
        for name in ("torch", "jax"):
            if optional_module(name) is None:
                continue
            for xy in ("copies", "views"):
                for step, (x, y) in enumerate(self.stream(4, layout=layout, to=name, xy=xy, dtype="int32")):
                    with self.subTest(to=name, xy=xy, step=step):
                        numpy.testing.assert_array_equal(numpy.asarray(x), expected[step][0])
                        numpy.testing.assert_array_equal(numpy.asarray(y), expected[step][1])

    def test_a_context_parallel_rank_reads_about_half_the_bytes(self):
        whole = self.stream(4, context=512, steps=6, prefetch=1, layout=backplane.Layout({"dp": 2}, batch="dp", rank=1))
        half = self.stream(4, context=512, steps=6, prefetch=1,
                           layout=backplane.Layout({"dp": 2, "cp": 2}, batch="dp", sequence="cp", rank=3))
        figures = []
        for stream, row_tokens in ((whole, 513), (half, 257)):
            list(stream)
            read = stream.stats().read_bytes
            stream.close()
            piece = 4 * row_tokens * 2  # 4 rows of uint16
            self.assertEqual(read % piece, 0)
            self.assertIn(read // piece, (6, 7))  # the 6 steps, and the one prefetch=1 may hold
            figures.append(piece)
        self.assertLessEqual(figures[1], 0.55 * figures[0])

    def test_a_state_resumes_under_another_layout(self):
        reference = self.reference(8, steps=5)
        before = self.stream(2, steps=5, layout=backplane.Layout({"dp": 4}, batch="dp", rank=2))
        next(before)
        next(before)
        state = before.state_dict()
        before.close()
        layout = backplane.Layout({"dp": 2, "cp": 2}, batch="dp", sequence="cp", rank=1)
        after = self.stream(4, steps=5, state=state, layout=layout)
        self.assertEqual(after.step, 2)
        for step, (x, _) in enumerate(after, start=2):
            numpy.testing.assert_array_equal(x, reference[step][0][0:4, 8:16], f"step {step}")
        # And a rank/world_size stream's state under a layout, and back.
        plain = self.stream(4, steps=5, rank=1, world_size=2)
        next(plain)
        after = self.stream(2, steps=5, state=plain.state_dict(),
                            layout=backplane.Layout({"dp": 4, "tp": 2}, batch="dp", rank=7))
        x, _ = next(after)
        numpy.testing.assert_array_equal(x, reference[1][0][6:8])
        back = self.stream(8, steps=5, state=after.state_dict(), rank=0, world_size=1)
        numpy.testing.assert_array_equal(next(back)[0], reference[2][0])

    def test_the_rank_comes_from_the_argument_then_rank_then_zero(self):
        layout = backplane.Layout({"dp": 2}, batch="dp")
        reference = self.reference(8, steps=1)[0][0]
        with mock.patch.dict(os.environ, {"RANK": "1"}):
            stream = self.stream(4, steps=1, layout=layout)
        self.assertEqual(stream.rank_source, "environment")
        numpy.testing.assert_array_equal(next(stream)[0], reference[4:8])
        with mock.patch.dict(os.environ, {}, clear=False):
            os.environ.pop("RANK", None)
            stream = self.stream(4, steps=1, layout=layout)
        self.assertEqual(stream.rank_source, "default")
        numpy.testing.assert_array_equal(next(stream)[0], reference[0:4])

    def test_documents_with_a_layout_of_rows(self):
        # Documents of 97 tokens, each ending in token 0.
        self.tokens = self.runtime.array((numpy.arange(60_000) % 97).astype(numpy.uint16), device="cpu:0")
        reference = list(self.stream(8, steps=2, documents={"eos": 0}, rank=0, world_size=1))
        layout = backplane.Layout({"dp": 2, "tp": 2}, batch="dp", rank=3)
        for step, (x, y, documents) in enumerate(self.stream(4, steps=2, documents={"eos": 0}, layout=layout)):
            numpy.testing.assert_array_equal(x, reference[step][0][4:8])
            numpy.testing.assert_array_equal(documents.position_ids, reference[step][2].position_ids[4:8])

    def test_documents_with_a_sequence_axis_give_each_piece_its_columns_positions(self):
        self.tokens = self.runtime.array((numpy.arange(60_000) % 11).astype(numpy.uint16), device="cpu:0")
        reference = list(self.stream(4, steps=2, documents={"eos": 0}, rank=0, world_size=1))
        layout = backplane.Layout({"dp": 2, "cp": 2}, batch="dp", sequence="cp", rank=2, sequence_order="head_tail")
        columns = numpy.r_[0:4, 12:16]  # cp rank 0 of head_tail: chunks 0 and 3 of 4
        for step, (x, y, pieces) in enumerate(self.stream(2, steps=2, documents={"eos": 0}, layout=layout)):
            numpy.testing.assert_array_equal(x, reference[step][0][2:4][:, columns])
            numpy.testing.assert_array_equal(pieces.position_ids, reference[step][2].position_ids[2:4][:, columns])
            # Every piece lies in one document and is contiguous in the window.
            cu = pieces.cu_seqlens[:pieces.cu_seqlens.tolist().index(16) + 1]
            flat = pieces.position_ids.reshape(-1)
            for begin, end in zip(cu[:-1], cu[1:]):
                self.assertTrue((numpy.diff(flat[begin:end]) == 1).all(), (begin, end, flat))

    def test_bad_layouts_are_refused_naming_the_problem(self):
        cases = [
            (dict(layout=backplane.Layout({"dp": 2}, batch="data", rank=0)), "batch axis 'data' is not an axis of "
                                                                              "the mesh (dp=2)"),
            (dict(layout=backplane.Layout({"dp": 2, "cp": 2}, batch="dp", sequence="dp", rank=0)),
             "axis 'dp' is in both batch and sequence"),
            (dict(layout=backplane.Layout({"dp": 2, "tp": 2}, batch="dp", rank=4)),
             "rank 4 is not in [0, 4), the positions of the mesh dp=2 x tp=2"),
            (dict(layout=backplane.Layout({"dp": 2, "cp": 3}, batch="dp", sequence="cp", rank=0)),
             "context 16 does not split into the 3 chunks of sequence axes cp"),
            (dict(layout=backplane.Layout({"cp": 3}, sequence="cp", rank=0, sequence_order="head_tail")),
             "context 16 does not split into the 2 x 3 = 6 chunks of sequence_order head_tail"),
            (dict(layout=backplane.Layout({"dp": 0}, batch="dp", rank=0)), "mesh axis 'dp' has size 0"),
            (dict(layout=backplane.Layout({"dp": 2}, batch="dp"), rank=1), "layout= together with rank=1"),
            (dict(layout=backplane.Layout({"dp": 2}, batch="dp"), device=["cpu:0"]), "layout= together with device="),
            (dict(layout={"dp": 2}), "expected a backplane.Layout"),
        ]
        for options, words in cases:
            with self.subTest(words=words):
                with self.assertRaises(backplane.InvalidArgumentError) as caught:
                    options.setdefault("device", "cpu:0")
                    backplane.batches(self.tokens, 4, 16, seed=9, runtime=self.runtime, **options)
                self.assertIn(words, str(caught.exception))
        for bad, words in (({"sequence_order": "zigzag"}, "sequence_order='zigzag'"), ({"batch": 3}, "batch=3"),
                           ({"mesh": []}, "mesh=[]")):
            arguments = dict(mesh={"dp": 2}, batch="dp")
            arguments.update(bad)
            with self.subTest(words=words), self.assertRaises(backplane.InvalidArgumentError) as caught:
                backplane.Layout(**arguments)
            self.assertIn(words, str(caught.exception))


if __name__ == "__main__":
    unittest.main()
