"""The device in torch and JAX: str() of a Device and of the default device is
its selector, and Device.torch() / jax() (backplane.torch_device /
jax_device) name where batches land; a backend the framework cannot name is
refused naming it."""
import os
import tempfile
import unittest

import backplane
from support import optional_module, sim_runtime

torch = optional_module("torch")
jax = optional_module("jax")


class DeviceTextTest(unittest.TestCase):
    def test_str_of_a_device_and_of_the_default_device_is_the_selector(self):
        self.assertEqual(str(backplane.Device("cuda", 0)), "cuda:0")
        chosen = backplane.DefaultDevice(backplane.Device("cpu", 1), "set in code")
        self.assertEqual(str(chosen), "cpu:1")
        self.assertEqual(str(backplane.default_device()), str(backplane.default_device().device))

    def test_a_backend_no_framework_names_is_refused_naming_it(self):
        for framework in ("torch", "jax"):
            with self.assertRaises(backplane.UnsupportedError) as caught:
                getattr(backplane.Device("opencl", 2), framework)()
            message = str(caught.exception)
            self.assertIn("opencl:2", message)
            self.assertIn("backend opencl", message)
            self.assertIn("torch" if framework == "torch" else "JAX", message)


@unittest.skipIf(torch is None, "torch is not installed for this interpreter (Debian: python3-torch)")
class TorchDeviceTest(unittest.TestCase):
    def test_torch_device_of_a_selector_works(self):
        self.assertEqual(torch.device(str(backplane.Device("cuda", 1))), torch.device("cuda", 1))
        self.assertEqual(torch.device(str(backplane.Device("cpu", 0))), torch.device("cpu", 0))
        with backplane.default_device_scope("cpu"):
            self.assertEqual(torch.device(str(backplane.default_device())), torch.device("cpu", 0))

    def test_torch_devices(self):
        self.assertEqual(backplane.Device("cuda", 1).torch(), torch.device("cuda", 1))
        self.assertEqual(backplane.Device("cpu", 1).torch(), torch.device("cpu"))
        self.assertEqual(backplane.torch_device("cpu:0"), torch.device("cpu"))
        self.assertEqual(backplane.torch_device(), backplane.default_device().device.torch())
        with backplane.default_device_scope("cpu"):
            self.assertEqual(backplane.torch_device(), torch.device("cpu"))
            self.assertEqual(backplane.default_device().torch(), torch.device("cpu"))

    def test_a_model_on_the_helpers_device_meets_the_batches(self):
        with tempfile.TemporaryDirectory() as scratch:
            runtime = sim_runtime(scratch)
            tokens = runtime.array(bytes(range(200)), device="cpu:0")
            stream = backplane.batches(tokens, 2, 8, device="cpu:0", to="torch", dtype="int64")
            model = torch.nn.Embedding(256, 4).to(runtime.device("cpu:0").torch())
            x, _ = next(stream)
            self.assertEqual(x.device, next(model.parameters()).device)
            self.assertEqual(model(x).shape, (2, 8, 4))
            stream.close()
            with self.assertRaises(backplane.UnsupportedError) as caught:
                runtime.device("sim:1").torch()
            self.assertIn("backend sim", str(caught.exception))
            runtime.close()


@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "jaxlib under a preloaded sanitizer runtime")
@unittest.skipIf(jax is None, "jax is not installed for this interpreter (scripts/pip-test-packages installs it)")
class JaxDeviceTest(unittest.TestCase):
    def test_jax_devices(self):
        first_cpu = jax.devices("cpu")[0]
        self.assertEqual(backplane.Device("cpu", 1).jax(), first_cpu)
        self.assertEqual(backplane.jax_device("cpu:0"), first_cpu)
        with backplane.default_device_scope("cpu"):
            self.assertEqual(backplane.jax_device(), first_cpu)

    def test_a_host_batch_lands_on_the_helpers_device(self):
        with tempfile.TemporaryDirectory() as scratch:
            runtime = sim_runtime(scratch)
            tokens = runtime.array(bytes(range(200)), device="cpu:0")
            stream = backplane.batches(tokens, 2, 8, device="cpu:0", to="jax")
            x, _ = next(stream)
            self.assertEqual(set(x.devices()), {runtime.device("cpu:0").jax()})
            stream.close()
            runtime.close()


if __name__ == "__main__":
    unittest.main()
