"""Runtime: discovery, devices, the default device, and placing arrays."""
from __future__ import annotations

import ctypes
import os
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Union, cast

import numpy as _numpy

from . import _dtypes, _lib
from ._array import Array
from ._devices import (Backend, DefaultDevice, Device, DeviceInfo, MemoryStats, backend_from_c, device_info_from_c,
                       memory_stats_from_c)
from ._dlpack import HOST_DEVICE_TYPES, KDLCUDA, import_capsule
from ._errors import InvalidArgumentError, OutOfRangeError, UnsupportedError
from ._scopes import DefaultDeviceScope, ScopeStack


DeviceLike = Union[str, Device]
# The DLPack protocol's value for CUDA's legacy default stream.
_CUDA_LEGACY_DEFAULT_STREAM = 1
_SCOPED_OVERRIDE = "scoped override"

_take_windows = _lib.lib.bp_take_windows
_c_char = ctypes.c_char


def _path_like(path: Any) -> Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]:
    """A path as given, or the str() of anything else."""
    return path if isinstance(path, (str, bytes, os.PathLike)) else str(path)


def _integer_offsets(offsets: Any) -> Any:
    """`offsets` as contiguous int64, refusing what is not integers: floats
    would be truncated (0.9 becomes window 0), booleans and strings are no
    offsets, and a uint64 beyond the int64 range would wrap negative."""
    values = _numpy.asarray(offsets)
    if values.dtype.kind == "u":
        if values.size and int(values.max()) > _INT64_MAX:
            raise OutOfRangeError(f"take_windows: offset {int(values.max())} is beyond the int64 range")
    elif values.dtype.kind != "i" and values.size:
        kind = "booleans" if values.dtype.kind == "b" else f"{values.dtype} values"
        raise InvalidArgumentError(f"take_windows: offsets must be integers (a NumPy integer array or Python ints), "
                                   f"got {kind}")
    return _numpy.ascontiguousarray(values, dtype=_numpy.int64)


_INT64_MAX = (1 << 63) - 1


def _as_dtype(values: Any, dtype: Any) -> Any:
    """`values` converted to `dtype` as numpy.array(data, dtype=...) would
    (array([1, 2, 3], dtype="uint8") holds 1, 2, 3). A dtype NumPy lacks
    (BF16) takes the data's bytes as they are, which must be that dtype's
    already (uint16 bit patterns for BF16)."""
    typestr = _dtypes.numpy_dtype(_dtypes.code(dtype))
    if typestr is None or values.dtype == _numpy.dtype(typestr):
        return values
    return values.astype(typestr)


def _site_directories(paths: Iterable[Any]) -> List[bytes]:
    """sys.path entries as the C API takes them; "" (the current directory)
    and entries that are not text are left out."""
    return [os.fsencode(path) for path in paths if isinstance(path, (str, bytes, os.PathLike)) and os.fspath(path)]


def _give_default_python_paths() -> None:
    """sys.path for the process-wide runtime, before it is made. Another user
    of the library in this process may have made it already (its discovery
    then ran without them): nothing to give, and nothing to raise for."""
    sites = _site_directories(sys.path)
    site_array = (ctypes.c_char_p * max(len(sites), 1))(*sites)
    _lib.lib.bp_runtime_default_set_python_paths(ctypes.cast(site_array, ctypes.c_void_p), len(sites))


