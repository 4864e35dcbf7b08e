"""The types around a batch stream, apart from it so that they read without
it (_batches re-exports them): what it hands out besides x and y (its
counters, BatchStreamStats; the windows of a step, Window; the document
pieces of a step with documents, DocumentPieces) and its options for the
type checker (BatchOptions)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Sequence, Tuple, TypedDict

from ._batch_arguments import StateLike, WeightsLike
from ._layout import Layout
from ._runtime import Runtime


@dataclass(frozen=True)
class BatchStreamStats:
    """What a stream did so far (C++ BatchStreamStats, C
    bp_batch_stream_stats): counters, cheap to read every step. Seconds are
    wall time on a steady clock. The resident size of the sources is
    BatchStream.resident_bytes(), a slower call."""

    steps: int  # batches handed out
    windows: int  # windows handed out
    bytes: int  # bytes of those batches, as handed out
    wait_seconds: float  # inside next(), waiting for data
    gather_seconds: float  # gathering windows (summed over steps, not threads)
    transfer_seconds: float  # from a batch's copy issue to its arrival
    elapsed_seconds: float  # from the first next() to the last return
    windows_per_second: float
    data_stall_fraction: float  # wait_seconds / elapsed_seconds, in [0, 1]
    read_bytes: int  # bytes gathered from the sources, prefetched steps included (a piece's own columns)
    # The global step of the batch handed out last: the stream's step - 1 (-1
    # before a new stream's first next()).
    step: int
    # The epoch that step draws in: 0 in the first pass over the window
    # starts, 1 in the second, ... (a context change starts another; with
    # weights, the least of the sources' own). docs/batch-stream.md, "Epochs".
    epoch: int


BatchStats = BatchStreamStats  # the name this class had before it took the C++ one


class Window(NamedTuple):
    """One window of a step: the index of its source and its first token."""

    source: int
    start: int


class DocumentPieces(NamedTuple):
    """The document pieces of one device's x (with batches(documents=...)):
    the runs of its rows * T tokens, flattened, that lie in one document;
    every row starts a piece. The layout flash-attn's varlen functions take.

    With a layout whose sequence axes cut the columns, they describe the
    piece's own tokens: its rows * L (L: its columns, each row's chunks one
    after the other). position_ids are then each token's place in its
    document counted in the whole window (what the unsliced batch has at
    those columns, so that rotary embeddings match it), and cu_seqlens cuts
    where a document starts, where a row starts and where two chunks that
    do not meet are joined (head_tail), so that each piece is contiguous in
    the window.

    cu_seqlens: int32 [max_documents + 1]: 0, each piece's end, then rows * T
        (rows * L) repeated (pieces of no tokens), on x's device, converted
        as x is.
    max_seqlen: the longest piece, in tokens.
    position_ids: int32 [rows, T] ([rows, L]): 0 at each piece's first
        token, counting up (without a sequence axis).
    """

    cu_seqlens: Any
    max_seqlen: int
    position_ids: Any


Documents = DocumentPieces  # the name this class had before it took the C++ one


class BatchOptions(TypedDict, total=False):
    """The keyword arguments of batches() that do not change what x and y
    are, for the type checker (BatchStream.__init__ says what each does).
    Every name and type here is one of __init__'s; a test holds the two
    lists equal."""

    schedule: Optional[Sequence[Tuple[int, int, int]]]
    dtype: Any
    seed: Optional[int]
    prefetch: int
    steps: Optional[int]
    rank: Optional[int]
    world_size: Optional[int]
    weights: Optional[WeightsLike]
    threads: int
    release_pages: bool
    max_documents: int
    state: Optional[StateLike]
    xy: str
    runtime: Optional[Runtime]
    layout: Optional[Layout]
