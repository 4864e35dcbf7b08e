"""safetensors files: inspect (header only), load onto a device, save."""
from __future__ import annotations

import ctypes
import os
import sys
import warnings
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union,
                    overload)

from . import _lib
from ._array import Array
from ._errors import CancelledError, MissingFileError, NotFoundError, UnsupportedError
from ._runtime import DeviceLike, Runtime

if TYPE_CHECKING:
    from ._lib_gen import Pointer, VoidPointer

    # bp_safetensors_header_metadata_n and bp_tensor_map_metadata_n.
    _MetadataEntry = Callable[[VoidPointer, int, Pointer[ctypes.c_void_p], Pointer[ctypes.c_size_t],
                               Pointer[ctypes.c_void_p], Pointer[ctypes.c_size_t]], int]

PathLike = Union[str, "os.PathLike[str]"]
Progress = Callable[[int, int], Any]

def _text(pointer: Optional[int], size: int) -> str:
    return ctypes.string_at(pointer or 0, size).decode("utf-8", errors="replace") if size else ""


def _texts(values: List[bytes]) -> Tuple[Any, Any]:
    """A C array of pointers to `values` and one of their sizes."""
    pointers = (ctypes.c_char_p * max(len(values), 1))(*values)
    sizes = (ctypes.c_size_t * max(len(values), 1))(*(len(value) for value in values))
    return pointers, sizes


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: Tuple[int, ...]
    begin: int  # data_offsets, relative to the data section
    end: int


@dataclass(frozen=True)
class Header:
    """A validated header: tensors in data order, metadata (None when the
    file has none), and where the data section starts."""

    tensors: List[TensorInfo]
    metadata: Optional[Dict[str, str]]
    header_size: int
    data_offset: int
    file_size: int


