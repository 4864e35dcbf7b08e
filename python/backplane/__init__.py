"""backplane from Python: backends, devices, the default device, arrays,
training batches, DLPack exchange, safetensors and token files.

    import backplane
    for backend in backplane.backends():            # never raises to list
        print(backend.name, backend.status, backend.reason)
    with backplane.default_device_scope("cpu"):
        tokens = backplane.safetensors.load("tokens.safetensors")["tokens"]
    for x, y in backplane.batches(tokens, 32, 1024, to="torch", steps=100):
        ...                                         # x, y on the default device

Module-level functions use the process-wide runtime (Runtime.default());
Runtime() makes an independent one. Errors raise subclasses of
backplane.Error carrying `status` (the C API's BP_STATUS_* code) and
`message`. docs/embedding.md is the guide.
"""
# No `from __future__ import annotations` and no names taken from typing:
# dir(backplane) lists the package's own names only.
import typing as _typing

from . import _lib
from . import _safetensors as safetensors
from ._array import Array
from ._batches import BatchStats, BatchStream, BatchStreamStats, DocumentPieces, Documents, Window, batches
from ._devices import Backend, DefaultDevice, Device, DeviceInfo, MemoryStats
from ._dtypes import bits as _bits
from ._layout import Layout
from ._errors import (CancelledError, ConfigError, DeviceError, Error, FileSystemError, InternalError,
                      InvalidArgumentError, InvalidFileError, MissingFileError, NotFoundError, OutOfMemoryError,
                      OutOfRangeError, PluginError, UnavailableError, UnsupportedError)
from ._runtime import DeviceLike, Runtime, runtime_of
from ._scopes import DefaultDeviceScope
from ._trace import Trace, trace  # tracing (docs/tracing.md)
from ._tokens import load_tokens

__all__ = [
    "Array", "Backend", "BatchStats", "BatchStream", "BatchStreamStats", "CancelledError", "ConfigError", "DefaultDevice",
    "DefaultDeviceScope", "Device", "DeviceError", "DeviceInfo", "DocumentPieces", "Documents", "Error", "FileSystemError", "InternalError",
    "InvalidArgumentError", "InvalidFileError", "Layout", "MemoryStats", "MissingFileError", "NotFoundError",
    "OutOfMemoryError", "OutOfRangeError", "PluginError", "Runtime", "UnavailableError", "UnsupportedError",
    "Window", "array", "backends", "batches", "default_device", "default_device_scope", "default_runtime", "device",
    "devices", "dtype_bits", "from_dlpack", "is_available", "jax_device", "library_path", "load_tokens", "safetensors",
    "set_default_device", "take_windows", "torch_device", "version",
]
__all__ += ["Trace", "trace"]  # tracing (docs/tracing.md)


def version() -> str:
    """The loaded library's version, e.g. "0.1.0"."""
    return _lib.text(_lib.lib.bp_version())


# The package's version, as tools read it (`backplane.__version__`): the
# library's own, which is what decides the behaviour.
__version__: str = version()


def library_path() -> str:
    """The path of the libbackplane that was loaded."""
    return _lib.library_path()


def default_runtime() -> Runtime:
    """The process-wide runtime (Runtime.default())."""
    return Runtime.default()


def dtype_bits(dtype: _typing.Any) -> int:
    """Bits per element of a dtype in any accepted spelling."""
    return _bits(dtype)


def backends() -> list[Backend]:
    """Every plugin the process-wide runtime found, each with its status."""
    return Runtime.default().backends()


def devices(backend: _typing.Optional[str] = None) -> list[Device]:
    """The devices of `backend` ([] when it is unavailable, NotFoundError
    for an unknown name), or of every available backend."""
    return Runtime.default().devices(backend)


def is_available(backend: str) -> bool:
    """Whether the process-wide runtime can use `backend` ("cuda"): False
    for one that is unavailable, failed, disabled or not found."""
    return Runtime.default().is_available(backend)


def set_default_device(selector: _typing.Optional[DeviceLike]) -> None:
    """Sets the process-wide default device ("set in code"); None clears it.
    A default_device_scope still wins inside its block."""
    Runtime.default().set_default_device(selector)


def device(selector: DeviceLike) -> Device:
    """The device a selector names ("cuda:0", "cpu", "cuda" for its first
    device), checked against what the process-wide runtime found."""
    return Runtime.default().device(selector)


def default_device() -> DefaultDevice:
    """The default device on this thread and what decided it (a scope, the
    process setting, BACKPLANE_DEFAULT_DEVICE, the config file, or the
    fastest available backend); str() of it is the selector."""
    return Runtime.default().default_device()


def torch_device(device: _typing.Optional[DeviceLike] = None) -> _typing.Any:
    """The torch.device where batches on `device` (default: the default
    device) land: model.to(backplane.torch_device()) puts the model where
    batches(..., to="torch") puts x and y. See Device.torch()."""
    return _framework_device(device).torch()


def jax_device(device: _typing.Optional[DeviceLike] = None) -> _typing.Any:
    """The jax.Device where batches on `device` (default: the default
    device) land. See Device.jax()."""
    return _framework_device(device).jax()


def _framework_device(device: _typing.Optional[DeviceLike]) -> Device:
    runtime = Runtime.default()
    return runtime.default_device().device if device is None else runtime.device(device)


def default_device_scope(selector: DeviceLike) -> DefaultDeviceScope:
    """A `with` block in which `selector` is the default device, on this
    thread (and this context's tasks) only."""
    return Runtime.default().default_device_scope(selector)


def array(data: _typing.Any, dtype: _typing.Any = None, shape: _typing.Any = None,
          device: _typing.Optional[DeviceLike] = None) -> Array:
    """A new array holding a copy of `data` (bytes, a buffer, a NumPy array
    or anything NumPy takes, converted to `dtype` as NumPy would) on
    `device` (default: the default device). See Runtime.array."""
    return Runtime.default().array(data, dtype, shape, device)


def take_windows(tokens: Array, offsets: _typing.Any, length: int, device: _typing.Optional[DeviceLike] = None,
                 dtype: _typing.Any = None) -> Array:
    """The windows tokens[o:o + length] for each offset o, as one
    [len(offsets), length] array on `device` (default: the default device),
    in `dtype` (default: the tokens')."""
    return runtime_of(tokens).take_windows(tokens, offsets, length, device, dtype)


def from_dlpack(obj: _typing.Any, runtime: _typing.Optional[Runtime] = None) -> Array:
    """Zero-copy import of a DLPack tensor (NumPy, PyTorch, JAX) as an Array,
    through `runtime` (default: the process-wide one)."""
    return (runtime or Runtime.default()).from_dlpack(obj)
