"""Planning a Parquet read on the client: which row groups, in which fragments, on which worker.

:func:`plan_fragments` expands the source (path, glob, directory with hive ``key=value`` folders,
``http(s)://`` or ``s3://`` URLs, or a list of them); reads the first file's footer and validates
``columns=`` and ``filters=`` against its schema; drops files whose hive values cannot satisfy the
filters; reads the other footers once and in parallel (remote ones with a single suffix request
for the last 64 KiB, a second only when the footer is larger) and checks that the files agree on
their schema (files dropped by hive values are never opened, so they are not checked); prunes
row groups whose min/max statistics cannot satisfy the filters; packs the remaining row groups
of each file into fragments of about ``partition_bytes`` compressed bytes; and assigns fragments
to workers so that each gets about the same number of bytes.

The footers stay in the plan (:attr:`ReadPlan.footers`). The read step sends each fragment's
task its file's ``pyarrow.parquet.FileMetaData`` (pickled as the footer's own Thrift bytes, a
few KiB), so workers never fetch a footer again; they fetch only the column chunks of their row
groups (:func:`column_chunk_ranges`).
"""

from __future__ import annotations

import glob as globbing
import heapq
import numbers
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import OptionError
from .errors import (
    ColumnNotFoundError,
    CorruptFileError,
    FilterError,
    SchemaMismatchError,
    SourceNotFoundError,
    TruncatedFileError,
)
from .remote import (
    FOOTER_PROBE,
    Concurrency,
    Source,
    StorageOptions,
    list_s3,
    measure_storage,
    open_source,
    scheme_of,
    storage_options,
)

MAGIC = b"PAR1"
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
CPU_PARTITION_BYTES = 128 * 2**20
FOOTER_THREADS = 16
OPERATORS = ("==", "!=", "<", "<=", ">", ">=", "in", "not in")
_GLOB_CHARS = "*?["

Term = tuple[str, str, Any]


def default_partition_bytes() -> int:
    """Compressed bytes per fragment: 1/32 of the smallest GPU's memory, or 128 MiB without GPUs.

    A fragment grows several times once decompressed and decoded, and a join holds a few
    partitions at once, so 1/32 of device memory leaves room on the GPU.
    """
    from ..cluster.hardware import list_gpus

    gpus = list_gpus()
    if not gpus:
        return CPU_PARTITION_BYTES
    return max(16 * 2**20, min(gpu.memory_bytes for gpu in gpus) // 32)


@dataclass(frozen=True)
class Fragment:
    """Row groups of one file, read by one task on ``owner``."""

    index: int
    path: str
    row_groups: tuple[int, ...]
    rows: int
    bytes: int
    partition: tuple[tuple[str, Any], ...] = ()
    owner: str | None = None


@dataclass
class ReadPlan:
    """What a read will fetch, where, and what was pruned; ``repr`` summarises it."""

    fragments: list[Fragment]
    schema: pa.Schema
    """The result's columns: file columns, then hive partition columns, or ``columns=``."""
    partition_schema: pa.Schema
    files: list[str]
    """Files left after hive values were checked against the filters."""
    files_total: int
    columns_read: list[str]
    """File columns fetched: the result's, then those only the filters need."""
    filters: list[list[Term]] | None
    row_groups_total: int
    """Row groups of :attr:`files` (files dropped by hive values are not counted)."""
    row_groups_kept: int
    result_bytes: int
    storage: StorageOptions
    concurrency: Concurrency | None
    partition_bytes: int
    footers: dict[str, pq.FileMetaData] = field(repr=False)

    @property
    def total_bytes(self) -> int:
        """Compressed bytes the read fetches: output columns plus filter-only columns."""
        return sum(f.bytes for f in self.fragments)

    @property
    def rows(self) -> int:
        """Rows in the kept row groups (an upper bound on the result when filtering)."""
        return sum(f.rows for f in self.fragments)

    def bytes_by_worker(self) -> dict[str, int]:
        loads: dict[str, int] = {}
        for fragment in self.fragments:
            loads[str(fragment.owner)] = loads.get(str(fragment.owner), 0) + fragment.bytes
        return loads

    def __repr__(self) -> str:
        loads = ", ".join(f"{w}: {_mib(b)}" for w, b in sorted(self.bytes_by_worker().items()))
        return (f"<ReadPlan {len(self.files)}/{self.files_total} files, "
                f"{len(self.fragments)} fragments, "
                f"row groups {self.row_groups_kept}/{self.row_groups_total} kept, "
                f"{_mib(self.total_bytes)} to read for {_mib(self.result_bytes)} of result "
                f"columns, by worker {{{loads}}}, {self.concurrency!r}>")


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f} MiB"


