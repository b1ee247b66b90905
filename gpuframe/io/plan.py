"""Planning a read on the client: which units of which files, in which fragments, on which worker.

The same steps for every format (:mod:`~gpuframe.io.formats`: Parquet row groups, ORC stripes,
CSV line-aligned byte ranges). :func:`plan_fragments` expands the source (path, glob, directory
with hive ``key=value`` folders, ``http(s)://`` or ``s3://`` URLs, or a list of them); reads the
first file's metadata (Parquet footer, ORC tail, CSV header and sample) and validates
``columns=`` and ``filters=`` against its schema; drops files whose hive values cannot satisfy
the filters; reads the other files' metadata once and in parallel (remote ones with a single
suffix request for the last 64 KiB where the format keeps it at the end) and checks that the
files agree on their schema (files dropped by hive values are never opened, so they are not
checked); prunes units whose statistics cannot satisfy the filters; packs the remaining units of
each file into fragments of about ``partition_bytes`` bytes; and assigns fragments to workers so
that each gets about the same number of bytes.

The metadata stays in the plan (:attr:`ReadPlan.footers`), and for later plans while the files
are unchanged (:class:`MetadataCache`). The read step sends each fragment's task its file's
metadata (a Parquet footer pickles as its own Thrift bytes, a few KiB), so workers never fetch
it again; they fetch only the bytes of their units, from remote files that must still be the
version planning saw (:attr:`ReadPlan.versions`).

The partition budget is passed in: :func:`default_partition_bytes` takes the workers' device
memory, which the read step learns from the scheduler; planning asks no hardware itself.
"""

from __future__ import annotations

import glob as globbing
import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence
from urllib.parse import unquote

import pyarrow as pa

from ..errors import GpuframeError, OptionError
from .errors import ColumnNotFoundError, SchemaMismatchError, SourceNotFoundError
from .filters import Term, normalize_filters
from .formats import FileFormat, format_for
from .statistics import hive_values_may_match
from .storage import open_source
from .storage.base import RemoteVersion, StorageOptions, scheme_of, storage_options
from .storage.s3 import list_s3
from .tuning.model import Concurrency, fit_to_ranges
from .tuning.stores import measure_storage, unmeasured_concurrency

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
CPU_PARTITION_BYTES = 128 * 2**20
MIN_PARTITION_BYTES = 16 * 2**20
FOOTER_THREADS = 16
_GLOB_CHARS = "*?["


