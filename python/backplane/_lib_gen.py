"""The C API (backplane.h) as ctypes declares it: generated from the header by
python/generate_lib.py. Do not edit; run `python3 python/generate_lib.py`.

tests/python/test_header_mirror.py fails when this file is not what the
header generates, and checks the structs against the C compiler's layout.
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Protocol, Tuple, TypeVar, Union

if TYPE_CHECKING:
    _T = TypeVar("_T", bound=ctypes._CData)
    # What ctypes takes for a POINTER(T) parameter: a pointer, byref(), the
    # T itself (passed by reference) or None (NULL).
    Pointer = Union["ctypes._Pointer[_T]", ctypes._CArgObject, _T, None]
    # What ctypes takes for a c_void_p parameter: an address, NULL, or any
    # ctypes object that is one.
    VoidPointer = Union[int, None, ctypes.c_void_p, ctypes._CArgObject, "ctypes._Pointer[Any]",
                        "ctypes.Array[Any]"]

# ---- constants ----
BP_API_VERSION_MAJOR = 0
BP_API_VERSION_MINOR = 11
BP_API_VERSION_PATCH = 0
BP_OK = 0
BP_STATUS_INVALID_ARGUMENT = 1
BP_STATUS_OUT_OF_MEMORY = 2
BP_STATUS_UNAVAILABLE = 3
BP_STATUS_UNSUPPORTED = 4
BP_STATUS_DEVICE = 5
BP_STATUS_INTERNAL = 6
BP_STATUS_OUT_OF_RANGE = 7
BP_STATUS_NOT_FOUND = 8
BP_STATUS_CONFIG = 9
BP_STATUS_INVALID_FILE = 10
BP_STATUS_PLUGIN = 11
BP_STATUS_IO = 12
BP_STATUS_CANCELLED = 13
BP_ORIGIN_CODE = 0
BP_ORIGIN_ENVIRONMENT = 1
BP_ORIGIN_CONFIG = 2
BP_ORIGIN_INSTALL_DIR = 3
BP_ORIGIN_CORE_DIR = 4
BP_ORIGIN_PACKAGE = 5
BP_PLUGIN_SOURCE_PATH = 0
BP_PLUGIN_SOURCE_PJRT = 1
BP_BACKEND_AVAILABLE = 0
BP_BACKEND_UNAVAILABLE = 1
BP_BACKEND_INCOMPATIBLE = 2
BP_BACKEND_FAILED = 3
BP_BACKEND_DISABLED = 4
BP_BACKEND_SHADOWED = 5
BP_BACKEND_NAME_CAPACITY = 65
BP_DEVICE_CPU = 0
BP_DEVICE_GPU = 1
BP_DEVICE_ACCELERATOR = 2
BP_SOURCE_SCOPED_OVERRIDE = 0
BP_SOURCE_PROCESS_SETTING = 1
BP_SOURCE_ENVIRONMENT = 2
BP_SOURCE_CONFIG_FILE = 3
BP_SOURCE_AUTOMATIC = 4
BP_SOURCE_LOCAL_RANK = 5
BP_DTYPE_U8 = 1
BP_DTYPE_U16 = 2
BP_DTYPE_U32 = 3
BP_DTYPE_I32 = 4
BP_DTYPE_I64 = 5
BP_DTYPE_BOOL = 6
BP_DTYPE_I8 = 7
BP_DTYPE_I16 = 8
BP_DTYPE_U64 = 9
BP_DTYPE_F16 = 10
BP_DTYPE_BF16 = 11
BP_DTYPE_F32 = 12
BP_DTYPE_F64 = 13
BP_DTYPE_C64 = 14
BP_DTYPE_F8_E5M2 = 15
BP_DTYPE_F8_E4M3 = 16
BP_DTYPE_F8_E8M0 = 17
BP_DTYPE_F8_E4M3FNUZ = 18
BP_DTYPE_F8_E5M2FNUZ = 19
BP_DTYPE_F4 = 20
BP_DTYPE_F6_E2M3 = 21
BP_DTYPE_F6_E3M2 = 22
BP_MEMORY_UNKNOWN = 18446744073709551615
BP_BATCH_STREAM_MAX_PREFETCH = 64
BP_BATCH_STREAM_LAST_STEP = 9223372036854775679
BP_DOCUMENTS_NONE = 0
BP_DOCUMENTS_BOS = 1
BP_DOCUMENTS_EOS = 2
BP_DOCUMENTS_STARTS = 3
BP_SEQUENCE_CONTIGUOUS = 0
BP_SEQUENCE_HEAD_TAIL = 1
BP_TRACE_DEFAULT_CAPACITY = 1048576

# ---- callbacks ----
bp_progress_callback = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p)
bp_cancellable_progress_callback = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p)

# ---- structs ----


class bp_plugin_source(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("kind", ctypes.c_int32),
        ("name", ctypes.c_char_p),
        ("path", ctypes.c_char_p),
        ("origin", ctypes.c_int32),
        ("origin_detail", ctypes.c_char_p),
        ("problem", ctypes.c_char_p),
        ("create_option_keys", ctypes.POINTER(ctypes.c_char_p)),
        ("create_option_values", ctypes.POINTER(ctypes.c_char_p)),
        ("create_option_count", ctypes.c_size_t),
    ]


class bp_runtime_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("plugin_paths", ctypes.POINTER(ctypes.c_char_p)),
        ("plugin_path_count", ctypes.c_size_t),
        ("config_file", ctypes.c_char_p),
        ("ignore_environment", ctypes.c_int32),
        ("skip_default_paths", ctypes.c_int32),
        ("sources", ctypes.POINTER(bp_plugin_source)),
        ("source_count", ctypes.c_size_t),
        ("python_paths", ctypes.POINTER(ctypes.c_char_p)),
        ("python_path_count", ctypes.c_size_t),
    ]


class bp_backend_info(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("name", ctypes.c_char_p),
        ("status", ctypes.c_int32),
        ("status_name", ctypes.c_char_p),
        ("reason", ctypes.c_char_p),
        ("plugin_path", ctypes.c_char_p),
        ("abi_version", ctypes.c_char_p),
        ("priority", ctypes.c_int32),
        ("capabilities", ctypes.c_uint64),
        ("dlpack_device_type", ctypes.c_int32),
        ("origin_detail", ctypes.c_char_p),
        ("library", ctypes.c_char_p),
    ]


class bp_device(ctypes.Structure):
    _fields_ = [
        ("backend", ctypes.c_char * BP_BACKEND_NAME_CAPACITY),
        ("ordinal", ctypes.c_int32),
    ]


class bp_memory_stats(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("in_use", ctypes.c_uint64),
        ("cached", ctypes.c_uint64),
        ("peak", ctypes.c_uint64),
        ("backend_allocations", ctypes.c_uint64),
        ("backend_frees", ctypes.c_uint64),
        ("pinned_in_use", ctypes.c_uint64),
        ("pinned_cached", ctypes.c_uint64),
        ("pinned_backend_allocations", ctypes.c_uint64),
        ("memory_total", ctypes.c_uint64),
        ("memory_free", ctypes.c_uint64),
    ]


class bp_safetensors_tensor_info(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("name", ctypes.c_void_p),
        ("dtype_name", ctypes.c_char_p),
        ("dtype", ctypes.c_int32),
        ("rank", ctypes.c_size_t),
        ("shape", ctypes.POINTER(ctypes.c_uint64)),
        ("begin", ctypes.c_uint64),
        ("end", ctypes.c_uint64),
        ("name_size", ctypes.c_size_t),
    ]


class bp_safetensors_load_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("names", ctypes.POINTER(ctypes.c_char_p)),
        ("name_count", ctypes.c_size_t),
        ("progress", bp_progress_callback),
        ("user_data", ctypes.c_void_p),
        ("cancellable_progress", bp_cancellable_progress_callback),
        ("name_sizes", ctypes.POINTER(ctypes.c_size_t)),
    ]


class bp_save_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("durable", ctypes.c_int32),
    ]


class bp_schedule_entry(ctypes.Structure):
    _fields_ = [
        ("step", ctypes.c_int64),
        ("batch_size", ctypes.c_int64),
        ("context", ctypes.c_int64),
    ]


class bp_mesh_axis(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("size", ctypes.c_int64),
    ]


class bp_batch_stream_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("batch_size", ctypes.c_int64),
        ("context", ctypes.c_int64),
        ("devices", ctypes.POINTER(bp_device)),
        ("device_count", ctypes.c_size_t),
        ("dtype", ctypes.c_int32),
        ("seed", ctypes.c_uint64),
        ("rank", ctypes.c_int64),
        ("world_size", ctypes.c_int64),
        ("prefetch", ctypes.c_int64),
        ("weights", ctypes.POINTER(ctypes.c_double)),
        ("weight_count", ctypes.c_size_t),
        ("threads", ctypes.c_uint32),
        ("release_pages", ctypes.c_int32),
        ("state", ctypes.c_char_p),
        ("seed_from_state", ctypes.c_int32),
        ("documents", ctypes.c_int32),
        ("document_token", ctypes.c_int64),
        ("document_starts", ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))),
        ("document_start_counts", ctypes.POINTER(ctypes.c_size_t)),
        ("max_documents", ctypes.c_int64),
        ("schedule", ctypes.POINTER(bp_schedule_entry)),
        ("schedule_count", ctypes.c_size_t),
        ("weight_steps", ctypes.POINTER(ctypes.c_int64)),
        ("weight_step_count", ctypes.c_size_t),
        ("mesh", ctypes.POINTER(bp_mesh_axis)),
        ("mesh_axis_count", ctypes.c_size_t),
        ("batch_axes", ctypes.POINTER(ctypes.c_char_p)),
        ("batch_axis_count", ctypes.c_size_t),
        ("sequence_axes", ctypes.POINTER(ctypes.c_char_p)),
        ("sequence_axis_count", ctypes.c_size_t),
        ("sequence_order", ctypes.c_int32),
        ("mesh_ranks", ctypes.POINTER(ctypes.c_int64)),
        ("mesh_rank_count", ctypes.c_size_t),
    ]


class bp_batch_pieces(ctypes.Structure):
    _fields_ = [
        ("cu_seqlens", ctypes.c_void_p),
        ("position_ids", ctypes.c_void_p),
        ("max_seqlen", ctypes.c_int64),
        ("pieces", ctypes.c_int64),
    ]


class bp_batch_stream_stats(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("steps", ctypes.c_int64),
        ("windows", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("wait_seconds", ctypes.c_double),
        ("gather_seconds", ctypes.c_double),
        ("transfer_seconds", ctypes.c_double),
        ("elapsed_seconds", ctypes.c_double),
        ("windows_per_second", ctypes.c_double),
        ("data_stall_fraction", ctypes.c_double),
        ("read_bytes", ctypes.c_uint64),
        ("step", ctypes.c_int64),
        ("epoch", ctypes.c_uint64),
    ]


class bp_trace_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("capacity", ctypes.c_uint64),
    ]


class bp_tokens_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("dtype", ctypes.c_int32),
        ("name", ctypes.c_char_p),
        ("device", ctypes.POINTER(bp_device)),
        ("allow_empty_match", ctypes.c_int32),
    ]


# ---- functions: name -> (argument types, result type) ----
PROTOTYPES: Dict[str, Tuple[List[Any], Any]] = {
    "bp_version": ([], ctypes.c_char_p),
    "bp_last_error": ([], ctypes.c_char_p),
    "bp_status_name": ([ctypes.c_int32], ctypes.c_char_p),
    "bp_runtime_create": ([ctypes.POINTER(bp_runtime_options), ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int32),
    "bp_runtime_default": ([ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int32),
    "bp_runtime_default_set_python_paths": ([ctypes.c_void_p, ctypes.c_size_t], ctypes.c_int32),
    "bp_runtime_destroy": ([ctypes.c_void_p], None),
    "bp_runtime_config_path": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p)], ctypes.c_int32),
    "bp_backend_count": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)], ctypes.c_int32),
    "bp_backend_get": ([ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(bp_backend_info)], ctypes.c_int32),
    "bp_backend_is_available": ([ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32)], ctypes.c_int32),
    "bp_device_resolve": ([ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(bp_device)], ctypes.c_int32),
    "bp_device_selector": ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t], ctypes.c_int32),
    "bp_device_count": ([ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32)], ctypes.c_int32),
    "bp_device_info_create": ([
        ctypes.c_void_p,
        ctypes.POINTER(bp_device),
        ctypes.POINTER(ctypes.c_void_p),
    ], ctypes.c_int32),
    "bp_device_info_destroy": ([ctypes.c_void_p], None),
    "bp_device_info_name": ([ctypes.c_void_p], ctypes.c_char_p),
    "bp_device_info_kind": ([ctypes.c_void_p], ctypes.c_int32),
    "bp_device_info_memory_total": ([ctypes.c_void_p], ctypes.c_uint64),
    "bp_device_info_memory_free": ([ctypes.c_void_p], ctypes.c_uint64),
    "bp_device_info_attribute_count": ([ctypes.c_void_p], ctypes.c_size_t),
    "bp_device_info_attribute": ([
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_char_p),
    ], ctypes.c_int32),
    "bp_device_info_memory_kind_count": ([ctypes.c_void_p], ctypes.c_size_t),
    "bp_device_info_memory_kind": ([ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p)], ctypes.c_int32),
    "bp_default_device": ([ctypes.c_void_p, ctypes.POINTER(bp_device), ctypes.POINTER(ctypes.c_int32)], ctypes.c_int32),
    "bp_device_source_name": ([ctypes.c_int32], ctypes.c_char_p),
    "bp_default_device_describe": ([
        ctypes.c_void_p,
        ctypes.POINTER(bp_device),
        ctypes.POINTER(ctypes.c_int32),
        ctypes.POINTER(ctypes.c_char_p),
    ], ctypes.c_int32),
    "bp_default_device_set": ([ctypes.c_void_p, ctypes.c_char_p], ctypes.c_int32),
    "bp_default_device_push_scope": ([
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_uint64),
    ], ctypes.c_int32),
    "bp_default_device_pop_scope": ([ctypes.c_void_p, ctypes.c_uint64], ctypes.c_int32),
    "bp_default_device_push": ([ctypes.c_void_p, ctypes.c_char_p], ctypes.c_int32),
    "bp_default_device_pop": ([ctypes.c_void_p], ctypes.c_int32),
    "bp_dtype_name": ([ctypes.c_int32], ctypes.c_char_p),
    "bp_dtype_from_name": ([ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32)], ctypes.c_int32),
    "bp_dtype_bits": ([ctypes.c_int32], ctypes.c_int32),
    "bp_array_create": ([
        ctypes.c_void_p,
        ctypes.POINTER(bp_device),
        ctypes.c_int32,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.POINTER(ctypes.c_void_p),
    ], ctypes.c_int32),
    "bp_array_destroy": ([ctypes.c_void_p], None),
    "bp_array_dtype": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32)], ctypes.c_int32),
    "bp_array_rank": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)], ctypes.c_int32),
    "bp_array_shape": ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t], ctypes.c_int32),
    "bp_array_nbytes": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)], ctypes.c_int32),
    "bp_array_device": ([ctypes.c_void_p, ctypes.POINTER(bp_device)], ctypes.c_int32),
    "bp_array_native_address": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int32),
    "bp_array_shares_buffer": ([ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32)], ctypes.c_int32),
    "bp_array_copy_to_host": ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64], ctypes.c_int32),
    "bp_array_slice": ([
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.POINTER(ctypes.c_void_p),
    ], ctypes.c_int32),
    "bp_array_device_put": ([
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.POINTER(bp_device),
        bp_progress_callback,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_void_p),
    ], ctypes.c_int32),
    "bp_array_wait": ([ctypes.c_void_p], ctypes.c_int32),
    "bp_array_is_ready": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32)], ctypes.c_int32),
    "bp_take_windows": ([
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int64,
        ctypes.POINTER(bp_device),
        ctypes.c_int32,
        ctypes.POINTER(ctypes.c_void_p),
    ], ctypes.c_int32),
    "bp_memory_stats_get": ([
        ctypes.c_void_p,
        ctypes.POINTER(bp_device),
        ctypes.POINTER(bp_memory_stats),
    ], ctypes.c_int32),
    "bp_memory_reset_peak": ([ctypes.c_void_p, ctypes.POINTER(bp_device)], ctypes.c_int32),
    "bp_empty_cache": ([ctypes.c_void_p, ctypes.POINTER(bp_device)], ctypes.c_int32),
    "bp_array_to_dlpack": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int32),
    "bp_array_dlpack_device": ([
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_int32),
        ctypes.POINTER(ctypes.c_int32),
    ], ctypes.c_int32),
    "bp_array_from_dlpack": ([ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int32),
    "bp_dlpack_tensor_delete": ([ctypes.c_void_p], None),
    "bp_dlpack_capsule_destructor": ([ctypes.c_void_p], None),
    "bp_safetensors_inspect": ([ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int32),
    "bp_safetensors_header_destroy": ([ctypes.c_void_p], None),
    "bp_safetensors_header_sizes": ([
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_uint64),
        ctypes.POINTER(ctypes.c_uint64),
        ctypes.POINTER(ctypes.c_uint64),
    ], ctypes.c_int32),
    "bp_safetensors_header_tensor_count": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)], ctypes.c_int32),
    "bp_safetensors_header_tensor": ([
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(bp_safetensors_tensor_info),
    ], ctypes.c_int32),
    "bp_safetensors_header_metadata_count": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)], ctypes.c_int32),
    "bp_safetensors_header_metadata": ([
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_char_p),
    ], ctypes.c_int32),
    "bp_safetensors_header_metadata_n": ([
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_size_t),
    ], ctypes.c_int32),
    "bp_safetensors_load": ([
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.POINTER(bp_device),
        ctypes.POINTER(bp_safetensors_load_options),
        ctypes.POINTER(ctypes.c_void_p),
    ], ctypes.c_int32),
    "bp_tensor_map_destroy": ([ctypes.c_void_p], None),
    "bp_tensor_map_count": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)], ctypes.c_int32),
    "bp_tensor_map_name": ([ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p)], ctypes.c_int32),
    "bp_tensor_map_name_n": ([
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_size_t),
    ], ctypes.c_int32),
    "bp_tensor_map_get": ([ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int32),
    "bp_tensor_map_get_n": ([
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_void_p),
    ], ctypes.c_int32),
    "bp_tensor_map_metadata_count": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)], ctypes.c_int32),
    "bp_tensor_map_metadata": ([
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_char_p),
    ], ctypes.c_int32),
    "bp_tensor_map_metadata_n": ([
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_size_t),
    ], ctypes.c_int32),
    "bp_safetensors_save": ([
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int64,
    ], ctypes.c_int32),
    "bp_safetensors_save_n": ([
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int64,
    ], ctypes.c_int32),
    "bp_safetensors_save_with": ([
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.POINTER(bp_save_options),
    ], ctypes.c_int32),
    "bp_batch_stream_create": ([
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(bp_batch_stream_options),
        ctypes.POINTER(ctypes.c_void_p),
    ], ctypes.c_int32),
    "bp_batch_stream_destroy": ([ctypes.c_void_p], None),
    "bp_batch_stream_next": ([
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    ], ctypes.c_int32),
    "bp_batch_stream_next_documents": ([
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    ], ctypes.c_int32),
    "bp_batch_stream_step": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)], ctypes.c_int32),
    "bp_batch_stream_state": ([
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    ], ctypes.c_int32),
    "bp_batch_stream_stats_get": ([ctypes.c_void_p, ctypes.POINTER(bp_batch_stream_stats)], ctypes.c_int32),
    "bp_batch_stream_resident_bytes": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)], ctypes.c_int32),
    "bp_batch_stream_windows": ([
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    ], ctypes.c_int32),
    "bp_trace_start": ([ctypes.c_char_p, ctypes.POINTER(bp_trace_options)], ctypes.c_int32),
    "bp_trace_stop": ([], ctypes.c_int32),
    "bp_tokens_load": ([
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.POINTER(bp_tokens_options),
        ctypes.POINTER(ctypes.c_void_p),
    ], ctypes.c_int32),
    "bp_tokens_load_files": ([
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.POINTER(bp_tokens_options),
        ctypes.POINTER(ctypes.c_void_p),
    ], ctypes.c_int32),
    "bp_token_files_destroy": ([ctypes.c_void_p], None),
    "bp_token_files_count": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)], ctypes.c_int32),
    "bp_token_files_path": ([ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p)], ctypes.c_int32),
    "bp_token_files_get": ([ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int32),
    "bp_token_files_document_starts": ([
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_size_t),
    ], ctypes.c_int32),
}


class Library(Protocol):
    """libbackplane as ctypes calls it, once PROTOTYPES is declared."""

    def bp_version(self) -> Optional[bytes]: ...
    def bp_last_error(self) -> Optional[bytes]: ...
    def bp_status_name(self, status: int, /) -> Optional[bytes]: ...
    def bp_runtime_create(self, options: Pointer[bp_runtime_options], out: Pointer[ctypes.c_void_p], /) -> int: ...
    def bp_runtime_default(self, out: Pointer[ctypes.c_void_p], /) -> int: ...
    def bp_runtime_default_set_python_paths(self, paths: VoidPointer, count: int, /) -> int: ...
    def bp_runtime_destroy(self, runtime: VoidPointer, /) -> None: ...
    def bp_runtime_config_path(self, runtime: VoidPointer, out: Pointer[ctypes.c_char_p], /) -> int: ...
    def bp_backend_count(self, runtime: VoidPointer, out: Pointer[ctypes.c_size_t], /) -> int: ...
    def bp_backend_get(self, runtime: VoidPointer, index: int, out: Pointer[bp_backend_info], /) -> int: ...
    def bp_backend_is_available(
        self,
        runtime: VoidPointer,
        name: Optional[bytes],
        out: Pointer[ctypes.c_int32],
        /,
    ) -> int: ...
    def bp_device_resolve(self, runtime: VoidPointer, selector: Optional[bytes], out: Pointer[bp_device], /) -> int: ...
    def bp_device_selector(self, device: VoidPointer, buffer: VoidPointer, capacity: int, /) -> int: ...
    def bp_device_count(
        self,
        runtime: VoidPointer,
        backend: Optional[bytes],
        out: Pointer[ctypes.c_int32],
        /,
    ) -> int: ...
    def bp_device_info_create(
        self,
        runtime: VoidPointer,
        device: Pointer[bp_device],
        out: Pointer[ctypes.c_void_p],
        /,
    ) -> int: ...
    def bp_device_info_destroy(self, info: VoidPointer, /) -> None: ...
    def bp_device_info_name(self, info: VoidPointer, /) -> Optional[bytes]: ...
    def bp_device_info_kind(self, info: VoidPointer, /) -> int: ...
    def bp_device_info_memory_total(self, info: VoidPointer, /) -> int: ...
    def bp_device_info_memory_free(self, info: VoidPointer, /) -> int: ...
    def bp_device_info_attribute_count(self, info: VoidPointer, /) -> int: ...
    def bp_device_info_attribute(
        self,
        info: VoidPointer,
        index: int,
        key: Pointer[ctypes.c_char_p],
        value: Pointer[ctypes.c_char_p],
        /,
    ) -> int: ...
    def bp_device_info_memory_kind_count(self, info: VoidPointer, /) -> int: ...
    def bp_device_info_memory_kind(self, info: VoidPointer, index: int, kind: Pointer[ctypes.c_char_p], /) -> int: ...
    def bp_default_device(
        self,
        runtime: VoidPointer,
        out: Pointer[bp_device],
        source: Pointer[ctypes.c_int32],
        /,
    ) -> int: ...
    def bp_device_source_name(self, source: int, /) -> Optional[bytes]: ...
    def bp_default_device_describe(
        self,
        runtime: VoidPointer,
        out: Pointer[bp_device],
        source: Pointer[ctypes.c_int32],
        description: Pointer[ctypes.c_char_p],
        /,
    ) -> int: ...
    def bp_default_device_set(self, runtime: VoidPointer, selector: Optional[bytes], /) -> int: ...
    def bp_default_device_push_scope(
        self,
        runtime: VoidPointer,
        selector: Optional[bytes],
        token: Pointer[ctypes.c_uint64],
        /,
    ) -> int: ...
    def bp_default_device_pop_scope(self, runtime: VoidPointer, token: int, /) -> int: ...
    def bp_default_device_push(self, runtime: VoidPointer, selector: Optional[bytes], /) -> int: ...
    def bp_default_device_pop(self, runtime: VoidPointer, /) -> int: ...
    def bp_dtype_name(self, dtype: int, /) -> Optional[bytes]: ...
    def bp_dtype_from_name(self, name: Optional[bytes], out: Pointer[ctypes.c_int32], /) -> int: ...
    def bp_dtype_bits(self, dtype: int, /) -> int: ...
    def bp_array_create(
        self,
        runtime: VoidPointer,
        device: Pointer[bp_device],
        dtype: int,
        shape: VoidPointer,
        rank: int,
        data: VoidPointer,
        size: int,
        out: Pointer[ctypes.c_void_p],
        /,
    ) -> int: ...
    def bp_array_destroy(self, array: VoidPointer, /) -> None: ...
    def bp_array_dtype(self, array: VoidPointer, out: Pointer[ctypes.c_int32], /) -> int: ...
    def bp_array_rank(self, array: VoidPointer, out: Pointer[ctypes.c_size_t], /) -> int: ...
    def bp_array_shape(self, array: VoidPointer, shape: VoidPointer, capacity: int, /) -> int: ...
    def bp_array_nbytes(self, array: VoidPointer, out: Pointer[ctypes.c_uint64], /) -> int: ...
    def bp_array_device(self, array: VoidPointer, out: Pointer[bp_device], /) -> int: ...
    def bp_array_native_address(self, array: VoidPointer, out: Pointer[ctypes.c_void_p], /) -> int: ...
    def bp_array_shares_buffer(
        self,
        first: VoidPointer,
        second: VoidPointer,
        out: Pointer[ctypes.c_int32],
        /,
    ) -> int: ...
    def bp_array_copy_to_host(self, array: VoidPointer, destination: VoidPointer, capacity: int, /) -> int: ...
    def bp_array_slice(self, array: VoidPointer, begin: int, end: int, out: Pointer[ctypes.c_void_p], /) -> int: ...
    def bp_array_device_put(
        self,
        runtime: VoidPointer,
        array: VoidPointer,
        device: Pointer[bp_device],
        progress: Optional[ctypes._CFunctionType],
        user_data: VoidPointer,
        out: Pointer[ctypes.c_void_p],
        /,
    ) -> int: ...
    def bp_array_wait(self, array: VoidPointer, /) -> int: ...
    def bp_array_is_ready(self, array: VoidPointer, out: Pointer[ctypes.c_int32], /) -> int: ...
    def bp_take_windows(
        self,
        runtime: VoidPointer,
        tokens: VoidPointer,
        offsets: VoidPointer,
        count: int,
        length: int,
        device: Pointer[bp_device],
        output: int,
        out: Pointer[ctypes.c_void_p],
        /,
    ) -> int: ...
    def bp_memory_stats_get(
        self,
        runtime: VoidPointer,
        device: Pointer[bp_device],
        out: Pointer[bp_memory_stats],
        /,
    ) -> int: ...
    def bp_memory_reset_peak(self, runtime: VoidPointer, device: Pointer[bp_device], /) -> int: ...
    def bp_empty_cache(self, runtime: VoidPointer, device: Pointer[bp_device], /) -> int: ...
    def bp_array_to_dlpack(self, array: VoidPointer, out: Pointer[ctypes.c_void_p], /) -> int: ...
    def bp_array_dlpack_device(
        self,
        array: VoidPointer,
        device_type: Pointer[ctypes.c_int32],
        device_id: Pointer[ctypes.c_int32],
        /,
    ) -> int: ...
    def bp_array_from_dlpack(
        self,
        runtime: VoidPointer,
        tensor: VoidPointer,
        out: Pointer[ctypes.c_void_p],
        /,
    ) -> int: ...
    def bp_dlpack_tensor_delete(self, tensor: VoidPointer, /) -> None: ...
    def bp_dlpack_capsule_destructor(self, capsule: VoidPointer, /) -> None: ...
    def bp_safetensors_inspect(self, path: Optional[bytes], out: Pointer[ctypes.c_void_p], /) -> int: ...
    def bp_safetensors_header_destroy(self, header: VoidPointer, /) -> None: ...
    def bp_safetensors_header_sizes(
        self,
        header: VoidPointer,
        header_size: Pointer[ctypes.c_uint64],
        data_offset: Pointer[ctypes.c_uint64],
        file_size: Pointer[ctypes.c_uint64],
        /,
    ) -> int: ...
    def bp_safetensors_header_tensor_count(self, header: VoidPointer, out: Pointer[ctypes.c_size_t], /) -> int: ...
    def bp_safetensors_header_tensor(
        self,
        header: VoidPointer,
        index: int,
        out: Pointer[bp_safetensors_tensor_info],
        /,
    ) -> int: ...
    def bp_safetensors_header_metadata_count(self, header: VoidPointer, out: Pointer[ctypes.c_int64], /) -> int: ...
    def bp_safetensors_header_metadata(
        self,
        header: VoidPointer,
        index: int,
        key: Pointer[ctypes.c_char_p],
        value: Pointer[ctypes.c_char_p],
        /,
    ) -> int: ...
    def bp_safetensors_header_metadata_n(
        self,
        header: VoidPointer,
        index: int,
        key: Pointer[ctypes.c_void_p],
        key_size: Pointer[ctypes.c_size_t],
        value: Pointer[ctypes.c_void_p],
        value_size: Pointer[ctypes.c_size_t],
        /,
    ) -> int: ...
    def bp_safetensors_load(
        self,
        runtime: VoidPointer,
        path: Optional[bytes],
        device: Pointer[bp_device],
        options: Pointer[bp_safetensors_load_options],
        out: Pointer[ctypes.c_void_p],
        /,
    ) -> int: ...
    def bp_tensor_map_destroy(self, map: VoidPointer, /) -> None: ...
    def bp_tensor_map_count(self, map: VoidPointer, out: Pointer[ctypes.c_size_t], /) -> int: ...
    def bp_tensor_map_name(self, map: VoidPointer, index: int, out: Pointer[ctypes.c_char_p], /) -> int: ...
    def bp_tensor_map_name_n(
        self,
        map: VoidPointer,
        index: int,
        out: Pointer[ctypes.c_void_p],
        size: Pointer[ctypes.c_size_t],
        /,
    ) -> int: ...
    def bp_tensor_map_get(self, map: VoidPointer, name: Optional[bytes], out: Pointer[ctypes.c_void_p], /) -> int: ...
    def bp_tensor_map_get_n(
        self,
        map: VoidPointer,
        name: Optional[bytes],
        size: int,
        out: Pointer[ctypes.c_void_p],
        /,
    ) -> int: ...
    def bp_tensor_map_metadata_count(self, map: VoidPointer, out: Pointer[ctypes.c_int64], /) -> int: ...
    def bp_tensor_map_metadata(
        self,
        map: VoidPointer,
        index: int,
        key: Pointer[ctypes.c_char_p],
        value: Pointer[ctypes.c_char_p],
        /,
    ) -> int: ...
    def bp_tensor_map_metadata_n(
        self,
        map: VoidPointer,
        index: int,
        key: Pointer[ctypes.c_void_p],
        key_size: Pointer[ctypes.c_size_t],
        value: Pointer[ctypes.c_void_p],
        value_size: Pointer[ctypes.c_size_t],
        /,
    ) -> int: ...
    def bp_safetensors_save(
        self,
        path: Optional[bytes],
        names: VoidPointer,
        arrays: VoidPointer,
        count: int,
        metadata_keys: VoidPointer,
        metadata_values: VoidPointer,
        metadata_count: int,
        /,
    ) -> int: ...
    def bp_safetensors_save_n(
        self,
        path: Optional[bytes],
        names: VoidPointer,
        name_sizes: VoidPointer,
        arrays: VoidPointer,
        count: int,
        metadata_keys: VoidPointer,
        metadata_key_sizes: VoidPointer,
        metadata_values: VoidPointer,
        metadata_value_sizes: VoidPointer,
        metadata_count: int,
        /,
    ) -> int: ...
    def bp_safetensors_save_with(
        self,
        path: Optional[bytes],
        names: VoidPointer,
        name_sizes: VoidPointer,
        arrays: VoidPointer,
        count: int,
        metadata_keys: VoidPointer,
        metadata_key_sizes: VoidPointer,
        metadata_values: VoidPointer,
        metadata_value_sizes: VoidPointer,
        metadata_count: int,
        options: Pointer[bp_save_options],
        /,
    ) -> int: ...
    def bp_batch_stream_create(
        self,
        runtime: VoidPointer,
        sources: VoidPointer,
        source_count: int,
        options: Pointer[bp_batch_stream_options],
        out: Pointer[ctypes.c_void_p],
        /,
    ) -> int: ...
    def bp_batch_stream_destroy(self, stream: VoidPointer, /) -> None: ...
    def bp_batch_stream_next(
        self,
        stream: VoidPointer,
        out: VoidPointer,
        capacity: int,
        count: Pointer[ctypes.c_size_t],
        /,
    ) -> int: ...
    def bp_batch_stream_next_documents(
        self,
        stream: VoidPointer,
        out: VoidPointer,
        pieces: VoidPointer,
        capacity: int,
        count: Pointer[ctypes.c_size_t],
        /,
    ) -> int: ...
    def bp_batch_stream_step(self, stream: VoidPointer, out: Pointer[ctypes.c_int64], /) -> int: ...
    def bp_batch_stream_state(
        self,
        stream: VoidPointer,
        buffer: VoidPointer,
        capacity: int,
        length: Pointer[ctypes.c_size_t],
        /,
    ) -> int: ...
    def bp_batch_stream_stats_get(self, stream: VoidPointer, out: Pointer[bp_batch_stream_stats], /) -> int: ...
    def bp_batch_stream_resident_bytes(self, stream: VoidPointer, out: Pointer[ctypes.c_uint64], /) -> int: ...
    def bp_batch_stream_windows(
        self,
        stream: VoidPointer,
        step: int,
        sources: VoidPointer,
        starts: VoidPointer,
        capacity: int,
        count: Pointer[ctypes.c_size_t],
        /,
    ) -> int: ...
    def bp_trace_start(self, path: Optional[bytes], options: Pointer[bp_trace_options], /) -> int: ...
    def bp_trace_stop(self) -> int: ...
    def bp_tokens_load(
        self,
        runtime: VoidPointer,
        path: Optional[bytes],
        options: Pointer[bp_tokens_options],
        out: Pointer[ctypes.c_void_p],
        /,
    ) -> int: ...
    def bp_tokens_load_files(
        self,
        runtime: VoidPointer,
        pattern: Optional[bytes],
        options: Pointer[bp_tokens_options],
        out: Pointer[ctypes.c_void_p],
        /,
    ) -> int: ...
    def bp_token_files_destroy(self, files: VoidPointer, /) -> None: ...
    def bp_token_files_count(self, files: VoidPointer, out: Pointer[ctypes.c_size_t], /) -> int: ...
    def bp_token_files_path(self, files: VoidPointer, index: int, out: Pointer[ctypes.c_char_p], /) -> int: ...
    def bp_token_files_get(self, files: VoidPointer, index: int, out: Pointer[ctypes.c_void_p], /) -> int: ...
    def bp_token_files_document_starts(
        self,
        files: VoidPointer,
        index: int,
        starts: Pointer[ctypes.c_void_p],
        count: Pointer[ctypes.c_size_t],
        /,
    ) -> int: ...
