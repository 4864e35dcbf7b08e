"""batches(to="jax"): with JAX's 64-bit types off (its default) the stream
hands out int32, which JAX takes as it is, instead of int64 that JAX would
convert on every step; asking for int64 anyway says so once. x and y hold
the same tokens as the NumPy path's."""
import unittest
import warnings

import backplane
from support import isolated_runtime, optional_module

numpy = optional_module("numpy")
jax = optional_module("jax")


@unittest.skipIf(jax is None or numpy is None, "jax and numpy are needed (scripts/pip-test-packages installs jax)")
class JaxBatchesTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()
        values = numpy.random.default_rng(3).integers(0, 50000, size=20000, dtype=numpy.uint16)
        self.tokens = self.runtime.array(values, device="cpu:0")

    def tearDown(self):
        self.runtime.close()

    def stream(self, **options):
        return backplane.batches(self.tokens, 4, 32, device="cpu:0", seed=5, steps=3, runtime=self.runtime,
                                 **options)

    def test_without_x64_the_default_dtype_is_int32_and_the_tokens_are_those_of_numpy(self):
        self.assertFalse(jax.config.read("jax_enable_x64"))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the default says nothing
            pairs = list(self.stream(to="jax"))
        expected = list(self.stream(to="numpy"))
        self.assertEqual(len(pairs), 3)
        for (x, y), (x_numpy, y_numpy) in zip(pairs, expected):
            self.assertIsInstance(x, jax.Array)
            self.assertEqual(x.dtype, numpy.int32)
            self.assertEqual(x.shape, (4, 32))
            numpy.testing.assert_array_equal(numpy.asarray(x), x_numpy)
            numpy.testing.assert_array_equal(numpy.asarray(y), y_numpy)

    def test_int64_without_x64_warns_what_to_pass(self):
        with self.assertWarns(UserWarning) as caught:
            stream = self.stream(to="jax", dtype="int64")
        self.assertIn("pass dtype='int32' (no conversion) or enable jax_enable_x64", str(caught.warning))
        x, _ = next(iter(stream))
        self.assertEqual(x.dtype, numpy.int32)  # what JAX makes of it
        stream.close()

    def test_views_and_copies_give_the_same_arrays(self):
        for (x, y), (x_views, y_views) in zip(self.stream(to="jax"), self.stream(to="jax", xy="views")):
            numpy.testing.assert_array_equal(numpy.asarray(x), numpy.asarray(x_views))
            numpy.testing.assert_array_equal(numpy.asarray(y), numpy.asarray(y_views))


if __name__ == "__main__":
    unittest.main()
