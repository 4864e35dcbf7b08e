"""Loading libbackplane and declaring the C API's prototypes (backplane.h).

The library is found, first hit wins, at:
1. $BACKPLANE_LIBRARY (an explicit choice that fails is an error, never a
   silent fall-through to another library);
2. _native/libbackplane.so inside this package (what `pip install` lays out:
   the plugins sit next to it in _native/backplane/plugins, where the core
   looks first, so no environment variable is needed);
3. the path meson install recorded in _install_paths.py;
4. a build tree: <build>/core/libbackplane.so next to <build>/python;
5. the system's search path (ctypes.util.find_library).

Why ctypes and not a compiled extension or cffi: docs/python.md has the
measurement (bench/python/bench_call_overhead.py). Python objects never
outlive what the C API says a pointer is valid for: strings are copied out
at once.

The structs and prototypes come from _lib_gen.py, which
python/generate_lib.py writes from backplane.h; `lib` is typed as its
`Library` Protocol, so mypy --strict checks every call into the library.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import pathlib
from typing import Iterator, List, NoReturn, Optional, Union, cast

from ._errors import InvalidArgumentError
from ._errors import error_for as error_for  # re-exported: callers raise through _lib
from ._lib_gen import BP_BACKEND_NAME_CAPACITY, PROTOTYPES, Library
from ._lib_gen import BP_MEMORY_UNKNOWN as BP_MEMORY_UNKNOWN  # a memory figure the backend cannot tell
from ._lib_gen import BP_BATCH_STREAM_MAX_PREFETCH as BP_BATCH_STREAM_MAX_PREFETCH
from ._lib_gen import BP_DOCUMENTS_BOS as BP_DOCUMENTS_BOS  # bp_documents_kind: batches(documents=...)
from ._lib_gen import BP_DOCUMENTS_EOS as BP_DOCUMENTS_EOS
from ._lib_gen import BP_DOCUMENTS_NONE as BP_DOCUMENTS_NONE
from ._lib_gen import BP_DOCUMENTS_STARTS as BP_DOCUMENTS_STARTS
from ._lib_gen import bp_backend_info as bp_backend_info
from ._lib_gen import bp_batch_pieces as bp_batch_pieces
from ._lib_gen import bp_batch_stream_options as bp_batch_stream_options
from ._lib_gen import bp_batch_stream_stats as bp_batch_stream_stats
from ._lib_gen import bp_schedule_entry as bp_schedule_entry
from ._lib_gen import bp_mesh_axis as bp_mesh_axis  # batches(layout=...)
from ._lib_gen import BP_SEQUENCE_CONTIGUOUS as BP_SEQUENCE_CONTIGUOUS
from ._lib_gen import BP_SEQUENCE_HEAD_TAIL as BP_SEQUENCE_HEAD_TAIL
from ._lib_gen import bp_device as bp_device
from ._lib_gen import bp_memory_stats as bp_memory_stats
from ._lib_gen import bp_runtime_options as bp_runtime_options
from ._lib_gen import bp_save_options as bp_save_options
from ._lib_gen import bp_safetensors_load_options as bp_safetensors_load_options
from ._lib_gen import bp_safetensors_tensor_info as bp_safetensors_tensor_info
from ._lib_gen import bp_tokens_options as bp_tokens_options
from ._lib_gen import BP_STATUS_NOT_FOUND as BP_STATUS_NOT_FOUND  # a token file that records no documents
from ._lib_gen import bp_cancellable_progress_callback, bp_progress_callback
from ._lib_gen import BP_TRACE_DEFAULT_CAPACITY as BP_TRACE_DEFAULT_CAPACITY  # the events kept for capacity 0
from ._lib_gen import bp_trace_options as bp_trace_options

BACKEND_NAME_CAPACITY = BP_BACKEND_NAME_CAPACITY
PROGRESS_CALLBACK = bp_progress_callback
CANCELLABLE_PROGRESS_CALLBACK = bp_cancellable_progress_callback
PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
NATIVE_DIR = PACKAGE_DIR / "_native"

# Names and metadata may hold NUL bytes ("\u0000" in a file): they cross the
# C API as (pointer, size) through the API 0.3 fields and *_n functions, never
# as NUL-terminated strings, which would cut "a\0b" to "a". Such a pointer is
# a c_void_p, read with ctypes.string_at(pointer, size).
c_size_p = ctypes.POINTER(ctypes.c_size_t)

# Newer than the oldest library this package works with: left undeclared when
# the loaded library lacks them, and has() tells the callers. Every other
# function of the header must be there.
OPTIONAL = frozenset({"bp_default_device_push_scope", "bp_default_device_pop_scope", "bp_default_device_describe"})


def _installed_library() -> str:
    try:
        from . import _install_paths  # type: ignore[attr-defined]
    except ImportError:
        return ""
    return str(getattr(_install_paths, "LIBRARY", ""))


def _candidates() -> Iterator[str]:
    explicit = os.environ.get("BACKPLANE_LIBRARY")
    if explicit:
        yield explicit
        return
    bundled = NATIVE_DIR / "libbackplane.so"
    if bundled.exists():
        yield str(bundled)
    installed = _installed_library()
    if installed and os.path.exists(installed):
        yield installed
    build_tree = PACKAGE_DIR.parent.parent / "core"
    for name in ("libbackplane.so", "libbackplane.so.0"):
        if (build_tree / name).exists():
            yield str(build_tree / name)
    found = ctypes.util.find_library("backplane")
    if found:
        yield found


def _load() -> ctypes.CDLL:
    tried: List[str] = []
    for candidate in _candidates():
        try:
            return ctypes.CDLL(candidate)
        except OSError as error:
            tried.append(f"{candidate}: {error}")
    detail = "; ".join(tried) if tried else (
        f"not in {NATIVE_DIR} (a `pip install` puts it there), nor installed by meson, nor found by "
        "ctypes.util.find_library")
    raise ImportError(f"backplane: cannot load libbackplane ({detail}); install the package with `pip install .` "
                      "from a checkout, or set BACKPLANE_LIBRARY to the library's path")


def _declare(library: ctypes.CDLL) -> Library:
    missing = []
    for name, (arguments, result) in PROTOTYPES.items():
        function = getattr(library, name, None)
        if function is None:
            if name not in OPTIONAL:
                missing.append(name)
            continue
        function.argtypes = arguments
        function.restype = result
    if missing:
        raise ImportError(f"backplane: {library._name} lacks {', '.join(missing)}: it is older than this package's "
                          "backplane.h; install the package and the library together")
    return cast(Library, library)


_library = _load()
lib: Library = _declare(_library)


def has(name: str) -> bool:
    """True when the loaded library exports `name`."""
    return getattr(_library, name, None) is not None


def address(name: str) -> int:
    """The address of the library's function `name`, to hand to C."""
    return ctypes.cast(getattr(_library, name), ctypes.c_void_p).value or 0


