"""DLPack: NumPy and PyTorch see our CPU arrays without a copy, and we see
theirs; lifetimes hold in both directions and nothing leaks."""
import ctypes
import gc
import os
import struct
import sys
import tempfile
import unittest
import weakref

import backplane
from support import isolated_runtime, optional_module, plugin_runtime, sim_runtime

numpy = optional_module("numpy")
torch = optional_module("torch")
if torch is not None:
    import torch.utils.dlpack  # noqa: F401  (the submodule is not imported by `import torch` everywhere)


def rss_kib():
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class ExportTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()

    def tearDown(self):
        self.runtime.close()

    def f32(self, values, shape):
        return self.runtime.array(struct.pack(f"<{len(values)}f", *values), "F32", shape, device="cpu")

    def test_dlpack_device(self):
        self.assertEqual(self.f32([1], (1,)).__dlpack_device__(), (1, 0))
        self.assertTrue(self.f32([1], (1,)).is_host)
        # The simulator declares kDLExtDev (12): the type comes from the plugin.
        on_sim = self.runtime.array(b"\0", "U8", (1,), device="sim")
        self.assertEqual(on_sim.__dlpack_device__(), (12, 0))
        self.assertFalse(on_sim.is_host)
        self.assertEqual([b.dlpack_device_type for b in self.runtime.backends() if b.name in ("cpu", "sim")],
                         [1, 12])
        with self.assertRaises(BufferError):
            self.runtime.array(b"\0", "F8_E4M3", (1,), device="cpu").__dlpack__()

    def test_a_backend_without_a_dlpack_type_is_refused_by_name(self):
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        undeclared = os.path.join(os.path.dirname(os.environ["BACKPLANE_TEST_SIM_PLUGIN"]), "sim_undeclared",
                                  "backplane-sim.so")
        with plugin_runtime(directory.name, os.environ["BACKPLANE_TEST_CPU_PLUGIN"], undeclared) as runtime:
            on_sim = runtime.array(b"\0", "U8", (1,), device="sim")
            with self.assertRaises(BufferError):
                on_sim.__dlpack_device__()
            with self.assertRaises(backplane.UnsupportedError) as caught:
                on_sim.__dlpack__()
            self.assertEqual(caught.exception.status, 4)
            self.assertIn("sim:0 cannot be exported: backend 'sim' declares no DLPack device type",
                          caught.exception.message)
            self.assertFalse(on_sim.is_host)

    @unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
    def test_numpy_sees_our_buffer(self):
        a = self.f32([1, 2, 3, 4, 5, 6], (2, 3))
        view = numpy.from_dlpack(a)
        self.assertEqual(view.ctypes.data, a.data_ptr)
        self.assertEqual(view.shape, (2, 3))
        self.assertEqual(view.dtype, numpy.float32)
        self.assertEqual(view.tolist(), [[1, 2, 3], [4, 5, 6]])
        row = numpy.from_dlpack(a[1:2])
        self.assertEqual(row.ctypes.data, a.data_ptr + 12)

    @unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
    def test_numpy_keeps_our_array_alive(self):
        a = self.f32([7, 8, 9], (3,))
        view = numpy.from_dlpack(a)
        del a
        gc.collect()
        self.runtime.close()  # the data outlives the runtime too
        self.assertEqual(view.tolist(), [7, 8, 9])

    @unittest.skipIf(torch is None, "torch is not installed for this interpreter")
    def test_torch_sees_our_buffer(self):
        a = self.f32([1, 2, 3, 4, 5, 6], (2, 3))
        tensor = torch.utils.dlpack.from_dlpack(a)
        self.assertEqual(tensor.data_ptr(), a.data_ptr)
        self.assertEqual(tuple(tensor.shape), (2, 3))
        self.assertEqual(tensor.dtype, torch.float32)
        self.assertEqual(tensor.tolist(), [[1, 2, 3], [4, 5, 6]])
        del a
        gc.collect()
        self.assertEqual(tensor.sum().item(), 21)

    def test_an_unconsumed_capsule_releases_the_tensor(self):
        a = self.f32([1], (1,))
        stats_before = rss_kib()
        for _ in range(1000):
            capsule = a.__dlpack__()
            del capsule  # never consumed: our destructor runs the deleter
        self.assertLess(rss_kib() - stats_before, 8 * 1024)
        self.assertEqual(a.to_bytes(), struct.pack("<f", 1))

    @unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
    @unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"),
                     "RSS means nothing under AddressSanitizer (its quarantine keeps freed memory); "
                     "the sanitizer itself checks these round trips for use after free")
    def test_round_trips_do_not_leak(self):
        payload = b"\1" * (64 << 10)
        payload_elements = len(payload)
        for _ in range(200):  # warm up allocator caches before measuring
            numpy.from_dlpack(self.runtime.array(payload, "U8", device="cpu"))
        gc.collect()
        before = rss_kib()
        for _ in range(10_000):
            ours = self.runtime.array(payload, "U8", device="cpu")
            theirs = numpy.from_dlpack(ours)  # read-only: NumPy does not re-export it
            imported = self.runtime.from_dlpack(numpy.ones(payload_elements, dtype=numpy.uint8))
            del ours, theirs, imported
        gc.collect()
        grown = rss_kib() - before
        # 10k leaked 64 KiB buffers would be 640 MiB.
        self.assertLess(grown, 32 * 1024, f"RSS grew by {grown} KiB over 10k round trips")


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class ImportTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()

    def tearDown(self):
        self.runtime.close()

    def test_a_numpy_array_is_shared_not_copied(self):
        values = numpy.arange(10, dtype=numpy.int64)
        a = self.runtime.from_dlpack(values)
        self.assertEqual(a.data_ptr, values.ctypes.data)
        self.assertEqual((a.dtype, a.shape, a.device), ("I64", (10,), backplane.Device("cpu", 0)))
        values[3] = 333  # modified through numpy, seen through backplane
        self.assertEqual(struct.unpack("<10q", a.to_bytes())[3], 333)

    def test_the_array_keeps_the_producer_alive_then_releases_it(self):
        released = []
        values = numpy.arange(6, dtype=numpy.float32).reshape(2, 3)
        weakref.finalize(values, released.append, True)
        a = self.runtime.from_dlpack(values)
        row = a[1:2]
        moved = a.device_put("sim")
        del values, a
        gc.collect()
        self.assertEqual(released, [])  # the view and the transfer hold it
        self.assertEqual(struct.unpack("<3f", row.to_bytes()), (3, 4, 5))
        self.assertEqual(struct.unpack("<6f", moved.wait().to_bytes()), (0, 1, 2, 3, 4, 5))
        del row, moved
        gc.collect()
        self.assertEqual(released, [True])

    def test_dlpack_import_via_the_module_function(self):
        values = numpy.array([True, False, True])
        try:
            a = backplane.from_dlpack(values, self.runtime)
        except BufferError:
            self.skipTest("this numpy cannot export bool through DLPack")
        self.assertEqual((a.dtype, a.to_bytes()), ("BOOL", b"\1\0\1"))

    def test_refusals_carry_codes_and_leave_the_capsule_usable(self):
        strided = numpy.arange(12, dtype=numpy.float32).reshape(3, 4)[:, ::2]
        capsule = strided.__dlpack__()
        with self.assertRaises(backplane.UnsupportedError) as caught:
            self.runtime.from_dlpack(capsule)
        self.assertEqual(caught.exception.status, 4)
        self.assertIn("not row-major contiguous", caught.exception.message)
        # Not consumed: it can still be imported elsewhere (and is released by its own destructor).
        self.assertEqual(numpy.from_dlpack(_CapsuleHolder(capsule)).shape, (3, 2))
        with self.assertRaises(backplane.UnsupportedError) as caught:
            self.runtime.from_dlpack(numpy.zeros(2, dtype=numpy.complex128))
        self.assertIn("has no backplane dtype", caught.exception.message)

    def test_a_consumed_capsule_cannot_be_imported_twice(self):
        capsule = numpy.arange(3, dtype=numpy.uint8).__dlpack__()
        a = self.runtime.from_dlpack(capsule)
        with self.assertRaises(ValueError):
            self.runtime.from_dlpack(capsule)
        self.assertEqual(a.to_bytes(), b"\0\1\2")


