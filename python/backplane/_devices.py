"""Devices, backends and the default device as Python values."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, cast, get_args

from . import _lib
from ._errors import UnavailableError, UnsupportedError

# What discovery says of a plugin: the C API's status_name of each
# BP_BACKEND_* status (C++ to_string(BackendStatus)), the whole set.
BackendStatus = Literal["available", "unavailable", "incompatible", "failed", "disabled", "shadowed"]
# Which precedence level decided the default device: bp_device_source_name
# of each BP_SOURCE_* level (C++ to_string(DeviceSource)), highest first.
DeviceSourceLevel = Literal["scoped override", "set in code", "BACKPLANE_DEFAULT_DEVICE", "config default_device",
                            "highest-priority available backend", "local rank"]
_DEVICE_SOURCE_LEVELS = get_args(DeviceSourceLevel)

# The backends whose memory torch and JAX name, and what they call it.
_FRAMEWORK_BACKENDS = ("cpu", "cuda")


def _unrepresentable(device: "Device", framework: str) -> UnsupportedError:
    return UnsupportedError(f"{framework} has no device for backplane device {device} (backend {device.backend}): "
                            f"only the backends {' and '.join(_FRAMEWORK_BACKENDS)} have one")


@dataclass(frozen=True)
class Device:
    """A device: backend name and ordinal. str() is its selector, "cpu:0",
    which torch.device() and backplane's own calls accept. torch() and jax()
    give the framework's device where batches on this device land."""

    backend: str
    ordinal: int = 0

    def __str__(self) -> str:
        return f"{self.backend}:{self.ordinal}"

    def torch(self) -> Any:
        """The torch.device of this device: torch.device("cuda", N) for
        cuda:N, torch.device("cpu") for any cpu device (torch has one CPU
        device; a cpu:N batch is a CPU tensor). Put the model there so it
        meets the batches of batches(..., device=this, to="torch").
        UnsupportedError, naming the backend, for a backend torch has no
        device for."""
        if self.backend not in _FRAMEWORK_BACKENDS:
            raise _unrepresentable(self, "torch")
        import torch
        return torch.device("cpu") if self.backend == "cpu" else torch.device("cuda", self.ordinal)

    def jax(self) -> Any:
        """The jax.Device of this device: jax.devices("cuda")[N] for cuda:N,
        JAX's first CPU device for any cpu device (where a host batch lands
        through DLPack). UnsupportedError, naming the backend, for a backend
        JAX has no device for; UnavailableError when this JAX has no such
        device (a CPU-only jaxlib asked for cuda)."""
        if self.backend not in _FRAMEWORK_BACKENDS:
            raise _unrepresentable(self, "JAX")
        import jax
        index = 0 if self.backend == "cpu" else self.ordinal
        try:
            found = jax.devices(self.backend)
        except RuntimeError as error:
            raise UnavailableError(f"JAX has no {self.backend} devices for backplane device {self}: "
                                   f"jax.devices({self.backend!r}) raised: {error}") from None
        if index >= len(found):
            raise UnavailableError(f"JAX has {len(found)} {self.backend} device(s), none for backplane device {self}")
        return found[index]

    def _to_c(self) -> _lib.bp_device:
        name = _lib.c_text("Device", "backend", self.backend)
        if len(name) >= _lib.BACKEND_NAME_CAPACITY:
            raise ValueError(f"backend name {self.backend!r} is too long")
        return _lib.bp_device(name, self.ordinal)

    @staticmethod
    def _from_c(device: _lib.bp_device) -> "Device":
        return Device(_lib.text(device.backend), device.ordinal)


@dataclass(frozen=True)
class Backend:
    """One plugin found by discovery, whatever its status."""

    name: str
    status: BackendStatus
    reason: str
    plugin_path: str
    abi_version: str
    priority: int
    capabilities: int
    # The DLPack device type the plugin declares for its memory (1 kDLCPU,
    # 2 kDLCUDA, ...); 0 when it declares none.
    dlpack_device_type: int = 0
    # Where it came from in words ("config /etc/x.toml:12:1 [pjrt.cpu]",
    # "xla_cpu_pjrt 0.0.1 (entry point xla_plugins:xla_cpu_pjrt)"); "" for a
    # plugin of the search path no package put there.
    origin_detail: str = ""
    # The PJRT library a pjrt_<name> backend drives; "" otherwise.
    library: str = ""

    @property
    def available(self) -> bool:
        """Whether the backend can be used (status "available")."""
        return self.status == "available"


