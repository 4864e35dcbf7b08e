"""Where batches() delivers and what it hands out to the framework to=
names: the devices as C structs and this process's share of the job
(placement: rank, layout, sharding), whether the devices are host memory,
the dtype, and the refusals at the call of what the framework would take
wrongly or not at all, so that no step delivers wrong numbers and no next()
fails the same way every step."""
from __future__ import annotations

import warnings
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple, Union, cast

import numpy

from . import _dtypes, _lib
from ._batch_arguments import _invalid, _ranks
from ._devices import Device
from ._dlpack import KDLCPU
from ._errors import UnsupportedError
from ._global_arrays import GlobalBatches, refuse_rank_arguments
from ._layout import CLayout, Layout
from ._ranks import RankSource
from ._runtime import DeviceLike, Runtime

Converter = Callable[[Any], Any]
_HOST_ADDRESSABLE = 1  # BP_CAPABILITY_HOST_ADDRESSABLE of plugin.h: the CPU can read the memory

# JAX with 64-bit types off (jax_enable_x64, off by default) makes each
# 64-bit integer array its 32-bit counterpart, value by value.
_JAX_32_BIT = {"int64": "int32", "uint64": "uint32"}


class _DefaultDtype:
    """batches()'s default dtype: int64 (what torch's cross_entropy takes as
    targets), or for to="jax" while JAX has 64-bit types off (its default)
    the 32-bit type that holds the tokens, where int64 batches would be
    converted to int32 on every step."""

    def __repr__(self) -> str:
        return "'int64' (int32 for to='jax' without jax_enable_x64)"


DEFAULT_DTYPE: Any = _DefaultDtype()


def device_targets(runtime: Runtime, device: Union[None, DeviceLike, Sequence[DeviceLike]],
                   many: bool) -> List[_lib.bp_device]:
    """The devices as C structs (`many`: `device` is a list); [] for the
    default device (the library picks it, unless a Python default-device
    scope names one)."""
    if many:
        resolved = [runtime.device(item) for item in cast(Sequence[DeviceLike], device)]
        if not resolved:  # a list asks for a list of pairs: of none, here
            raise _invalid("the device list is empty")
        return [target._to_c() for target in resolved]
    single = runtime._c_device(cast(Optional[DeviceLike], device))
    return [] if single is None else [single]


class Placement(NamedTuple):
    """Where a stream's batches go and which share of the job they are."""

    targets: List[_lib.bp_device]
    rank: int
    world_size: int
    rank_source: RankSource  # what BatchStream.rank_source reads
    layout: Optional[CLayout]  # this rank's piece of the global batch, from layout= or sharding=
    sharded: Optional[GlobalBatches]  # with sharding=: the global jax.Arrays each step is assembled into


def placement(runtime: Runtime, device: Union[None, DeviceLike, Sequence[DeviceLike]], many: bool,
              rank: Optional[int], world_size: Optional[int], layout: Optional[Layout], sharding: Any,
              to: Union[None, str, Converter], documents: Any) -> Placement:
    """batches()'s device, rank, world_size, layout and sharding, checked in
    this order: a layout or a sharding says the rank itself (and a sharding
    the devices), so that rank, world_size and a device list are refused
    with them; else the ranks are the arguments or the defaults (_ranks)."""
    if layout is not None and sharding is not None:
        raise _invalid("layout= and sharding= both given: pass a Layout for this rank's piece, or a "
                       "NamedSharding for global JAX arrays")
    c_layout: Optional[CLayout] = None
    if layout is not None or sharding is not None:
        refuse_rank_arguments("layout" if layout is not None else "sharding", rank, world_size, device)
        rank, world_size = 0, 1
    if layout is not None:
        if not isinstance(layout, Layout):
            raise _invalid(f"layout={layout!r}: expected a backplane.Layout")
        mine, source = layout.resolve_rank()
        c_layout = CLayout(layout.mesh, layout.batch, layout.sequence, layout.sequence_order, [mine])
    elif sharding is None:
        rank, world_size, source = _ranks(rank, world_size)
    targets = device_targets(runtime, device, many)
    if sharding is None:
        return Placement(targets, cast(int, rank), cast(int, world_size), source, c_layout, None)
    if to not in (None, "jax"):
        raise _invalid(f"sharding= with to={to!r}: a sharding makes global jax.Arrays; leave to out or pass 'jax'")
    sharded = GlobalBatches(sharding, runtime)
    c_layout, targets = sharded.layout(), [target._to_c() for target in sharded.targets]
    if documents is not None:
        raise _invalid("sharding= with documents=: global arrays of document pieces are not built yet; "
                       "use a Layout that splits only the rows for documents")
    return Placement(targets, 0, 1, "jax sharding", c_layout, sharded)


def host_devices(runtime: Runtime, targets: List[_lib.bp_device]) -> Tuple[bool, Optional[Tuple[Device, Any]]]:
    """Whether every target is host memory NumPy can read; where one is
    not, that device and its backend (None: unavailable, which the library
    refuses by name)."""
    devices = [Device._from_c(target) for target in targets] or [runtime.default_device().device]
    backends = {backend.name: backend for backend in runtime.backends() if backend.available}
    for device in devices:
        backend = backends.get(device.backend)
        if backend is None:
            continue
        declared = backend.dlpack_device_type
        if declared == KDLCPU or (declared == 0 and backend.capabilities & _HOST_ADDRESSABLE):
            continue
        return False, (device, backend)
    return True, None


def _jax_has_x64() -> bool:
    import jax
    return bool(getattr(jax.config, "jax_enable_x64"))


