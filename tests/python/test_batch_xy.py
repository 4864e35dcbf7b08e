"""batches(xy=...): by default x and y are contiguous arrays of their own, so
the usual label masking and view(-1) work; xy="views" keeps the zero-copy
views of one buffer, which alias."""
import tempfile
import unittest

import backplane
from support import optional_module, sim_runtime

numpy = optional_module("numpy")
torch = optional_module("torch")

PAD = 7  # a token that occurs: tokens are i % 50


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class BatchXyTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        self.runtime = sim_runtime(self.scratch.name)
        self.tokens = self.runtime.array(numpy.arange(5000, dtype=numpy.uint16) % 50, device="cpu:0")

    def tearDown(self):
        self.runtime.close()
        self.scratch.cleanup()

    def stream(self, **options):
        options.setdefault("device", "cpu:0")
        return backplane.batches(self.tokens, 4, 16, seed=3, **options)

    def test_masking_y_leaves_x_unchanged(self):
        x, y = next(self.stream())
        before = x.copy()
        self.assertIn(PAD, y)
        y[y == PAD] = -100
        self.assertEqual(x.tolist(), before.tolist())
        self.assertNotIn(PAD, y)
        self.assertTrue(x.flags.c_contiguous and y.flags.c_contiguous)
        self.assertFalse(numpy.shares_memory(x, y))
        self.assertEqual(y.reshape(-1).shape, (64,))

    def test_copies_hold_the_same_values_as_views(self):
        for (x, y), (vx, vy) in zip(self.stream(steps=3), self.stream(steps=3, xy="views")):
            self.assertEqual(x.tolist(), vx.tolist())
            self.assertEqual(y.tolist(), vy.tolist())
            self.assertEqual(x[:, 1:].tolist(), y[:, :-1].tolist())

    def test_views_alias_one_buffer(self):
        x, y = next(self.stream(xy="views"))
        self.assertTrue(numpy.shares_memory(x, y))
        self.assertFalse(y.flags.c_contiguous)
        self.assertEqual(x[:, 1:].tolist(), y[:, :-1].tolist())

    def test_a_callable_result_is_copied_with_its_copy(self):
        class Rows:  # a NumPy-like array of the user's own with copy()
            def __init__(self, values):
                self.values = values

            def __getitem__(self, key):
                return Rows(self.values[key])

            def copy(self):
                return Rows(self.values.copy())

        x, y = next(self.stream(to=lambda array: Rows(numpy.from_dlpack(array))))
        self.assertFalse(numpy.shares_memory(x.values, y.values))

    def test_a_result_that_cannot_be_copied_says_to_pass_views(self):
        class Opaque:
            def __getitem__(self, key):
                return self

        stream = self.stream(to=lambda array: Opaque())
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            next(stream)
        self.assertIn("xy='copies' cannot copy the Opaque that to= returned", str(caught.exception))
        self.assertIn("xy='views'", str(caught.exception))
        x, y = next(self.stream(to=lambda array: Opaque(), xy="views"))
        self.assertIsInstance(x, Opaque)

    def test_an_unknown_mode_is_refused_naming_both(self):
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.stream(xy="copy")
        message = str(caught.exception)
        self.assertIn("xy='copy'", message)
        self.assertIn("'copies'", message)
        self.assertIn("'views'", message)

    def test_an_unknown_framework_is_refused_naming_the_ones_there_are(self):
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.stream(to="tensorflow")
        self.assertIn("to='tensorflow': expected 'numpy', 'torch', 'jax' or a callable", str(caught.exception))

    @unittest.skipIf(torch is None, "torch is not installed for this interpreter (Debian: python3-torch)")
    def test_torch_targets_view_and_masking(self):
        x, y = next(self.stream(to="torch"))
        before = x.clone()
        self.assertEqual(y.view(-1).shape, (64,))  # nanoGPT's targets.view(-1)
        y[y == PAD] = -100  # HF-style label masking
        self.assertTrue(torch.equal(x, before))
        self.assertTrue(x.is_contiguous() and y.is_contiguous())
        self.assertNotEqual(x.data_ptr(), y.data_ptr())

    @unittest.skipIf(torch is None, "torch is not installed for this interpreter (Debian: python3-torch)")
    def test_torch_views_alias_and_cannot_view_flat(self):
        x, y = next(self.stream(to="torch", xy="views"))
        with self.assertRaisesRegex(RuntimeError, "view size is not compatible"):
            y.view(-1)
        y[0, 0] = -100
        self.assertEqual(int(x[0, 1]), -100)  # y is x shifted by one token

    @unittest.skipIf(torch is None, "torch is not installed for this interpreter (Debian: python3-torch)")
    def test_torch_copies_are_independent_with_one_window(self):
        # [1, T] slices are contiguous already: contiguous() alone would still alias.
        x, y = next(backplane.batches(self.tokens, 1, 16, device="cpu:0", to="torch"))
        y[0, 0] = -100
        self.assertNotEqual(int(x[0, 1]), -100)


if __name__ == "__main__":
    unittest.main()
