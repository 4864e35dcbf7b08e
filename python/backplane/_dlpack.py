"""DLPack capsules, the Python array API's exchange protocol: the device type
numbers, and making and consuming "dltensor" capsules around the library's
DLManagedTensor. Below _array and _runtime, which both use it."""
from __future__ import annotations

import ctypes
from typing import Any

from . import _lib

_DLTENSOR = b"dltensor"  # module-level: capsule names must outlive the capsules
_USED_DLTENSOR = b"used_dltensor"
KDLCPU, KDLCUDA, KDLCUDAHOST, KDLROCMHOST = 1, 2, 3, 11
# Host memory in DLPack's terms: it lands on a host-addressable device.
HOST_DEVICE_TYPES = (KDLCPU, KDLCUDAHOST, KDLROCMHOST)

_pythonapi = ctypes.pythonapi
_pythonapi.PyCapsule_New.restype = ctypes.py_object
_pythonapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_pythonapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_pythonapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pythonapi.PyCapsule_SetName.restype = ctypes.c_int
_pythonapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
# The capsule destructor is the library's, in C: one in Python would run
# while a consumer's exception is pending (a consumer that refuses the
# capsule drops it while raising), which ctypes turns into "Exception
# ignored ... SystemError" and a tensor never freed.
_DESTRUCTOR_ADDRESS = _lib.address("bp_dlpack_capsule_destructor")


def import_capsule(runtime_handle: ctypes.c_void_p, capsule: Any) -> ctypes.c_void_p:
    """A new bp_array handle over the tensor inside an unconsumed "dltensor"
    capsule, which is renamed "used_dltensor" once the array owns it."""
    pointer = _pythonapi.PyCapsule_GetPointer(capsule, _DLTENSOR)  # raises for a consumed or foreign capsule
    handle = ctypes.c_void_p()
    _lib.check(_lib.lib.bp_array_from_dlpack(runtime_handle, pointer, ctypes.byref(handle)))
    _pythonapi.PyCapsule_SetName(capsule, _USED_DLTENSOR)
    return handle


def export_capsule(array_handle: ctypes.c_void_p) -> Any:
    """A "dltensor" capsule sharing the buffer of the bp_array: the library's
    DLManagedTensor, freed by the capsule's destructor unless consumed."""
    tensor = ctypes.c_void_p()
    # UnsupportedError (a dtype or device DLPack cannot name) is a BufferError, as the protocol asks.
    _lib.check(_lib.lib.bp_array_to_dlpack(array_handle, ctypes.byref(tensor)))
    try:
        return _pythonapi.PyCapsule_New(tensor, _DLTENSOR, _DESTRUCTOR_ADDRESS)
    except BaseException:
        _lib.lib.bp_dlpack_tensor_delete(tensor)
        raise
