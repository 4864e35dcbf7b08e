"""JAX (CPU wheels): it sees backplane's host arrays without a copy, and its
arrays import back."""
import os
import unittest

import backplane
from support import isolated_runtime, optional_module

numpy = optional_module("numpy")
jax = optional_module("jax")
if jax is not None:
    import jax.numpy as jnp


@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "jaxlib under a preloaded sanitizer runtime")
@unittest.skipIf(jax is None or numpy is None, "jax is not installed for this interpreter (scripts/pip-test-packages "
                                               "installs the CPU wheels)")
class JaxTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()
        self.tokens = self.runtime.array(numpy.arange(4096, dtype=numpy.uint16), device="cpu")

    def tearDown(self):
        self.runtime.close()

    def test_jax_sees_a_batch_without_a_copy(self):
        batch = self.runtime.take_windows(self.tokens, [3, 100], 8, "cpu", "int32")
        array = jnp.from_dlpack(batch)
        self.assertEqual(array.shape, (2, 8))
        self.assertEqual(array.dtype, jnp.int32)
        self.assertEqual(array.unsafe_buffer_pointer(), batch.data_ptr)
        self.assertEqual(array[1].tolist(), list(range(100, 108)))

    def test_jax_arrays_import_back(self):
        source = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
        imported = self.runtime.from_dlpack(source)
        self.assertEqual(imported.shape, (3, 4))
        self.assertEqual(imported.dtype, "F32")
        self.assertEqual(imported.device, backplane.Device("cpu", 0))
        self.assertEqual(imported.data_ptr, source.unsafe_buffer_pointer())
        self.assertEqual(imported.numpy().tolist(), numpy.arange(12, dtype=numpy.float32).reshape(3, 4).tolist())

    def test_batches_as_jax_arrays(self):
        x, y = next(backplane.batches(self.tokens, 4, 16, device="cpu", to="jax"))
        self.assertEqual(x.shape, (4, 16))
        self.assertEqual(x.dtype, jnp.int64 if jax.config.jax_enable_x64 else jnp.int32)
        self.assertTrue(bool((x[:, 1:] == y[:, :-1]).all()))


if __name__ == "__main__":
    unittest.main()
