"""backplane.Error and one subclass per status code of backplane.h."""
from __future__ import annotations

import errno
from typing import Dict, Optional, Type


class Error(Exception):
    """A failed C API call: `status` is the BP_STATUS_* code, `message` the
    library's explanation (bp_last_error), `status_name` its short name."""

    status: Optional[int] = None

    def __init__(self, status: int, message: str, status_name: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.status_name = status_name

    def __str__(self) -> str:
        return f"{self.message} [{self.status_name or self.status}]"


class InvalidArgumentError(Error, ValueError):
    pass


class OutOfMemoryError(Error, MemoryError):
    pass


class UnavailableError(Error):
    pass


class UnsupportedError(Error, BufferError):  # BufferError: what DLPack consumers catch
    pass


class DeviceError(Error):
    pass


class InternalError(Error):
    pass


class OutOfRangeError(Error, IndexError):
    pass


class NotFoundError(Error, LookupError):
    pass


class ConfigError(Error):
    pass


class InvalidFileError(Error):
    pass


class PluginError(Error):
    pass


class FileSystemError(Error, OSError):
    pass


class CancelledError(Error):
    """A long operation stopped by its caller, e.g. a progress callback that
    raised; the callback's exception is the __cause__."""


# BP_STATUS_* values, never renumbered.
STATUS_CLASSES: Dict[int, Type[Error]] = {
    1: InvalidArgumentError,
    2: OutOfMemoryError,
    3: UnavailableError,
    4: UnsupportedError,
    5: DeviceError,
    6: InternalError,
    7: OutOfRangeError,
    8: NotFoundError,
    9: ConfigError,
    10: InvalidFileError,
    11: PluginError,
    12: FileSystemError,
    13: CancelledError,
}


class MissingFileError(NotFoundError, FileNotFoundError):
    """A file that does not exist: catchable as FileNotFoundError too."""

    def __init__(self, status: int, message: str, status_name: str = "", filename: str = "") -> None:
        super().__init__(status, message, status_name)
        self.errno = errno.ENOENT
        self.strerror = message
        self.filename = filename


def error_for(status: int, message: str, status_name: str = "") -> Error:
    return STATUS_CLASSES.get(status, Error)(status, message, status_name)
