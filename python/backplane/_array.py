"""Arrays: handles over bp_array, DLPack export (__dlpack__) and import."""
import ctypes

from . import _lib
from ._devices import Device

# NumPy-style names accepted wherever a dtype is expected, besides the
# safetensors names ("U16", "F32") that backplane itself uses.
_ALIASES = {
    "bool": "BOOL", "uint8": "U8", "int8": "I8", "uint16": "U16", "int16": "I16", "uint32": "U32",
    "int32": "I32", "uint64": "U64", "int64": "I64", "float16": "F16", "bfloat16": "BF16",
    "float32": "F32", "float64": "F64", "complex64": "C64",
}


def dtype_code(dtype):
    """The bp_dtype number of a name ("U16", "uint16", numpy.uint16's dtype)."""
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype
    if name is None:
        name = str(dtype)
    name = _ALIASES.get(name, name)
    code = ctypes.c_int32()
    _lib.call("bp_dtype_from_name", name.encode(), ctypes.byref(code))
    return code.value


def dtype_name(code):
    return _lib.text(_lib.lib.bp_dtype_name(code))


def dtype_bits(dtype):
    return _lib.lib.bp_dtype_bits(dtype_code(dtype))


# --- DLPack capsules (the Python array API's exchange protocol) -------------
_DLTENSOR = b"dltensor"  # module-level: capsule names must outlive the capsules
_USED_DLTENSOR = b"used_dltensor"
_KDLCPU, _KDLCUDA = 1, 2

_pythonapi = ctypes.pythonapi
_pythonapi.PyCapsule_New.restype = ctypes.py_object
_pythonapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_pythonapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_pythonapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pythonapi.PyCapsule_SetName.restype = ctypes.c_int
_pythonapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
# The destructor receives a capsule whose reference count is already zero:
# it must be passed as a raw pointer, never turned back into an object.
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _pythonapi))


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    # A consumer renames the capsule to "used_dltensor" and owns the tensor;
    # only an unconsumed capsule still owns it and must release it.
    if _capsule_is_valid(capsule, _DLTENSOR):
        _lib.lib.bp_dlpack_tensor_delete(_capsule_pointer(capsule, _DLTENSOR))


_DESTRUCTOR_ADDRESS = ctypes.cast(_capsule_destructor, ctypes.c_void_p).value


def import_capsule(runtime, capsule):
    """A new bp_array handle over the tensor inside an unconsumed "dltensor"
    capsule, which is renamed "used_dltensor" once the array owns it."""
    pointer = _pythonapi.PyCapsule_GetPointer(capsule, _DLTENSOR)  # raises for a consumed or foreign capsule
    handle = ctypes.c_void_p()
    _lib.call("bp_array_from_dlpack", runtime._live_handle(), pointer, ctypes.byref(handle))
    _pythonapi.PyCapsule_SetName(capsule, _USED_DLTENSOR)
    return handle