def plan_fragments(source: str | os.PathLike | Sequence[str | os.PathLike],
                   columns: Sequence[str] | None = None,
                   filters: Sequence[Any] | None = None,
                   partition_bytes: int | None = None,
                   storage: StorageOptions | Mapping[str, Any] | None = None,
                   workers: Sequence[str] | None = None) -> ReadPlan:
    """Plan reading a Parquet dataset; see the module docstring for the steps.

    ``filters`` take pandas/pyarrow's DNF form: a list of ``(column, op, value)`` tuples (all
    must hold) or a list of such lists (any may hold); ``op`` is one of ``==, =, !=, <, <=, >,
    >=, in, not in``. Pruning is conservative: a row group without statistics is kept, and the
    read step applies the filters to rows. ``workers=None`` leaves fragments without owners.
    """
    storage = storage_options(storage)
    if partition_bytes is None:
        partition_bytes = default_partition_bytes()
    if partition_bytes < 1:
        raise OptionError(f"partition_bytes={partition_bytes} must be at least 1")
    found = expand_source(source, storage)
    paths = [path for path, _ in found]
    partitions = hive_partitions(found)
    partition_schema = _partition_schema(partitions)
    # The first footer gives the schema to check columns and filters against; then files whose
    # hive values fail the filters are dropped before their footers are read.
    footers, concurrency = read_footers(paths[:1], storage)
    first_schema = _arrow_schema(paths[0], footers[paths[0]])
    _check_no_collision(first_schema, partition_schema, paths[0])
    full = pa.schema(list(first_schema) + list(partition_schema), first_schema.metadata)
    output = _select_columns(full, columns, paths[0])
    dnf = normalize_filters(filters, full, paths[0])
    kept_paths = [p for p in paths if partition_may_match(partitions.get(p, {}), dnf)]
    others = [p for p in kept_paths if p != paths[0]]
    footers.update(read_footers(others, storage, measure=False)[0])
    file_schema = common_schema(paths[:1] + others, footers)
    filter_columns = [t[0] for conj in dnf or () for t in conj]
    names = output.names + [c for c in dict.fromkeys(filter_columns) if c not in output.names]
    columns_read = [c for c in names if c in file_schema.names]
    result_columns = [c for c in output.names if c in file_schema.names]

    fragments: list[Fragment] = []
    total = kept = result_bytes = 0
    for path in kept_paths:
        metadata = footers[path]
        values = partitions.get(path, {})
        indices = column_indices(metadata, columns_read)
        result_indices = column_indices(metadata, result_columns)
        chosen: list[int] = []
        rows = size = 0
        for group in range(metadata.num_row_groups):
            total += 1
            row_group = metadata.row_group(group)
            if not row_group_may_match(row_group, metadata, values, dnf):
                continue
            kept += 1
            group_bytes = sum(row_group.column(i).total_compressed_size for i in indices)
            result_bytes += sum(row_group.column(i).total_compressed_size for i in result_indices)
            if chosen and size + group_bytes > partition_bytes:
                fragments.append(Fragment(len(fragments), path, tuple(chosen), rows, size,
                                          tuple(values.items())))
                chosen, rows, size = [], 0, 0
            chosen.append(group)
            rows += row_group.num_rows
            size += group_bytes
        if chosen:
            fragments.append(Fragment(len(fragments), path, tuple(chosen), rows, size,
                                      tuple(values.items())))
    if workers is not None:
        owners = assign_owners([f.bytes for f in fragments], workers)
        fragments = [Fragment(f.index, f.path, f.row_groups, f.rows, f.bytes, f.partition, o)
                     for f, o in zip(fragments, owners)]
    return ReadPlan(fragments, output, partition_schema, kept_paths, len(paths), columns_read, dnf,
                    total, kept, result_bytes, storage, concurrency, partition_bytes, footers)


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


