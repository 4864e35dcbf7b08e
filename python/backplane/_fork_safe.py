"""A lock that fork() leaves unlocked in the child.

fork() copies a process with only the forking thread in it. A
threading.Lock that another thread held at that moment stays held in the
child for ever: a batch stream's next() or state_dict() would then hang
there, where it must say at once that the stream belongs to the parent (the
library refuses the step). Each ForkSafeLock is replaced by a fresh lock in
the child, as CPython does for its own locks; nobody else is there to hold
it.
"""
import os
import threading
import weakref
from types import TracebackType
from typing import Optional, Type


class ForkSafeLock:
    """threading.Lock as a context manager, unlocked in a forked child."""

    _every: "weakref.WeakSet[ForkSafeLock]" = weakref.WeakSet()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        ForkSafeLock._every.add(self)

    def __enter__(self) -> "ForkSafeLock":
        self._lock.acquire()
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self._lock.release()


def _unlock_in_child() -> None:
    for lock in list(ForkSafeLock._every):
        lock._lock = threading.Lock()


os.register_at_fork(after_in_child=_unlock_in_child)
