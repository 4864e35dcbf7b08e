"""The arguments of batches() as the C struct bp_batch_stream_options holds
them. Only what C cannot say is checked here: Python types, values a C
field cannot hold, the zeros C reads as defaults; what a value means is the
library's to check, so that a bad argument reads the same on every face
(tests/batches/bad_stream_arguments.json). Errors name the argument:
_invalid for a Python-side refusal, _core in the library's own words."""
from __future__ import annotations

import ctypes
import json
import math
import numbers
import operator
from typing import Any, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union, cast

import numpy

from . import _lib
from ._array import Array
from ._errors import Error, InvalidArgumentError
from ._ranks import RankSource, default_ranks

StateLike = Union[Mapping[str, Any], str, bytes]

_INT64_LIMIT = 1 << 63
_UINT64_LIMIT = 1 << 64


def _invalid(message: str) -> Error:
    return InvalidArgumentError(f"batches(): {message}")


def _core(message: str) -> Error:
    """An error the library's BatchStream would raise, for the one value
    whose C spelling means something else (0 is "the default" in the C
    struct): the same words, so the faces read alike."""
    return InvalidArgumentError(f"BatchStream: {message}")


def _integer(name: str, value: Any, minimum: int, maximum: int = _INT64_LIMIT, wanted: str = "") -> int:
    """`value` as an int in [minimum, maximum) (by default what an int64_t
    holds); bool and float are refused. This checks what the C field can
    hold; what the value means is the library's to check."""
    if isinstance(value, bool) or isinstance(value, float):
        number = None
    else:
        try:
            number = operator.index(value)
        except TypeError:
            number = None
    if number is None or number < minimum or number >= maximum:
        if wanted:
            if number is not None and "[" not in wanted:  # an open range: say where the C field ends
                wanted += " below 2**63" if number >= maximum else " of at least -2**63"
        elif maximum == _INT64_LIMIT:
            wanted = f"an int >= {minimum}"
        elif maximum == _UINT64_LIMIT:
            wanted = f"an int in [{minimum}, 2**64)"
        else:
            wanted = f"an int in [{minimum}, {maximum - 1}]"
        raise _invalid(f"{name} must be {wanted}, got {value!r}")
    return number


def _int64(name: str, value: Any, wanted: str) -> int:
    """`value` as an int64_t; `wanted` says what the library accepts, for a
    value that is no int or does not fit."""
    return _integer(name, value, -_INT64_LIMIT, _INT64_LIMIT, wanted)


def _ranks(rank: Optional[int], world_size: Optional[int]) -> Tuple[int, int, RankSource]:
    """(rank, world_size, source): the arguments, else the defaults
    _ranks.default_ranks finds (an engine's, the environment's), else 0 and
    1; `source` is what BatchStream.rank_source reads."""
    defaults = default_ranks(rank, world_size)
    world = defaults.world_size if world_size is None else world_size
    world = 1 if world is None else _int64("world_size", world, "a positive int")
    if world == 0:
        raise _core("world_size must be at least 1, got 0")
    mine = defaults.rank if rank is None else rank
    mine = 0 if mine is None else _int64("rank", mine, "an int")
    return mine, world, defaults.source


def _sources(tokens: Union[Array, Sequence[Array]]) -> List[Array]:
    sources = [tokens] if isinstance(tokens, Array) else list(tokens) if isinstance(tokens, (list, tuple)) else None
    if not sources or not all(isinstance(source, Array) for source in sources):
        found = next((source for source in sources or [tokens] if not isinstance(source, Array)), tokens)
        how = ""
        if hasattr(found, "__dlpack__") or hasattr(found, "__array__"):
            # A NumPy array or a tensor: say how to make the Array it needs.
            how = ("; make one with backplane.from_dlpack(tokens) (shares its memory) or backplane.array(tokens) "
                   "(copies it), or load a token file with backplane.load_tokens(path)")
        raise _invalid(f"tokens must be an Array or a non-empty list of Arrays, got "
                       f"{type(found).__module__}.{type(found).__name__}{how}")
    return sources


def _state_text(state: Optional[StateLike]) -> Optional[bytes]:
    """The JSON the library resumes from (it reports what is wrong with it)."""
    if state is None:
        return None
    if isinstance(state, bytes):
        return state
    if isinstance(state, str):
        return state.encode()
    if isinstance(state, Mapping):
        try:
            return json.dumps(dict(state)).encode()
        except (TypeError, ValueError) as error:
            raise _invalid(f"state is not JSON-serialisable: {error}") from None
        except RecursionError:
            raise _invalid("state is not JSON-serialisable: it nests too deeply") from None
    raise _invalid(f"state must be a dict from state_dict() or its JSON text, got {type(state).__name__}")