def read_footers(paths: Sequence[str], storage: StorageOptions, threads: int = FOOTER_THREADS,
                 measure: bool = True) -> tuple[dict[str, pq.FileMetaData], Concurrency | None]:
    """Every file's footer, read in parallel; and (``measure``) the store's concurrency,
    measured on the first file. An error names the first failing file in ``paths`` order."""
    if not paths:
        return {}, None

    def one(index_path: tuple[int, str]) -> tuple[pq.FileMetaData, Concurrency | None]:
        index, path = index_path
        with open_source(path, storage) as source:
            metadata = read_footer(source)
            chosen = measure_storage(source, storage) if measure and index == 0 else None
            return metadata, chosen

    with ThreadPoolExecutor(max(1, min(threads, len(paths))),
                            thread_name_prefix="gpuframe-footer") as pool:
        results = list(pool.map(one, enumerate(paths)))
    return {p: r[0] for p, r in zip(paths, results)}, results[0][1]


def read_footer(source: Source) -> pq.FileMetaData:
    """The footer of one Parquet file: the last 64 KiB in one request, more only if needed.

    Raises :class:`TruncatedFileError` when the file starts like Parquet but its end (footer or
    data) is missing, :class:`CorruptFileError` when it is not Parquet or the footer is garbage.
    """
    path = source.path
    size, tail = source.read_tail(FOOTER_PROBE)
    if size == 0:
        raise CorruptFileError(f"{path} is empty, not a Parquet file")
    if size < 12 or tail[-4:] != MAGIC:
        head = tail[:4] if len(tail) == size else source.read_range(0, 4)
        if head == MAGIC:
            raise TruncatedFileError(f"{path} is truncated: it starts like Parquet but its "
                                     f"{size} bytes end without a footer")
        raise CorruptFileError(f"{path} is not a Parquet file (no PAR1 magic at either end)")
    length = int.from_bytes(tail[-8:-4], "little")
    if length + 12 > size:
        raise CorruptFileError(f"corrupt footer in {path}: it claims {length} bytes of a "
                               f"{size}-byte file")
    if length + 8 > len(tail):
        missing = length + 8 - len(tail)
        tail = source.read_range(size - len(tail) - missing, missing) + tail
    try:
        metadata = pq.read_metadata(pa.BufferReader(tail[-(length + 8):]))
    except (OSError, pa.ArrowException) as exc:
        raise CorruptFileError(f"corrupt footer in {path}: {exc}") from exc
    data_end = size - length - 8
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for i in range(row_group.num_columns):
            chunk = row_group.column(i)
            start, length_ = chunk_range(chunk)
            if start < 0 or start + length_ > data_end:
                raise TruncatedFileError(
                    f"{path} is truncated or corrupt: row group {group} column "
                    f"{chunk.path_in_schema!r} lies at bytes {start}-{start + length_}, past "
                    f"the data's end at {data_end}")
    return metadata


