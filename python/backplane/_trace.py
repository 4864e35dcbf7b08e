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


class Trace:
    """Recording to `path` from construction until stop() (or the end of a
    `with` block). Raises FileSystemError when the file cannot be created,
    InvalidArgumentError when a trace is already being recorded."""

    def __init__(self, path: Union[str, "os.PathLike[str]"], capacity: int = 0) -> None:
        self.path = os.fspath(path)
        options = _lib.bp_trace_options(ctypes.sizeof(_lib.bp_trace_options), capacity)
        _lib.check(_lib.lib.bp_trace_start(self.path.encode(), ctypes.byref(options)))
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


def trace(path: Union[str, "os.PathLike[str]"], capacity: int = 0) -> Trace:
    """Starts recording a trace to `path`; use as `with backplane.trace(path):`.
    `capacity` is the most events kept (0: the library's default)."""
    return Trace(path, capacity)
