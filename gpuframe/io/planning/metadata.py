"""Each file's metadata for planning: read in parallel (here, or on the workers through a
callback), kept for later plans while the file is unchanged (:class:`MetadataCache`), and its
schema checked against the other files' (:func:`common_schema`).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from ...errors import GpuframeError
from ..errors import SchemaMismatchError
from ..formats import FileMetadata
from ..formats.base import FileFormat
from ..storage import open_source
from ..storage.base import RemoteVersion, StorageOptions, scheme_of

FOOTER_THREADS = 16
"""Files whose metadata one process reads at once."""

FileStamp = tuple[int, int, int]
"""A local file's (size, modification time in ns, inode): while they stay the same, so does the
file, as make and Spark take it (a rewrite in place to the same size within one tick of the file
system's clock would go unseen)."""

Stamp = FileStamp | RemoteVersion
"""What says a file is unchanged: a local file's :data:`FileStamp`, a remote file's version."""
MetadataResult = tuple[FileMetadata, Stamp | None] | GpuframeError
"""One file's metadata and stamp as :func:`read_metadata_each` reads them, or why it cannot."""
ReadMetadata = Callable[[Sequence[str], StorageOptions, FileFormat, int], list[MetadataResult]]
"""``read_metadata(paths, storage, format, partition_bytes)``: each file's
:data:`MetadataResult`, in ``paths`` order (:func:`read_metadata_each`, here or on the
workers)."""


def read_metadata_each(paths: Sequence[str], storage: StorageOptions, format: FileFormat,
                       partition_bytes: int, threads: int = FOOTER_THREADS
                       ) -> list[MetadataResult]:
    """Each file's (metadata, stamp), read in parallel, or the :class:`GpuframeError` that
    names what is wrong with it, in ``paths`` order (the caller raises the first). The stamp
    of a local file is its :func:`file_stamp` taken before reading it (where the format's
    metadata is reusable, else None); of a remote file, the
    :class:`~gpuframe.io.storage.base.RemoteVersion` its store's answers gave (None with
    ``check_version`` off: the file is neither checked nor kept)."""
    def one(path: str) -> MetadataResult:
        local = scheme_of(path) == "file"
        stamp = file_stamp(path) if local and format.reusable_metadata else None
        try:
            with open_source(path, storage) as source:
                metadata = format.read_metadata(source, partition_bytes)
                if local or not storage.check_version:
                    return metadata, stamp
                return metadata, source.version
        except GpuframeError as exc:
            return exc

    if not paths:
        return []
    with ThreadPoolExecutor(max(1, min(threads, len(paths))),
                            thread_name_prefix="gpuframe-footer") as pool:
        return list(pool.map(one, paths))


def file_stamp(path: str) -> FileStamp | None:
    """``path``'s :data:`FileStamp` where it is a local file that this process sees, else None."""
    if scheme_of(path) != "file":
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns, stat.st_ino


class MetadataCache:
    """The metadata that planning read, each with its file's stamp, so that planning an
    unchanged file again asks no worker: that is a task's round trip, a good part of a warm
    read (benchmarks/results/2026-11-24-ingest-h200.md), and for remote files a request each
    too (benchmarks/results/2026-11-24-remote-versions-h200.md).

    A local file counts as unchanged where this process sees it with the same
    :data:`FileStamp` as the worker that read it did (the inode tells apart a file of the same
    path on another host). A remote file is taken as it was: asking would cost what is saved,
    so the read checks instead, every answer against the
    :class:`~gpuframe.io.storage.base.RemoteVersion` planning saw
    (:class:`~gpuframe.io.storage.base.Source`), and a read that finds a file changed plans
    again (the scan operator, :mod:`gpuframe.operators.scan`). So only remote files whose store
    sends an ETag or Last-Modified are kept: by size alone a rewrite would go unseen. Only
    formats whose metadata is the file's own (``reusable_metadata``); at most ``capacity`` files
    and ``max_bytes`` of metadata as the files hold it (:meth:`FileFormat.metadata_bytes`: a
    Parquet footer of 200 columns in 10 row groups is 234 KB, and a wide table's can be MBs),
    the least recently planned dropped first."""

    def __init__(self, capacity: int = 1024, max_bytes: int = 256 * 2**20):
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], tuple[Stamp, FileMetadata, int]] = (
            OrderedDict())
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, path: str, format: FileFormat) -> tuple[FileMetadata, Stamp] | None:
        """(metadata, stamp) of ``path`` if it is kept and, where local, unchanged; else
        None."""
        if not format.reusable_metadata:
            return None
        local = scheme_of(path) == "file"
        stamp = file_stamp(path) if local else None
        with self._lock:
            entry = self._entries.get((format.name, path))
            if entry is None or (local and entry[0] != stamp):
                return None
            self._entries.move_to_end((format.name, path))
            return entry[1], entry[0]

    def put(self, path: str, format: FileFormat, stamp: Stamp | None,
            metadata: FileMetadata) -> None:
        """Keep ``metadata`` of ``path`` read at ``stamp`` (see :func:`read_metadata_each`),
        where it can be told unchanged later."""
        if (stamp is None or not format.reusable_metadata
                or (isinstance(stamp, RemoteVersion) and not stamp.validated)):
            return
        nbytes = format.metadata_bytes(metadata)
        with self._lock:
            self._drop((format.name, path))
            self._entries[(format.name, path)] = (stamp, metadata, nbytes)
            self._bytes += nbytes
            while len(self._entries) > self.capacity or self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    def forget(self, paths: Iterable[str]) -> None:
        """Drop what is kept of ``paths`` (every format's)."""
        dropped = set(paths)
        with self._lock:
            for key in [key for key in self._entries if key[1] in dropped]:
                self._drop(key)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _drop(self, key: tuple[str, str]) -> None:
        """Drop ``key``'s entry if kept; the caller holds the lock."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry[2]


PLANNED_METADATA = MetadataCache()
"""The metadata planning read in this process (:class:`MetadataCache`)."""


@dataclass(frozen=True)
class PlannedFile:
    """What planning knows of one file."""

    metadata: FileMetadata
    version: RemoteVersion | None
    """A remote file's, as its store said when the metadata was read; None for local files."""
    reused: bool
    """The metadata came from :data:`PLANNED_METADATA`, not from reading the file now."""