class Array:
    """An immutable array on one device (backplane::Array through bp_array).

    Made by Runtime.array, Runtime.from_dlpack, take_windows, device_put and
    safetensors.load. The data lives while any Array, view or DLPack consumer
    uses it; the Runtime object that made it is kept alive by it.
    """

    def __init__(self, runtime, handle, keep=None):
        self._runtime = runtime
        self._handle = handle  # c_void_p owned by this object
        self._keep = keep  # what C may still call back into (a progress callback)

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value and _lib is not None and _lib.lib is not None:
            _lib.lib.bp_array_destroy(handle)
        self._handle = None

    def _live(self):
        if self._handle is None:
            raise ValueError("backplane.Array: used after close()")
        return self._handle

    def close(self):
        """Releases this handle now (the data lives on while others use it)."""
        self.__del__()

    def _query(self, name, c_type):
        value = c_type()
        _lib.call(name, self._live(), ctypes.byref(value))
        return value.value

    @property
    def dtype(self):
        """The safetensors name of the element type: "U16", "F32", ..."""
        return dtype_name(self._query("bp_array_dtype", ctypes.c_int32))

    @property
    def ndim(self):
        return self._query("bp_array_rank", ctypes.c_size_t)

    @property
    def shape(self):
        rank = self.ndim
        extents = (ctypes.c_int64 * max(rank, 1))()
        _lib.call("bp_array_shape", self._live(), extents, rank)
        return tuple(extents[:rank])

    @property
    def nbytes(self):
        return self._query("bp_array_nbytes", ctypes.c_uint64)

    @property
    def device(self):
        device = _lib.bp_device()
        _lib.call("bp_array_device", self._live(), ctypes.byref(device))
        return Device._from_c(device)

    @property
    def data_ptr(self):
        """The backend's address of the first byte (host pointer on CPU)."""
        return self._query("bp_array_native_address", ctypes.c_void_p) or 0

    @property
    def is_ready(self):
        return bool(self._query("bp_array_is_ready", ctypes.c_int32))

    def __len__(self):
        shape = self.shape
        if not shape:
            raise TypeError("len() of a scalar backplane.Array")
        return shape[0]

    def __repr__(self):
        if self._handle is None:
            return "<backplane.Array (closed)>"
        return f"<backplane.Array {self.dtype}{list(self.shape)} on {self.device}>"

    def wait(self):
        """Blocks until the data has arrived; raises the transfer's error."""
        _lib.call("bp_array_wait", self._live())
        return self

    def to_bytes(self):
        """Waits, then copies the data into a new bytes object."""
        size = self.nbytes
        buffer = ctypes.create_string_buffer(max(size, 1))
        _lib.call("bp_array_copy_to_host", self._live(), buffer, size)
        return buffer.raw[:size]

    def slice(self, begin, end):
        """Rows [begin, end) along axis 0, sharing the buffer."""
        handle = ctypes.c_void_p()
        _lib.call("bp_array_slice", self._live(), begin, end, ctypes.byref(handle))
        return Array(self._runtime, handle)

    def __getitem__(self, key):
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("backplane.Array supports only [begin:end] slices along axis 0")
        begin, end, _ = key.indices(len(self))
        return self.slice(begin, max(begin, end))

    def shares_buffer_with(self, other):
        return bool(_query2("bp_array_shares_buffer", self._live(), other._live()))

    def device_put(self, device=None, progress=None):
        """This array on `device` (default: the default device), returned at
        once while the data moves (wait() blocks). `progress(done, total)` is
        called on a transfer thread."""
        return self._runtime.device_put(self, device, progress)

    # --- DLPack producer ----------------------------------------------------
    def __dlpack_device__(self):
        device = self.device
        if device.backend == "cuda":
            return (_KDLCUDA, device.ordinal)
        if self.data_ptr and device.backend == "cpu":
            return (_KDLCPU, 0)
        raise BufferError(f"DLPack has no device type for {device}")

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A "dltensor" capsule sharing this array's buffer (the unversioned
        DLManagedTensor: the library is built against DLPack 0.6). The data
        is ready when it returns, so any `stream` may use it at once."""
        del stream, max_version  # synchronised already; unversioned only
        source = self
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"cannot export {self.device} to DLPack device {tuple(dl_device)} without a copy")
        if copy:
            source = self._runtime.array(self.to_bytes(), self.dtype, self.shape, device="cpu")
        tensor = ctypes.c_void_p()
        # UnsupportedError (a dtype or device DLPack cannot name) is a BufferError, as the protocol asks.
        _lib.call("bp_array_to_dlpack", source._live(), ctypes.byref(tensor))
        try:
            return _pythonapi.PyCapsule_New(tensor, _DLTENSOR, _DESTRUCTOR_ADDRESS)
        except BaseException:
            _lib.lib.bp_dlpack_tensor_delete(tensor)
            raise


def _query2(name, first, second):
    value = ctypes.c_int32()
    _lib.call(name, first, second, ctypes.byref(value))
    return value.value
