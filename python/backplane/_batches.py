"""batches(): the training loop's data path, a thin layer over the library's
batch stream (bp_batch_stream_*; docs/batch-stream.md is the guide).

Each step hands out B windows of T+1 tokens as x = windows[:, :-1] and
y = windows[:, 1:] (the next-token targets): by default two contiguous
copies that share nothing (xy="copies"), or, with xy="views", two views of
the one [B, T+1] buffer, which save the copies but alias each other. The
library gathers the windows on its own threads and moves them to
the device `prefetch` steps ahead, so a step here is one C call
(bp_batch_stream_next) and a DLPack conversion. Buffers come back to the
device's caching allocator when the caller drops them, so a steady loop makes
no backend allocation per step.

Sampling is a pure function of the seed and the global step: a saved
state_dict() resumes the stream exactly, in another process too, on any rank
and any world_size that keeps the global batch B * world_size.

With documents= every window starts at a document start, and each step also
carries the document pieces of x (Documents: cu_seqlens, max_seqlen,
position_ids), for attention that stays inside a document
(bp_batch_stream_next_documents).
"""
from __future__ import annotations

import ctypes
import json
from typing import (TYPE_CHECKING, Any, Callable, Dict, Generic, List, Literal, Optional, Sequence, Tuple, TypeVar,
                    Union, cast, overload)

from . import _dtypes, _lib
from ._array import Array
from ._batch_arguments import (StateLike, WeightsLike, _core, _documents, _int64, _integer, _invalid, _schedules,
                               _sources, _state_text, stream_options)
from ._batch_convert import Converter, Target, conversion
from ._batch_targets import DEFAULT_DTYPE, check_target, chosen_dtype, host_devices, placement
from ._batch_types import BatchOptions, BatchStats, BatchStreamStats, DocumentPieces, Documents, Window
from ._errors import OutOfRangeError
from ._fork_safe import ForkSafeLock
from ._layout import Layout
from ._runtime import DeviceLike, Runtime, runtime_of

if TYPE_CHECKING:
    import numpy.typing
    import torch
    from typing_extensions import Unpack

    NumpyPair = Tuple[numpy.typing.NDArray[Any], numpy.typing.NDArray[Any]]
    TorchPair = Tuple[torch.Tensor, torch.Tensor]

__all__ = ["BatchOptions", "BatchStats", "BatchStream", "BatchStreamStats", "DocumentPieces", "Documents", "Window",
           "batches"]

# What next() hands out: (x, y) of the type to= makes, typed for the common
# calls (see BatchStream.__init__'s overloads), Any for the others.
Item = TypeVar("Item")
Tensor = TypeVar("Tensor")
MAX_PREFETCH = _lib.BP_BATCH_STREAM_MAX_PREFETCH
_UINT32_LIMIT = 1 << 32
_UINT64_LIMIT = 1 << 64
_STATE_BUFFER = 1024  # bytes; grown when a state needs more

_stream_next = _lib.lib.bp_batch_stream_next
_stream_next_documents = _lib.lib.bp_batch_stream_next_documents
# One step from the library: each device's array and, with documents, its
# (cu_seqlens, position_ids, max_seqlen).
Step = Tuple[List[Array], Optional[List[Tuple[Array, Array, int]]]]