def planned_metadata(paths: Sequence[str], read: ReadMetadata, storage: StorageOptions,
                     format: FileFormat, partition_bytes: int) -> dict[str, PlannedFile]:
    """Each file's metadata, by path: from :data:`PLANNED_METADATA` where it is kept (local
    files: unchanged; remote ones: unless ``check_version`` is off), the others by ``read``
    (:func:`read_metadata_each`, here or on the workers)."""
    planned: dict[str, PlannedFile] = {}
    missing = []
    for path in paths:
        checked = storage.check_version or scheme_of(path) == "file"
        kept = PLANNED_METADATA.get(path, format) if checked else None
        if kept is None:
            missing.append(path)
        else:
            planned[path] = PlannedFile(kept[0], _remote_version(kept[1]), True)
    results = read(missing, storage, format, partition_bytes) if missing else []
    for path, result in zip(missing, results):
        if isinstance(result, BaseException):
            raise result
        metadata, stamp = result
        planned[path] = PlannedFile(metadata, _remote_version(stamp), False)
        PLANNED_METADATA.put(path, format, stamp, metadata)
    return {path: planned[path] for path in paths}


def _remote_version(stamp: Stamp | None) -> RemoteVersion | None:
    return stamp if isinstance(stamp, RemoteVersion) else None


def common_schema(paths: Sequence[str], footers: Mapping[str, FileMetadata],
                  format: FileFormat) -> pa.Schema:
    """The files' arrow schema; :class:`SchemaMismatchError` names two files and the column.

    A column of null type in one file (a CSV column empty in every sampled row) takes the type
    the other files give it."""
    first = paths[0]
    schema = format.arrow_schema(first, footers[first])
    for path in paths[1:]:
        other = format.arrow_schema(path, footers[path])
        if other.names == schema.names and other.types == schema.types:
            continue
        for name in list(dict.fromkeys(schema.names + other.names)):
            mine = schema.field(name).type if name in schema.names else "missing"
            theirs = other.field(name).type if name in other.names else "missing"
            if mine == theirs:
                continue
            if "missing" not in (mine, theirs) and pa.types.is_null(mine):
                schema = schema.set(schema.get_field_index(name), other.field(name))
                continue
            if "missing" not in (mine, theirs) and pa.types.is_null(theirs):
                continue
            raise SchemaMismatchError(
                f"{first} and {path} disagree on column {name!r}: {mine} vs {theirs}")
        if other.names != schema.names:
            raise SchemaMismatchError(f"{first} and {path} order their columns differently: "
                                      f"{schema.names} vs {other.names}")
    return schema