class Runtime:
    """A backplane runtime (bp_runtime). Runtime() makes an independent one;
    Runtime.default() is the process-wide one (never closed). Use it as a
    context manager or call close(); arrays it made stay readable after."""

    _default: Optional["Runtime"] = None

    def __init__(self, plugin_paths: Iterable[Any] = (), config_file: Any = None, ignore_environment: bool = False,
                 skip_default_paths: bool = False, python_paths: Optional[Iterable[Any]] = None,
                 _handle: Optional[ctypes.c_void_p] = None) -> None:
        """`python_paths`: the site directories whose installed packages are
        scanned, without importing them, for PJRT plugins and backplane
        plugin wheels; default this interpreter's sys.path, or none with
        `skip_default_paths` (a runtime of only the plugins named)."""
        self._owned = _handle is None
        self._scopes = ScopeStack()
        # Resolved selectors as C structs, for calls on the hot path.
        self._c_devices: Dict[Device, _lib.bp_device] = {}
        # Selectors resolve the same way for a runtime's whole life (discovery
        # runs once), and resolving costs a call into the plugin.
        self._resolved: Dict[str, Device] = {}
        if _handle is not None:
            self._handle: Optional[ctypes.c_void_p] = _handle
            return
        paths = [_lib.c_path("Runtime", f"plugin_paths[{index}]", _path_like(path))
                 for index, path in enumerate(plugin_paths)]
        path_array = (ctypes.c_char_p * max(len(paths), 1))(*paths)
        if python_paths is None:
            python_paths = () if skip_default_paths else sys.path
        sites = _site_directories(python_paths)
        site_array = (ctypes.c_char_p * max(len(sites), 1))(*sites)
        options = _lib.bp_runtime_options(
            struct_size=ctypes.sizeof(_lib.bp_runtime_options),
            plugin_paths=ctypes.cast(path_array, ctypes.POINTER(ctypes.c_char_p)),
            plugin_path_count=len(paths),
            config_file=None if config_file is None else _lib.c_path("Runtime", "config_file", _path_like(config_file)),
            ignore_environment=int(bool(ignore_environment)),
            skip_default_paths=int(bool(skip_default_paths)),
            python_paths=ctypes.cast(site_array, ctypes.POINTER(ctypes.c_char_p)),
            python_path_count=len(sites),
        )
        handle = ctypes.c_void_p()
        _lib.check(_lib.lib.bp_runtime_create(ctypes.byref(options), ctypes.byref(handle)))
        self._handle = handle

    @classmethod
    def default(cls) -> "Runtime":
        """The process-wide runtime (BACKPLANE_* environment, config file,
        and the packages installed on sys.path as it is at first use)."""
        if cls._default is None:
            _give_default_python_paths()
            handle = ctypes.c_void_p()
            _lib.check(_lib.lib.bp_runtime_default(ctypes.byref(handle)))
            cls._default = cls(_handle=handle)
        return cls._default

    def close(self) -> None:
        """Destroys an owned runtime; the process-wide one is never closed."""
        if not getattr(self, "_owned", False):
            return
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None and _lib.lib is not None:
            _lib.lib.bp_runtime_destroy(handle)

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _live_handle(self) -> ctypes.c_void_p:
        if self._handle is None:
            raise InvalidArgumentError("backplane.Runtime: used after close()")
        return self._handle

    def _c_device(self, device: Optional[DeviceLike]) -> Optional[_lib.bp_device]:
        """The bp_device for a selector or Device; for None the scoped device
        of this Python context, or None (the C default decides)."""
        if device is None:
            device = self._scopes.current()
            if device is None:
                return None
        elif not isinstance(device, Device):
            device = self.device(device)
        found = self._c_devices.get(device)
        if found is None:
            found = self._c_devices[device] = device._to_c()
        return found

    def _device(self, device: Optional[DeviceLike]) -> Any:
        c_device = self._c_device(device)
        return None if c_device is None else ctypes.byref(c_device)

    def _resolve_c(self, selector: str) -> _lib.bp_device:
        out = _lib.bp_device()
        _lib.check(_lib.lib.bp_device_resolve(self._live_handle(), _lib.c_text("device", "selector", selector),
                                              ctypes.byref(out)))
        return out

    # --- discovery -----------------------------------------------------------
    @property
    def config_path(self) -> Optional[str]:
        """The config file this runtime read, or None when it read none."""
        path = ctypes.c_char_p()
        _lib.check(_lib.lib.bp_runtime_config_path(self._live_handle(), ctypes.byref(path)))
        return _lib.text(path.value) or None

    def backends(self) -> List[Backend]:
        """Every plugin found, each with status and reason: listing never raises
        for an unavailable backend."""
        count = ctypes.c_size_t()
        _lib.check(_lib.lib.bp_backend_count(self._live_handle(), ctypes.byref(count)))
        result: List[Backend] = []
        for index in range(count.value):
            info = _lib.bp_backend_info(struct_size=ctypes.sizeof(_lib.bp_backend_info))
            _lib.check(_lib.lib.bp_backend_get(self._live_handle(), index, ctypes.byref(info)))
            result.append(backend_from_c(info))
        return result

    def is_available(self, backend: str) -> bool:
        """Whether the backend of that name was found and can be used."""
        available = ctypes.c_int32()
        _lib.check(_lib.lib.bp_backend_is_available(self._live_handle(), _lib.c_text("is_available", "backend", backend),
                                                    ctypes.byref(available)))
        return bool(available.value)

    def device(self, selector: DeviceLike) -> Device:
        """Resolves "cpu", "cuda:1" to a Device (raises naming the problem)."""
        key = str(selector)
        found = self._resolved.get(key)
        if found is None:
            found = self._resolved[key] = Device._from_c(self._resolve_c(key))
        return found

    def devices(self, backend: Optional[str] = None) -> List[Device]:
        """Devices of one backend, or of every available backend. A backend
        that was found but cannot be used (unavailable, failed, disabled)
        has none: [], as torch.cuda.device_count() is 0 without a GPU; an
        unknown name raises NotFoundError listing the backends."""
        names = [backend] if backend is not None else [b.name for b in self.backends() if b.available]
        result: List[Device] = []
        for name in dict.fromkeys(names):  # a shadowed duplicate name lists once
            count = ctypes.c_int32()
            status = _lib.lib.bp_device_count(self._live_handle(), _lib.c_text("devices", "backend", name),
                                              ctypes.byref(count))
            if status != 0:
                if backend is not None and any(found.name == name for found in self.backends()):
                    return []  # found, not usable: no devices
                _lib.raise_status(status)
            result.extend(Device(name, ordinal) for ordinal in range(count.value))
        return result

    def device_info(self, device: DeviceLike) -> DeviceInfo:
        """What the backend says of a device: name, kind, memory, attributes."""
        resolved = self.device(device)
        handle = ctypes.c_void_p()
        _lib.check(_lib.lib.bp_device_info_create(self._live_handle(), ctypes.byref(resolved._to_c()),
                                                  ctypes.byref(handle)))
        try:
            return device_info_from_c(handle, resolved)
        finally:
            _lib.lib.bp_device_info_destroy(handle)

    # --- the default device --------------------------------------------------
    def default_device(self) -> DefaultDevice:
        """The default device and what decided it (DefaultDevice)."""
        scoped = self._scopes.current()
        if scoped is not None:
            return DefaultDevice(scoped, _SCOPED_OVERRIDE)
        out = _lib.bp_device()
        source = ctypes.c_int32()
        if _lib.has("bp_default_device_describe"):
            description = ctypes.c_char_p()
            _lib.check(_lib.lib.bp_default_device_describe(self._live_handle(), ctypes.byref(out), ctypes.byref(source),
                                                           ctypes.byref(description)))
            return DefaultDevice(Device._from_c(out), _lib.text(description.value))
        _lib.check(_lib.lib.bp_default_device(self._live_handle(), ctypes.byref(out), ctypes.byref(source)))
        return DefaultDevice(Device._from_c(out), _lib.text(_lib.lib.bp_device_source_name(source.value)))

    def set_default_device(self, selector: Optional[DeviceLike]) -> None:
        """The process-wide setting; None clears it."""
        value = None if selector is None else _lib.c_text("set_default_device", "selector", str(selector))
        _lib.check(_lib.lib.bp_default_device_set(self._live_handle(), value))

    def default_device_scope(self, selector: DeviceLike) -> DefaultDeviceScope:
        """`with runtime.default_device_scope("cpu") as device:` makes it the
        default for the code that block runs, in this asyncio task or thread
        only; a generator suspended inside the block does not take it along.
        Nestable; restored on exceptions; exiting out of order raises."""
        return DefaultDeviceScope(self._scopes, self.device(selector))

    # --- arrays --------------------------------------------------------------
    def array(self, data: Any, dtype: Any = None, shape: Optional[Sequence[int]] = None,
              device: Optional[DeviceLike] = None) -> Array:
        """A new array holding a copy of `data` on `device` (default: the
        default device). `data` is bytes, any buffer, a NumPy array (any
        shape, empty included; big-endian data is byte-swapped) or anything
        NumPy can turn into an array. `dtype` and `shape` default to the
        data's own (NumPy) or U8 and 1-D for raw bytes."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            values = _numpy.asarray(data)
            if dtype is not None:
                values = _as_dtype(values, dtype)
            if not values.dtype.isnative:
                values = values.astype(values.dtype.newbyteorder("="))
            # Not ascontiguousarray: it turns a 0-d array (a scalar) into shape (1,).
            if not values.flags.c_contiguous:
                values = values.copy(order="C")
            code = _dtypes.code(values.dtype if dtype is None else dtype)
            extents = values.shape if shape is None else tuple(shape)
            address = values.ctypes.data if values.nbytes else None
            return self._create(code, extents, address, values.nbytes, device, keep=values)
        view = memoryview(data)
        if not view.c_contiguous:
            raise InvalidArgumentError("backplane.Runtime.array: the buffer is not C-contiguous")
        code = _dtypes.code("U8" if dtype is None else dtype)
        size = view.nbytes
        if shape is None:
            bits = int(_lib.lib.bp_dtype_bits(code))
            shape = (size * 8 // bits,)
        if view.readonly:
            # ctypes cannot take the address of a read-only buffer: bytes
            # expose theirs through c_char_p, anything else is copied once.
            source = data if isinstance(data, bytes) else view.tobytes()
            return self._create(code, tuple(shape), ctypes.cast(ctypes.c_char_p(source), ctypes.c_void_p).value,
                                size, device, keep=source)
        buffer = (ctypes.c_char * size).from_buffer(view.cast("B")) if size else None
        address = ctypes.addressof(buffer) if buffer is not None else None
        return self._create(code, tuple(shape), address, size, device, keep=buffer)

    def _create(self, code: int, shape: Sequence[int], address: Optional[int], size: int,
                device: Optional[DeviceLike], keep: Any) -> Array:
        extents = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        handle = ctypes.c_void_p()
        _lib.check(_lib.lib.bp_array_create(self._live_handle(), self._device(device), code, extents, len(shape),
                                            address, size, ctypes.byref(handle)))
        del keep  # released only after the call has copied the bytes
        return Array(self, handle)

    def from_dlpack(self, obj: Any) -> Array:
        """Zero-copy import of any object with __dlpack__ (NumPy, PyTorch,
        JAX, CuPy) or of a "dltensor" capsule. Host memory becomes an array
        on the default device when that is host-addressable, else on the
        first available host-addressable device; device memory an array on
        device N (DLPack's device_id) of the backend that declares the
        tensor's DLPack device type. The array keeps the producer's memory
        alive; it must not change while transfers read it. A CUDA producer
        is asked for stream 1 (the legacy default stream), after which the
        backend orders its own work."""
        if hasattr(obj, "__dlpack__"):
            stream = None
            if hasattr(obj, "__dlpack_device__"):
                device_type, _ = obj.__dlpack_device__()
                importable = self._importable_device_types()
                if device_type not in importable:
                    raise UnsupportedError(f"backplane.Runtime.from_dlpack: DLPack device type {device_type} cannot "
                                           "be imported: no available backend declares it (importable here: "
                                           f"{', '.join(str(t) for t in sorted(importable))})")
                if device_type == KDLCUDA:
                    stream = _CUDA_LEGACY_DEFAULT_STREAM
            capsule = obj.__dlpack__(stream=stream)
        else:
            capsule = obj
        scoped = self._scopes.current()
        if scoped is None:
            return Array(self, import_capsule(self._live_handle(), capsule))
        # Host memory lands on the default device, which the library decides:
        # it sees this context's Python scope only while it is pushed there.
        token = ctypes.c_uint64()
        _lib.check(_lib.lib.bp_default_device_push_scope(self._live_handle(),
                                                         _lib.c_text("default_device_scope", "device", str(scoped)),
                                                         ctypes.byref(token)))
        try:
            return Array(self, import_capsule(self._live_handle(), capsule))
        finally:
            _lib.check(_lib.lib.bp_default_device_pop_scope(self._live_handle(), token.value))

    def _importable_device_types(self) -> Set[int]:
        """Host memory, and the device types the available backends declare."""
        declared = {backend.dlpack_device_type for backend in self.backends()
                    if backend.available and backend.dlpack_device_type}
        return set(HOST_DEVICE_TYPES) | declared

    def device_put(self, array: Array, device: Optional[DeviceLike] = None, progress: Any = None) -> Array:
        """A copy of `array` on `device` (default: the default device), or
        `array` itself when it is there already. `progress(done, total)` is
        called as the bytes arrive."""
        keep = None
        callback = _lib.PROGRESS_CALLBACK()  # NULL
        if progress is not None:
            callback = keep = _lib.PROGRESS_CALLBACK(lambda done, total, _: progress(done, total))
        handle = ctypes.c_void_p()
        _lib.check(_lib.lib.bp_array_device_put(self._live_handle(), array._live(), self._device(device), callback,
                                                None, ctypes.byref(handle)))
        return Array(self, handle, keep=keep)

    def take_windows(self, tokens: Array, offsets: Any, length: int, device: Optional[DeviceLike] = None,
                     dtype: Any = None) -> Array:
        """[len(offsets), length] windows of the 1-D array `tokens` on
        `device` (default: the default device), converted to `dtype` when
        given (widening on the host at memory speed, or on the device where
        the backend can). `offsets` is a NumPy integer array (passed without
        a copy when it is contiguous int64) or any sequence of ints. Returns
        while the transfer runs."""
        # The hot path of a training loop: every step below is measured
        # (bench/python/bench_batches.py); keep it free of avoidable calls.
        starts: Any = offsets
        if type(offsets) is not _numpy.ndarray or offsets.dtype != _numpy.int64 or not offsets.flags.c_contiguous:
            starts = _integer_offsets(offsets)
        if starts.ndim != 1:
            raise InvalidArgumentError(f"take_windows: offsets must be 1-D, got shape {starts.shape}")
        if type(length) is not int and not isinstance(length, _numpy.integer):
            raise InvalidArgumentError(f"take_windows: length must be an integer, got {type(length).__name__} "
                                       f"{length!r}")
        count = starts.shape[0]
        if count == 0:
            address = None
        elif starts.flags.writeable:
            address = ctypes.addressof(_c_char.from_buffer(starts))  # the cheapest way to an address
        else:
            address = starts.ctypes.data
        runtime = self._handle
        if runtime is None:
            self._live_handle()  # raises the "used after close()" error
        source = tokens._handle
        if source is None:
            tokens._live()
        c_device = self._c_device(device)
        code = 0 if dtype is None else _dtypes.code(dtype)
        handle = ctypes.c_void_p()
        status = _take_windows(runtime, source, address, count, length,
                               None if c_device is None else ctypes.byref(c_device), code, ctypes.byref(handle))
        if status != 0:
            _lib.raise_status(status)
        return Array(self, handle)

    def memory_stats(self, device: Optional[DeviceLike] = None) -> MemoryStats:
        """The device's memory as the runtime sees it: in use, peak, cached,
        allocations made, and the backend's free and total figures."""
        stats = _lib.bp_memory_stats(struct_size=ctypes.sizeof(_lib.bp_memory_stats))
        _lib.check(_lib.lib.bp_memory_stats_get(self._live_handle(), self._device(device), ctypes.byref(stats)))
        return memory_stats_from_c(stats)

    def reset_peak_memory_stats(self, device: Optional[DeviceLike] = None) -> None:
        """Sets the device's peak to what is in use now, so that the next
        memory_stats reports the peak of what ran since."""
        _lib.check(_lib.lib.bp_memory_reset_peak(self._live_handle(), self._device(device)))

    def empty_cache(self, device: Optional[DeviceLike] = None) -> None:
        """Gives the device's cached, unused buffers back to the backend."""
        _lib.check(_lib.lib.bp_empty_cache(self._live_handle(), self._device(device)))


def runtime_of(array: Array) -> Runtime:
    """The Runtime that made `array` (an Array knows it only as its owner)."""
    return cast(Runtime, array._runtime)
