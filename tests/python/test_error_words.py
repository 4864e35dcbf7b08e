"""Errors that point the right way: a selector's suggestion names only a
backend that exists (GPU:0 -> cuda:0 where cuda is known, never 'gpu:0'); an
out-of-range cpu ordinal says how to have more cpu devices; a batch stream
whose to= cannot take the target device's batches is refused at the call,
naming what works there."""
import os
import tempfile
import unittest

import backplane
from support import optional_module, plugin_runtime

numpy = optional_module("numpy")
torch = optional_module("torch")
jax = optional_module("jax")
CPU = os.environ["BACKPLANE_TEST_CPU_PLUGIN"]
SIM = os.environ["BACKPLANE_TEST_SIM_PLUGIN"]
# The cuda plugin of this build, if it was built: known without a driver (unavailable).
CUDA = os.path.join(os.path.dirname(os.path.dirname(CPU)), "cuda", "backplane-cuda.so")
# The simulated accelerator declaring no DLPack device type: device memory
# the library cannot export, as an OpenCL device's.
UNDECLARED = os.path.join(os.path.dirname(SIM), "sim_undeclared", "backplane-sim.so")
OPENCL = os.path.join(os.path.dirname(os.path.dirname(CPU)), "opencl", "backplane-opencl.so")


class ErrorWordsTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        self.addCleanup(self.scratch.cleanup)

    def runtime(self, *plugins, config=""):
        runtime = plugin_runtime(self.scratch.name, *plugins, config=config)
        self.addCleanup(runtime.close)
        return runtime

    def refusal(self, runtime, selector):
        with self.assertRaises(backplane.Error) as caught:
            runtime.set_default_device(selector)
        return str(caught.exception)

    def test_a_suggestion_names_only_a_backend_that_exists(self):
        runtime = self.runtime(CPU, SIM)
        self.assertIn("'SIM:1': backend names are lowercase; did you mean 'sim:1'?", self.refusal(runtime, "SIM:1"))
        for selector in ("GPU:0", "gpu"):  # no cuda here: nothing to suggest
            message = self.refusal(runtime, selector)
            self.assertNotIn("did you mean", message)
            self.assertNotIn("gpu:0'?", message)
        self.assertIn("'GPU:0': backend names are lowercase (expected", self.refusal(runtime, "GPU:0"))
        self.assertIn("no backend 'gpu'; backends: cpu (available), sim (available)", self.refusal(runtime, "gpu"))

    @unittest.skipUnless(os.path.exists(CUDA), "the cuda plugin was not built")
    def test_gpu_suggests_cuda_where_cuda_is_known_whatever_its_status(self):
        runtime = self.runtime(CPU, CUDA)
        self.assertIn("cuda", [backend.name for backend in runtime.backends()])
        self.assertIn("'GPU:0': backend names are lowercase; did you mean 'cuda:0'?", self.refusal(runtime, "GPU:0"))
        self.assertIn("no backend 'gpu' (did you mean 'cuda'?); backends: cpu", self.refusal(runtime, "gpu"))

    def test_an_out_of_range_cpu_ordinal_says_how_to_have_more(self):
        message = self.refusal(self.runtime(CPU), "cpu:1")
        self.assertIn("device 'cpu:1' is out of range: backend 'cpu' has 1 device (cpu:0); to have 2 cpu devices, "
                      "set devices = 2 under [backend.cpu] in the config file", message)
        self.runtime(CPU, config="[backend.cpu]\ndevices = 2\n").set_default_device("cpu:1")  # as it says

    @unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
    def test_a_target_that_cannot_take_the_devices_batches_is_refused_at_the_call(self):
        self.check_targets(UNDECLARED, "sim:0", "sim:0 cannot be exported: backend 'sim' declares no DLPack device type")

    @unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
    @unittest.skipUnless(os.path.exists(OPENCL), "the opencl plugin was not built")
    def test_an_opencl_default_device_is_refused_for_torch_and_jax_at_the_call(self):
        runtime = self.runtime(CPU, OPENCL)
        if not any(backend.name == "opencl" and backend.available for backend in runtime.backends()):
            self.skipTest("no OpenCL platform on this machine (Debian: pocl-opencl-icd)")
        runtime.close()
        self.check_targets(OPENCL, "opencl:0", "opencl:0 cannot be exported: backend 'opencl' gives its memory no "
                                               "address")

    def check_targets(self, plugin, device, reason):
        """On `plugin`'s `device` as the default device: torch and jax refused
        with the library's `reason`, numpy pointing to a copying callable,
        which works."""
        runtime = self.runtime(CPU, plugin)
        runtime.set_default_device(device)
        tokens = runtime.array(numpy.arange(5000, dtype=numpy.uint16), device="cpu:0")

        def stream(to):
            return backplane.batches(tokens, 2, 8, steps=1, seed=1, to=to, runtime=runtime)
        targets = [name for name, module in (("torch", torch), ("jax", jax)) if module is not None]
        for to in targets:
            with self.subTest(to=to), self.assertRaises(backplane.InvalidArgumentError) as caught:
                stream(to)
            message = str(caught.exception)
            self.assertIn(f"to='{to}' takes each batch through DLPack, which {device} cannot give: ", message)
            self.assertIn(reason, message)
            self.assertIn("pass device= a host device ('cpu'), or to= a callable that takes the Array and copies it "
                          "to a host device", message)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            stream("numpy")
        self.assertIn(f"to='numpy' needs host memory, but {device} is not host memory", str(caught.exception))
        self.assertNotIn("to='torch'", str(caught.exception))  # torch could not take it either
        self.assertIn("to= a callable that takes the Array and copies it to a host device", str(caught.exception))
        # A callable is the caller's to judge: one that copies to the host works.
        x, y = next(stream(lambda array: numpy.from_dlpack(array.device_put("cpu").wait())))
        self.assertEqual(x.shape, (2, 8))
        self.assertEqual(x[:, 1:].tolist(), y[:, :-1].tolist())
        if torch is not None:  # the callable the message gives, as written
            x, _ = next(stream(lambda array: torch.from_dlpack(array.device_put('cpu').wait())))
            self.assertEqual(tuple(x.shape), (2, 8))


if __name__ == "__main__":
    unittest.main()
