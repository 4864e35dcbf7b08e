"""safetensors files: inspect (header only), load onto a device, save."""
import ctypes
from dataclasses import dataclass

from . import _lib
from ._array import Array


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple
    begin: int  # data_offsets, relative to the data section
    end: int


@dataclass(frozen=True)
class Header:
    """A validated header: tensors in data order, metadata (None when the
    file has none), and where the data section starts."""

    tensors: list
    metadata: dict
    header_size: int
    data_offset: int
    file_size: int


@dataclass
class Loaded:
    """What load() returns: name -> Array and the file's __metadata__."""

    tensors: dict
    metadata: dict

    def __getitem__(self, name):
        return self.tensors[name]


def _require(name):
    if not _lib.has(name):
        raise _lib.error_for(4, f"backplane: the loaded libbackplane has no {name} (older than this package)",
                             "unsupported")


def _metadata(handle, count_function, entry_function):
    count = ctypes.c_int64()
    _lib.call(count_function, handle, ctypes.byref(count))
    if count.value < 0:
        return None
    result = {}
    for index in range(count.value):
        key, value = ctypes.c_char_p(), ctypes.c_char_p()
        _lib.call(entry_function, handle, index, ctypes.byref(key), ctypes.byref(value))
        result[key.value.decode()] = value.value.decode()
    return result


def inspect(path):
    """Reads and validates the header of `path` (never the tensor data);
    raises InvalidFileError naming the rule a broken file violates."""
    _require("bp_safetensors_inspect")
    handle = ctypes.c_void_p()
    _lib.call("bp_safetensors_inspect", str(path).encode(), ctypes.byref(handle))
    try:
        count = ctypes.c_size_t()
        _lib.call("bp_safetensors_header_tensor_count", handle, ctypes.byref(count))
        tensors = []
        for index in range(count.value):
            info = _lib.bp_safetensors_tensor_info(struct_size=ctypes.sizeof(_lib.bp_safetensors_tensor_info))
            _lib.call("bp_safetensors_header_tensor", handle, index, ctypes.byref(info))
            tensors.append(TensorInfo(info.name.decode(), info.dtype_name.decode(),
                                      tuple(info.shape[i] for i in range(info.rank)), info.begin, info.end))
        sizes = [ctypes.c_uint64() for _ in range(3)]
        _lib.call("bp_safetensors_header_sizes", handle, *(ctypes.byref(size) for size in sizes))
        metadata = _metadata(handle, "bp_safetensors_header_metadata_count", "bp_safetensors_header_metadata")
        return Header(tensors, metadata, *(size.value for size in sizes))
    finally:
        _lib.lib.bp_safetensors_header_destroy(handle)


def load(runtime, path, device=None, names=None, progress=None):
    """Loads `path` onto `device` (default: the default device, scoped
    overrides included). On cpu the arrays are zero-copy views of a read-only
    memory map: never write into a DLPack export of them."""
    _require("bp_safetensors_load")
    encoded = [name.encode() for name in (names or [])]
    name_array = (ctypes.c_char_p * max(len(encoded), 1))(*encoded)
    callback = ctypes.cast(None, _lib.PROGRESS_CALLBACK)
    if progress is not None:
        callback = _lib.PROGRESS_CALLBACK(lambda done, total, _: progress(done, total))
    options = _lib.bp_safetensors_load_options(
        struct_size=ctypes.sizeof(_lib.bp_safetensors_load_options),
        names=ctypes.cast(name_array, ctypes.POINTER(ctypes.c_char_p)),
        name_count=len(encoded),
        progress=callback,
        user_data=None,
    )
    handle = ctypes.c_void_p()
    _lib.call("bp_safetensors_load", runtime._live_handle(), str(path).encode(), runtime._device(device),
              ctypes.byref(options), ctypes.byref(handle))
    try:
        count = ctypes.c_size_t()
        _lib.call("bp_tensor_map_count", handle, ctypes.byref(count))
        tensors = {}
        for index in range(count.value):
            name = ctypes.c_char_p()
            _lib.call("bp_tensor_map_name", handle, index, ctypes.byref(name))
            array = ctypes.c_void_p()
            _lib.call("bp_tensor_map_get", handle, name.value, ctypes.byref(array))
            tensors[name.value.decode()] = Array(runtime, array)
        metadata = _metadata(handle, "bp_tensor_map_metadata_count", "bp_tensor_map_metadata")
        return Loaded(tensors, metadata)
    finally:
        _lib.lib.bp_tensor_map_destroy(handle)


def save(path, arrays, metadata=None):
    """Writes {name: Array} (arrays on any device) and optional string
    metadata to `path`, atomically, as the reference writer lays it out."""
    _require("bp_safetensors_save")
    items = list(arrays.items())
    names = (ctypes.c_char_p * max(len(items), 1))(*(name.encode() for name, _ in items))
    handles = (ctypes.c_void_p * max(len(items), 1))(*(array._live().value for _, array in items))
    pairs = list((metadata or {}).items())
    keys = (ctypes.c_char_p * max(len(pairs), 1))(*(str(key).encode() for key, _ in pairs))
    values = (ctypes.c_char_p * max(len(pairs), 1))(*(str(value).encode() for _, value in pairs))
    _lib.call("bp_safetensors_save", str(path).encode(), names, handles, len(items), keys, values,
              -1 if metadata is None else len(pairs))