def _numpy_name(dtype_code: int) -> Optional[str]:
    typestr = _dtypes.numpy_dtype(dtype_code)
    return None if typestr is None else numpy.dtype(typestr).name


def _holds(wider: str, tokens: str) -> bool:
    """Whether `wider` holds every value of `tokens` (both NumPy names)."""
    return bool(numpy.can_cast(numpy.dtype(tokens), numpy.dtype(wider), "safe"))


def _jax_dtype(dtype: Any, tokens: str) -> Any:
    """The dtype for to="jax": refused where JAX without 64-bit types would
    change token values, with a warning where it converts every step."""
    if _jax_has_x64():
        return "int64" if dtype is DEFAULT_DTYPE else dtype
    if dtype is DEFAULT_DTYPE:
        # int32 where it holds every token; uint32 tokens stay uint32, which JAX has without x64.
        fitting = next((name for name in ("int32", "uint32") if _holds(name, tokens)), None)
        if fitting is not None:
            return fitting
        wanted = "int64"
    else:
        wanted = _numpy_name(_dtypes.code(tokens if dtype is None else dtype)) or ""
    narrow = _JAX_32_BIT.get(wanted)
    if narrow is None:
        return dtype
    spelled = "the default" if dtype is DEFAULT_DTYPE else f"dtype={dtype!r}"
    if not _holds(narrow, tokens):
        limit = numpy.iinfo(numpy.dtype(narrow)).max
        fix = "call jax.config.update('jax_enable_x64', True) before batches()"
        if _holds("uint32", tokens):
            fix += ", or pass dtype='uint32', which JAX has without 64-bit types"
        raise _invalid(f"to='jax' with {spelled}: the tokens are {tokens}, and JAX has 64-bit types off "
                       f"(jax_enable_x64 is False), so it would turn {wanted} batches into {narrow} and token ids "
                       f"above {limit} would arrive as wrong numbers; {fix}")
    warnings.warn(f"batches(to='jax', {spelled}): JAX has 64-bit types off (jax_enable_x64), so each batch "
                  f"arrives as {narrow} through a conversion every step; pass dtype='{narrow}' (no conversion) or "
                  "enable jax_enable_x64", stacklevel=4)
    return dtype


def _torch_dtype(dtype: Any, tokens: str) -> None:
    """Refuses an unsigned type wider than 8 bits on a torch without it
    (before 2.3), whose from_dlpack would raise on every step."""
    import torch
    wanted = tokens if dtype is None else _numpy_name(_dtypes.code(dtype)) or ""
    if wanted not in ("uint16", "uint32", "uint64") or isinstance(getattr(torch, wanted, None), torch.dtype):
        return
    spelled = f"dtype={dtype!r}" if dtype is not None else f"dtype=None (the tokens' own {tokens})"
    working = [name for name in ("int32", "int64") if _holds(name, tokens)]
    fix = (f"pass dtype={' or '.join(repr(name) for name in working)}" if working else
           f"torch has no type that holds every {tokens} token")
    raise _invalid(f"to='torch' with {spelled}: torch {torch.__version__} has no {wanted} tensors (of the "
                   f"unsigned types it has uint8 only), so no step could be converted; {fix}")


def chosen_dtype(dtype: Any, to: Union[None, str, Converter], tokens_code: int) -> Any:
    """The dtype the stream hands out (None: the tokens' own), checked
    against what `to`'s framework can take; `tokens_code` is the sources'
    dtype."""
    tokens = _numpy_name(tokens_code)
    if to == "jax" and tokens is not None:
        return _jax_dtype(dtype, tokens)
    if to == "torch" and tokens is not None and dtype is not DEFAULT_DTYPE:
        _torch_dtype(dtype, tokens)
    return "int64" if dtype is DEFAULT_DTYPE else dtype


# What takes a batch from any device: a callable that copies it to host memory.
COPYING_CALLABLE = ("to= a callable that takes the Array and copies it to a host device (e.g. lambda array: "
                    "torch.from_dlpack(array.device_put('cpu').wait()))")


def export_refusal(runtime: Any, device: Any) -> Optional[str]:
    """Why the library cannot export `device`'s arrays through DLPack (its
    backend declares no DLPack device type and is no host memory, or gives
    its memory no address, as OpenCL's cl_mem), in its own words; None where
    it can. Found by exporting one byte there: the library's rule, not a
    copy of it."""
    probe = runtime.array(b"\0", "U8", (1,), device=device)
    try:
        probe.__dlpack__()
        return None
    except UnsupportedError as error:
        return str(error.message)
    finally:
        probe.close()


def check_target(runtime: Any, to: Union[None, str, Converter], device: Any, backend: Any) -> None:
    """Refuses, before the first step, a `to` that could not take batches on
    `device` (not host memory): "numpy" never, "torch" and "jax" where
    DLPack cannot export them. A callable is the caller's to judge."""
    if callable(to):
        return
    refusal = export_refusal(runtime, device)
    if to in ("torch", "jax") and refusal is not None:
        raise _invalid(f"to={to!r} takes each batch through DLPack, which {device} cannot give: {refusal}; pass "
                       f"device= a host device ('cpu'), or {COPYING_CALLABLE}")
    if to is None or to == "numpy":
        works = COPYING_CALLABLE if refusal is not None else "to='torch', to='jax' or a callable that takes the Array"
        raise _invalid(f"to='numpy' needs host memory, but {device} is not host memory (backend {backend.name} "
                       f"declares DLPack device type {backend.dlpack_device_type}): pass {works}")
