"""Errors of reading datasets: each names the file, URL, column, filter term or option at fault.

They derive from :class:`gpuframe.errors.GpuframeError` and from the built-in class a caller would
catch for the same trouble (``FileNotFoundError`` for a missing file, ``PermissionError`` for
refused credentials), so both ``except GpuframeError`` and ``except OSError`` work.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from ..errors import GpuframeError

_URL_LOGIN = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*):[^/@\s]*@")


def without_passwords(text: str) -> str:
    """``text`` with every URL's ``user:password@`` as ``user:***@``."""
    return _URL_LOGIN.sub(r"\1:***@", text)


def repr_without_passwords(self: Any) -> str:
    """A dataclass's repr, as ``dataclass`` writes it, without passwords: the ``__repr__`` of
    the classes that carry a file's URL (which may hold its login)."""
    fields = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)
                       if f.repr)
    return without_passwords(f"{type(self).__qualname__}({fields})")


class DatasetError(GpuframeError):
    """Base class of the errors of planning and reading a dataset. Their messages never show a
    URL's password (:func:`without_passwords`): a file's URL may carry its login, and errors
    end up in logs and notebooks."""

    gpu_context_lost = False
    """Set where decoding lost the worker's CUDA context: the worker must restart before its
    GPU runs anything more."""

    def __init__(self, *args: Any):
        super().__init__(*(without_passwords(a) if isinstance(a, str) else a for a in args))


class SourceNotFoundError(DatasetError, FileNotFoundError):
    """A file, URL or object named by the source does not exist, or a glob matched nothing."""


class NotARegularFileError(DatasetError, OSError):
    """A dataset entry that is not a regular file (a FIFO, a socket, a device): reading it
    could block forever or never end."""


class CorruptFileError(DatasetError, ValueError):
    """A file is not Parquet, or its footer cannot be parsed."""


class TruncatedFileError(CorruptFileError):
    """A file starts like Parquet but ends early: its footer, or data it points at, is missing."""


class FileChangedError(DatasetError, OSError):
    """A remote file is not the one planning read: its size, ETag or Last-Modified differ.
    ``path``: the file."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path

    def __reduce__(self) -> tuple:  # from a worker to the client: (path, message) again
        return type(self), (self.path, str(self)), self.__dict__


class SchemaMismatchError(DatasetError, ValueError):
    """Two files of one dataset disagree on a column's presence or type."""


class ColumnNotFoundError(DatasetError, LookupError):
    """A column asked for in ``columns=`` is not in the dataset."""


class FilterError(DatasetError, ValueError):
    """A ``filters=`` term is malformed, names an unknown column, or has an unusable value."""


class RemoteError(DatasetError, OSError):
    """A remote store (HTTP or S3) failed a request; the message names the URL."""


class UnreachableError(RemoteError, ConnectionError):
    """The server of a URL could not be reached (refused, unresolvable, timed out)."""


class AccessDeniedError(RemoteError, PermissionError):
    """The server refused the request: wrong or missing credentials, or no permission."""


class RangeNotSupportedError(RemoteError):
    """An HTTP server ignored a Range request; reading it would download whole files."""


class SecretsMissingError(GpuframeError, RuntimeError):
    """A task's credentials did not reach the worker that runs it
    (:mod:`~gpuframe.io.storage.sealed`)."""


class PageReadUnsupportedError(DatasetError, ValueError):
    """A Parquet column chunk cannot be read page by page (nested or encrypted column, no page
    index, pages that do not map to rows); whole row groups can still be read."""