def common_schema(paths: Sequence[str], footers: Mapping[str, pq.FileMetaData]) -> pa.Schema:
    """The files' arrow schema; :class:`SchemaMismatchError` names two files and the column."""
    first = paths[0]
    schema = _arrow_schema(first, footers[first])
    for path in paths[1:]:
        other = _arrow_schema(path, footers[path])
        if other.names == schema.names and other.types == schema.types:
            continue
        for name in list(dict.fromkeys(schema.names + other.names)):
            mine = schema.field(name).type if name in schema.names else "missing"
            theirs = other.field(name).type if name in other.names else "missing"
            if mine != theirs:
                raise SchemaMismatchError(
                    f"{first} and {path} disagree on column {name!r}: {mine} vs {theirs}")
        raise SchemaMismatchError(f"{first} and {path} order their columns differently: "
                                  f"{schema.names} vs {other.names}")
    return schema


def _arrow_schema(path: str, metadata: pq.FileMetaData) -> pa.Schema:
    try:
        return metadata.schema.to_arrow_schema()
    except (pa.ArrowException, OSError) as exc:
        raise CorruptFileError(f"{path}: its schema has no arrow equivalent: {exc}") from exc


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


def normalize_filters(filters: Sequence[Any] | None, schema: pa.Schema,
                      path: str) -> list[list[Term]] | None:
    """Filters as a list of conjunctions of ``(column, op, value)`` with ``=`` spelled ``==``
    and values of the column's type; :class:`FilterError` names the bad term."""
    if filters is None:
        return None
    if not isinstance(filters, (list, tuple)) or not filters:
        raise FilterError(f"filters= must be a non-empty list of (column, op, value) tuples "
                          f"or a list of such lists, not {filters!r}")
    nested = isinstance(filters[0], list)
    conjunctions = filters if nested else [filters]
    result = []
    for conjunction in conjunctions:
        if not isinstance(conjunction, (list, tuple)) or not conjunction:
            raise FilterError(f"filters= term {conjunction!r} is not a non-empty list of "
                              "(column, op, value) tuples")
        result.append([_normalize_term(term, schema, path) for term in conjunction])
    return result


def _normalize_term(term: Any, schema: pa.Schema, path: str) -> Term:
    if not isinstance(term, (tuple, list)) or len(term) != 3 or not isinstance(term[0], str):
        raise FilterError(f"filter term {term!r} is not a (column, op, value) tuple")
    column, op, value = term
    op = "==" if op == "=" else str(op).lower()
    if op not in OPERATORS:
        raise FilterError(f"filter term {term!r}: unknown operator {term[1]!r}; use one of "
                          "==, =, !=, <, <=, >, >=, in, not in")
    if column not in schema.names:
        raise FilterError(f"filter term {term!r} names column {column!r}, which is not in "
                          f"{path}; its columns are " + ", ".join(schema.names))
    kind = schema.field(column).type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if op in ("in", "not in"):
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise FilterError(f"filter term {term!r}: {op!r} needs a list, set or tuple of "
                              "values")
        return column, op, tuple(_typed(v, kind, term, column) for v in value)
    return column, op, _typed(value, kind, term, column)


def _typed(value: Any, kind: pa.DataType, term: Any, column: str) -> Any:
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind)
    if numeric and isinstance(value, numbers.Real) and not isinstance(value, bool):
        return value
    try:
        if numeric:
            raise TypeError("not a number")
        return pa.scalar(value, type=kind).as_py()
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise FilterError(f"filter term {term!r}: value {value!r} does not fit column "
                          f"{column!r} of type {kind} ({exc})") from exc


def column_indices(metadata: pq.FileMetaData, names: Sequence[str]) -> list[int]:
    """Leaf column indices (in the footer) of the top-level columns ``names``."""
    wanted = set(names)
    return [i for i in range(metadata.num_columns)
            if metadata.schema.column(i).path.split(".", 1)[0] in wanted]


