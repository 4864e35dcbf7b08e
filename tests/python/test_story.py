"""examples/story.py: the story's trainer, in each framework this
interpreter has, runs on a CPU-only machine and its loss falls; in
--documents mode its attention never crosses a document."""
import importlib.util
import os
import pathlib
import subprocess
import sys
import unittest

import backplane
from support import isolated_runtime, optional_module

SOURCE = pathlib.Path(os.environ.get("BACKPLANE_TEST_SOURCE_DIR", pathlib.Path(__file__).parents[2]))


@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "torch and jaxlib under a preloaded sanitizer runtime")
class StoryTest(unittest.TestCase):
    def run_story(self, framework, *options):
        if optional_module(framework) is None:
            self.skipTest(f"{sys.executable} cannot import {framework}")
        result = subprocess.run([sys.executable, str(SOURCE / "examples" / "story.py"), "--framework", framework,
                                 "--steps", "40", *options], capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("backends:", result.stdout)
        count = "200,000" if options else "1,000,000"
        self.assertIn(f"tokens: {count} on cpu:0", result.stdout)
        self.assertIn(f"{framework}: 40 steps of 16 x 64 tokens", result.stdout)
        self.assertIn("stream: 40 steps, ", result.stdout)
        self.assertIn("data stall ", result.stdout)

    def test_torch_trainer(self):
        self.run_story("torch")

    def test_torch_trainer_on_documents(self):
        self.run_story("torch", "--documents")

    def test_jax_trainer(self):
        self.run_story("jax")


def load_story():
    spec = importlib.util.spec_from_file_location("story", SOURCE / "examples" / "story.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@unittest.skipIf(optional_module("torch") is None or optional_module("numpy") is None,
                 f"{sys.executable} cannot import torch and numpy")
@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "torch under a preloaded sanitizer runtime")
class StoryDocumentsTest(unittest.TestCase):
    """The --documents model's attention, on batches of the story's tokens."""

    ROWS, CONTEXT = 8, 64

    def setUp(self):
        import numpy
        self.story = load_story()
        self.runtime = isolated_runtime()
        self.tokens = self.story.document_tokens(20_000)
        self.starts = set(numpy.flatnonzero(self.tokens == self.story.BOS).tolist())
        source = self.runtime.array(self.tokens, device="cpu:0")
        self.stream = backplane.batches(source, self.ROWS, self.CONTEXT, device="cpu:0", seed=3, to="torch",
                                        documents={"bos": self.story.BOS})

    def tearDown(self):
        self.stream.close()
        self.runtime.close()

    def pieces_of(self, step):
        """[rows, T] piece numbers of step `step`'s x, from its windows and the
        document starts alone: a new piece at each row start and each BOS."""
        import torch
        numbers, piece = [], -1
        for window in self.stream.windows(step):
            row = []
            for column in range(self.CONTEXT):
                if column == 0 or window.start + column in self.starts:
                    piece += 1
                row.append(piece)
            numbers.append(row)
        return torch.tensor(numbers)

    def test_no_attention_weight_crosses_a_document(self):
        import torch
        torch.manual_seed(0)
        model = self.story.attention_model(self.CONTEXT)
        for step in range(3):
            with self.subTest(step=step):
                pieces = self.pieces_of(step)
                x, _, documents = next(self.stream)
                self.assertTrue(all(int(row[0]) == self.story.BOS for row in x), "windows start at a BOS")
                mask = self.story.document_mask(documents.cu_seqlens, self.ROWS, self.CONTEXT)
                same = pieces[:, :, None] == pieces[:, None, :]
                causal = torch.ones(self.CONTEXT, self.CONTEXT, dtype=torch.bool).tril()
                self.assertTrue(torch.equal(mask, same & causal), "the mask is one built from the windows")
                self.assertGreater(int(pieces.max()) + 1, self.ROWS, "some row holds two documents")
                with torch.no_grad():
                    hidden = model.tokens(x) + model.positions(documents.position_ids.long())
                    q, k, v = model.qkv(hidden).chunk(3, dim=-1)
                    weights = self.story.attention_weights(q, k, mask)
                    self.assertTrue(bool((weights[~same] == 0).all()), "a weight crosses a document")
                    self.assertTrue(bool((weights[~causal.expand_as(weights)] == 0).all()), "a weight looks ahead")
                    self.assertTrue(torch.allclose(weights.sum(-1), torch.ones(self.ROWS, self.CONTEXT)))
                    # What the model computes is these weights applied.
                    self.assertTrue(torch.allclose(self.story.attend(q, k, v, mask, documents), weights @ v,
                                                   atol=1e-5))

    def test_position_ids_restart_at_each_document(self):
        import torch
        pieces = self.pieces_of(0)
        _, _, documents = next(self.stream)
        first = torch.ones_like(pieces, dtype=torch.bool)
        first[:, 1:] = pieces[:, 1:] != pieces[:, :-1]
        expected = torch.zeros_like(pieces)
        for row in range(self.ROWS):
            for column in range(1, self.CONTEXT):
                expected[row, column] = 0 if first[row, column] else expected[row, column - 1] + 1
        self.assertTrue(torch.equal(documents.position_ids.long(), expected))


if __name__ == "__main__":
    unittest.main()
