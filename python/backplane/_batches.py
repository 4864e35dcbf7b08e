"""batches(): the training loop's sampler as one call.

Each step draws B window starts, gathers the B windows of T+1 tokens with one
take_windows onto the target device, and hands out x = windows[:, :-1] and
y = windows[:, 1:] (the next-token targets) as views of that one buffer.
Steps run `prefetch` ahead: step k+1's transfer is issued before step k is
handed out, so the copy overlaps the training step. Buffers come back to the
device's caching allocator when the caller drops them, so a steady loop makes
no backend allocation per step.

Sampling is deterministic: a seed gives the same stream on every run. With
data-parallel ranks every rank draws the same global batch of
B * world_size distinct starts and keeps its own B, so ranks never share a
window within a step and need no communication.
"""
from __future__ import annotations

import collections
import os
from typing import Any, Callable, Deque, Iterator, List, Optional, Sequence, Tuple, Union, cast

import numpy

from . import _lib
from ._array import Array
from ._devices import Device
from ._runtime import DeviceLike, Runtime

Converter = Callable[[Array], Any]


def _converter(to: Union[None, str, Converter]) -> Converter:
    if callable(to):
        return to
    if to is None or to == "numpy":
        return lambda array: numpy.from_dlpack(array)
    if to == "torch":
        import torch
        return lambda array: torch.from_dlpack(array)
    if to == "jax":
        import jax.numpy as jnp
        return lambda array: jnp.from_dlpack(array)
    raise _lib.error_for(1, f"batches(): to={to!r}: expected 'numpy', 'torch', 'jax' or a callable taking an Array",
                         "invalid argument")


def _rank_from_environment(name: str) -> Optional[int]:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise _lib.error_for(1, f"batches(): {name}={value!r} is not an integer", "invalid argument") from None
    return number


def _check_rank(rank: Optional[int], world_size: Optional[int]) -> Tuple[int, int]:
    if rank is None:
        rank = _rank_from_environment("RANK")
    if world_size is None:
        world_size = _rank_from_environment("WORLD_SIZE")
    rank = 0 if rank is None else rank
    world_size = 1 if world_size is None else world_size
    if world_size < 1 or not 0 <= rank < world_size:
        raise _lib.error_for(1, f"batches(): rank {rank} is not in [0, world_size={world_size})", "invalid argument")
    return rank, world_size


def batches(tokens: Array, batch_size: int, context: int, *, device: Union[None, DeviceLike,
            Sequence[DeviceLike]] = None, dtype: Any = "int64", seed: int = 0, prefetch: int = 2,
            steps: Optional[int] = None, rank: Optional[int] = None, world_size: Optional[int] = None,
            to: Union[None, str, Converter] = None, runtime: Optional[Runtime] = None) -> Iterator[Any]:
    """Yields (x, y) training batches of `batch_size` windows of `context`
    tokens from the 1-D array `tokens` (any device; a cpu memory map is the
    usual), y shifted by one token.

    device: the target (default: the default device when the iteration
        starts), or a list of devices: then each step yields a list with one
        (x, y) per device, the batch split across them (B must divide evenly).
    dtype: the element type of x and y (default int64, for embeddings).
    seed: the stream of window starts; the same seed gives the same batches.
    prefetch: how many steps are in flight ahead of the one handed out (>= 1).
    steps: stop after this many steps (default: never).
    rank, world_size: this process's share of a data-parallel job (default:
        $RANK and $WORLD_SIZE when set, else 0 and 1); ranks draw disjoint
        windows from one global batch per step.
    to: what x and y are: "numpy" (default, host devices), "torch", "jax",
        or a callable turning the [B, T+1] Array into a tensor that supports
        [:, :-1] slicing (e.g. torch.from_dlpack for CUDA devices).
    """
    runtime = runtime or tokens._runtime
    if batch_size < 1 or context < 1:
        raise _lib.error_for(1, f"batches(): batch_size ({batch_size}) and context ({context}) must be positive",
                             "invalid argument")
    if prefetch < 1:
        raise _lib.error_for(1, f"batches(): prefetch must be at least 1, got {prefetch}", "invalid argument")
    shape = tokens.shape
    if len(shape) != 1:
        raise _lib.error_for(1, f"batches(): tokens must be 1-D, got shape {list(shape)}", "invalid argument")
    window = context + 1
    if shape[0] < window:
        raise _lib.error_for(7, f"batches(): {shape[0]} tokens are fewer than one window of context+1 = {window}",
                             "out of range")
    rank, world_size = _check_rank(rank, world_size)
    targets: List[Device]
    many = isinstance(device, (list, tuple))
    if many:
        targets = [runtime.device(item) for item in cast(Sequence[DeviceLike], device)]
        if not targets or batch_size % len(targets) != 0:
            raise _lib.error_for(1, f"batches(): batch_size {batch_size} does not split evenly over "
                                    f"{len(targets)} device(s)", "invalid argument")
    else:
        single = cast(Optional[DeviceLike], device)
        targets = [runtime.device(single) if single is not None else runtime.default_device().device]
    convert = _converter(to)
    starts = shape[0] - window + 1
    global_batch = batch_size * world_size
    if global_batch > starts:
        raise _lib.error_for(7, f"batches(): {global_batch} distinct windows per step do not fit in {starts} "
                                "window starts", "out of range")
    generator = numpy.random.Generator(numpy.random.PCG64(seed))
    share = batch_size // len(targets)

    def issue() -> List[Array]:
        drawn = generator.choice(starts, size=global_batch, replace=False)
        mine = numpy.ascontiguousarray(drawn[rank * batch_size:(rank + 1) * batch_size], dtype=numpy.int64)
        return [runtime.take_windows(tokens, mine[index * share:(index + 1) * share], window, target, dtype)
                for index, target in enumerate(targets)]

    def hand_out(step: List[Array]) -> Any:
        pairs = []
        for array in step:
            tensor = convert(array.wait())
            pairs.append((tensor[:, :-1], tensor[:, 1:]))
        return pairs if many else pairs[0]

    in_flight: Deque[List[Array]] = collections.deque()
    issued = 0
    while steps is None or issued < steps:
        in_flight.append(issue())
        issued += 1
        if len(in_flight) > prefetch:
            yield hand_out(in_flight.popleft())
    while in_flight:
        yield hand_out(in_flight.popleft())