class _CapsuleHolder:
    """Hands an existing capsule to a consumer that calls __dlpack__."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **_):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def _set_device_id(capsule, device_id):
    """Rewrites the device_id of the DLTensor inside an unconsumed capsule
    (DLTensor: data pointer, then DLDevice {int32 type, int32 id})."""
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    tensor = get_pointer(capsule, b"dltensor")
    ctypes.c_int32.from_address(tensor + ctypes.sizeof(ctypes.c_void_p) + 4).value = device_id


class _Producer:
    """A device-memory producer in the protocol's terms: records the stream it
    is asked to order its work before, and hands out an array's capsule."""

    def __init__(self, array):
        self.array = array
        self.streams = []

    def __dlpack__(self, *, stream=None, **_):
        self.streams.append(stream)
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class DeviceImportTest(unittest.TestCase):
    """Device memory import on the simulated accelerator, found by the DLPack
    device type it declares (kDLExtDev): the same calls a CuPy or PyTorch
    CUDA tensor goes through on the cuda backend."""

    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.runtime = sim_runtime(self.directory.name)

    def tearDown(self):
        self.runtime.close()
        self.directory.cleanup()

    def test_device_memory_is_adopted_not_copied(self):
        values = struct.pack("<6i", -1, 2, -3, 4, -5, 6)
        original = self.runtime.array(values, "I32", (2, 3), device="sim:1")
        producer = _Producer(original)
        self.assertEqual(producer.__dlpack_device__(), (12, 1))
        imported = self.runtime.from_dlpack(producer)
        self.assertEqual(producer.streams, [None])  # stream 1 is CUDA's convention only
        self.assertEqual(imported.device, backplane.Device("sim", 1))
        self.assertEqual(imported.data_ptr, original.data_ptr)
        self.assertEqual(self.runtime.memory_stats("sim:1").backend_allocations, 1)  # the original's only
        del original, producer
        gc.collect()
        self.assertEqual(imported.to_bytes(), values)
        self.assertEqual(imported.device_put("cpu").wait().to_bytes(), values)

    def test_memory_of_another_device_is_refused(self):
        on_zero = self.runtime.array(b"\1" * 512, "U8", (512,), device="sim:0")
        capsule = on_zero.__dlpack__()
        # Claims sim:1 for memory of sim:0: the plugin checks the address.
        _set_device_id(capsule, 1)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            self.runtime.from_dlpack(capsule)
        self.assertIn("sim:1: memory_wrap of 512 bytes", caught.exception.message)
        self.assertIn("the address is memory of sim:0", caught.exception.message)
        _set_device_id(capsule, 5)
        with self.assertRaises(backplane.OutOfRangeError) as caught:
            self.runtime.from_dlpack(capsule)
        self.assertIn("DLPack device type 12 (kDLExtDev) device_id 5 is out of range: backend 'sim'",
                      caught.exception.message)
        _set_device_id(capsule, 0)  # refused, so still unconsumed: importable as it really is
        self.assertEqual(self.runtime.from_dlpack(capsule).to_bytes(), b"\1" * 512)

    def test_other_device_types_are_refused_before_asking_for_a_capsule(self):
        producer = _Producer(None)
        producer.__dlpack_device__ = lambda: (7, 0)  # Vulkan: no backend here declares it
        with self.assertRaises(backplane.UnsupportedError) as caught:
            self.runtime.from_dlpack(producer)
        self.assertIn("DLPack device type 7 cannot be imported: no available backend declares it (importable "
                      "here: 1, 3, 11, 12)", caught.exception.message)
        self.assertEqual(producer.streams, [])

    def test_host_memory_lands_on_the_default_device_when_it_is_host_memory(self):
        plugins = [os.environ["BACKPLANE_TEST_CPU_PLUGIN"], os.environ["BACKPLANE_TEST_SIM_PLUGIN"]]
        with plugin_runtime(self.directory.name, *plugins, config="[backend.cpu]\ndevices = 2\n") as runtime:
            source = runtime.array(b"\7" * 8, "U8", (8,), device="cpu:0")
            # The default is sim:0, not host memory: the first host-addressable device.
            self.assertEqual(runtime.default_device().device, backplane.Device("sim", 0))
            self.assertEqual(runtime.from_dlpack(source).device, backplane.Device("cpu", 0))
            with runtime.default_device_scope("cpu:1"):
                imported = runtime.from_dlpack(source)
            self.assertEqual(imported.device, backplane.Device("cpu", 1))
            self.assertEqual(imported.data_ptr, source.data_ptr)