class Loaded(Mapping[str, Array]):
    """What load() returns: a read-only mapping name -> Array (in, len,
    iteration, keys/values/items), and the file's __metadata__ (None when
    the file has none)."""

    def __init__(self, tensors: Dict[str, Array], metadata: Optional[Dict[str, str]]) -> None:
        self._tensors = tensors
        self.metadata = metadata

    @property
    def tensors(self) -> Mapping[str, Array]:
        """The loaded arrays by name (this mapping itself)."""
        return self

    def __getitem__(self, name: str) -> Array:
        try:
            return self._tensors[name]
        except KeyError:
            known = ", ".join(repr(key) for key in list(self._tensors)[:10]) or "none"
            raise KeyError(f"no tensor {name!r} was loaded (loaded: {known})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)

    def __repr__(self) -> str:
        return f"<backplane.safetensors.Loaded {len(self)} tensor(s): {', '.join(map(repr, self._tensors))}>"


def _path_bytes(path: PathLike) -> bytes:
    return os.fsencode(os.path.expanduser(path))  # ~ as a shell reads it


def _reraise_missing(error: NotFoundError, path: PathLike) -> None:
    """A file that is not there raises something FileNotFoundError catches."""
    if not os.path.lexists(os.path.expanduser(path)):
        raise MissingFileError(error.message, filename=os.fspath(path)) from None


def _metadata(handle: ctypes.c_void_p, count_function: Callable[[VoidPointer, Pointer[ctypes.c_int64]], int],
              entry_function: _MetadataEntry) -> Optional[Dict[str, str]]:
    count = ctypes.c_int64()
    _lib.check(count_function(handle, ctypes.byref(count)))
    if count.value < 0:
        return None
    result = {}
    for index in range(count.value):
        key, value = ctypes.c_void_p(), ctypes.c_void_p()
        key_size, value_size = ctypes.c_size_t(), ctypes.c_size_t()
        _lib.check(entry_function(handle, index, ctypes.byref(key), ctypes.byref(key_size), ctypes.byref(value),
                                  ctypes.byref(value_size)))
        result[_text(key.value, key_size.value)] = _text(value.value, value_size.value)
    return result


def inspect(path: PathLike) -> Header:
    """Reads and validates the header of `path` (never the tensor data);
    raises InvalidFileError naming the rule a broken file violates."""
    handle = ctypes.c_void_p()
    try:
        _lib.check(_lib.lib.bp_safetensors_inspect(_path_bytes(path), ctypes.byref(handle)))
    except NotFoundError as error:
        _reraise_missing(error, path)
        raise
    try:
        count = ctypes.c_size_t()
        _lib.check(_lib.lib.bp_safetensors_header_tensor_count(handle, ctypes.byref(count)))
        tensors = []
        for index in range(count.value):
            info = _lib.bp_safetensors_tensor_info(struct_size=ctypes.sizeof(_lib.bp_safetensors_tensor_info))
            _lib.check(_lib.lib.bp_safetensors_header_tensor(handle, index, ctypes.byref(info)))
            name = _text(info.name, info.name_size)
            tensors.append(TensorInfo(name, _lib.text(info.dtype_name),
                                      tuple(info.shape[i] for i in range(info.rank)), info.begin, info.end))
        sizes = [ctypes.c_uint64() for _ in range(3)]
        _lib.check(_lib.lib.bp_safetensors_header_sizes(handle, *(ctypes.byref(size) for size in sizes)))
        metadata = _metadata(handle, _lib.lib.bp_safetensors_header_metadata_count,
                             _lib.lib.bp_safetensors_header_metadata_n)
        return Header(tensors, metadata, sizes[0].value, sizes[1].value, sizes[2].value)
    finally:
        _lib.lib.bp_safetensors_header_destroy(handle)


class _ProgressRelay:
    """Calls the user's progress function from C. An exception cannot cross
    C, so the first one is kept, the load is cancelled (the callback answers
    non-zero), and load() raises CancelledError from it."""

    def __init__(self, function: Progress) -> None:
        self.function = function
        self.failure: Optional[BaseException] = None
        self.c_function = _lib.CANCELLABLE_PROGRESS_CALLBACK(self._relay)

    def _relay(self, done: int, total: int, _: Any) -> int:
        if self.failure is not None:
            return 1
        try:
            self.function(done, total)
        except BaseException as error:  # KeyboardInterrupt must cancel the load too
            self.failure = error
            return 1
        return 0


def _progress_function(progress: Union[None, bool, Progress], path: PathLike) -> Tuple[Optional[Progress], Any]:
    """The callable for `progress` and what to close afterwards (a tqdm bar)."""
    if progress is None or progress is False:
        return None, None
    if progress is True:
        if not sys.stderr.isatty():
            return None, None
        try:
            from tqdm import tqdm
        except ImportError:
            return None, None
        bar = tqdm(total=0, unit="B", unit_scale=True, desc=os.path.basename(os.fspath(path)))

        def update(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)
        return update, bar
    if not callable(progress):
        raise TypeError(f"progress must be a callable(done, total), True or None, not {type(progress).__name__}")
    return progress, None


def _names(names: Union[None, str, bytes, Iterable[str]]) -> List[bytes]:
    if names is None:
        return []
    if isinstance(names, (str, bytes)):
        names = [names.decode() if isinstance(names, bytes) else names]
    encoded = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, got {type(name).__name__}")
        encoded.append(_lib.utf8("safetensors.load", f"tensor name {name!r}", name))
    return encoded


Names = Union[None, str, Iterable[str]]
ProgressLike = Union[None, bool, Progress]


@overload
def load(path: PathLike, *, names: Names = None, device: Optional[DeviceLike] = None,
         runtime: Optional[Runtime] = None, progress: ProgressLike = None) -> Loaded: ...


@overload  # the earlier form, runtime first: deprecated
def load(runtime: Optional[Runtime], path: PathLike, device: Optional[DeviceLike] = None, names: Names = None,
         progress: ProgressLike = None, /) -> Loaded: ...


def load(path: Union[PathLike, Runtime, None], *legacy: Any, names: Names = None,
         device: Optional[DeviceLike] = None, runtime: Optional[Runtime] = None,
         progress: ProgressLike = None) -> Loaded:
    """Loads the file `path` onto `device` (default: the default device, scopes
    included). `names`: one tensor name or an iterable of them (default:
    all). `progress(done, total)` is called as bytes arrive; if it raises,
    the load is cancelled and CancelledError is raised from its exception.
    `progress=True` shows a tqdm bar when tqdm is installed and stderr is a
    terminal. On cpu the arrays are zero-copy views of a copy-on-write memory
    map. A missing file raises MissingFileError, a FileNotFoundError.
    `runtime`: the runtime to load with (default: the process's default).

    The earlier form load(runtime, path, device, names, progress), with the
    runtime first, still works and warns (DeprecationWarning)."""
    if path is None or isinstance(path, Runtime):
        if runtime is not None or not legacy or len(legacy) > 4:
            raise TypeError("load(path, *, names=None, device=None, runtime=None, progress=None): the earlier form "
                            "is load(runtime, path, device=None, names=None, progress=None), with the runtime only "
                            "first")
        warnings.warn("safetensors.load(runtime, path, ...) is deprecated: use load(path, ..., runtime=runtime)",
                      DeprecationWarning, stacklevel=2)
        runtime = path
        file: PathLike = legacy[0]
        rest = legacy[1:]
        device = rest[0] if len(rest) > 0 else device
        names = rest[1] if len(rest) > 1 else names
        progress = rest[2] if len(rest) > 2 else progress
    elif legacy:
        raise TypeError(f"load() takes one positional argument, the path, but {1 + len(legacy)} were given; names, "
                        "device, runtime and progress are keywords")
    else:
        file = path
    runtime = runtime or Runtime.default()
    encoded = _names(names)
    name_array, name_sizes = _texts(encoded)
    function, bar = _progress_function(progress, file)
    relay = _ProgressRelay(function) if function is not None else None
    options = _lib.bp_safetensors_load_options(
        struct_size=ctypes.sizeof(_lib.bp_safetensors_load_options),
        names=ctypes.cast(name_array, ctypes.POINTER(ctypes.c_char_p)),
        name_sizes=ctypes.cast(name_sizes, _lib.c_size_p),
        name_count=len(encoded),
        progress=_lib.PROGRESS_CALLBACK(),  # NULL
        user_data=None,
        cancellable_progress=relay.c_function if relay is not None else _lib.CANCELLABLE_PROGRESS_CALLBACK(),
    )
    handle = ctypes.c_void_p()
    try:
        _lib.check(_lib.lib.bp_safetensors_load(runtime._live_handle(), _path_bytes(file), runtime._device(device),
                                                ctypes.byref(options), ctypes.byref(handle)))
    except CancelledError as error:
        failure = relay.failure if relay is not None else None
        if failure is None:
            raise
        raise CancelledError(f"{error.message}: it raised {type(failure).__name__}: {failure}") from failure
    except NotFoundError as error:
        _reraise_missing(error, file)
        raise
    finally:
        if bar is not None:
            bar.close()
    try:
        count = ctypes.c_size_t()
        _lib.check(_lib.lib.bp_tensor_map_count(handle, ctypes.byref(count)))
        tensors = {}
        for index in range(count.value):
            name, size = ctypes.c_void_p(), ctypes.c_size_t()
            _lib.check(_lib.lib.bp_tensor_map_name_n(handle, index, ctypes.byref(name), ctypes.byref(size)))
            raw = ctypes.string_at(name.value or 0, size.value) if size.value else b""
            array = ctypes.c_void_p()
            _lib.check(_lib.lib.bp_tensor_map_get_n(handle, raw, size.value, ctypes.byref(array)))
            tensors[raw.decode("utf-8", errors="replace")] = Array(runtime, array)
        metadata = _metadata(handle, _lib.lib.bp_tensor_map_metadata_count, _lib.lib.bp_tensor_map_metadata_n)
        return Loaded(tensors, metadata)
    finally:
        _lib.lib.bp_tensor_map_destroy(handle)


def _as_array(runtime: Runtime, name: str, value: Any) -> Array:
    if isinstance(value, Array):
        return value
    if _is_numpy(value) and value.flags.c_contiguous and value.dtype.isnative and value.size:
        # Saved in place, without the copy runtime.array makes: a copy costs
        # as much as the write on a fast disk. NumPy refuses some arrays
        # through DLPack (read-only ones before 2.1, some dtypes): those are
        # copied below.
        try:
            return runtime.from_dlpack(value)
        except (BufferError, TypeError, UnsupportedError):
            pass
    if hasattr(value, "__dlpack__") and not _is_numpy(value):
        try:
            return runtime.from_dlpack(value)
        except (BufferError, TypeError, RuntimeError):
            pass  # a producer DLPack cannot carry here (e.g. a device we cannot import): copy it below
    try:
        return runtime.array(value, device="cpu")
    except (TypeError, ValueError) as error:
        raise TypeError(f"save(): tensor {name!r} is a {type(value).__name__}, which is neither a backplane.Array, "
                        f"a NumPy array nor a DLPack producer ({error})") from error


def _is_numpy(value: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray)


def save(path: PathLike, arrays: Mapping[str, Any], metadata: Optional[Mapping[str, Any]] = None,
         runtime: Optional[Runtime] = None, durable: bool = True) -> None:
    """Writes {name: array} to `path` atomically, in the reference layout.
    Values are backplane Arrays (any device), NumPy arrays, or anything with
    __dlpack__ (torch, JAX); metadata values are written as strings.

    durable: flush the file to disk before it replaces `path` (fsync), so
    that a machine that loses power keeps the old file or the whole new one.
    False, for scratch files: no flush, several times faster on a slow disk;
    still atomic for every process, but a crash of the machine may leave a
    partial file."""
    runtime = runtime or Runtime.default()
    items = [(name, _as_array(runtime, name, value)) for name, value in arrays.items()]
    for name, _ in items:
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, got {type(name).__name__}")
    names, name_sizes = _texts([_lib.utf8("safetensors.save", f"tensor name {name!r}", name) for name, _ in items])
    handles = (ctypes.c_void_p * max(len(items), 1))(*(array._live().value for _, array in items))
    pairs = list((metadata or {}).items())
    keys, key_sizes = _texts([_lib.utf8("safetensors.save", f"metadata key {str(key)!r}", str(key)) for key, _ in pairs])
    values, value_sizes = _texts([_lib.utf8("safetensors.save", f"metadata[{str(key)!r}]", str(value))
                                  for key, value in pairs])
    try:
        options = _lib.bp_save_options(struct_size=ctypes.sizeof(_lib.bp_save_options), durable=1 if durable else 0)
        _lib.check(_lib.lib.bp_safetensors_save_with(_path_bytes(path), names, name_sizes, handles, len(items), keys,
                                                     key_sizes, values, value_sizes,
                                                     -1 if metadata is None else len(pairs), ctypes.byref(options)))
    except NotFoundError as error:
        _reraise_missing(error, os.path.dirname(os.path.abspath(os.path.expanduser(os.fspath(path)))))
        raise
