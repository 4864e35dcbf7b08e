"""batches(sharding=...): each step as one global jax.Array per x and y,
sharded as the caller's NamedSharding says (docs/batch-stream.md, "Many
devices, many processes").

The sharding's mesh becomes the library's layout: the partition spec's first
entry names the batch axes, its second the sequence axes, and the other mesh
axes replicate. This process asks the library for one piece per distinct
shard among its own devices (replicas share a piece), so it reads only the
rows and columns its devices hold, and builds the global array from
per-device buffers with jax.make_array_from_single_device_arrays: no
device_put of the whole batch, no gather in Python. In a multi-process job
(jax.distributed) each process fills only its addressable shards, and its
place comes from the devices JAX gave it, never from $RANK.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

from ._array import Array
from ._batch_arguments import _invalid
from ._layout import CLayout
from ._runtime import Runtime


def _spec_axes(entry: Any, what: str) -> Tuple[str, ...]:
    if entry is None:
        return ()
    if isinstance(entry, str):
        return (entry,)
    if isinstance(entry, tuple) and all(isinstance(name, str) for name in entry):
        return entry
    raise _invalid(f"sharding: the partition spec's {what} entry {entry!r} is not an axis name, a tuple of them or "
                   "None")


class GlobalBatches:
    """What batches() needs to hand out global arrays for a NamedSharding:
    the layout to ask the library for, the backplane device of each piece,
    and assemble(), which turns one step's pieces into (x, y)."""

    def __init__(self, sharding: Any, runtime: Runtime) -> None:
        import jax
        mesh, spec = getattr(sharding, "mesh", None), getattr(sharding, "spec", None)
        if mesh is None or spec is None or not hasattr(mesh, "devices"):
            raise _invalid(f"sharding={sharding!r}: expected a jax.sharding.NamedSharding (a mesh and a partition "
                           "spec)")
        if len(spec) > 2:
            raise _invalid(f"sharding: the partition spec {spec} has {len(spec)} entries; a batch [B, T] has two "
                           "dimensions (rows, then the sequence)")
        self.sharding = sharding
        self.batch_axes = _spec_axes(spec[0] if len(spec) > 0 else None, "first (rows)")
        self.sequence_axes = _spec_axes(spec[1] if len(spec) > 1 else None, "second (sequence)")
        self.mesh_axes: Dict[str, int] = {str(name): int(size) for name, size in mesh.shape.items()}
        self.rows = 1
        for name in self.batch_axes:
            self.rows *= self.mesh_axes.get(name, 1)
        self.columns = 1
        for name in self.sequence_axes:
            self.columns *= self.mesh_axes.get(name, 1)
        devices = numpy.asarray(mesh.devices)
        process = jax.process_index()
        # The shards this process holds, grouped by the piece they take: the
        # devices of one group are replicas, which get the same bytes.
        groups: Dict[Tuple[int, ...], List[Tuple[int, Any]]] = {}
        names = list(self.mesh_axes)
        for position, device in enumerate(devices.flat):
            if device.process_index != process:
                continue
            coordinates = numpy.unravel_index(position, devices.shape)
            key = tuple(int(coordinates[names.index(name)]) for name in self.batch_axes + self.sequence_axes
                        if name in names)
            groups.setdefault(key, []).append((position, device))
        if not groups:
            held = sorted({device.process_index for device in devices.flat})
            raise _invalid(f"sharding: its mesh holds none of this process's devices (process {process}; the mesh's "
                           f"devices belong to processes {held})")
        self.groups: List[List[Any]] = [[device for _, device in members] for members in groups.values()]
        self.ranks: List[int] = [members[0][0] for members in groups.values()]
        self.host = all(device.platform == "cpu" for group in self.groups for device in group)
        self.targets = [self._backplane_device(runtime, group[0]) for group in self.groups]
        self._index_tables: Dict[Tuple[int, int], Dict[Tuple[int, ...], int]] = {}

    @staticmethod
    def _backplane_device(runtime: Runtime, device: Any) -> Any:
        """The backplane device a JAX device's piece is gathered to: host
        memory for JAX's CPU devices, which then copies it in (device_put);
        the same physical GPU for a GPU."""
        if device.platform == "cpu":
            return runtime.device("cpu")
        if device.platform in ("gpu", "cuda"):
            selector = f"cuda:{device.local_hardware_id}"
            try:
                return runtime.device(selector)
            except Exception as error:
                raise _invalid(f"sharding: JAX device {device} has no backplane counterpart {selector}: "
                               f"{error}") from error
        raise _invalid(f"sharding: JAX device {device} (platform {device.platform!r}) has no backplane counterpart; "
                       "backplane places pieces on cpu and cuda devices")

    def per_coordinate(self, name: str, global_batch: int) -> int:
        """A global batch size (the global array's first dimension, JAX's
        convention) as the library's batch size per batch coordinate."""
        if global_batch % self.rows != 0:
            raise _invalid(f"{name} {global_batch} (the global array's first dimension) does not split over the "
                           f"batch axes {self.batch_axes} of {self.rows} coordinates")
        return global_batch // self.rows

    def local_shapes(self, batch_size: Any, schedule: Any) -> Tuple[Any, Any]:
        """batch_size and the schedule's batch sizes, global as JAX has them,
        as the library's per batch coordinate; entries that are not
        (step, batch_size, context) triples of ints pass as they are, for
        the schedule's own checks to name."""
        if isinstance(batch_size, int) and not isinstance(batch_size, bool):
            batch_size = self.per_coordinate("batch_size", batch_size)
        if isinstance(schedule, (list, tuple)):
            schedule = [(entry[0], self.per_coordinate(f"schedule entry {index}'s batch_size", entry[1]), entry[2])
                        if isinstance(entry, (list, tuple)) and len(entry) == 3 and isinstance(entry[1], int) else entry
                        for index, entry in enumerate(schedule)]
        return batch_size, schedule

    def layout(self) -> CLayout:
        return CLayout(self.mesh_axes, self.batch_axes, self.sequence_axes, "contiguous", self.ranks)

    def assemble(self, pieces: Sequence[Array]) -> Tuple[Any, Any]:
        """One step's pieces (one per group, in order) as global (x, y)."""
        rows, length = pieces[0].shape[0], pieces[0].shape[1] - 1
        shape = (rows * self.rows, length * self.columns)
        if self.host:
            return self._assemble_from_host(pieces, shape)
        import jax
        import jax.numpy as jnp
        xs: List[Any] = []
        ys: List[Any] = []
        for group, piece in zip(self.groups, pieces):
            whole = jnp.from_dlpack(piece)  # on the piece's own GPU
            x, y = whole[:, :-1], whole[:, 1:]
            for device in group:  # replicas: copied from there
                xs.append(jax.device_put(x, device))
                ys.append(jax.device_put(y, device))
        return (jax.make_array_from_single_device_arrays(shape, self.sharding, xs),
                jax.make_array_from_single_device_arrays(shape, self.sharding, ys))

    def _assemble_from_host(self, pieces: Sequence[Array], shape: Tuple[int, int]) -> Tuple[Any, Any]:
        """For JAX's CPU devices: one make_array_from_callback each for x and
        y, handing JAX NumPy views of the host pieces, which it copies into
        each device's buffer in one batched call (a device_put per shard
        costs about twice as much). The views keep the pieces alive for as
        long as JAX reads them."""
        import jax
        group_of = self._groups_by_index(shape)
        views = [numpy.from_dlpack(piece) for piece in pieces]
        xs = [view[:, :-1] for view in views]
        ys = [view[:, 1:] for view in views]
        return (jax.make_array_from_callback(shape, self.sharding, lambda index: xs[group_of[_starts(index)]]),
                jax.make_array_from_callback(shape, self.sharding, lambda index: ys[group_of[_starts(index)]]))

    def _groups_by_index(self, shape: Tuple[int, int]) -> Dict[Tuple[int, ...], int]:
        """Which piece each shard's index (its slices' starts) takes, for a
        global shape (a schedule changes it; JAX caches the map per shape)."""
        found = self._index_tables.get(shape)
        if found is None:
            group_of_device = {device: number for number, group in enumerate(self.groups) for device in group}
            indices = self.sharding.addressable_devices_indices_map(shape)
            found = {_starts(index): group_of_device[device] for device, index in indices.items()}
            self._index_tables[shape] = found
        return found


def _starts(index: Any) -> Tuple[int, ...]:
    """A shard index (a tuple of slices, as JAX hands it) by its starts."""
    return tuple(part.start or 0 for part in index)


def refuse_rank_arguments(what: str, rank: Optional[int], world_size: Optional[int], device: Any) -> None:
    """layout= and sharding= say where this process is; refuses the
    arguments that would say it a second time. `what` is "layout" or
    "sharding"."""
    if rank is not None or world_size is not None:
        raise _invalid(f"{what}= together with rank={rank!r}, world_size={world_size!r}: the {what} says where this "
                       "process is; leave rank and world_size out")
    if isinstance(device, (list, tuple)):
        raise _invalid(f"{what}= together with device={device!r}: a layout takes one device per process, a sharding "
                       "its own devices; pass one device (or none)")