@dataclass(frozen=True)
class DeviceInfo:
    device: Device
    name: str
    kind: str  # "cpu", "gpu", "accelerator"
    memory_total: int
    memory_free: Optional[int]  # None: the backend cannot tell
    attributes: Dict[str, str] = field(default_factory=dict)
    # The device's memory kinds, the default first: "host", "device",
    # "pinned_host", "unpinned_host".
    memory_kinds: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class DefaultDevice:
    """The default device and what decided it, in words: the precedence
    level ("scoped override", "set in code", "BACKPLANE_DEFAULT_DEVICE",
    "config default_device", "highest-priority available backend") or, for
    a data-parallel rank, the variable that chose the device and its value
    ("LOCAL_RANK=1"). `level` is the level alone, a DeviceSourceLevel."""

    device: Device
    source: str  # a str, not a Literal: the local rank's words hold a value

    @property
    def level(self) -> DeviceSourceLevel:
        """The precedence level that decided: `source`, or "local rank"
        where `source` names a local-rank variable."""
        return cast(DeviceSourceLevel, self.source) if self.source in _DEVICE_SOURCE_LEVELS else "local rank"

    def __str__(self) -> str:
        """The device's selector ("cuda:0"), as str(Device)."""
        return str(self.device)

    def torch(self) -> Any:
        """The default device as a torch.device (Device.torch())."""
        return self.device.torch()

    def jax(self) -> Any:
        """The default device as a jax.Device (Device.jax())."""
        return self.device.jax()


@dataclass(frozen=True)
class MemoryStats:
    """The caching allocator of one device (bytes; peak since the runtime
    started or reset_peak_memory_stats), and the device's own memory as its
    backend reports it at the time of the call, whoever holds it (cached
    blocks count as used). memory_free is None when the backend cannot tell:
    opencl, and cuda before the device is first used in this process."""

    in_use: int
    cached: int
    peak: int
    backend_allocations: int
    backend_frees: int
    pinned_in_use: int
    pinned_cached: int
    pinned_backend_allocations: int
    memory_total: int
    memory_free: Optional[int]


_KINDS = {0: "cpu", 1: "gpu", 2: "accelerator"}


def backend_from_c(info: _lib.bp_backend_info) -> Backend:
    return Backend(
        name=_lib.text(info.name),
        # One of BackendStatus: tests/python/test_runtime.py holds the type
        # equal to the header's statuses.
        status=cast(BackendStatus, _lib.text(info.status_name)),
        reason=_lib.text(info.reason),
        plugin_path=_lib.text(info.plugin_path),
        abi_version=_lib.text(info.abi_version),
        priority=info.priority,
        capabilities=info.capabilities,
        dlpack_device_type=info.dlpack_device_type,
        origin_detail=_lib.text(info.origin_detail),
        library=_lib.text(info.library),
    )


def device_info_from_c(handle: ctypes.c_void_p, device: Device) -> DeviceInfo:
    lib = _lib.lib
    attributes: Dict[str, str] = {}
    for index in range(lib.bp_device_info_attribute_count(handle)):
        key = ctypes.c_char_p()
        value = ctypes.c_char_p()
        _lib.check(_lib.lib.bp_device_info_attribute(handle, index, ctypes.byref(key), ctypes.byref(value)))
        attributes[_lib.text(key.value)] = _lib.text(value.value)
    memory_kinds: List[str] = []
    for index in range(lib.bp_device_info_memory_kind_count(handle)):
        kind = ctypes.c_char_p()
        _lib.check(lib.bp_device_info_memory_kind(handle, index, ctypes.byref(kind)))
        memory_kinds.append(_lib.text(kind.value))
    return DeviceInfo(
        device=device,
        name=_lib.text(lib.bp_device_info_name(handle)),
        kind=_KINDS.get(lib.bp_device_info_kind(handle), "unknown"),
        memory_total=lib.bp_device_info_memory_total(handle),
        memory_free=known_memory(lib.bp_device_info_memory_free(handle)),
        attributes=attributes,
        memory_kinds=memory_kinds,
    )


def known_memory(figure: int) -> Optional[int]:
    return None if figure == _lib.BP_MEMORY_UNKNOWN else figure


def memory_stats_from_c(stats: Any) -> MemoryStats:
    figures = {field[0]: getattr(stats, field[0]) for field in _lib.bp_memory_stats._fields_[1:]}
    figures["memory_free"] = known_memory(figures["memory_free"])
    return MemoryStats(**figures)
