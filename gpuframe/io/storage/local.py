"""Local files, read with ``os.pread``, and local folders written as datasets: a path or a
``file://`` URL."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from urllib.parse import unquote, urlparse

from pyarrow import fs

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


def local_path(path: str) -> str:
    """The absolute local path of a path or ``file://`` URL."""
    return os.path.abspath(unquote(urlparse(path).path) if path.startswith("file://") else path)


class LocalStore:
    """Datasets in local folders (:class:`~.base.DatasetStore`). A staged folder is published
    by renaming it to the dataset's path: atomic where both lie on one file system, which a
    sibling of the path does. Replacing a dataset takes two renames (the old one aside, the new
    one in) and the old folder's deletion: between the renames the path is briefly absent,
    never partial."""

    creates_folders = True

    def __init__(self) -> None:
        self.filesystem = fs.LocalFileSystem()

    def location(self, path: str) -> str:
        return local_path(path)

    def exists(self, path: str) -> bool:
        return os.path.lexists(local_path(path))

    def write_bytes(self, path: str, data: bytes) -> None:
        with open(local_path(path), "wb") as file:
            file.write(data)

    def publish(self, staged: str, path: str, replace: bool, last: Sequence[str] = ()) -> None:
        """One rename publishes every file at once: ``last`` has nothing to order."""
        source, target = local_path(staged), local_path(path)
        aside = None
        if replace and os.path.lexists(target):
            aside = source + ".replaced"
            os.rename(target, aside)
        try:
            os.rename(source, target)
        except OSError:
            if aside is not None:
                os.rename(aside, target)
            raise
        if aside is not None:
            self.remove(aside)

    def remove(self, path: str) -> None:
        target = local_path(path)
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target, ignore_errors=True)
        elif os.path.lexists(target):
            os.remove(target)

    def failure(self, exc: OSError, path: str) -> Exception:
        """A local error names its file already."""
        return exc