def _weight(where: str, value: Any) -> float:
    """A weight as the double the library checks: an int too large for one
    is infinite, which the library refuses as it refuses inf. `where` names
    it: "weights[2]"."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _invalid(f"{where} = {value!r} is not a number")
    try:
        return float(value)
    except OverflowError:
        return math.inf if cast(int, value) > 0 else -math.inf  # an int or a Fraction beyond a double


WeightsLike = Union[Sequence[float], Sequence[Tuple[int, Sequence[float]]]]


class _Schedules(NamedTuple):
    """schedule= and weights= as the C options hold them (the arrays stay
    alive as long as the stream may be re-created)."""
    entries: "ctypes.Array[_lib.bp_schedule_entry]"
    weights: Optional["ctypes.Array[ctypes.c_double]"]
    weight_steps: Optional["ctypes.Array[ctypes.c_int64]"]
    largest_batch: int


def _schedules(batch_size: Any, context: Any, schedule: Any, weights: Any, source_count: int) -> _Schedules:
    """Python's types into C's: a schedule of (step, batch_size, context)
    entries, and weights as one list or (step, list) entries. What the
    values mean is the library's to check."""
    entries: List[Tuple[int, int, int]] = []
    if schedule is not None:  # an empty one is no schedule, as in C++ and C
        if isinstance(schedule, (str, bytes, Mapping)) or not isinstance(schedule, Sequence):
            raise _invalid(f"schedule must be a list of (step, batch_size, context), got {type(schedule).__name__}")
        for index, entry in enumerate(schedule):
            if not isinstance(entry, Sequence) or isinstance(entry, (str, bytes)) or len(entry) != 3:
                raise _invalid(f"schedule[{index}] = {_describe(entry)} is not (step, batch_size, context)")
            entries.append((_int64(f"schedule[{index}] step", entry[0], "an int"),
                            _int64(f"schedule[{index}] batch_size", entry[1], "a positive int"),
                            _int64(f"schedule[{index}] context", entry[2], "a positive int")))
    if not entries and (batch_size is None or context is None):
        raise TypeError("batches() needs batch_size and context, or schedule=[(step, batch_size, context), ...]")
    largest = max([batch_size or 0] + [entry[1] for entry in entries])
    c_entries = (_lib.bp_schedule_entry * max(len(entries), 1))(
        *[_lib.bp_schedule_entry(step=step, batch_size=size, context=length) for step, size, length in entries])
    if weights is None:
        return _Schedules(c_entries, None, None, largest)
    if isinstance(weights, (str, bytes, Mapping)) or not isinstance(weights, (Sequence, numpy.ndarray)):
        raise _invalid(f"weights must be a list of numbers or of (step, weights), got {type(weights).__name__}")
    scheduled = len(weights) > 0 and isinstance(weights[0], (tuple, list))
    if not scheduled:
        values = [_weight(f"weights[{index}]", value) for index, value in enumerate(weights)]
        return _Schedules(c_entries, (ctypes.c_double * len(values))(*values), None, largest)
    steps: List[int] = []
    flat: List[float] = []
    for index, entry in enumerate(weights):
        if (not isinstance(entry, (tuple, list)) or len(entry) != 2 or isinstance(entry[1], (str, bytes))
                or not isinstance(entry[1], (Sequence, numpy.ndarray))):
            raise _invalid(f"weights[{index}] = {_describe(entry)} is not (step, [weight, ...])")
        steps.append(_int64(f"weights[{index}] step", entry[0], "an int"))
        row = [_weight(f"weights[{index}][1][{position}]", value) for position, value in enumerate(entry[1])]
        if len(row) != source_count:
            # C takes the entries as one array of source_count each: a wrong
            # length is said here, in the core's words.
            raise _core(f"weights entry {index} (step {steps[-1]}): {len(row)} weights for {source_count} sources")
        flat.extend(row)
    return _Schedules(c_entries, (ctypes.c_double * len(flat))(*flat), (ctypes.c_int64 * len(steps))(*steps), largest)


_DOCUMENTS_WANTED = ("None, 'index' (the sources' document_starts), {'bos': token}, {'eos': token}, or a list "
                     "of document starts (one 1-D integer array per source)")


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{type(value).__name__} {text[:40]}..."


class _DocumentOptions(NamedTuple):
    """documents= as the C options hold it; `starts` keeps the arrays the
    pointers point into alive for as long as the stream may be re-created."""

    kind: int
    token: int
    starts: List["numpy.ndarray[Any, Any]"]


def _starts_array(where: str, value: Any) -> "numpy.ndarray[Any, Any]":
    """One source's document starts as a contiguous int64 array; what the
    values mean (increasing, inside the source) is the library's to check."""
    if isinstance(value, (str, bytes, Mapping)):
        raise _invalid(f"{where} must be a 1-D array or sequence of integer token offsets, got {_describe(value)}")
    try:
        array = numpy.asarray(value)
    except (TypeError, ValueError) as error:
        raise _invalid(f"{where} is not an array of integer token offsets: {error}") from None
    if array.ndim != 1:
        raise _invalid(f"{where} must be 1-D, got shape {array.shape}")
    if array.size == 0:
        return numpy.zeros(0, dtype=numpy.int64)
    if array.dtype.kind not in "iu":
        raise _invalid(f"{where} must hold integers, got dtype {array.dtype}")
    if array.dtype == numpy.uint64 and int(array.max()) >= _INT64_LIMIT:
        raise _invalid(f"{where} holds {int(array.max())}, beyond a token offset (below 2**63)")
    return numpy.ascontiguousarray(array, dtype=numpy.int64)