class BatchStream(Generic[Item]):
    """An iterator of training batches over one or more token arrays; what
    batches() returns (batches is this class).

    Each next() is one step: an (x, y) pair, or a list of pairs, one per
    device, when `device` is a list; with documents=, (x, y, Documents)
    triples. state_dict() / load_state_dict() save and restore where it stands, stats() says what it did, windows(step)
    which windows a step holds. close() (or a `with` block) stops its
    threads; batches already handed out stay valid.

    next() is safe from any thread: each step goes to exactly one caller. A
    step that fails is not consumed: when the conversion raises, the next
    next() hands out the same step again.
    """

    # The overloads give editors and type checkers the type of x and y: NumPy
    # arrays by default, torch tensors for to="torch", what a callable
    # returns; a list of devices, documents or to="jax" hand out Any. The
    # implementation below is the one signature that runs and checks.
    @overload
    def __init__(self: BatchStream[NumpyPair], tokens: Union[Array, Sequence[Array]],
                 batch_size: Optional[int] = None, context: Optional[int] = None, *,
                 device: Optional[DeviceLike] = None, documents: None = None, to: Optional[Literal["numpy"]] = None,
                 **options: Unpack[BatchOptions]) -> None: ...

    @overload
    def __init__(self: BatchStream[TorchPair], tokens: Union[Array, Sequence[Array]],
                 batch_size: Optional[int] = None, context: Optional[int] = None, *,
                 device: Optional[DeviceLike] = None, documents: None = None, to: Literal["torch"],
                 **options: Unpack[BatchOptions]) -> None: ...

    @overload
    def __init__(self: BatchStream[Tuple[Tensor, Tensor]], tokens: Union[Array, Sequence[Array]],
                 batch_size: Optional[int] = None, context: Optional[int] = None, *,
                 device: Optional[DeviceLike] = None, documents: None = None, to: Callable[[Array], Tensor],
                 **options: Unpack[BatchOptions]) -> None: ...

    @overload
    def __init__(self: BatchStream[Any], tokens: Union[Array, Sequence[Array]], batch_size: Optional[int] = None,
                 context: Optional[int] = None, *, device: Union[None, DeviceLike, Sequence[DeviceLike]] = None,
                 documents: Any = None, to: Union[None, Target, Converter] = None, sharding: Any = None,
                 **options: Unpack[BatchOptions]) -> None: ...

    def __init__(self, tokens: Union[Array, Sequence[Array]], batch_size: Optional[int] = None,
                 context: Optional[int] = None, *, schedule: Optional[Sequence[Tuple[int, int, int]]] = None,
                 device: Union[None, DeviceLike, Sequence[DeviceLike]] = None, dtype: Any = DEFAULT_DTYPE,
                 seed: Optional[int] = None, prefetch: int = 2, steps: Optional[int] = None,
                 rank: Optional[int] = None, world_size: Optional[int] = None,
                 weights: Optional[WeightsLike] = None, threads: int = 0, release_pages: bool = False,
                 documents: Any = None, max_documents: int = 0, state: Optional[StateLike] = None,
                 to: Union[None, str, Converter] = None, xy: str = "copies",
                 runtime: Optional[Runtime] = None, layout: Optional[Layout] = None, sharding: Any = None) -> None:
        """Training batches of `batch_size` windows of `context` + 1 tokens
        from the 1-D token array `tokens` (or a list of them), as (x, y)
        pairs with y shifted by one token. Every argument is checked here,
        before the first step, by the library's own BatchStream (its messages
        are the C++ and C faces', word for word); the stream starts preparing
        batches at once.

        device: the target (default: the default device now), or a list of
            distinct devices: then each step yields a list with one (x, y)
            per device, the batch split evenly across them.
        dtype: the element type of x and y (default int64, what
            torch.nn.functional.cross_entropy takes as targets; for to="jax"
            while jax_enable_x64 is off, as JAX has it by default, int32, or
            uint32 for uint32 tokens, and a 64-bit dtype JAX would narrow
            past a token's value is refused; None: the tokens' own, the C++
            and C default).
        seed: the sampling key (default: a saved state's seed, else 0); the
            same seed gives the same batches.
        prefetch: steps prepared ahead of the one handed out, in [1, 64].
        steps: stop before global step `steps` (default: never); a stream
            resumed at step k hands out steps - k more.
        rank, world_size: this process's share of a data-parallel job
            (default: an initialised torch.distributed's or jax.distributed's,
            else $RANK and $WORLD_SIZE, else 0 and 1; see rank_source).
        schedule: batch size and context that change at given global
            steps: [(step, batch_size, context), ...], steps increasing from
            0; batch_size and context may then be left out (or given equal
            to the first entry). Each step's x and y have that step's shape.
        weights: one per token array, the share of windows drawn from it
            (default: in proportion to each array's length); or a mixture
            that changes: [(step, [weight, ...]), ...], steps increasing
            from 0.
        threads: gather threads (0: chosen from the machine).
        release_pages: give back the pages of gathered windows, so that a
            token file larger than RAM does not fill the process's resident
            memory.
        documents: document-aligned windows (default None: windows start
            anywhere). Every window then starts at a document start, and
            each step yields (x, y, Documents) with the pieces of x that
            lie in one document. "index": each token array's
            document_starts (Megatron .idx files record them);
            {"bos": token}: a document starts at every `token`;
            {"eos": token}: at 0 and after every `token`; or a list of
            increasing token offsets (a 1-D integer array or sequence) per
            token array.
        max_documents: with documents, the pieces each device's
            cu_seqlens describes (its length is max_documents + 1);
            0: rows * context, which no batch exceeds, and the most it
            may be (InvalidArgumentError past it). A step with more
            pieces raises OutOfRangeError at its next(), naming the step.
        state: a state_dict() (or its JSON) to continue from, bit for bit.
        to: what x and y are: "numpy" (default; refused here for a device
            that is not host memory), "torch" (refused here with a dtype
            torch lacks), "jax", or a callable turning the [B, T+1] Array into a tensor
            that supports [:, :-1] slicing (e.g. torch.from_dlpack for CUDA
            devices).
        xy: how x and y relate to the [B, T+1] batch. "copies" (default):
            two contiguous arrays of their own, so that masking y in place
            (y[y == pad] = -100) leaves x alone and y.view(-1) works; they
            cost two copies of B * T elements per step, made by the
            framework on the batch's device. "views": x = batch[:, :-1] and
            y = batch[:, 1:], no copy, but they overlap (writing one changes
            the other) and are not contiguous. JAX slices are new immutable
            arrays either way.
        layout: a Layout: this rank's piece of each step's global batch over
            a mesh with data, tensor and context parallel axes (then
            batch_size is per coordinate of the batch axes, and rank,
            world_size and a device list are refused). With
            sequence_order="head_tail" and a sequence axis, x and y are
            copies even with xy="views".
        sharding: a jax.sharding.NamedSharding: x and y are global
            jax.Arrays of shape [batch_size, T] with this sharding (the
            spec's first entry names the batch axes, its second the
            sequence axes); batch_size is the global array's first
            dimension, as JAX has it, and each process fills only its own
            devices' shards.
        """
        self._handle: Optional[ctypes.c_void_p] = None
        self._swap = ForkSafeLock()
        # next() from any thread: one caller at a time takes a step, converts
        # it and hands it out, so each step goes to exactly one caller. Both
        # locks are unlocked in a forked child, where next() must refuse at
        # once rather than wait for a parent thread that is not there.
        self._next_lock = ForkSafeLock()
        # A step whose conversion raised: handed out by the next next().
        self._pending: Optional[Step] = None
        sources = _sources(tokens)
        self._runtime = runtime if runtime is not None else runtime_of(sources[0])
        # Here only what the C struct cannot say: Python types, values a C
        # field cannot hold, and the zeros C reads as "the default".
        self._batch_size = 0 if batch_size is None else _int64("batch_size", batch_size, "a positive int")
        self._context = 0 if context is None else _int64("context", context, "a positive int")
        seed = None if seed is None else _integer("seed", seed, 0, _UINT64_LIMIT)
        self._limit = None if steps is None else _integer("steps", steps, 0)
        prefetch = _int64("prefetch", prefetch, f"an int in [1, {MAX_PREFETCH}]")
        if prefetch == 0:
            raise _core(f"prefetch must be in [1, {MAX_PREFETCH}], got 0")
        threads = _integer("threads", threads, 0, _UINT32_LIMIT)
        if not isinstance(release_pages, bool):
            raise _invalid(f"release_pages must be True or False, got {release_pages!r}")
        self._many = isinstance(device, (list, tuple))
        where = placement(self._runtime, device, self._many, rank, world_size, layout, sharding, to, documents)
        self.rank_source, self._layout, self._global = where.rank_source, where.layout, where.sharded
        targets = where.targets
        if self._global is not None:  # global jax.Arrays, of which this process fills its own devices' shards
            to = "jax"
            batch_size, schedule = self._global.local_shapes(batch_size, schedule)
            self._batch_size = 0 if batch_size is None else batch_size
        self._schedules = _schedules(batch_size, context, schedule, weights, len(sources))
        max_documents = _int64("max_documents", max_documents, "an int >= 0")
        document_options = _documents(documents, sources)
        self._documents = document_options.kind != _lib.BP_DOCUMENTS_NONE
        # Whether every target is host memory (what the conversion depends on); else one that is not.
        host, elsewhere = host_devices(self._runtime, targets)
        self._convert, self._split, self._convert_pieces = conversion(to, xy, host,
                                                                      layout is not None and layout.head_tail)
        dtype = chosen_dtype(dtype, to, sources[0]._dtype_code())
        if elsewhere is not None:  # refused now, not at every next()
            check_target(self._runtime, to, *elsewhere)
        self._sources = sources  # the library holds references of its own; these re-create the stream
        self._options = stream_options(
            batch_size=self._batch_size, context=self._context, targets=targets,
            dtype_code=0 if dtype is None else _dtypes.code(dtype), seed=seed, rank=where.rank,
            world_size=where.world_size, prefetch=prefetch, threads=threads, release_pages=release_pages,
            schedules=self._schedules, schedule_count=0 if schedule is None else len(schedule),
            documents=document_options, max_documents=max_documents)
        if self._layout is not None:
            self._layout.fill(self._options.struct)
        self._arrays_per_step = max(len(targets), 1)
        self._out = (ctypes.c_void_p * self._arrays_per_step)()
        self._pieces = (_lib.bp_batch_pieces * self._arrays_per_step)()
        self._count = ctypes.c_size_t()
        self._count_ref = ctypes.byref(self._count)
        self._state_buffer = ctypes.create_string_buffer(_STATE_BUFFER)
        self._step = 0
        self._open(_state_text(state))

    def _open(self, state: Optional[bytes]) -> None:
        """Creates the native stream (at `state`'s step when given) and
        replaces the current one only once that has worked."""
        self._options.struct.state = state
        handle = ctypes.c_void_p()
        sources = (ctypes.c_void_p * len(self._sources))(*[source._live().value for source in self._sources])
        try:
            _lib.check(_lib.lib.bp_batch_stream_create(self._runtime._live_handle(), sources, len(self._sources),
                                                       ctypes.byref(self._options.struct), ctypes.byref(handle)))
        finally:
            self._options.struct.state = None
        step = ctypes.c_int64()
        status = _lib.lib.bp_batch_stream_step(handle, ctypes.byref(step))
        if status != 0:
            _lib.lib.bp_batch_stream_destroy(handle)
            _lib.raise_status(status)
        with self._swap:
            old, self._handle = self._handle, handle
            self._step, self._pending = step.value, None
        if old is not None:
            _lib.lib.bp_batch_stream_destroy(old)

    # --- the iterator --------------------------------------------------------
    def __iter__(self) -> BatchStream[Item]:
        return self

    def __next__(self) -> Item:
        # The training loop's hot path: one C call, then the conversion, all
        # under the lock that makes next() safe from any thread.
        with self._next_lock:
            if self._limit is not None and self._step >= self._limit:
                raise StopIteration
            handle = self._handle
            if handle is None:
                raise _invalid("the stream was used after close()")
            taken = self._pending if self._pending is not None else self._take(handle)
            arrays, pieces = taken
            convert, split, convert_pieces = self._convert, self._split, self._convert_pieces
            try:
                if self._global is not None:
                    item = self._global.assemble(arrays)
                elif pieces is None:
                    items: List[Any] = [split(convert(array)) for array in arrays]
                else:  # (x, y, DocumentPieces) per device
                    items = [(*split(convert(array)), DocumentPieces(convert_pieces(cu_seqlens), max_seqlen,
                                                                     convert_pieces(position_ids)))
                             for array, (cu_seqlens, position_ids, max_seqlen) in zip(arrays, pieces)]
            except BaseException:
                # Not consumed: the next next() hands this step out again.
                self._pending = taken
                raise
            self._pending = None
            self._step += 1
        return cast(Item, item if self._global is not None else items if self._many else items[0])

    def _take(self, handle: ctypes.c_void_p) -> Step:
        """The next step's arrays from the library, and with documents each
        device's (cu_seqlens, position_ids, max_seqlen); every array owned
        before any conversion, so that none leaks when one raises."""
        out, made, count = self._out, self._pieces, self._count
        if self._documents:
            status = _stream_next_documents(handle, out, made, self._arrays_per_step, self._count_ref)
        else:
            status = _stream_next(handle, out, self._arrays_per_step, self._count_ref)
        if status != 0:
            _lib.raise_status(status)  # the library's failed step is not consumed either
        runtime = self._runtime
        arrays = [Array(runtime, ctypes.c_void_p(out[index])) for index in range(count.value)]
        if not self._documents:
            return arrays, None
        return arrays, [(Array(runtime, ctypes.c_void_p(made[index].cu_seqlens)),
                         Array(runtime, ctypes.c_void_p(made[index].position_ids)), made[index].max_seqlen)
                        for index in range(count.value)]

    def __len__(self) -> int:
        """The steps left to hand out when `steps` was given (steps - step:
        what a for loop over the stream runs, a resumed stream's included,
        and what tqdm shows as the total); TypeError for an endless stream."""
        if self._limit is None:
            raise TypeError("len() of a BatchStream without steps=: it never ends")
        return max(self._limit - self._step, 0)

    def __bool__(self) -> bool:
        return True  # a stream is a stream, with steps left or not (and len() may raise)

    @property
    def step(self) -> int:
        """The global step next() hands out next."""
        return self._step

    # --- state -----------------------------------------------------------------
    def _live(self) -> ctypes.c_void_p:
        handle = self._handle
        if handle is None:
            raise _invalid("the stream was used after close()")
        return handle

    def state_dict(self) -> Dict[str, Any]:
        """Where the stream stands: a plain dict of JSON values (json.dumps
        it to save it), small and the same on every rank. Passing it as
        `state=` to batches(), or to load_state_dict(), continues with
        bit-identical batches from this step."""
        with self._next_lock:  # the step a concurrent next() hands out is in the state, or not
            return self._state_dict()

    def _state_dict(self) -> Dict[str, Any]:
        handle = self._live()
        length = ctypes.c_size_t()
        while True:
            buffer = self._state_buffer
            status = _lib.lib.bp_batch_stream_state(handle, buffer, len(buffer), ctypes.byref(length))
            if status == OutOfRangeError.status and length.value + 1 > len(buffer):
                self._state_buffer = ctypes.create_string_buffer(length.value + 1)
                continue
            if status != 0:
                _lib.raise_status(status)
            result: Dict[str, Any] = json.loads(buffer.raw[:length.value])
            if self._pending is not None:
                result["step"] = self._step  # the native stream has handed out the step this one holds back
            return result

    def load_state_dict(self, state: StateLike) -> None:
        """Continues from a saved state (a dict from state_dict(), or its
        JSON text): the native stream is created anew at that step. The seed,
        context, batch_size * world_size, the weights and the sources must
        match it (the error names what differs); on error this stream is
        left as it was."""
        text = _state_text(state)
        if text is None:
            raise _invalid("load_state_dict(None): pass a state from state_dict()")
        self._live()  # a closed stream stays closed
        with self._next_lock:
            self._open(text)

    def stats(self) -> BatchStreamStats:
        """What the stream did so far."""
        stats = _lib.bp_batch_stream_stats(struct_size=ctypes.sizeof(_lib.bp_batch_stream_stats))
        _lib.check(_lib.lib.bp_batch_stream_stats_get(self._live(), ctypes.byref(stats)))
        return BatchStreamStats(**{field[0]: getattr(stats, field[0])
                                   for field in _lib.bp_batch_stream_stats._fields_[1:]})

    def resident_bytes(self) -> int:
        """Resident bytes, in this process, of the shared file mappings
        holding the sources (what release_pages keeps bounded; 0 for other
        memory). Reads /proc/self/smaps, milliseconds with large mappings:
        call it when you want the figure, not every step."""
        resident = ctypes.c_uint64()
        _lib.check(_lib.lib.bp_batch_stream_resident_bytes(self._live(), ctypes.byref(resident)))
        return resident.value

    def windows(self, step: int) -> List[Window]:
        """This rank's windows at global step `step` (any step, without
        preparing it), in batch order."""
        global_step = _integer("step", step, 0)
        capacity = self._schedules.largest_batch  # no step has more
        sources = (ctypes.c_int32 * capacity)()
        starts = (ctypes.c_int64 * capacity)()
        count = ctypes.c_size_t()
        _lib.check(_lib.lib.bp_batch_stream_windows(self._live(), global_step, sources, starts, capacity,
                                                    ctypes.byref(count)))
        return [Window(sources[index], starts[index]) for index in range(count.value)]

    # --- lifetime --------------------------------------------------------------
    def close(self) -> None:
        """Stops the stream's threads and releases what it prepared ahead;
        batches already handed out stay valid."""
        with self._swap:
            handle, self._handle = self._handle, None
            self._pending = None
        if handle is not None and _lib is not None and _lib.lib is not None:
            _lib.lib.bp_batch_stream_destroy(handle)

    def __del__(self) -> None:
        if getattr(self, "_swap", None) is not None:
            self.close()

    def __enter__(self) -> BatchStream[Item]:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else f"at step {self._step}"
        first = self._schedules.entries[0]
        scheduled = self._options.struct.schedule_count > 0
        shape = (f"B={first.batch_size} T={first.context} at first (a schedule)" if scheduled else
                 f"B={self._batch_size} T={self._context}")
        return f"<backplane.BatchStream {shape} {state}>"


# One signature for both spellings: batches(...) is BatchStream(...).
batches = BatchStream
