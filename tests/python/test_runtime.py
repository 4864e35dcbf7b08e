"""Backends, devices, the default device and errors from Python."""
import unittest

import backplane
from support import isolated_runtime


class RuntimeTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()

    def tearDown(self):
        self.runtime.close()

    def test_backends_are_listed_with_status_and_reason_without_errors(self):
        backends = {backend.name: backend for backend in self.runtime.backends()}
        self.assertTrue(backends["cpu"].available)
        self.assertEqual(backends["unavailable"].status, "unavailable")
        self.assertIn("fixture: no such hardware", backends["unavailable"].reason)
        self.assertEqual(backends["too_new"].status, "incompatible")
        self.assertTrue(self.runtime.is_available("cpu"))
        self.assertFalse(self.runtime.is_available("nope"))

    def test_devices_and_info(self):
        self.assertIn(backplane.Device("cpu", 0), self.runtime.devices())
        self.assertEqual(self.runtime.devices("cpu"), [backplane.Device("cpu", 0)])
        self.assertEqual(str(self.runtime.device("cpu")), "cpu:0")
        info = self.runtime.device_info("cpu")
        self.assertEqual(info.kind, "cpu")
        self.assertGreater(info.memory_total, 0)
        self.assertTrue(info.attributes)

    def test_default_device_source_and_scopes(self):
        chosen = self.runtime.default_device()
        self.assertEqual(chosen.device.backend, "sim")
        self.assertEqual(chosen.source, "highest-priority available backend")
        with self.runtime.default_device_scope("cpu") as device:
            self.assertEqual(device, backplane.Device("cpu", 0))
            self.assertEqual(self.runtime.default_device().source, "scoped override")
            with self.runtime.default_device_scope("sim:0"):
                self.assertEqual(self.runtime.default_device().device.backend, "sim")
            self.assertEqual(self.runtime.default_device().device.backend, "cpu")
        with self.assertRaises(RuntimeError):
            with self.runtime.default_device_scope("cpu"):
                raise RuntimeError("unwinds")
        self.assertEqual(self.runtime.default_device().device.backend, "sim")
        self.runtime.set_default_device("cpu")
        self.assertEqual(self.runtime.default_device().source, "set in code")
        self.runtime.set_default_device(None)

    def test_bad_selectors_raise_with_code_and_message(self):
        with self.assertRaises(backplane.NotFoundError) as caught:
            self.runtime.device("cdua")
        self.assertEqual(caught.exception.status, 8)
        self.assertIn("no backend 'cdua'", caught.exception.message)
        self.assertIn("cpu (available)", caught.exception.message)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.runtime.device("cpu:x")
        self.assertEqual(caught.exception.status, 1)
        self.assertIsInstance(caught.exception, backplane.Error)
        with self.assertRaises(backplane.UnavailableError) as caught:
            with self.runtime.default_device_scope("unavailable"):
                pass
        self.assertEqual(caught.exception.status, 3)
        self.assertIn("fixture: no such hardware", str(caught.exception))
        with self.assertRaises(backplane.OutOfRangeError):
            self.runtime.device("cpu:9")

    def test_a_closed_runtime_is_an_error_not_a_crash(self):
        self.runtime.close()
        with self.assertRaises(backplane.InvalidArgumentError):
            self.runtime.backends()
        self.runtime.close()  # twice: fine

    def test_version_and_default_runtime(self):
        self.assertEqual(backplane.version(), "0.1.0")
        self.assertIs(backplane.default_runtime(), backplane.Runtime.default())
        with backplane.Runtime.default() as runtime:  # leaving the block does not close it
            pass
        self.assertTrue(runtime.backends())


if __name__ == "__main__":
    unittest.main()