@unittest.skipIf(torch is None, "torch is not installed for this interpreter")
class TorchImportTest(unittest.TestCase):
    def test_a_torch_tensor_is_shared(self):
        with isolated_runtime() as runtime:
            tensor = torch.arange(8, dtype=torch.int32)
            a = runtime.from_dlpack(tensor)
            self.assertEqual(a.data_ptr, tensor.data_ptr())
            tensor[0] = 42
            self.assertEqual(struct.unpack("<8i", a.to_bytes())[0], 42)
            del tensor
            gc.collect()
            self.assertEqual(struct.unpack("<8i", a.to_bytes())[7], 7)


if __name__ == "__main__":
    unittest.main()


class RejectedExportTest(unittest.TestCase):
    """A consumer that refuses our capsule (NumPy given device memory drops
    it with its error set): its own error reaches the user, nothing is
    printed as ignored, and the array's memory is freed."""

    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.runtime = sim_runtime(self.directory.name)
        self.unraisable = []
        self.previous_hook = sys.unraisablehook
        sys.unraisablehook = self.unraisable.append

    def tearDown(self):
        sys.unraisablehook = self.previous_hook
        self.runtime.close()
        self.directory.cleanup()

    @unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
    def test_numpy_refusing_device_memory_raises_its_own_error(self):
        array = self.runtime.array(b"\1" * (1 << 20), "U8", device="sim:0")
        with self.assertRaises(Exception) as raised:
            numpy.from_dlpack(array)
        self.assertNotIsInstance(raised.exception, SystemError)
        gc.collect()
        self.assertEqual(self.unraisable, [])
        array.close()
        gc.collect()
        self.assertEqual(self.runtime.memory_stats("sim:0").in_use, 0)


class EmptyImportTest(unittest.TestCase):
    """Empty tensors: no element has a place a stride could get wrong, so
    whatever strides the producer gives them are accepted."""

    def setUp(self):
        self.runtime = isolated_runtime()

    def tearDown(self):
        self.runtime.close()

    @unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
    def test_empty_numpy_arrays_import(self):
        for shape in [(0, 4), (4, 0), (0,), (3, 0, 2)]:
            with self.subTest(shape=shape):
                imported = self.runtime.from_dlpack(numpy.zeros(shape, dtype=numpy.float32))
                self.assertEqual(imported.shape, shape)

    @unittest.skipIf(torch is None, "torch is not installed for this interpreter")
    def test_empty_torch_tensors_import(self):
        for tensor in [torch.zeros(0, 5), torch.zeros(5, 0).t(), torch.zeros(2, 0, 3)]:
            with self.subTest(shape=tuple(tensor.shape)):
                imported = self.runtime.from_dlpack(tensor)
                self.assertEqual(imported.shape, tuple(tensor.shape))