def _documents(documents: Any, sources: List[Array]) -> _DocumentOptions:
    """documents= checked for what the C fields can hold."""
    if documents is None:
        return _DocumentOptions(_lib.BP_DOCUMENTS_NONE, 0, [])
    if isinstance(documents, str):
        if documents != "index":
            raise _invalid(f"documents={documents!r}: expected {_DOCUMENTS_WANTED}")
        found = []
        for index, source in enumerate(sources):
            starts = getattr(source, "document_starts", None)
            if starts is None:
                raise _invalid(f"documents='index': source {index} records no documents (only Megatron .idx files "
                               "do); pass documents={'bos': token} or {'eos': token}, or the starts themselves")
            found.append(_starts_array(f"documents='index': source {index}'s document_starts", starts))
        return _DocumentOptions(_lib.BP_DOCUMENTS_STARTS, 0, found)
    if isinstance(documents, Mapping):
        if len(documents) != 1 or next(iter(documents)) not in ("bos", "eos"):
            raise _invalid(f"documents={_describe(documents)}: expected {{'bos': token}} or {{'eos': token}} (one "
                           "key: the marker that begins or ends each document)")
        key, token = next(iter(documents.items()))
        token = _int64(f"documents['{key}']", token, "an int token")
        return _DocumentOptions(_lib.BP_DOCUMENTS_BOS if key == "bos" else _lib.BP_DOCUMENTS_EOS, token, [])
    if isinstance(documents, (list, tuple)):
        if len(documents) != len(sources):  # C passes one list per source: say it as the core does
            raise _core(f"documents: {len(documents)} lists of starts for {len(sources)} sources")
        starts = [_starts_array(f"documents[{index}]", value) for index, value in enumerate(documents)]
        return _DocumentOptions(_lib.BP_DOCUMENTS_STARTS, 0, starts)
    raise _invalid(f"documents must be {_DOCUMENTS_WANTED}, got {_describe(documents)}")


class StreamOptions(NamedTuple):
    """bp_batch_stream_options (`struct`) and what its pointers point into
    (`keep`), alive together for as long as the stream may be re-created."""

    struct: _lib.bp_batch_stream_options
    keep: Tuple[Any, ...]


def stream_options(*, batch_size: int, context: int, targets: List[_lib.bp_device], dtype_code: int,
                   seed: Optional[int], rank: int, world_size: int, prefetch: int, threads: int,
                   release_pages: bool, schedules: _Schedules, schedule_count: int, documents: _DocumentOptions,
                   max_documents: int) -> StreamOptions:
    """The checked arguments as the C struct holds them (0 where C reads the
    default; seed None: the saved state's, else 0)."""
    devices = (_lib.bp_device * max(len(targets), 1))(*targets)
    starts = documents.starts
    start_pointers = (ctypes.POINTER(ctypes.c_int64) * max(len(starts), 1))(
        *[array.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)) for array in starts])
    start_counts = (ctypes.c_size_t * max(len(starts), 1))(*[len(array) for array in starts])
    weights, weight_steps = schedules.weights, schedules.weight_steps
    struct = _lib.bp_batch_stream_options(
        struct_size=ctypes.sizeof(_lib.bp_batch_stream_options),
        batch_size=batch_size,
        context=context,
        devices=ctypes.cast(devices, ctypes.POINTER(_lib.bp_device)),
        device_count=len(targets),
        dtype=dtype_code,
        seed=0 if seed is None else seed,
        seed_from_state=int(seed is None),
        rank=rank,
        world_size=world_size,
        prefetch=prefetch,
        weights=None if weights is None else ctypes.cast(weights, ctypes.POINTER(ctypes.c_double)),
        weight_count=0 if weights is None else len(weights),
        threads=threads,
        release_pages=int(release_pages),
        documents=documents.kind,
        document_token=documents.token,
        document_starts=None if not starts else ctypes.cast(start_pointers,
                                                            ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))),
        document_start_counts=None if not starts else ctypes.cast(start_counts, ctypes.POINTER(ctypes.c_size_t)),
        max_documents=max_documents,
        schedule=ctypes.cast(schedules.entries, ctypes.POINTER(_lib.bp_schedule_entry)),
        schedule_count=schedule_count,
        weight_steps=None if weight_steps is None else ctypes.cast(weight_steps, ctypes.POINTER(ctypes.c_int64)),
        weight_step_count=0 if weight_steps is None else len(weight_steps),
    )
    return StreamOptions(struct, (devices, start_pointers, start_counts, documents, schedules))
