"""Token files as zero-copy host arrays: backplane.load_tokens. The formats
are the table in docs/tokens.md."""
from __future__ import annotations

import ctypes
import os
from typing import Any, List, Optional, Tuple, Union, overload

import numpy

from . import _dtypes, _lib
from ._array import Array
from ._errors import MissingFileError, NotFoundError
from ._runtime import DeviceLike, Runtime

PathLike = Union[str, "os.PathLike[str]"]

_PATTERN_CHARACTERS = frozenset("*?[")


def _options(runtime: Runtime, dtype: Any, name: Optional[str], device: Optional[DeviceLike]) -> Any:
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    options = _lib.bp_tokens_options(
        struct_size=ctypes.sizeof(_lib.bp_tokens_options),
        dtype=0 if dtype is None else _dtypes.code(dtype),
        name=None if name is None else _lib.c_text("load_tokens", "name", name),
    )
    # None is the runtime's cpu device, not the default device (nor a scope's):
    # token files stay in host memory whatever the default is.
    c_device = None if device is None else runtime._c_device(device)
    if c_device is not None:
        options.device = ctypes.pointer(c_device)
    return options


def _load_one(runtime: Runtime, path: PathLike, options: Any) -> Array:
    # Through a set of one, which carries the document starts: glob(3) reads
    # a path as itself when it exists (or is a Megatron-Core prefix) and
    # nothing else matches it. A path whose glob characters match other
    # files is read by bp_tokens_load alone, and so is one matching nothing,
    # for that call's error naming the file.
    encoded = _lib.c_path("load_tokens", "path", path)
    files = ctypes.c_void_p()
    options.allow_empty_match = 1
    _lib.check(_lib.lib.bp_tokens_load_files(runtime._live_handle(), encoded, ctypes.byref(options),
                                             ctypes.byref(files)))
    try:
        count = ctypes.c_size_t()
        _lib.check(_lib.lib.bp_token_files_count(files, ctypes.byref(count)))
        found = ctypes.c_char_p()
        if count.value == 1:
            _lib.check(_lib.lib.bp_token_files_path(files, 0, ctypes.byref(found)))
            if found.value == encoded:
                return _entry(runtime, files, 0)
    finally:
        _lib.lib.bp_token_files_destroy(files)
    handle = ctypes.c_void_p()
    try:
        _lib.check(_lib.lib.bp_tokens_load(runtime._live_handle(), encoded, ctypes.byref(options),
                                           ctypes.byref(handle)))
    except NotFoundError as error:
        if not os.path.lexists(os.path.expanduser(path)):  # catchable as FileNotFoundError
            raise MissingFileError(error.message, filename=os.fspath(path)) from None
        raise
    return Array(runtime, handle)


def _entry(runtime: Runtime, files: Any, index: int) -> Array:
    """File `index` of a bp_token_files, with its document starts (copied:
    the set is destroyed after the call)."""
    handle = ctypes.c_void_p()
    _lib.check(_lib.lib.bp_token_files_get(files, index, ctypes.byref(handle)))
    array = Array(runtime, handle)
    starts = ctypes.c_void_p()
    count = ctypes.c_size_t()
    status = _lib.lib.bp_token_files_document_starts(files, index, ctypes.byref(starts), ctypes.byref(count))
    if status == _lib.BP_STATUS_NOT_FOUND:
        return array  # a format that records no documents
    _lib.check(status)
    data = ctypes.string_at(starts.value, count.value * 8) if count.value and starts.value else b""
    array._document_starts = numpy.frombuffer(data, dtype=numpy.int64)  # over bytes: read-only
    return array


def _load_pattern(runtime: Runtime, pattern: str, options: Any) -> List[Array]:
    files = ctypes.c_void_p()
    # An empty match comes back as an empty set, so it is told from a file's
    # own NotFoundError (a tensor name a matching safetensors file lacks) by
    # the count, never by the words of a message.
    options.allow_empty_match = 1
    _lib.check(_lib.lib.bp_tokens_load_files(runtime._live_handle(),
                                             _lib.c_path("load_token_files", "pattern", pattern), ctypes.byref(options),
                                             ctypes.byref(files)))
    try:
        count = ctypes.c_size_t()
        _lib.check(_lib.lib.bp_token_files_count(files, ctypes.byref(count)))
        if count.value == 0:
            raise MissingFileError(f"load_tokens: no file matches {pattern!r}", filename=pattern)
        return [_entry(runtime, files, index) for index in range(count.value)]
    finally:
        _lib.lib.bp_token_files_destroy(files)


def is_pattern(path: Any) -> bool:
    """True for a str holding a glob character (*, ? or [), but an http(s) URL,
    whose '?' starts its query: an s3:// key may hold a pattern, a URL never."""
    return (isinstance(path, str) and not _PATTERN_CHARACTERS.isdisjoint(path)
            and not path.startswith(("http://", "https://")))


@overload
def load_tokens(path: "os.PathLike[str]", *, dtype: Any = None, name: Optional[str] = None,
                device: Optional[DeviceLike] = None, runtime: Optional[Runtime] = None) -> Array: ...


# A str is a path or, holding *, ? or [, a pattern: which one it is shows
# only at run time, so its type says both (isinstance() tells them apart, and
# a pathlib.Path is always one file). batches() takes either.
@overload
def load_tokens(path: str, *, dtype: Any = None, name: Optional[str] = None, device: Optional[DeviceLike] = None,
                runtime: Optional[Runtime] = None) -> Union[Array, List[Array]]: ...


@overload
def load_tokens(path: Union[List[PathLike], Tuple[PathLike, ...]], *, dtype: Any = None, name: Optional[str] = None,
                device: Optional[DeviceLike] = None, runtime: Optional[Runtime] = None) -> List[Array]: ...


def load_tokens(path: Union[PathLike, List[PathLike], Tuple[PathLike, ...]], *, dtype: Any = None,
                name: Optional[str] = None, device: Optional[DeviceLike] = None,
                runtime: Optional[Runtime] = None) -> Union[Array, List[Array]]:
    """Token files as 1-D integer Arrays over a read-only memory map of each
    file (nothing is read but the header; NumPy views share the pages).

    `path`: one file -> one Array; an s3://BUCKET/KEY or http(s):// URL is an
    object, read into memory (docs/tokens.md, "Token files in object
    storage"); a str holding *, ? or [ is a glob pattern (s3 keys too)
    -> a list of Arrays, one per matching file in bytewise order of the paths
    (a path that exists as written matches itself); a list or tuple of paths
    -> a list of Arrays in the order given (each a path, never a pattern).
    `dtype`: required for raw files; for the other formats a check of the
    header's. `name`: the tensor of a safetensors file holding several.
    `device`: a host-addressable device, default "cpu" (not the default
    device: token files stay in host memory; batches() moves windows).
    Each Array's `document_starts` holds where its documents start when the
    file's format records them (a Megatron-Core dataset), else None.
    Raises MissingFileError (a FileNotFoundError) for a missing file or a
    pattern nothing matches, InvalidFileError naming the file and the field
    for a header that lies, InvalidArgumentError for a raw file without
    dtype or a dtype that contradicts the header."""
    runtime = runtime or Runtime.default()
    options = _options(runtime, dtype, name, device)
    if isinstance(path, (list, tuple)):
        return [_load_one(runtime, item, options) for item in path]
    if isinstance(path, str) and is_pattern(path):
        return _load_pattern(runtime, path, options)
    return _load_one(runtime, path, options)
