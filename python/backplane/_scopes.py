"""Default-device scopes for Python code: per asyncio task, per thread, and
never leaking out of a suspended generator.

A scope belongs to the function whose `with` statement entered it (looking
through contextlib helpers such as @contextmanager and ExitStack) and to the
context (contextvars) it was entered in. It applies:
- to that function and everything it calls while the `with` block runs;
- not while that function is suspended: a generator that yields inside a
  scope does not hand its device to whoever consumes it;
- in each asyncio task or thread separately: a task sees the scopes that were
  open when it was created (contextvars copies the context), never those its
  siblings enter later.
Exiting scopes of one function in another order than innermost-first raises
InvalidArgumentError naming both scopes, and leaves both open.
"""
from __future__ import annotations

import contextlib
import contextvars
import itertools
import sys
import threading
from types import FrameType, TracebackType
from typing import Dict, Optional, Tuple, Type

from ._devices import Device
from ._errors import InvalidArgumentError

_CONTEXTLIB_FILE = contextlib.__file__
_GENERATOR_FLAGS = 0x20 | 0x200  # CO_GENERATOR | CO_ASYNC_GENERATOR
_tokens = itertools.count(1)


def _owner() -> object:
    """The asyncio task running now, else the thread."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        loop = asyncio._get_running_loop()
        if loop is not None:
            task = asyncio.current_task(loop)
            if task is not None:
                return task
    return threading.current_thread()


def _entering_frame(frame: Optional[FrameType]) -> Optional[FrameType]:
    """The user's frame behind a scope's __enter__, past contextlib."""
    while frame is not None:
        if frame.f_code.co_filename == _CONTEXTLIB_FILE:
            frame = frame.f_back
            continue
        caller = frame.f_back
        if frame.f_code.co_flags & _GENERATOR_FLAGS and caller is not None and \
                caller.f_code.co_filename == _CONTEXTLIB_FILE:
            frame = caller  # the generator of a @contextmanager: its `with` is the owner
            continue
        return frame
    return None


class _Entry:
    __slots__ = ("token", "device", "frame", "owner", "where")

    def __init__(self, device: Device, frame: Optional[FrameType], owner: object) -> None:
        self.token = next(_tokens)
        self.device = device
        self.frame = frame
        self.owner = owner
        self.where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"

    def describe(self) -> str:
        return f"{self.device} (token {self.token}, entered at {self.where})"


class ScopeStack:
    """One runtime's Python-side scopes."""

    def __init__(self) -> None:
        self._entries: contextvars.ContextVar[Tuple[_Entry, ...]] = contextvars.ContextVar(
            "backplane_default_device_scopes", default=())

    def current(self) -> Optional[Device]:
        """The device of the scope that applies here, or None."""
        entries = self._entries.get()
        if not entries:
            return None
        owner = _owner()
        mine: Dict[int, _Entry] = {}
        inherited: Optional[_Entry] = None
        for entry in entries:
            if entry.owner is owner:
                mine[id(entry.frame)] = entry  # the latest of each frame wins
            else:
                inherited = entry
        if mine:
            frame: Optional[FrameType] = sys._getframe(1)
            while frame is not None:
                found = mine.get(id(frame))
                if found is not None:
                    return found.device
                frame = frame.f_back
        return inherited.device if inherited is not None else None

    def enter(self, device: Device, frame: Optional[FrameType]) -> _Entry:
        entry = _Entry(device, _entering_frame(frame), _owner())
        self._entries.set(self._entries.get() + (entry,))
        return entry

    def exit(self, entry: _Entry) -> None:
        entries = self._entries.get()
        if entry not in entries:
            raise InvalidArgumentError(f"default-device scope {entry.describe()} is not open in this context: "
                                       "exited twice, or in another asyncio task or thread than the one that "
                                       "entered it")
        later = [other for other in entries[entries.index(entry) + 1:]
                 if other.frame is entry.frame and other.owner is entry.owner]
        if later:
            raise InvalidArgumentError(f"default-device scope {entry.describe()} exited while scope "
                                       f"{later[-1].describe()}, entered after it, is still open; exit scopes "
                                       "innermost first")
        self._entries.set(tuple(other for other in entries if other is not entry))


class DefaultDeviceScope:
    """`with runtime.default_device_scope("cpu") as device:` (see the module
    docstring for where it applies). Reusable only after it has exited."""

    def __init__(self, stack: ScopeStack, device: Device) -> None:
        self._stack = stack
        self._device = device
        self._entry: Optional[_Entry] = None

    @property
    def device(self) -> Device:
        """The device this scope makes the default."""
        return self._device

    def __enter__(self) -> Device:
        if self._entry is not None:
            raise InvalidArgumentError(f"default-device scope {self._entry.describe()} is already open")
        self._entry = self._stack.enter(self._device, sys._getframe(1))
        return self._device

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        entry = self._entry
        if entry is None:
            raise InvalidArgumentError(f"default-device scope {self._device} exited without being entered")
        self._stack.exit(entry)  # raises, leaving the scope open, when exited out of order
        self._entry = None

    def __repr__(self) -> str:
        state = "open" if self._entry is not None else "not entered"
        return f"<backplane.DefaultDeviceScope {self._device} ({state})>"

