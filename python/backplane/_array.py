"""Arrays: handles over bp_array, NumPy views, DLPack export (__dlpack__) and
import."""
from __future__ import annotations

import builtins
import ctypes
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Protocol, Sequence, Tuple, TypeVar

from . import _dtypes, _lib
from ._devices import Device
from ._dlpack import KDLCPU, export_capsule
from ._errors import InvalidArgumentError

if TYPE_CHECKING:
    import numpy

    from ._lib_gen import Pointer as _Pointer
    from ._lib_gen import VoidPointer as _VoidPointer

    _Scalar = TypeVar("_Scalar", bound="ctypes._SimpleCData[Any]")


class _Owner(Protocol):
    """What an Array asks of the runtime that made it (backplane.Runtime):
    named here so that this module needs nothing from _runtime."""

    def array(self, data: Any, dtype: Any = None, shape: Optional[Sequence[int]] = None,
              device: Any = None) -> "Array": ...

    def device_put(self, array: "Array", device: Any = None, progress: Any = None) -> "Array": ...


_PREVIEW_LIMIT = 1 << 20  # device arrays up to this size are copied for repr()


# Serialises taking a handle in close(); reentrant because the garbage
# collector may run another array's __del__ on the same thread meanwhile.
_HANDLE_SWAP = threading.RLock()


