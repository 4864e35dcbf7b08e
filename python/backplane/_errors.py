"""backplane.Error and one subclass per status code of backplane.h. Each
class carries its status and the library's name for it, so Python code raises
them like any exception: `raise InvalidArgumentError("take_windows: ...")`."""
from __future__ import annotations

import errno
from typing import Dict, Optional, Type


class Error(Exception):
    """A failed call: `status` is the BP_STATUS_* code, `message` the
    explanation (bp_last_error for the library's own errors), `status_name`
    the library's short name for the status."""

    status: int = 0
    status_name: str = "error"

    def __init__(self, message: str, *, status: Optional[int] = None, status_name: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:  # a status this package has no class for
            self.status = status
        if status_name is not None:
            self.status_name = status_name

    def __str__(self) -> str:
        return f"{self.message} [{self.status_name}]"


class InvalidArgumentError(Error, ValueError):
    """A bad argument: a wrong selector, option, shape or value, named in the message."""
    status = 1
    status_name = "invalid argument"


class OutOfMemoryError(Error, MemoryError):
    """A device or host allocation that cannot be satisfied."""
    status = 2
    status_name = "out of memory"


class UnavailableError(Error):
    """A backend or device that is installed but cannot be used here; the message says why."""
    status = 3
    status_name = "unavailable"


class UnsupportedError(Error, BufferError):  # BufferError: what DLPack consumers catch
    """Something this backend, dtype or layout cannot do (a BufferError, as DLPack consumers expect)."""
    status = 4
    status_name = "unsupported"


class DeviceError(Error):
    """A device or its plugin failed an operation."""
    status = 5
    status_name = "device error"


class InternalError(Error):
    """A bug in backplane or a plugin: please report it with the message."""
    status = 6
    status_name = "internal error"


class OutOfRangeError(Error, IndexError):
    """An index, ordinal, step or range outside what exists."""
    status = 7
    status_name = "out of range"


class NotFoundError(Error, LookupError):
    """No such backend, device, tensor or file."""
    status = 8
    status_name = "not found"


class ConfigError(Error):
    """A configuration file or variable that is malformed, naming the file, line and key."""
    status = 9
    status_name = "configuration error"


class InvalidFileError(Error):
    """A file whose contents break its format's rules, naming the file and the rule."""
    status = 10
    status_name = "invalid file"


class PluginError(Error):
    """A plugin that cannot be loaded or broke the plugin ABI."""
    status = 11
    status_name = "plugin error"


class FileSystemError(Error, OSError):
    """Reading, writing or mapping a file failed in the file system."""
    status = 12
    status_name = "I/O error"


class CancelledError(Error):
    """A long operation stopped by its caller, e.g. a progress callback that
    raised; the callback's exception is the __cause__."""
    status = 13
    status_name = "cancelled"


# BP_STATUS_* values, never renumbered: each class's own status.
STATUS_CLASSES: Dict[int, Type[Error]] = {cls.status: cls for cls in (
    InvalidArgumentError, OutOfMemoryError, UnavailableError, UnsupportedError, DeviceError, InternalError,
    OutOfRangeError, NotFoundError, ConfigError, InvalidFileError, PluginError, FileSystemError, CancelledError)}


class MissingFileError(NotFoundError, FileNotFoundError):
    """A file that does not exist: catchable as FileNotFoundError too."""

    def __init__(self, message: str, *, filename: str = "") -> None:
        super().__init__(message)
        self.errno = errno.ENOENT
        self.strerror = message
        self.filename = filename


def error_for(status: int, message: str, status_name: str) -> Error:
    """The exception for a status the library returned."""
    known = STATUS_CLASSES.get(status)
    if known is not None:
        return known(message)
    return Error(message, status=status, status_name=status_name)
