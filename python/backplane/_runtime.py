"""Runtime: discovery, devices, the default device, and placing arrays."""
import contextlib
import ctypes

from . import _lib
from ._array import Array, dtype_code, import_capsule
from ._devices import (DefaultDevice, Device, backend_from_c, device_info_from_c, memory_stats_from_c)

_KDLCPU, _KDLCUDA, _KDLCUDAHOST = 1, 2, 3
_IMPORTABLE_DEVICE_TYPES = (_KDLCPU, _KDLCUDA, _KDLCUDAHOST)
# The DLPack protocol's value for CUDA's legacy default stream.
_CUDA_LEGACY_DEFAULT_STREAM = 1


class Runtime:
    """A backplane runtime (bp_runtime). Runtime() makes an independent one;
    Runtime.default() is the process-wide one (never closed). Use it as a
    context manager or call close(); arrays it made stay readable after."""

    def __init__(self, plugin_paths=(), config_file=None, ignore_environment=False, skip_default_paths=False,
                 _handle=None):
        self._owned = _handle is None
        if _handle is not None:
            self._handle = _handle
            return
        paths = [str(path).encode() for path in plugin_paths]
        path_array = (ctypes.c_char_p * max(len(paths), 1))(*paths)
        options = _lib.bp_runtime_options(
            struct_size=ctypes.sizeof(_lib.bp_runtime_options),
            plugin_paths=ctypes.cast(path_array, ctypes.POINTER(ctypes.c_char_p)),
            plugin_path_count=len(paths),
            config_file=str(config_file).encode() if config_file is not None else None,
            ignore_environment=int(bool(ignore_environment)),
            skip_default_paths=int(bool(skip_default_paths)),
        )
        handle = ctypes.c_void_p()
        _lib.call("bp_runtime_create", ctypes.byref(options), ctypes.byref(handle))
        self._handle = handle

    _default = None

    @classmethod
    def default(cls):
        """The process-wide runtime (BACKPLANE_* environment, config file)."""
        if cls._default is None:
            handle = ctypes.c_void_p()
            _lib.call("bp_runtime_default", ctypes.byref(handle))
            cls._default = cls(_handle=handle)
        return cls._default

    def close(self):
        """Destroys an owned runtime; the process-wide one is never closed."""
        if not getattr(self, "_owned", False):
            return
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None and _lib.lib is not None:
            _lib.lib.bp_runtime_destroy(handle)

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def _live_handle(self):
        if self._handle is None:
            raise _lib.error_for(1, "backplane.Runtime: used after close()", "invalid argument")
        return self._handle

    def _device(self, device):
        """A bp_device pointer for a selector, a Device, or None (the default)."""
        if device is None:
            return None
        if isinstance(device, Device):
            return ctypes.byref(device._to_c())
        return ctypes.byref(self._resolve_c(str(device)))

    def _resolve_c(self, selector):
        out = _lib.bp_device()
        _lib.call("bp_device_resolve", self._live_handle(), selector.encode(), ctypes.byref(out))
        return out

    # --- discovery -----------------------------------------------------------
    @property
    def config_path(self):
        path = ctypes.c_char_p()
        _lib.call("bp_runtime_config_path", self._live_handle(), ctypes.byref(path))
        return _lib.text(path.value) or None

    def backends(self):
        """Every plugin found, each with status and reason: listing never raises
        for an unavailable backend."""
        count = ctypes.c_size_t()
        _lib.call("bp_backend_count", self._live_handle(), ctypes.byref(count))
        result = []
        for index in range(count.value):
            info = _lib.bp_backend_info(struct_size=ctypes.sizeof(_lib.bp_backend_info))
            _lib.call("bp_backend_get", self._live_handle(), index, ctypes.byref(info))
            result.append(backend_from_c(info))
        return result

    def is_available(self, backend):
        available = ctypes.c_int32()
        _lib.call("bp_backend_is_available", self._live_handle(), backend.encode(), ctypes.byref(available))
        return bool(available.value)

    def device(self, selector):
        """Resolves "cpu", "cuda:1" to a Device (raises naming the problem)."""
        if isinstance(selector, Device):
            selector = str(selector)
        return Device._from_c(self._resolve_c(selector))

    def devices(self, backend=None):
        """Devices of one available backend, or of every available backend."""
        names = [backend] if backend is not None else [b.name for b in self.backends() if b.available]
        result = []
        for name in dict.fromkeys(names):  # a shadowed duplicate name lists once
            count = ctypes.c_int32()
            _lib.call("bp_device_count", self._live_handle(), name.encode(), ctypes.byref(count))
            result.extend(Device(name, ordinal) for ordinal in range(count.value))
        return result

    def device_info(self, device):
        device = self.device(device)
        handle = ctypes.c_void_p()
        _lib.call("bp_device_info_create", self._live_handle(), ctypes.byref(device._to_c()), ctypes.byref(handle))
        try:
            return device_info_from_c(handle, device)
        finally:
            _lib.lib.bp_device_info_destroy(handle)

    # --- the default device --------------------------------------------------
    def default_device(self):
        """The default device and what decided it (DefaultDevice)."""
        out = _lib.bp_device()
        source = ctypes.c_int32()
        _lib.call("bp_default_device", self._live_handle(), ctypes.byref(out), ctypes.byref(source))
        return DefaultDevice(Device._from_c(out), _lib.text(_lib.lib.bp_device_source_name(source.value)))

    def set_default_device(self, selector):
        """The process-wide setting; None clears it."""
        value = None if selector is None else str(selector).encode()
        _lib.call("bp_default_device_set", self._live_handle(), value)

    @contextlib.contextmanager
    def default_device_scope(self, selector):
        """`with runtime.default_device_scope("cpu"):` makes it the default on
        this thread inside the block (nestable; restored on exceptions)."""
        _lib.call("bp_default_device_push", self._live_handle(), str(selector).encode())
        try:
            yield self.default_device().device
        finally:
            _lib.call("bp_default_device_pop", self._live_handle())

    # --- arrays --------------------------------------------------------------
    def array(self, data, dtype=None, shape=None, device=None):
        """A new array holding a copy of `data` (bytes or any buffer, e.g. a
        NumPy array) on `device` (default: the default device). `dtype` and
        `shape` default to the buffer's own (NumPy) or U8 and 1-D."""
        view = memoryview(data)
        if dtype is None:
            dtype = getattr(data, "dtype", "U8")
        if shape is None:
            shape = getattr(data, "shape", None)
        if not view.c_contiguous:
            raise _lib.error_for(1, "backplane.Runtime.array: the buffer is not C-contiguous", "invalid argument")
        view = view.cast("B") if view.ndim != 1 or view.format != "B" else view
        size = view.nbytes
        code = dtype_code(dtype)
        if shape is None:
            bits = _lib.lib.bp_dtype_bits(code)
            shape = (size * 8 // bits,)
        extents = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        if view.readonly:
            # ctypes cannot take the address of a read-only buffer: bytes
            # expose theirs through c_char_p, anything else is copied once.
            source = bytes(view) if not isinstance(data, bytes) else data
            address = ctypes.cast(ctypes.c_char_p(source), ctypes.c_void_p)
        else:
            source = (ctypes.c_char * size).from_buffer(view) if size else None
            address = ctypes.cast(source, ctypes.c_void_p) if size else None
        handle = ctypes.c_void_p()
        _lib.call("bp_array_create", self._live_handle(), self._device(device), code, extents, len(shape), address,
                  size, ctypes.byref(handle))
        del source  # released only after the call has copied the bytes
        return Array(self, handle)

    def from_dlpack(self, obj):
        """Zero-copy import of any object with __dlpack__ (NumPy, PyTorch,
        CuPy) or of a "dltensor" capsule. Host memory becomes an array on
        cpu:0, CUDA device memory an array on cuda:N. The array keeps the
        producer's memory alive; it must not change while transfers read it.
        A CUDA producer is asked for stream 1 (the legacy default stream),
        after which the cuda backend orders its own work."""
        if hasattr(obj, "__dlpack__"):
            stream = None
            if hasattr(obj, "__dlpack_device__"):
                device_type, _ = obj.__dlpack_device__()
                if device_type not in _IMPORTABLE_DEVICE_TYPES:
                    raise _lib.error_for(4, f"backplane.Runtime.from_dlpack: DLPack device type {device_type} cannot "
                                            "be imported (only CPU 1, CUDA 2 and CUDA host 3)", "unsupported")
                if device_type == _KDLCUDA:
                    stream = _CUDA_LEGACY_DEFAULT_STREAM
            capsule = obj.__dlpack__(stream=stream)
        else:
            capsule = obj
        return Array(self, import_capsule(self, capsule))

    def device_put(self, array, device=None, progress=None):
        keep = None
        callback = ctypes.cast(None, _lib.PROGRESS_CALLBACK)
        if progress is not None:
            callback = keep = _lib.PROGRESS_CALLBACK(lambda done, total, _: progress(done, total))
        handle = ctypes.c_void_p()
        _lib.call("bp_array_device_put", self._live_handle(), array._live(), self._device(device), callback, None,
                  ctypes.byref(handle))
        return Array(self, handle, keep=keep)

    def take_windows(self, tokens, offsets, length, device=None, dtype=None):
        """[len(offsets), length] windows of the 1-D host array `tokens` on
        `device` (default: the default device), converted to `dtype` when
        given; returns while the transfer runs."""
        offsets = list(offsets)
        values = (ctypes.c_int64 * max(len(offsets), 1))(*offsets)
        code = 0 if dtype is None else dtype_code(dtype)
        handle = ctypes.c_void_p()
        _lib.call("bp_take_windows", self._live_handle(), tokens._live(), values, len(offsets), length,
                  self._device(device), code, ctypes.byref(handle))
        return Array(self, handle)

    def memory_stats(self, device=None):
        stats = _lib.bp_memory_stats(struct_size=ctypes.sizeof(_lib.bp_memory_stats))
        _lib.call("bp_memory_stats_get", self._live_handle(), self._device(device), ctypes.byref(stats))
        return memory_stats_from_c(stats)

    def empty_cache(self, device=None):
        _lib.call("bp_empty_cache", self._live_handle(), self._device(device))
