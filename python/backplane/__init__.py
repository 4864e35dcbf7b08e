"""backplane from Python: backends, devices, the default device, arrays,
DLPack exchange and safetensors files, over libbackplane's C API (ctypes,
standard library only).

    import backplane
    with backplane.Runtime() as runtime:
        for backend in runtime.backends():          # never raises to list
            print(backend.name, backend.status, backend.reason)
        with runtime.default_device_scope("cpu"):
            tokens = backplane.safetensors.load(runtime, "tokens.safetensors")["tokens"]
        batch = runtime.take_windows(tokens, offsets, 1025, dtype="I64")  # default device

Errors raise subclasses of backplane.Error carrying `status` (the C API's
BP_STATUS_* code) and `message`. docs/embedding.md is the guide.
"""
from . import _lib
from ._array import Array, dtype_bits
from ._devices import Backend, DefaultDevice, Device, DeviceInfo, MemoryStats
from ._errors import (ConfigError, DeviceError, Error, FileSystemError, InternalError, InvalidArgumentError,
                      InvalidFileError, NotFoundError, OutOfMemoryError, OutOfRangeError, PluginError,
                      UnavailableError, UnsupportedError)
from ._runtime import Runtime
from . import _safetensors as safetensors

__all__ = [
    "Array", "Backend", "ConfigError", "DefaultDevice", "Device", "DeviceError", "DeviceInfo", "Error",
    "FileSystemError", "InternalError", "InvalidArgumentError", "InvalidFileError", "MemoryStats", "NotFoundError",
    "OutOfMemoryError", "OutOfRangeError", "PluginError", "Runtime", "UnavailableError", "UnsupportedError",
    "default_runtime", "dtype_bits", "from_dlpack", "library_path", "safetensors", "version",
]


def version():
    """The loaded library's version, e.g. "0.1.0"."""
    return _lib.text(_lib.lib.bp_version())


def library_path():
    """The path of the libbackplane that was loaded."""
    return _lib.lib._name


def default_runtime():
    """The process-wide runtime (Runtime.default())."""
    return Runtime.default()


def from_dlpack(obj, runtime=None):
    """Zero-copy import of a host DLPack tensor (NumPy, PyTorch CPU) as an
    Array on cpu:0, through `runtime` (default: the process-wide one)."""
    return (runtime or Runtime.default()).from_dlpack(obj)
