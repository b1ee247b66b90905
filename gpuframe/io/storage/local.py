"""Local files, read with ``os.pread``: a path or a ``file://`` URL."""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

from ..errors import AccessDeniedError, SourceNotFoundError
from .base import Source


class LocalSource(Source):
    """A local file read with ``os.pread``, safe to share between threads."""

    def __init__(self, path: str):
        super().__init__(path)
        local = unquote(urlparse(path).path) if path.startswith("file://") else path
        try:
            self._fd = os.open(local, os.O_RDONLY)
        except FileNotFoundError as exc:
            raise SourceNotFoundError(f"no such file: {path}") from exc
        except IsADirectoryError as exc:
            raise SourceNotFoundError(f"{path} is a directory, not a file") from exc
        except PermissionError as exc:
            raise AccessDeniedError(f"cannot open {path}: permission denied") from exc

    def _fetch_size(self) -> int:
        return os.fstat(self._fd).st_size

    def _read(self, offset: int, length: int) -> bytes:
        chunks, end = [], offset + length
        while offset < end:
            chunk = os.pread(self._fd, end - offset, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks)  # one chunk: itself, no copy

    def _read_into(self, offset: int, view: memoryview) -> int:
        done = 0
        while done < len(view):
            count = os.preadv(self._fd, [view[done:]], offset + done)
            if not count:
                break
            done += count
        return done

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