def default_partition_bytes(device_memory: Sequence[int] = ()) -> int:
    """Bytes per fragment: 1/32 of the smallest device's memory, or 128 MiB without devices.

    ``device_memory``: the memory of each worker's GPU, in bytes. A fragment grows several times
    once decompressed and decoded, and a join holds a few partitions at once, so 1/32 of device
    memory leaves room on the GPU.
    """
    if not device_memory:
        return CPU_PARTITION_BYTES
    return max(MIN_PARTITION_BYTES, min(device_memory) // 32)


@dataclass(frozen=True)
class Fragment:
    """Units (row groups, stripes, byte ranges) of one file, read by one task on ``owner``."""

    index: int
    path: str
    units: tuple[int, ...]
    rows: int | None
    """Rows in the units; None where the format does not say (CSV)."""
    bytes: int
    partition: tuple[tuple[str, Any], ...] = ()
    owner: str | None = None


@dataclass
class ReadPlan:
    """What a read will fetch, where, and what was pruned; ``repr`` summarises it."""

    format: FileFormat
    fragments: list[Fragment]
    schema: pa.Schema
    """The result's columns: file columns, then hive partition columns, or ``columns=``."""
    partition_schema: pa.Schema
    file_schema: pa.Schema
    """The columns of the files, as every file has them."""
    files: list[str]
    """Files left after hive values were checked against the filters."""
    files_total: int
    columns_read: list[str]
    """File columns fetched: the result's, then those only the filters need."""
    filters: list[list[Term]] | None
    units_total: int
    """Units of :attr:`files` (files dropped by hive values are not counted)."""
    units_kept: int
    result_bytes: int
    storage: StorageOptions
    concurrency: Concurrency | None
    partition_bytes: int
    footers: dict[str, Any] = field(repr=False)
    """Each file's metadata (:meth:`FileFormat.read_metadata`)."""
    versions: dict[str, RemoteVersion] = field(default_factory=dict, repr=False)
    """Each remote file's version as planning saw it: the read checks its store's answers
    against it."""
    reused: frozenset[str] = field(default_factory=frozenset, repr=False)
    """Files whose metadata planning took from :data:`PLANNED_METADATA` rather than read."""

    @property
    def total_bytes(self) -> int:
        """Bytes the read fetches: output columns plus filter-only columns."""
        return sum(f.bytes for f in self.fragments)

    @property
    def rows(self) -> int | None:
        """Rows in the kept units (an upper bound when filtering); None if a format can't say."""
        counts = [f.rows for f in self.fragments]
        return None if None in counts else sum(counts)

    def partitions(self) -> list[list[int]]:
        """The fragments (indices) read together, as one partition: runs of consecutive
        fragments with the same owner, packed while their bytes stay within
        :attr:`partition_bytes` (a larger fragment is a partition alone), so the frame keeps
        the files' row order. Few large reads: cuDF decodes one call's files together, four
        times faster than file by file (measured on an H200)."""
        groups: list[list[int]] = []
        size = 0
        for i, fragment in enumerate(self.fragments):
            if (not groups or fragment.owner != self.fragments[i - 1].owner
                    or size + fragment.bytes > self.partition_bytes):
                groups.append([])
                size = 0
            groups[-1].append(i)
            size += fragment.bytes
        return groups

    def bytes_by_worker(self) -> dict[str, int]:
        loads: dict[str, int] = {}
        for fragment in self.fragments:
            loads[str(fragment.owner)] = loads.get(str(fragment.owner), 0) + fragment.bytes
        return loads

    def __repr__(self) -> str:
        loads = ", ".join(f"{w}: {_mib(b)}" for w, b in sorted(self.bytes_by_worker().items()))
        return (f"<ReadPlan {self.format.name}: {len(self.files)}/{self.files_total} files, "
                f"{len(self.fragments)} fragments in {len(self.partitions())} partitions, "
                f"{self.format.unit_name} {self.units_kept}/{self.units_total} kept, "
                f"{_mib(self.total_bytes)} to read for {_mib(self.result_bytes)} of result "
                f"columns, by worker {{{loads}}}, {self.concurrency!r}>")


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f} MiB"