def library_path() -> str:
    return str(_library._name)


def _unencodable(function: str, argument: str, error: UnicodeEncodeError) -> InvalidArgumentError:
    character = error.object[error.start]
    return InvalidArgumentError(f"{function}: {argument} is not valid text: character {error.start} is "
                                f"{character!r}, a lone surrogate, which UTF-8 cannot encode")


def utf8(function: str, argument: str, value: str) -> bytes:
    """`value` as UTF-8, for text the library takes with its size. A str with
    no UTF-8 form (a lone surrogate) is refused with InvalidArgumentError
    naming the argument, not a UnicodeEncodeError."""
    try:
        return value.encode()
    except UnicodeEncodeError as error:
        raise _unencodable(function, argument, error) from None


def c_text(function: str, argument: str, value: str) -> bytes:
    """`value` as UTF-8 for a C string argument: refused as utf8() refuses,
    and when it holds a NUL byte (C would read it only up to there), in the
    C++ API's words."""
    return c_bytes(function, argument, utf8(function, argument, value))


def c_path(function: str, argument: str, path: Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]) -> bytes:
    """A path's bytes for a C string argument (os.fsencode: any bytes the
    file system allows, stray bytes that os.fsdecode turned into surrogates
    included), refused like c_text when it has no such form or holds a NUL
    byte. A leading ~ is the home directory, as a shell reads it."""
    try:
        encoded = os.fsencode(os.path.expanduser(path))
    except UnicodeEncodeError as error:
        raise _unencodable(function, argument, error) from None
    return c_bytes(function, argument, encoded)


def c_bytes(function: str, argument: str, value: bytes) -> bytes:
    """`value` itself, after checking that C would read all of it."""
    nul = value.find(b"\0")
    if nul >= 0:
        raise InvalidArgumentError(f"{function}: {argument} holds a NUL byte at offset {nul}")
    return value


def text(value: Optional[bytes]) -> str:
    """A library-owned C string copied into a Python str ('' for NULL)."""
    return value.decode("utf-8", errors="replace") if value else ""


def raise_status(status: int) -> NoReturn:
    raise error_for(status, text(lib.bp_last_error()), text(lib.bp_status_name(status)))


def check(status: int) -> None:
    """Raises the Error subclass of a failed status, with bp_last_error()."""
    if status != 0:
        raise_status(status)
