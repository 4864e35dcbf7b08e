"""batches(to="torch") with an unsigned dtype wider than 8 bits: a torch
without uint16, uint32 and uint64 tensors (before 2.3; Debian's 1.13) could
convert no step, so the call is refused, naming the dtype, torch's version
and the dtypes that work."""
import unittest

import backplane
from support import isolated_runtime, optional_module

numpy = optional_module("numpy")
torch = optional_module("torch")


@unittest.skipIf(torch is None or numpy is None, "torch is not installed for this interpreter (Debian: python3-torch)")
class TorchUnsignedTest(unittest.TestCase):
    def setUp(self):
        if isinstance(getattr(torch, "uint16", None), torch.dtype):
            self.skipTest(f"torch {torch.__version__} has uint16 tensors")
        self.runtime = isolated_runtime()
        self.addCleanup(self.runtime.close)

    def stream(self, values, **options):
        tokens = self.runtime.array(values, device="cpu:0")
        return backplane.batches(tokens, 2, 8, device="cpu:0", seed=1, steps=1, to="torch", runtime=self.runtime,
                                 **options)

    def test_unsigned_dtypes_are_refused_at_the_call(self):
        small = numpy.arange(1000, dtype=numpy.uint16)
        for dtype in ("uint16", "uint32", "uint64", numpy.uint32):
            with self.subTest(dtype=dtype), self.assertRaises(backplane.InvalidArgumentError) as caught:
                self.stream(small, dtype=dtype)
            name = numpy.dtype(dtype).name
            self.assertIn(f"to='torch' with dtype={dtype!r}: torch {torch.__version__} has no {name} tensors",
                          str(caught.exception))
            self.assertIn("pass dtype='int32' or 'int64'", str(caught.exception))

    def test_the_tokens_own_dtype_is_named(self):
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.stream(numpy.arange(1000, dtype=numpy.uint32), dtype=None)
        message = str(caught.exception)
        self.assertIn("dtype=None (the tokens' own uint32)", message)
        self.assertIn("has no uint32 tensors", message)
        self.assertIn("pass dtype='int64'", message)  # int32 cannot hold every uint32 token
        self.assertNotIn("int32'", message)

    def test_what_the_message_suggests_works(self):
        values = numpy.arange(1000, dtype=numpy.uint16)
        for dtype, expected in (("int32", torch.int32), ("int64", torch.int64)):
            x, y = next(self.stream(values, dtype=dtype))
            self.assertEqual((x.dtype, y.dtype), (expected, expected))
            self.assertEqual(y[:, :-1].tolist(), x[:, 1:].tolist())
        x, _ = next(self.stream(numpy.arange(1000, dtype=numpy.uint8), dtype=None))  # uint8: torch has it
        self.assertEqual(x.dtype, torch.uint8)


if __name__ == "__main__":
    unittest.main()
