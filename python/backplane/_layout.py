"""Layout: how one step's global batch [G, T] is laid out over a mesh of
ranks, for data, tensor and context parallel jobs (docs/batch-stream.md,
"Many devices, many processes"). The library takes the layout itself
(bp_batch_stream_options.mesh ...) and checks its values, so a bad layout
reads the same on every face; here are only the Python types and where this
process's rank comes from."""
from __future__ import annotations

import ctypes
from typing import Mapping, Optional, Sequence, Tuple, Union

from . import _lib
from ._batch_arguments import _int64, _invalid
from ._ranks import RankSource, _from_environment, _torch_ranks

SEQUENCE_ORDERS = {"contiguous": _lib.BP_SEQUENCE_CONTIGUOUS, "head_tail": _lib.BP_SEQUENCE_HEAD_TAIL}
Axes = Union[None, str, Sequence[str]]


def _axis_names(name: str, value: Axes) -> Tuple[str, ...]:
    """One axis name, a tuple of them, or None (no axis)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise _invalid(f"Layout {name}={value!r}: expected an axis name, a tuple of axis names or None")


class Layout:
    """A step's global batch over a mesh of ranks.

    mesh: an ordered mapping of axis name to size ({"dp": 2, "cp": 2, "tp":
        2}); ranks are numbered row-major in this order, as torch's
        init_device_mesh and JAX's Mesh number them.
    batch: the axis (or tuple of axes) that splits the rows: batch
        coordinate b takes rows [b * batch_size, (b + 1) * batch_size).
    sequence: the axis (or axes) that splits the columns: x's T / cp of them
        for coordinate c (y the same, shifted by one token).
    rank: this process's place in the mesh; None: torch.distributed's rank
        when a process group is initialised, else $RANK, else 0.
    sequence_order: "contiguous" (coordinate c takes the c-th of cp equal
        chunks) or "head_tail" (of 2 cp chunks, c and 2 cp - 1 - c, which
        balances causal attention's work; x and y are then those two chunks
        one after the other).

    Axes in neither list replicate: their ranks get identical bytes. With a
    layout, batch_size is per batch coordinate (the global batch is
    batch_size times the batch axes' sizes), as with rank and world_size.
    """

    def __init__(self, mesh: Mapping[str, int], batch: Axes = None, sequence: Axes = None, rank: Optional[int] = None,
                 sequence_order: str = "contiguous") -> None:
        if not isinstance(mesh, Mapping) or not mesh:
            raise _invalid(f"Layout mesh={mesh!r}: expected an ordered mapping of axis name to size, e.g. "
                           "{'dp': 2, 'tp': 2}")
        for name, size in mesh.items():
            if not isinstance(name, str):
                raise _invalid(f"Layout mesh axis {name!r}: axis names are str")
            _int64(f"Layout mesh axis {name!r}'s size", size, "a positive int")
        self.mesh = dict(mesh)
        self.batch = _axis_names("batch", batch)
        self.sequence = _axis_names("sequence", sequence)
        self.rank = None if rank is None else _int64("Layout rank", rank, "an int")
        if sequence_order not in SEQUENCE_ORDERS:
            raise _invalid(f"Layout sequence_order={sequence_order!r}: expected 'contiguous' or 'head_tail'")
        self.sequence_order = sequence_order

    @property
    def size(self) -> int:
        """The mesh's positions: the world size of the job it lays out."""
        size = 1
        for axis in self.mesh.values():
            size *= axis
        return size

    @property
    def head_tail(self) -> bool:
        """Whether pieces hold two chunks of each row (head_tail over a
        sequence axis of more than one rank)."""
        columns = 1
        for name in self.sequence:
            columns *= self.mesh.get(name, 1)
        return self.sequence_order == "head_tail" and columns > 1

    def resolve_rank(self) -> Tuple[int, RankSource]:
        """(this process's rank, where it came from): the argument, else an
        initialised torch.distributed's (whose world size must be the mesh's
        size), else $RANK, else 0."""
        if self.rank is not None:
            return self.rank, "argument"
        engine = _torch_ranks()
        if engine is not None:
            if engine[1] != self.size:
                raise _invalid(f"Layout mesh {self._described()} has {self.size} ranks but torch.distributed's world "
                               f"size is {engine[1]}: the mesh must cover the process group")
            return engine[0], "torch.distributed"
        found = _from_environment("RANK")
        return (0, "default") if found is None else (found, "environment")

    def _described(self) -> str:
        return " x ".join(f"{name}={size}" for name, size in self.mesh.items())

    def __repr__(self) -> str:
        return (f"Layout(mesh={self.mesh!r}, batch={self.batch!r}, sequence={self.sequence!r}, rank={self.rank!r}, "
                f"sequence_order={self.sequence_order!r})")


class CLayout:
    """The C fields of a layout, with the ctypes arrays they point into kept
    alive as long as this object (hold it as long as the options)."""

    def __init__(self, mesh: Mapping[str, int], batch: Sequence[str], sequence: Sequence[str], order: str,
                 ranks: Sequence[int]) -> None:
        self._names = [name.encode() for name in mesh]
        self._mesh = (_lib.bp_mesh_axis * len(mesh))(
            *[_lib.bp_mesh_axis(name, size) for name, size in zip(self._names, mesh.values())])
        # An empty list is an unused array of one, never NULL with a count.
        self._batch = (ctypes.c_char_p * max(len(batch), 1))(*[item.encode() for item in batch])
        self._sequence = (ctypes.c_char_p * max(len(sequence), 1))(*[item.encode() for item in sequence])
        self._ranks = (ctypes.c_int64 * len(ranks))(*ranks)
        self._counts = (len(mesh), len(batch), len(sequence), len(ranks))
        self._order = SEQUENCE_ORDERS[order]

    def fill(self, options: _lib.bp_batch_stream_options) -> None:
        mesh_count, batch_count, sequence_count, rank_count = self._counts
        options.mesh = ctypes.cast(self._mesh, ctypes.POINTER(_lib.bp_mesh_axis))
        options.mesh_axis_count = mesh_count
        options.batch_axes = ctypes.cast(self._batch, ctypes.POINTER(ctypes.c_char_p))
        options.batch_axis_count = batch_count
        options.sequence_axes = ctypes.cast(self._sequence, ctypes.POINTER(ctypes.c_char_p))
        options.sequence_axis_count = sequence_count
        options.sequence_order = self._order
        options.mesh_ranks = ctypes.cast(self._ranks, ctypes.POINTER(ctypes.c_int64))
        options.mesh_rank_count = rank_count
