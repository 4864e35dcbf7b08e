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

Why ctypes and not a compiled extension: the library has a C ABI already,
so one wheel (tagged abi3) serves every later CPython with no per-version
build, and with the arguments passed as
raw buffer addresses a call costs about a microsecond more than the C call
(bench/python/bench_take_windows.py measures it); docs/embedding.md has the
numbers. Python objects never outlive what the C API says a pointer is valid
for: strings are copied out at once.

The structs and prototypes below mirror backplane.h by hand;
tests/python/test_header_mirror.py checks them against the header (parameter
counts and types) and against the C compiler (struct sizes and offsets).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import pathlib
from typing import Any, Iterator, List, NoReturn, Optional

from ._errors import error_for as error_for  # re-exported: callers raise through _lib

c_int32 = ctypes.c_int32
c_int64 = ctypes.c_int64
c_uint64 = ctypes.c_uint64
c_size_t = ctypes.c_size_t
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
POINTER = ctypes.POINTER

BACKEND_NAME_CAPACITY = 65
PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
NATIVE_DIR = PACKAGE_DIR / "_native"


class bp_device(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_char * BACKEND_NAME_CAPACITY), ("ordinal", c_int32)]


class bp_runtime_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("plugin_paths", POINTER(c_char_p)),
        ("plugin_path_count", c_size_t),
        ("config_file", c_char_p),
        ("ignore_environment", c_int32),
        ("skip_default_paths", c_int32),
    ]


class bp_backend_info(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("name", c_char_p),
        ("status", c_int32),
        ("status_name", c_char_p),
        ("reason", c_char_p),
        ("plugin_path", c_char_p),
        ("abi_version", c_char_p),
        ("priority", c_int32),
        ("capabilities", c_uint64),
        ("dlpack_device_type", c_int32),  # API 0.4
    ]


class bp_memory_stats(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t)] + [
        (name, c_uint64)
        for name in ("in_use", "cached", "peak", "backend_allocations", "backend_frees", "pinned_in_use",
                     "pinned_cached", "pinned_backend_allocations",
                     "memory_total", "memory_free")  # API 0.6: memory_total, memory_free
    ]


BP_MEMORY_UNKNOWN = 2**64 - 1  # a memory figure the backend cannot tell


# Names and metadata may hold NUL bytes ("\u0000" in a file): they cross the
# C API as (pointer, size) through the API 0.3 fields and *_n functions, never
# as NUL-terminated strings, which would cut "a\0b" to "a". Such a pointer is
# a c_void_p, read with ctypes.string_at(pointer, size).
c_size_p = POINTER(c_size_t)
c_text_p = POINTER(c_void_p)


class bp_safetensors_tensor_info(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("name", c_void_p),
        ("dtype_name", c_char_p),
        ("dtype", c_int32),
        ("rank", c_size_t),
        ("shape", POINTER(c_uint64)),
        ("begin", c_uint64),
        ("end", c_uint64),
        ("name_size", c_size_t),  # API 0.3
    ]


PROGRESS_CALLBACK = ctypes.CFUNCTYPE(None, c_uint64, c_uint64, c_void_p)
CANCELLABLE_PROGRESS_CALLBACK = ctypes.CFUNCTYPE(c_int32, c_uint64, c_uint64, c_void_p)


class bp_safetensors_load_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("names", POINTER(c_char_p)),
        ("name_count", c_size_t),
        ("progress", PROGRESS_CALLBACK),
        ("user_data", c_void_p),
        ("cancellable_progress", CANCELLABLE_PROGRESS_CALLBACK),  # API 0.2
        ("name_sizes", c_size_p),  # API 0.3
    ]


class bp_batch_stream_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("batch_size", c_int64),
        ("context", c_int64),
        ("devices", POINTER(bp_device)),
        ("device_count", c_size_t),
        ("dtype", c_int32),
        ("seed", c_uint64),
        ("rank", c_int64),
        ("world_size", c_int64),
        ("prefetch", c_int64),
        ("weights", POINTER(ctypes.c_double)),
        ("weight_count", c_size_t),
        ("threads", ctypes.c_uint32),
        ("release_pages", c_int32),
        ("state", c_char_p),
    ]


class bp_batch_stream_stats(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("steps", c_int64),
        ("windows", c_uint64),
        ("bytes", c_uint64),
        ("wait_seconds", ctypes.c_double),
        ("gather_seconds", ctypes.c_double),
        ("transfer_seconds", ctypes.c_double),
        ("elapsed_seconds", ctypes.c_double),
        ("windows_per_second", ctypes.c_double),
        ("data_stall_fraction", ctypes.c_double),
        ("resident_bytes", c_uint64),
    ]


class bp_tokens_options(ctypes.Structure):  # API 0.5
    _fields_ = [
        ("struct_size", c_size_t),
        ("dtype", c_int32),
        ("name", c_char_p),
        ("device", POINTER(bp_device)),
    ]