class Array:
    """An array on one device (backplane::Array through bp_array).

    Made by Runtime.array, Runtime.from_dlpack, take_windows, device_put,
    batches() and safetensors.load. The data lives while any Array, view or
    DLPack consumer uses it. Host arrays convert to NumPy without a copy
    (numpy.asarray(array), array.numpy()); every array exports DLPack.
    """

    __slots__ = ("_runtime", "_handle", "_keep", "_document_starts", "__weakref__")

    def __init__(self, runtime: _Owner, handle: ctypes.c_void_p, keep: Any = None) -> None:
        self._runtime = runtime
        self._handle: Optional[ctypes.c_void_p] = handle  # owned by this object
        self._keep = keep  # what C may still call back into (a progress callback)
        self._document_starts: Optional[numpy.ndarray[Any, Any]] = None  # set by load_tokens

    def __del__(self) -> None:
        # Take the handle before destroying it, and only one thread may take
        # it: a second destroy of the same address could free a new array the
        # library has placed there since. A thread racing close() passes the
        # handle (the library keeps it alive for that call, or refuses it as
        # destroyed) or None (a clean error).
        lock = _HANDLE_SWAP  # None while the interpreter shuts down
        if lock is None:
            handle, self._handle = getattr(self, "_handle", None), None
        else:
            with lock:
                handle = getattr(self, "_handle", None)
                self._handle = None
        if handle is not None and handle.value and _lib is not None and _lib.lib is not None:
            _lib.lib.bp_array_destroy(handle)

    def _live(self) -> ctypes.c_void_p:
        if self._handle is None:
            raise InvalidArgumentError("backplane.Array: used after close()")
        return self._handle

    def close(self) -> None:
        """Releases this handle now (the data lives on while others use it)."""
        self.__del__()

    def _query(self, function: Callable[[_VoidPointer, _Pointer[_Scalar]], int], value: _Scalar) -> Any:
        _lib.check(function(self._live(), ctypes.byref(value)))
        return value.value

    @property
    def dtype(self) -> str:
        """The safetensors name of the element type: "U16", "F32", ..."""
        return _dtypes.name(self._dtype_code())

    def _dtype_code(self) -> int:
        return int(self._query(_lib.lib.bp_array_dtype, ctypes.c_int32()))

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return int(self._query(_lib.lib.bp_array_rank, ctypes.c_size_t()))

    @property
    def shape(self) -> Tuple[int, ...]:
        """The extent of each dimension."""
        rank = self.ndim
        extents = (ctypes.c_int64 * max(rank, 1))()
        _lib.check(_lib.lib.bp_array_shape(self._live(), extents, rank))
        return tuple(extents[:rank])

    @property
    def size(self) -> int:
        """The number of elements (1 for a 0-d array)."""
        count = 1
        for extent in self.shape:
            count *= extent
        return count

    @property
    def nbytes(self) -> int:
        """The size of the data in bytes."""
        return int(self._query(_lib.lib.bp_array_nbytes, ctypes.c_uint64()))

    @property
    def document_starts(self) -> Optional["numpy.ndarray[Any, Any]"]:
        """Where documents start in the tokens of a file load_tokens loaded,
        when the file's format records documents (a Megatron-Core indexed
        dataset: the first token of each document's first sequence): a
        read-only int64 NumPy array of token offsets, strictly increasing, each
        below len(self). None for formats that record no documents, and for
        arrays not loaded from a token file."""
        return self._document_starts

    @property
    def device(self) -> Device:
        """The device the data lives on."""
        device = _lib.bp_device()
        _lib.check(_lib.lib.bp_array_device(self._live(), ctypes.byref(device)))
        return Device._from_c(device)

    @property
    def data_ptr(self) -> int:
        """The backend's address of the first byte (host pointer on cpu)."""
        return int(self._query(_lib.lib.bp_array_native_address, ctypes.c_void_p()) or 0)

    @property
    def is_ready(self) -> bool:
        """Whether the data has arrived (a transfer onto the device is done), without waiting."""
        return bool(self._query(_lib.lib.bp_array_is_ready, ctypes.c_int32()))

    @property
    def is_host(self) -> bool:
        """True when the CPU can read the data in place (host memory: what
        exports through DLPack as kDLCPU)."""
        return _is_host(self)

    def __len__(self) -> int:
        shape = self.shape
        if not shape:
            raise TypeError("len() of a scalar backplane.Array")
        return shape[0]

    def __repr__(self) -> str:
        if self._handle is None:
            return "<backplane.Array (closed)>"
        header = f"backplane.Array {self.dtype}{list(self.shape)} on {self.device}"
        preview = self._preview()
        return f"<{header}>" if preview is None else f"<{header}\n{preview}>"

    def _preview(self) -> Optional[str]:
        try:
            import numpy
        except ImportError:
            return None
        if _dtypes.numpy_dtype(self._dtype_code()) is None:
            return None
        if self.is_host:
            values = self.numpy()
        elif self.nbytes <= _PREVIEW_LIMIT:
            values = numpy.frombuffer(self.to_bytes(), dtype=_dtypes.numpy_dtype(self._dtype_code()))
            values = values.reshape(self.shape)
        else:
            return None
        return numpy.array2string(values, threshold=20, edgeitems=3)

    def wait(self) -> "Array":
        """Blocks until the data has arrived; raises the transfer's error."""
        _lib.check(_lib.lib.bp_array_wait(self._live()))
        return self

    def to_bytes(self) -> bytes:
        """Waits, then copies the data into a new bytes object."""
        size = self.nbytes
        buffer = ctypes.create_string_buffer(max(size, 1))
        _lib.check(_lib.lib.bp_array_copy_to_host(self._live(), buffer, size))
        return buffer.raw[:size]

    # --- NumPy -------------------------------------------------------------
    @property
    def __array_interface__(self) -> Dict[str, Any]:
        """A read-only, zero-copy NumPy view of a host array (waits first)."""
        typestr = _dtypes.numpy_dtype(self._dtype_code())
        if typestr is None:
            raise TypeError(f"NumPy has no dtype for {self.dtype}; export it with DLPack or to_bytes()")
        if not self.is_host:
            raise TypeError(f"backplane.Array on {self.device} is not in host memory: copy it with "
                            "array.device_put('cpu') (or to_bytes()) first")
        self.wait()
        # numpy needs a non-NULL address even for an empty array.
        return {"version": 3, "shape": self.shape, "typestr": typestr, "data": (self.data_ptr or 1, True)}

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> "numpy.ndarray[Any, Any]":
        import numpy
        view = numpy.asarray(_Interface(self))
        if dtype is not None and numpy.dtype(dtype) != view.dtype:
            return view.astype(dtype)
        return view.copy() if copy else view

    def numpy(self) -> "numpy.ndarray[Any, Any]":
        """A read-only NumPy view of a host array, sharing its memory; it keeps
        this array's data alive."""
        import numpy
        return numpy.asarray(_Interface(self))

    # --- views and transfers ----------------------------------------------
    def slice(self, begin: int, end: int) -> "Array":
        """Rows [begin, end) along axis 0, sharing the buffer."""
        handle = ctypes.c_void_p()
        _lib.check(_lib.lib.bp_array_slice(self._live(), begin, end, ctypes.byref(handle)))
        return Array(self._runtime, handle)

    def __getitem__(self, key: builtins.slice) -> "Array":
        if not isinstance(key, builtins.slice) or key.step not in (None, 1):
            raise TypeError("backplane.Array supports only [begin:end] slices along axis 0; for more, view it "
                            "through numpy.asarray() or a DLPack consumer")
        begin, end, _ = key.indices(len(self))
        return self.slice(begin, max(begin, end))

    def shares_buffer_with(self, other: "Array") -> bool:
        """Whether this array and `other` are views of one buffer (a slice, a device_put that aliases)."""
        value = ctypes.c_int32()
        _lib.check(_lib.lib.bp_array_shares_buffer(self._live(), other._live(), ctypes.byref(value)))
        return bool(value.value)

    def device_put(self, device: Any = None, progress: Any = None) -> "Array":
        """This array on `device` (default: the default device), returned at
        once while the data moves (wait() blocks). `progress(done, total)` is
        called on a transfer thread."""
        return self._runtime.device_put(self, device, progress)

    # --- DLPack producer ----------------------------------------------------
    def __dlpack_device__(self) -> Tuple[int, int]:
        """(device type, device id): the type the backend declares with the
        device's ordinal, or kDLCPU (1, 0) for host memory. Raises
        UnsupportedError (a BufferError) naming the backend otherwise."""
        device_type, device_id = ctypes.c_int32(), ctypes.c_int32()
        _lib.check(_lib.lib.bp_array_dlpack_device(self._live(), ctypes.byref(device_type), ctypes.byref(device_id)))
        return (device_type.value, device_id.value)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Optional[bool] = None) -> Any:
        """A "dltensor" capsule sharing this array's buffer (the unversioned
        DLManagedTensor: the library is built against DLPack 0.6). The data
        is ready when it returns, so any `stream` may use it at once."""
        del stream, max_version  # synchronised already; unversioned only
        source = self
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"cannot export {self.device} to DLPack device {tuple(dl_device)} without a copy")
        if copy:
            source = self._runtime.array(self.to_bytes(), self.dtype, self.shape, device="cpu")
        return export_capsule(source._live())


def _is_host(array: Array) -> bool:
    """Host memory is what exports as kDLCPU (one rule, in the library)."""
    try:
        return array.__dlpack_device__()[0] == KDLCPU
    except BufferError:
        return False


class _Interface:
    """Holds the array for a NumPy view: numpy keeps this object as the
    view's base, and so the array's data alive."""

    __slots__ = ("__array_interface__", "array")

    def __init__(self, array: Array) -> None:
        # A handle of its own (a slice sharing the buffer): the view stays
        # valid even if the caller close()s the array it came from.
        self.array = array.slice(0, array.shape[0]) if array.ndim else array
        self.__array_interface__ = self.array.__array_interface__
