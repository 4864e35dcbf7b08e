"""batches(to="jax"): with JAX's 64-bit types off (its default) the stream
hands out int32 (uint32 for uint32 tokens), which JAX takes as it is,
instead of int64 that JAX would convert on every step; asking for int64
anyway says so once, and is refused where the conversion would change token
ids (uint32 tokens of 2**31 and more). x and y hold the same tokens as the
NumPy path's."""
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



@unittest.skipIf(jax is None or numpy is None, "jax and numpy are needed (scripts/pip-test-packages installs jax)")
class JaxLargeTokensTest(unittest.TestCase):
    """Token ids of 2**31 and more (uint32 sources): JAX without 64-bit
    types would turn int64 batches into int32 and hand them out negative,
    so the stream refuses such a dtype at the call, and what it suggests
    delivers every id as it is."""

    LARGE = 3_000_000_055

    def setUp(self):
        self.runtime = isolated_runtime()
        # Every token large, so that every window holds one.
        self.values = numpy.arange(self.LARGE, self.LARGE + 5000, dtype=numpy.uint32)
        self.tokens = self.runtime.array(self.values, device="cpu:0")
        self.assertFalse(jax.config.read("jax_enable_x64"))

    def tearDown(self):
        self.runtime.close()

    def stream(self, **options):
        return backplane.batches(self.tokens, 2, 8, device="cpu:0", seed=5, steps=2, runtime=self.runtime,
                                 **options)

    def assert_delivered_as_they_are(self, stream, dtype):
        for (x, y), (x_numpy, y_numpy) in zip(stream, self.stream(to="numpy")):
            self.assertEqual(x.dtype, dtype)
            self.assertEqual(numpy.asarray(x).astype(numpy.int64).tolist(), x_numpy.tolist())
            self.assertEqual(numpy.asarray(y).astype(numpy.int64).tolist(), y_numpy.tolist())
            self.assertTrue((numpy.asarray(x).astype(numpy.int64) >= self.LARGE).all())

    def test_int64_without_x64_is_refused_naming_the_setting_and_what_to_do(self):
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.stream(to="jax", dtype="int64")
        message = str(caught.exception)
        self.assertIn("to='jax' with dtype='int64': the tokens are uint32", message)
        self.assertIn("JAX has 64-bit types off (jax_enable_x64 is False), so it would turn int64 batches into "
                      "int32 and token ids above 2147483647 would arrive as wrong numbers", message)
        self.assertIn("call jax.config.update('jax_enable_x64', True) before batches(), or pass "
                      "dtype='uint32', which JAX has without 64-bit types", message)

    def test_uint64_without_x64_arrives_as_uint32_which_holds_the_tokens(self):
        with self.assertWarns(UserWarning) as caught:
            stream = self.stream(to="jax", dtype="uint64")
        self.assertIn("arrives as uint32 through a conversion every step; pass dtype='uint32'", str(caught.warning))
        self.assert_delivered_as_they_are(stream, numpy.uint32)

    def test_uint32_and_the_default_deliver_the_large_ids(self):
        self.assert_delivered_as_they_are(self.stream(to="jax", dtype="uint32"), numpy.uint32)
        # The default is the 32-bit type that holds the tokens: uint32 here, not int32.
        self.assert_delivered_as_they_are(self.stream(to="jax"), numpy.uint32)

    def test_with_x64_on_int64_delivers_the_large_ids(self):
        jax.config.update("jax_enable_x64", True)
        try:
            self.assert_delivered_as_they_are(self.stream(to="jax", dtype="int64"), numpy.int64)
        finally:
            jax.config.update("jax_enable_x64", False)

    def test_int64_tokens_without_x64_have_no_32_bit_way(self):
        tokens = self.runtime.array(self.values.astype(numpy.int64), device="cpu:0")
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            backplane.batches(tokens, 2, 8, device="cpu:0", steps=1, runtime=self.runtime, to="jax")
        message = str(caught.exception)
        self.assertIn("to='jax' with the default: the tokens are int64", message)
        self.assertIn("token ids above 2147483647 would arrive as wrong numbers", message)
        self.assertNotIn("uint32", message)


if __name__ == "__main__":
    unittest.main()
