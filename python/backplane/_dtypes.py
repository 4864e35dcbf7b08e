"""Element types: every spelling a Python user has at hand, to bp_dtype codes.

Accepted: backplane's own names ("U16", "I64"), NumPy names ("uint16",
"int64"), NumPy dtype objects and scalar types (np.int64, np.dtype("<u2")),
torch dtypes (torch.int64) and JAX/ml_dtypes objects that name themselves the
same way. A NumPy dtype with non-native byte order is refused here: the
caller byte-swaps (Runtime.array does) rather than storing wrong numbers.
"""
from __future__ import annotations

import ctypes
import sys
from typing import Any, Dict, Optional

from . import _lib
from ._errors import InvalidArgumentError

BP_U8, BP_U16, BP_U32, BP_I32, BP_I64, BP_BOOL, BP_I8, BP_I16, BP_U64 = 1, 2, 3, 4, 5, 6, 7, 8, 9
BP_F16, BP_BF16, BP_F32, BP_F64 = 10, 11, 12, 13

_NUMPY_NAMES = {
    "bool": "BOOL", "uint8": "U8", "int8": "I8", "uint16": "U16", "int16": "I16", "uint32": "U32",
    "int32": "I32", "uint64": "U64", "int64": "I64", "float16": "F16", "bfloat16": "BF16",
    "float32": "F32", "float64": "F64", "complex64": "C64", "half": "F16", "float": "F32", "double": "F64",
    "long": "I64", "int": "I32", "short": "I16",
}
# bp_dtype code -> NumPy typestr (native little-endian) for __array_interface__.
NUMPY_TYPESTR: Dict[int, str] = {
    BP_U8: "|u1", BP_I8: "|i1", BP_U16: "<u2", BP_I16: "<i2", BP_U32: "<u4", BP_I32: "<i4", BP_U64: "<u8",
    BP_I64: "<i8", BP_BOOL: "|b1", BP_F16: "<f2", BP_F32: "<f4", BP_F64: "<f8",
}

_cache: Dict[Any, int] = {}


def _spelling(dtype: Any) -> str:
    if isinstance(dtype, str):
        return dtype
    module = type(dtype).__module__
    if module.startswith("torch"):  # torch.int64 prints as "torch.int64"
        return str(dtype).rsplit(".", 1)[-1]
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        if isinstance(dtype, type) and issubclass(dtype, numpy.generic):
            dtype = numpy.dtype(dtype)
        if isinstance(dtype, numpy.dtype):
            if dtype.byteorder == (">" if sys.byteorder == "little" else "<"):
                raise InvalidArgumentError(f"dtype {dtype.str}: big-endian data would be stored as wrong numbers; "
                                           "convert it first (array.astype(array.dtype.newbyteorder('=')))")
            return str(dtype.name)
    name = getattr(dtype, "name", None)  # ml_dtypes / jax dtype-likes
    if isinstance(name, str):
        return name
    if isinstance(dtype, type):
        return dtype.__name__
    return str(dtype)


def code(dtype: Any) -> int:
    """The bp_dtype number of any accepted spelling; raises
    InvalidArgumentError naming the spelling otherwise."""
    try:
        return _cache[dtype]
    except (KeyError, TypeError):
        pass
    name = _spelling(dtype)
    value = ctypes.c_int32()
    status = _lib.lib.bp_dtype_from_name(_NUMPY_NAMES.get(name, name).encode(), ctypes.byref(value))
    if status != 0:
        raise _lib.error_for(status, f"{_lib.text(_lib.lib.bp_last_error())} (dtype {dtype!r}; use a NumPy or torch "
                                     "dtype, or a name such as 'int64' or 'I64')", _lib.text(_lib.lib.bp_status_name(status)))
    try:
        _cache[dtype] = value.value
    except TypeError:  # unhashable dtype-likes are fine, just not cached
        pass
    return value.value


def name(dtype_code: int) -> str:
    return _lib.text(_lib.lib.bp_dtype_name(dtype_code))


def bits(dtype: Any) -> int:
    return int(_lib.lib.bp_dtype_bits(code(dtype)))


def numpy_dtype(dtype_code: int) -> Optional[str]:
    """The NumPy typestr of a dtype NumPy has (BF16 and sub-byte types: None)."""
    return NUMPY_TYPESTR.get(dtype_code)
