"""Backends, devices, the default device and errors from Python."""
import os
import typing
import unittest
from unittest import mock

import backplane
from backplane import _devices, _lib, _lib_gen
from support import isolated_runtime, plugin_dirs


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

    def test_backend_status_type_holds_every_status_of_the_header(self):
        # Backend.status is typed as a Literal of these words: one per
        # BP_BACKEND_* status, as bp_backend_info's status_name spells it.
        header = {name[len("BP_BACKEND_"):].lower() for name in vars(_lib_gen)
                  if name.startswith("BP_BACKEND_") and name != "BP_BACKEND_NAME_CAPACITY"}
        self.assertEqual(set(typing.get_args(_devices.BackendStatus)), header)
        for backend in self.runtime.backends():
            self.assertIn(backend.status, typing.get_args(_devices.BackendStatus), backend.name)

    def test_default_device_level_type_holds_every_source_of_the_library(self):
        levels = [_lib.text(_lib.lib.bp_device_source_name(code)) for code in range(_lib_gen.BP_SOURCE_LOCAL_RANK + 1)]
        self.assertEqual(list(typing.get_args(_devices.DeviceSourceLevel)), levels)

    def test_default_device_level_is_the_source_without_the_local_rank_value(self):
        chosen = self.runtime.default_device()
        self.assertEqual((chosen.source, chosen.level), ("highest-priority available backend",) * 2)
        with self.runtime.default_device_scope("cpu"):
            self.assertEqual(self.runtime.default_device().level, "scoped override")
        # A runtime that reads the environment, of which only LOCAL_RANK
        # speaks to the default device.
        directories = plugin_dirs()
        others = ("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")
        launched = {name: value for name, value in os.environ.items()
                    if not name.startswith("BACKPLANE_") and name not in others}
        with mock.patch.dict(os.environ, {**launched, "LOCAL_RANK": "0"}, clear=True):
            runtime = backplane.Runtime(plugin_paths=directories, skip_default_paths=True)
            try:
                chosen = runtime.default_device()
            finally:
                runtime.close()
        self.assertEqual((chosen.source, chosen.level), ("LOCAL_RANK=0", "local rank"))

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