_status = c_int32
# name: (argument types, result type); a bp_status result is checked by call().
# Pointers to caller-owned arrays (offsets, shapes) are declared c_void_p so
# that a NumPy array's address passes straight through without a conversion.
_PROTOTYPES = {
    "bp_version": ([], c_char_p),
    "bp_last_error": ([], c_char_p),
    "bp_status_name": ([c_int32], c_char_p),
    "bp_runtime_create": ([POINTER(bp_runtime_options), POINTER(c_void_p)], _status),
    "bp_runtime_default": ([POINTER(c_void_p)], _status),
    "bp_runtime_destroy": ([c_void_p], None),
    "bp_runtime_config_path": ([c_void_p, POINTER(c_char_p)], _status),
    "bp_backend_count": ([c_void_p, POINTER(c_size_t)], _status),
    "bp_backend_get": ([c_void_p, c_size_t, POINTER(bp_backend_info)], _status),
    "bp_backend_is_available": ([c_void_p, c_char_p, POINTER(c_int32)], _status),
    "bp_device_resolve": ([c_void_p, c_char_p, POINTER(bp_device)], _status),
    "bp_device_count": ([c_void_p, c_char_p, POINTER(c_int32)], _status),
    "bp_device_info_create": ([c_void_p, POINTER(bp_device), POINTER(c_void_p)], _status),
    "bp_device_info_destroy": ([c_void_p], None),
    "bp_device_info_name": ([c_void_p], c_char_p),
    "bp_device_info_kind": ([c_void_p], c_int32),
    "bp_device_info_memory_total": ([c_void_p], c_uint64),
    "bp_device_info_memory_free": ([c_void_p], c_uint64),
    "bp_device_info_attribute_count": ([c_void_p], c_size_t),
    "bp_device_info_attribute": ([c_void_p, c_size_t, POINTER(c_char_p), POINTER(c_char_p)], _status),
    "bp_default_device": ([c_void_p, POINTER(bp_device), POINTER(c_int32)], _status),
    "bp_device_source_name": ([c_int32], c_char_p),
    "bp_default_device_set": ([c_void_p, c_char_p], _status),
    "bp_default_device_push": ([c_void_p, c_char_p], _status),
    "bp_default_device_pop": ([c_void_p], _status),
    "bp_dtype_name": ([c_int32], c_char_p),
    "bp_dtype_from_name": ([c_char_p, POINTER(c_int32)], _status),
    "bp_dtype_bits": ([c_int32], c_int32),
    "bp_array_create": ([c_void_p, POINTER(bp_device), c_int32, c_void_p, c_size_t, c_void_p, c_uint64,
                         POINTER(c_void_p)], _status),
    "bp_array_destroy": ([c_void_p], None),
    "bp_array_dtype": ([c_void_p, POINTER(c_int32)], _status),
    "bp_array_rank": ([c_void_p, POINTER(c_size_t)], _status),
    "bp_array_shape": ([c_void_p, c_void_p, c_size_t], _status),
    "bp_array_nbytes": ([c_void_p, POINTER(c_uint64)], _status),
    "bp_array_device": ([c_void_p, POINTER(bp_device)], _status),
    "bp_array_native_address": ([c_void_p, POINTER(c_void_p)], _status),
    "bp_array_shares_buffer": ([c_void_p, c_void_p, POINTER(c_int32)], _status),
    "bp_array_copy_to_host": ([c_void_p, c_void_p, c_uint64], _status),
    "bp_array_slice": ([c_void_p, c_int64, c_int64, POINTER(c_void_p)], _status),
    "bp_array_device_put": ([c_void_p, c_void_p, POINTER(bp_device), PROGRESS_CALLBACK, c_void_p,
                             POINTER(c_void_p)], _status),
    "bp_array_wait": ([c_void_p], _status),
    "bp_array_is_ready": ([c_void_p, POINTER(c_int32)], _status),
    "bp_take_windows": ([c_void_p, c_void_p, c_void_p, c_size_t, c_int64, POINTER(bp_device), c_int32,
                         POINTER(c_void_p)], _status),
    "bp_memory_stats_get": ([c_void_p, POINTER(bp_device), POINTER(bp_memory_stats)], _status),
    "bp_memory_reset_peak": ([c_void_p, POINTER(bp_device)], _status),  # API 0.6
    "bp_empty_cache": ([c_void_p, POINTER(bp_device)], _status),
    "bp_array_to_dlpack": ([c_void_p, POINTER(c_void_p)], _status),
    "bp_array_dlpack_device": ([c_void_p, POINTER(c_int32), POINTER(c_int32)], _status),
    "bp_array_from_dlpack": ([c_void_p, c_void_p, POINTER(c_void_p)], _status),
    "bp_dlpack_tensor_delete": ([c_void_p], None),
    "bp_dlpack_capsule_destructor": ([c_void_p], None),
    "bp_safetensors_inspect": ([c_char_p, POINTER(c_void_p)], _status),
    "bp_safetensors_header_destroy": ([c_void_p], None),
    "bp_safetensors_header_sizes": ([c_void_p, POINTER(c_uint64), POINTER(c_uint64), POINTER(c_uint64)], _status),
    "bp_safetensors_header_tensor_count": ([c_void_p, POINTER(c_size_t)], _status),
    "bp_safetensors_header_tensor": ([c_void_p, c_size_t, POINTER(bp_safetensors_tensor_info)], _status),
    "bp_safetensors_header_metadata_count": ([c_void_p, POINTER(c_int64)], _status),
    "bp_safetensors_header_metadata_n": ([c_void_p, c_size_t, c_text_p, c_size_p, c_text_p, c_size_p], _status),
    "bp_safetensors_load": ([c_void_p, c_char_p, POINTER(bp_device), POINTER(bp_safetensors_load_options),
                             POINTER(c_void_p)], _status),
    "bp_tensor_map_destroy": ([c_void_p], None),
    "bp_tensor_map_count": ([c_void_p, POINTER(c_size_t)], _status),
    "bp_tensor_map_name_n": ([c_void_p, c_size_t, c_text_p, c_size_p], _status),
    "bp_tensor_map_get_n": ([c_void_p, c_char_p, c_size_t, POINTER(c_void_p)], _status),
    "bp_tensor_map_metadata_count": ([c_void_p, POINTER(c_int64)], _status),
    "bp_tensor_map_metadata_n": ([c_void_p, c_size_t, c_text_p, c_size_p, c_text_p, c_size_p], _status),
    "bp_safetensors_save_n": ([c_char_p, c_void_p, c_void_p, c_void_p, c_size_t, c_void_p, c_void_p, c_void_p,
                               c_void_p, c_int64], _status),
    "bp_tokens_load": ([c_void_p, c_char_p, POINTER(bp_tokens_options), POINTER(c_void_p)], _status),
    "bp_tokens_load_files": ([c_void_p, c_char_p, POINTER(bp_tokens_options), POINTER(c_void_p)], _status),
    "bp_token_files_destroy": ([c_void_p], None),
    "bp_token_files_count": ([c_void_p, POINTER(c_size_t)], _status),
    "bp_token_files_get": ([c_void_p, c_size_t, POINTER(c_void_p)], _status),
    "bp_batch_stream_create": ([c_void_p, c_void_p, c_size_t, POINTER(bp_batch_stream_options), POINTER(c_void_p)],
                               _status),
    "bp_batch_stream_destroy": ([c_void_p], None),
    "bp_batch_stream_next": ([c_void_p, c_void_p, c_size_t, POINTER(c_size_t)], _status),
    "bp_batch_stream_state": ([c_void_p, c_void_p, c_size_t, POINTER(c_size_t)], _status),
    "bp_batch_stream_stats_get": ([c_void_p, POINTER(bp_batch_stream_stats)], _status),
    "bp_batch_stream_windows": ([c_void_p, c_int64, c_void_p, c_void_p, c_size_t, POINTER(c_size_t)], _status),
}