def plan_fragments(source: str | os.PathLike | Sequence[str | os.PathLike],
                   columns: Sequence[str] | None = None,
                   filters: Sequence[Any] | None = None,
                   partition_bytes: int | None = None,
                   storage: StorageOptions | Mapping[str, Any] | None = None,
                   workers: Sequence[str] | None = None,
                   format: str | FileFormat = "parquet",
                   device_memory: Sequence[int] = (),
                   measure: Callable[[str, StorageOptions, int], Concurrency] | None = None,
                   read_metadata: Callable[..., list[Any]] | None = None,
                   ) -> ReadPlan:
    """Plan reading a dataset; see the module docstring for the steps.

    ``filters`` take pandas/pyarrow's DNF form: a list of ``(column, op, value)`` tuples (all
    must hold) or a list of such lists (any may hold); ``op`` is one of ``==, =, !=, <, <=, >,
    >=, in, not in``. Pruning is conservative: a unit without statistics is kept, and the read
    step applies the filters to rows. ``workers=None`` leaves fragments without owners.
    ``format``: 'parquet', 'orc', 'csv' or a :class:`~gpuframe.io.formats.FileFormat`.
    ``partition_bytes=None`` takes :func:`default_partition_bytes` of ``device_memory``.
    ``measure(first file, storage, partition_bytes)``: the store's :class:`Concurrency`,
    measured where the reads will run (``gpuframe.io.read.measure_on_workers``), for plans of
    at least ``storage.probe_min_bytes`` (smaller ones take
    :func:`~gpuframe.io.tuning.unmeasured_concurrency`); None measures here
    (:func:`measure_here`). ``read_metadata(paths, storage, format, partition_bytes)``:
    each file's metadata or error, as :func:`read_metadata_each` (the default, here) gives
    them; ``gpuframe.io.read.metadata_on_workers`` reads them on the workers instead.
    """
    fmt = format_for(format)
    storage = storage_options(storage)
    read_metadata = read_metadata or read_metadata_each
    if partition_bytes is None:
        partition_bytes = default_partition_bytes(device_memory)
    if partition_bytes < 1:
        raise OptionError(f"partition_bytes={partition_bytes} must be at least 1")
    found = expand_source(source, storage)
    paths = [path for path, _ in found]
    partitions = hive_partitions(found)
    partition_schema = _partition_schema(partitions)
    # The first file's metadata gives the schema to check columns and filters against; then,
    # where filters may drop files by their hive values, those are dropped before their
    # metadata is read. Otherwise every file's metadata comes at once: one round trip to the
    # workers, not two (about 20 ms of a 0.15 s warm read of 2 GiB on an H200).
    prunable = bool(filters) and bool(partition_schema.names)
    planned = _footers(paths[:1] if prunable else paths, read_metadata, storage, fmt,
                       partition_bytes)
    first_schema = fmt.resolve_schema(fmt.arrow_schema(paths[0], planned[paths[0]].metadata))
    _check_no_collision(first_schema, partition_schema, paths[0])
    full = pa.schema(list(first_schema) + list(partition_schema), first_schema.metadata)
    output = _select_columns(full, columns, paths[0])
    dnf = normalize_filters(filters, full, paths[0])
    kept_paths = [p for p in paths if hive_values_may_match(partitions.get(p, {}), dnf)]
    others = [p for p in kept_paths if p != paths[0]]
    planned.update(_footers([p for p in others if p not in planned], read_metadata, storage,
                            fmt, partition_bytes))
    footers = {path: file.metadata for path, file in planned.items()}
    file_schema = fmt.resolve_schema(common_schema(paths[:1] + others, footers, fmt))
    filter_columns = [t[0] for conj in dnf or () for t in conj]
    names = output.names + [c for c in dict.fromkeys(filter_columns) if c not in output.names]
    columns_read = [c for c in names if c in file_schema.names]
    result_columns = [c for c in output.names if c in file_schema.names]

    fragments: list[Fragment] = []
    total = kept = result_bytes = 0
    for path in kept_paths:
        metadata = footers[path]
        values = partitions.get(path, {})
        chosen: list[int] = []
        rows: int | None = 0
        size = 0
        for unit in fmt.units(metadata, columns_read, result_columns):
            total += 1
            if not fmt.unit_may_match(metadata, unit, values, dnf):
                continue
            kept += 1
            result_bytes += unit.result_bytes
            if chosen and size + unit.bytes > partition_bytes:
                fragments.append(Fragment(len(fragments), path, tuple(chosen), rows, size,
                                          tuple(values.items())))
                chosen, rows, size = [], 0, 0
            chosen.append(unit.index)
            rows = None if rows is None or unit.rows is None else rows + unit.rows
            size += unit.bytes
        if chosen:
            fragments.append(Fragment(len(fragments), path, tuple(chosen), rows, size,
                                      tuple(values.items())))
    if (storage.requests_in_flight is None
            and sum(f.bytes for f in fragments) < storage.probe_min_bytes):
        concurrency = unmeasured_concurrency(storage)
    else:
        concurrency = (measure or measure_here)(paths[0], storage, partition_bytes)
    if concurrency is not None:
        concurrency = fit_to_ranges(concurrency, [
            length for f in fragments
            for _, length in fmt.ranges(footers[f.path], f.units, columns_read)],
            storage.max_requests_in_flight)
    if workers is not None:
        owners = assign_owners([f.bytes for f in fragments], workers)
        fragments = [Fragment(f.index, f.path, f.units, f.rows, f.bytes, f.partition, o)
                     for f, o in zip(fragments, owners)]
    return ReadPlan(fmt, fragments, output, partition_schema, file_schema, kept_paths,
                    len(paths), columns_read, dnf, total, kept, result_bytes, storage,
                    concurrency, partition_bytes, footers,
                    {path: file.version for path, file in planned.items() if file.version},
                    frozenset(path for path, file in planned.items() if file.reused))