def chunk_range(chunk: pq.ColumnChunkMetaData) -> tuple[int, int]:
    """(offset, length) of a column chunk in its file, dictionary page included."""
    start = chunk.data_page_offset
    if chunk.has_dictionary_page and 0 < chunk.dictionary_page_offset < start:
        start = chunk.dictionary_page_offset
    return start, chunk.total_compressed_size


def column_chunk_ranges(metadata: pq.FileMetaData, row_groups: Sequence[int],
                        names: Sequence[str]) -> list[tuple[int, int]]:
    """Byte ranges of the chunks of columns ``names`` in ``row_groups``, adjacent ones merged."""
    indices = column_indices(metadata, names)
    spans = sorted(chunk_range(metadata.row_group(g).column(i))
                   for g in row_groups for i in indices)
    merged: list[tuple[int, int]] = []
    for start, length in spans:
        if merged and start <= merged[-1][0] + merged[-1][1]:
            last_start, last_length = merged[-1]
            merged[-1] = (last_start, max(last_start + last_length, start + length) - last_start)
        else:
            merged.append((start, length))
    return merged


def partition_may_match(values: Mapping[str, Any], dnf: list[list[Term]] | None) -> bool:
    """False only when a file's hive values alone prove no row can satisfy ``dnf``."""
    if dnf is None or not values:
        return True
    return any(all(column not in values
                   or _range_may_match(op, value, values[column], values[column],
                                       1 if values[column] is None else 0, 1)
                   for column, op, value in conj)
               for conj in dnf)


def row_group_may_match(row_group: pq.RowGroupMetaData, metadata: pq.FileMetaData,
                        partition: Mapping[str, Any], dnf: list[list[Term]] | None) -> bool:
    """False only when statistics or hive values prove no row can satisfy ``dnf``."""
    if row_group.num_rows == 0:
        return False
    if dnf is None:
        return True
    return any(all(_term_may_match(term, row_group, metadata, partition) for term in conj)
               for conj in dnf)


def _term_may_match(term: Term, row_group: pq.RowGroupMetaData, metadata: pq.FileMetaData,
                    partition: Mapping[str, Any]) -> bool:
    column, op, value = term
    rows = row_group.num_rows
    if column in partition:
        known = partition[column]
        return _range_may_match(op, value, known, known, 1 if known is None else 0, 1)
    indices = column_indices(metadata, [column])
    if len(indices) != 1:
        return True
    stats = row_group.column(indices[0]).statistics
    if stats is None:
        return True
    nulls = stats.null_count if stats.has_null_count else None
    if not stats.has_min_max:
        return not (nulls is not None and nulls == rows)
    return _range_may_match(op, value, stats.min, stats.max, nulls, rows)


def _range_may_match(op: str, value: Any, low: Any, high: Any, nulls: int | None,
                     rows: int) -> bool:
    """Can a value in [low, high] satisfy ``op value``? Nulls satisfy no comparison."""
    if nulls is not None and nulls >= rows:
        return False
    try:
        if low != low or high != high:  # NaN statistics order nothing
            return True
        if op == "==":
            return low <= value <= high
        if op == "!=":
            return not (low == high == value)
        if op == "<":
            return low < value
        if op == "<=":
            return low <= value
        if op == ">":
            return high > value
        if op == ">=":
            return high >= value
        if op == "in":
            return any(low <= v <= high for v in value if v is not None)
        return not (low == high and low in value)
    except TypeError:
        return True


def assign_owners(sizes: Sequence[int], workers: Sequence[str]) -> list[str]:
    """An owner per fragment: largest first onto the least-loaded worker (ties: worker order).

    Deterministic for the same sizes and workers, so a re-planned read lands where it did.
    """
    if not workers:
        raise OptionError("workers= is empty: there is no worker to read on")
    heap = [(0, position) for position in range(len(workers))]
    owners = [""] * len(sizes)
    for index in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        load, position = heapq.heappop(heap)
        owners[index] = workers[position]
        heapq.heappush(heap, (load + sizes[index], position))
    return owners