# Declared only when the loaded library has them (newer than the oldest
# library this package works with); has() tells the callers.
# ---- tracing (docs/tracing.md) ----


class bp_trace_options(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("capacity", c_uint64)]


_PROTOTYPES.update({
    "bp_trace_start": ([c_char_p, POINTER(bp_trace_options)], _status),
    "bp_trace_stop": ([], _status),
})
# ---- end of tracing ----

_OPTIONAL_PROTOTYPES = {
    "bp_default_device_push_scope": ([c_void_p, c_char_p, POINTER(c_uint64)], _status),
    "bp_default_device_pop_scope": ([c_void_p, c_uint64], _status),
    "bp_default_device_describe": ([c_void_p, POINTER(bp_device), POINTER(c_int32), POINTER(c_char_p)], _status),
}


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


lib: Any = _load()
for _name, (_arguments, _result) in _PROTOTYPES.items():
    _function = getattr(lib, _name)
    _function.argtypes = _arguments
    _function.restype = _result
for _name, (_arguments, _result) in _OPTIONAL_PROTOTYPES.items():
    _function = getattr(lib, _name, None)
    if _function is not None:
        _function.argtypes = _arguments
        _function.restype = _result


def has(name: str) -> bool:
    """True when the loaded library exports `name`."""
    return getattr(lib, name, None) is not None


def library_path() -> str:
    return str(lib._name)


def text(value: Optional[bytes]) -> str:
    """A library-owned C string copied into a Python str ('' for NULL)."""
    return value.decode("utf-8", errors="replace") if value else ""


def raise_status(status: int) -> NoReturn:
    raise error_for(status, text(lib.bp_last_error()), text(lib.bp_status_name(status)))


def check(status: int) -> None:
    """Raises the Error subclass of a failed status, with bp_last_error()."""
    if status != 0:
        raise_status(status)


def call(name: str, *arguments: Any) -> None:
    """lib.name(*arguments), raising on a failed status."""
    status = getattr(lib, name)(*arguments)
    if status != 0:
        raise_status(status)