def expand_source(source: Any, storage: StorageOptions) -> list[tuple[str, str | None]]:
    """(file, base folder for hive partitions or None) for every data file of ``source``.

    Directories are walked recursively, skipping names that start with '_' or '.' (like
    ``_SUCCESS``), as pyarrow does; globs and directories must match at least one file.
    """
    if isinstance(source, (list, tuple)):
        if not source:
            raise OptionError("source= is an empty list")
        found: dict[str, str | None] = {}
        for item in source:
            for path, base in expand_source(item, storage):
                found.setdefault(path, base)
        return list(found.items())
    if not isinstance(source, (str, os.PathLike)):
        raise OptionError(f"source= must be a path, URL or list of them, not {type(source)!r}")
    path = os.fspath(source)
    scheme = scheme_of(path)
    if scheme in ("http", "https"):
        if any(c in path.split("?", 1)[0] for c in _GLOB_CHARS) or path.endswith("/"):
            raise OptionError(f"{path}: HTTP has no directory listing; name each file's URL")
        return [(path, None)]
    if scheme == "s3":
        return _expand_s3(path, storage)
    if path.startswith("file://"):
        path = unquote(path[len("file://"):])
    if any(c in path for c in _GLOB_CHARS):
        matches = sorted(p for p in globbing.glob(path, recursive=True) if os.path.isfile(p))
        if not matches:
            raise SourceNotFoundError(f"no file matches {path}")
        return [(p, _glob_base(path)) for p in matches]
    if os.path.isdir(path):
        files = []
        for folder, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
            files.extend(os.path.join(folder, n) for n in sorted(names)
                         if not n.startswith(("_", ".")))
        if not files:
            raise SourceNotFoundError(f"no data files in directory {path}")
        return [(f, path) for f in files]
    if not os.path.exists(path):
        raise SourceNotFoundError(f"no such file: {path}")
    return [(path, None)]


def _glob_base(pattern: str) -> str:
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        if any(c in part for c in _GLOB_CHARS):
            return "/".join(parts[:i])
    return os.path.dirname(pattern)


def _expand_s3(url: str, storage: StorageOptions) -> list[tuple[str, str | None]]:
    import fnmatch

    if not any(c in url for c in _GLOB_CHARS):
        listed = list_s3(url, storage)
        if listed == [url]:
            return [(url, None)]
        files = [u for u in listed if not _hidden(u[len(url):])]
        if not files:
            raise SourceNotFoundError(f"no data files under {url}")
        return [(u, url.rstrip("/")) for u in files]
    base = _glob_base(url)
    files = [u for u in list_s3(base, storage)
             if fnmatch.fnmatchcase(u, url) and not _hidden(u[len(base):])]
    if not files:
        raise SourceNotFoundError(f"no object matches {url}")
    return [(u, base) for u in files]


def _hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/") if part)


def hive_partitions(found: Iterable[tuple[str, str | None]]) -> dict[str, dict[str, Any]]:
    """Each file's hive values ``{key: value}``, typed as pyarrow's hive discovery types them:
    int32 when every value of a key is an integer that fits, else string;
    ``__HIVE_DEFAULT_PARTITION__`` is null."""
    raw: dict[str, dict[str, str | None]] = {}
    for path, base in found:
        if base is None:
            continue
        relative = path[len(base):].strip("/").split("/")[:-1]
        values = {}
        for part in relative:
            if "=" in part:
                key, value = part.split("=", 1)
                value = unquote(value)
                values[unquote(key)] = None if value == HIVE_NULL else value
        raw[path] = values
    if not raw:
        return {}
    keys = next(iter(raw.values())).keys()
    first = next(iter(raw))
    for path, values in raw.items():
        if values.keys() != keys:
            raise SchemaMismatchError(
                f"hive partition folders differ: {first} has keys {sorted(keys)}, "
                f"{path} has {sorted(values.keys())}")
    typed = {key: _hive_type([v[key] for v in raw.values()]) for key in keys}
    return {path: {k: (None if v is None else int(v) if typed[k] == pa.int32() else v)
                   for k, v in values.items()}
            for path, values in raw.items()}


def _hive_type(values: list[str | None]) -> pa.DataType:
    present = [v for v in values if v is not None]
    try:
        if present and all(-2**31 <= int(v) < 2**31 for v in present):
            return pa.int32()
    except ValueError:
        pass
    return pa.string()


def _partition_schema(partitions: Mapping[str, Mapping[str, Any]]) -> pa.Schema:
    if not partitions:
        return pa.schema([])
    columns: dict[str, list[Any]] = {}
    for values in partitions.values():
        for key, value in values.items():
            columns.setdefault(key, []).append(value)
    return pa.schema([(k, pa.int32() if any(isinstance(v, int) for v in vs) else pa.string())
                      for k, vs in columns.items()])


def _check_no_collision(file_schema: pa.Schema, partition_schema: pa.Schema, path: str) -> None:
    for name in partition_schema.names:
        if name in file_schema.names:
            raise SchemaMismatchError(f"hive partition key {name!r} is also a column of {path}")



