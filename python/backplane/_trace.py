"""Recording a timeline for ui.perfetto.dev and chrome://tracing.

    with backplane.trace("out.json"):
        ...                      # transfers, batches, loads
    # out.json is written when the block ends

docs/tracing.md describes the file. One trace is recorded at a time per
process; BACKPLANE_TRACE=out.json does the same without code.
"""
from __future__ import annotations

import ctypes
import os
from types import TracebackType
from typing import Optional, Type, Union

from . import _lib
from ._errors import InvalidArgumentError

PathArgument = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


def _encoded_path(path: PathArgument) -> bytes:
    """`path` as the bytes the C call takes; a NUL byte, which C would cut the
    path at, is refused."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"trace: path must be str, bytes or os.PathLike, got {type(path).__name__}")
    encoded = os.fsencode(os.path.expanduser(path))  # ~ as a shell reads it
    if b"\0" in encoded:
        raise InvalidArgumentError(f"trace: path {os.fsdecode(encoded)!r} holds a NUL byte")
    return encoded


def _checked_capacity(capacity: int) -> int:
    if isinstance(capacity, bool) or not isinstance(capacity, int):
        raise TypeError(f"trace: capacity must be an int, got {type(capacity).__name__}")
    if not 0 <= capacity < 2**64:
        raise InvalidArgumentError(
            f"trace: capacity must be an event count in [0, 2**64) (0: the default, {Trace.DEFAULT_CAPACITY}), "
            f"got {capacity}")
    return capacity


class Trace:
    """Recording to `path` from construction until stop() (or the end of a
    `with` block). `path` may hold %p (the process id), %r (the local rank)
    and %h (the host name), and is resolved against the current directory
    now. Raises FileSystemError when the file cannot be created,
    InvalidArgumentError when a trace is already being recorded, for a path
    with a NUL byte or naming what is not a regular file, and for a
    capacity out of range; TypeError for arguments of the wrong type."""

    #: The events kept when `capacity` is 0 (BP_TRACE_DEFAULT_CAPACITY).
    DEFAULT_CAPACITY: int = _lib.BP_TRACE_DEFAULT_CAPACITY

    def __init__(self, path: PathArgument, capacity: int = 0) -> None:
        encoded = _encoded_path(path)
        self.path = os.fsdecode(encoded)
        options = _lib.bp_trace_options(ctypes.sizeof(_lib.bp_trace_options), _checked_capacity(capacity))
        _lib.check(_lib.lib.bp_trace_start(encoded, ctypes.byref(options)))
        self._recording = True

    def stop(self) -> None:
        """Stops recording and writes the file (once; later calls do nothing)."""
        if self._recording:
            self._recording = False
            _lib.check(_lib.lib.bp_trace_stop())

    def __enter__(self) -> "Trace":
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.stop()


def trace(path: PathArgument, capacity: int = 0) -> Trace:
    """Starts recording a trace to `path` (str, bytes or a path object); use
    as `with backplane.trace(path):`. `capacity` is the most events kept
    (0: Trace.DEFAULT_CAPACITY, 1,048,576)."""
    return Trace(path, capacity)