def read_metadata_each(paths: Sequence[str], storage: StorageOptions, format: FileFormat,
                       partition_bytes: int, threads: int = FOOTER_THREADS) -> list[Any]:
    """Each file's (metadata, stamp), read in parallel, or the :class:`GpuframeError` that
    names what is wrong with it, in ``paths`` order (the caller raises the first). The stamp
    of a local file is its :func:`file_stamp` taken before reading it (where the format's
    metadata is reusable, else None); of a remote file, the
    :class:`~gpuframe.io.remote.RemoteVersion` its store's answers gave (None with
    ``check_version`` off: the file is neither checked nor kept)."""
    def one(path: str) -> Any:
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


FileStamp = tuple[int, int, int]
"""A local file's (size, modification time in ns, inode): while they stay the same, so does the
file, as make and Spark take it (a rewrite in place to the same size within one tick of the file
system's clock would go unseen)."""


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
    unchanged file again asks no worker: that is a task's round trip (25 ms of a 118 ms warm
    read of 2 GiB in 16 Parquet files on an H200, whose cuDF call took 64 ms), and for remote
    files a request each too (33 ms for 16 files over loopback HTTP).

    A local file counts as unchanged where this process sees it with the same
    :data:`FileStamp` as the worker that read it did (the inode tells apart a file of the same
    path on another host). A remote file is taken as it was: asking would cost what is saved,
    so the read checks instead, every answer against the
    :class:`~gpuframe.io.remote.RemoteVersion` planning saw
    (:class:`~gpuframe.io.remote.Source`), and a read that finds a file changed plans again
    (:func:`~gpuframe.io.read.read_plan`'s caller). So only remote files whose store sends an
    ETag or Last-Modified are kept: by size alone a rewrite would go unseen. Only formats whose
    metadata is the file's own (``reusable_metadata``); at most ``capacity`` files and
    ``max_bytes`` of metadata as the files hold it (:meth:`FileFormat.metadata_bytes`: a
    Parquet footer of 200 columns in 10 row groups is 234 KB, and a wide table's can be MBs),
    the least recently planned dropped first."""

    def __init__(self, capacity: int = 1024, max_bytes: int = 256 * 2**20):
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], tuple[Any, Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, path: str, format: FileFormat) -> tuple[Any, Any] | None:
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

    def put(self, path: str, format: FileFormat, stamp: Any, metadata: Any) -> None:
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


def measure_here(path: str, storage: StorageOptions, partition_bytes: int) -> Concurrency:
    """The store's :class:`Concurrency`, measured from this process on ``path``."""
    with open_source(path, storage) as source:
        return measure_storage(source, storage, fragment_bytes=partition_bytes)


@dataclass(frozen=True)
class PlannedFile:
    """What planning knows of one file."""

    metadata: Any
    version: RemoteVersion | None
    """A remote file's, as its store said when the metadata was read; None for local files."""
    reused: bool
    """The metadata came from :data:`PLANNED_METADATA`, not from reading the file now."""


def _footers(paths: Sequence[str], read: Callable[..., list[Any]], storage: StorageOptions,
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


def _remote_version(stamp: Any) -> RemoteVersion | None:
    return stamp if isinstance(stamp, RemoteVersion) else None


def common_schema(paths: Sequence[str], footers: Mapping[str, Any],
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


def _select_columns(schema: pa.Schema, columns: Sequence[str] | None, path: str) -> pa.Schema:
    if columns is None:
        return schema
    if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
        raise OptionError(f"columns= must be a list of column names, not {columns!r}")
    for name in columns:
        if name not in schema.names:
            raise ColumnNotFoundError(f"column {name!r} is not in {path}; its columns are "
                                      + ", ".join(schema.names))
    return pa.schema([schema.field(c) for c in columns], schema.metadata)



def assign_owners(sizes: Sequence[int], workers: Sequence[str]) -> list[str]:
    """An owner per fragment: contiguous runs of about equal bytes, in worker order, so each
    worker's fragments are neighbours in the files' order and read as few partitions
    (:meth:`ReadPlan.partitions`). A fragment goes to the worker whose share holds its middle
    byte: loads differ by at most about one fragment. Deterministic for the same sizes and
    workers, so a re-planned read lands where it did.
    """
    if not workers:
        raise OptionError("workers= is empty: there is no worker to read on")
    total = sum(sizes)
    owners, before = [], 0
    for size in sizes:
        middle = before + size / 2
        position = int(middle * len(workers) // total) if total else 0
        owners.append(workers[min(position, len(workers) - 1)])
        before += size
    return owners
