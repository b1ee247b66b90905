"""Planning a read on the client: which units of which files, in which fragments, on which
worker, read in which groups.

:mod:`.sources` finds the files and their hive values, :mod:`.metadata` reads and keeps their
metadata; this module prunes, packs and places. The same steps for every format
(:mod:`~gpuframe.io.formats`: Parquet row groups, ORC stripes, CSV line-aligned byte ranges).
:func:`plan_fragments` expands the source (path, glob, directory with hive ``key=value``
folders, ``http(s)://`` or ``s3://`` URLs, or a list of them); reads the first file's metadata
(Parquet footer, ORC tail, CSV header and sample) and validates ``columns=`` and ``filters=``
against its schema; drops files whose hive values cannot satisfy the filters; reads the other
files' metadata once and in parallel (remote ones with a single suffix request for the last
64 KiB where the format keeps it at the end) and checks that the files agree on their schema
(files dropped by hive values are never opened, so they are not checked); prunes units whose
statistics cannot satisfy the filters; packs the remaining units of each file into fragments of
about ``partition_bytes`` bytes; and assigns fragments to workers so that each gets about the
same number of bytes. Each worker's neighbouring fragments are then read together, one read
group a task, into one partition of the frame (:meth:`ReadPlan.read_groups`).

The metadata stays in the plan (:attr:`ReadPlan.footers`), and for later plans while the files
are unchanged (:class:`~.metadata.MetadataCache`). The read step sends each fragment's task its
file's metadata (a Parquet footer as its Thrift bytes, decoded once per process:
:class:`~gpuframe.io.formats.parquet.FooterBytes`), so workers never fetch it again; they
fetch only the bytes of their units, from remote files that must still be the version planning
saw (:attr:`ReadPlan.versions`). The units a plan keeps and packs are remembered while its
files' footers are the cached ones (:func:`packed_units`).

The partition budget is passed in: :func:`default_partition_bytes` takes the workers' memory
(their GPUs', or their memory limits), which the read step learns from the workers; planning
asks no hardware itself, and what it asks of the workers (their store's measurement, the files'
metadata) comes through the callbacks it is given (:data:`Measure`,
:data:`~.metadata.ReadMetadata`).
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ...errors import OptionError
from ..errors import ColumnNotFoundError, SchemaMismatchError, repr_without_passwords
from ..filters import Dnf, normalize_filters
from ..formats import FileMetadata, format_for
from ..formats.base import FileFormat
from ..statistics import HiveValue, hive_values_may_match, value_range
from ..storage import open_source
from ..storage.base import RemoteVersion, StorageOptions, scheme_of, storage_options
from ..tuning.model import Concurrency, StoreProbe, fit_to_ranges
from ..tuning.probe import probe_storage
from ..tuning.stores import concurrency_meanwhile, measure_storage, unmeasured_concurrency
from .metadata import ReadMetadata, common_schema, planned_metadata, read_metadata_each
from .sources import DatasetSource, expand_source, hive_schema_of, hive_values_of

CPU_PARTITION_BYTES = 128 * 2**20
MIN_PARTITION_BYTES = 16 * 2**20
Measure = Callable[[str, StorageOptions, int], Concurrency]
"""``measure(file, storage, partition_bytes)``: the store's :class:`Concurrency`, measured on
``file`` (the one the plan reads most of) where the reads will run (:func:`measure_here`, or on
the workers)."""


def default_partition_bytes(worker_memory: Sequence[int] = (), on_device: bool = False) -> int:
    """Bytes per fragment: 1/32 of the smallest worker's memory, at least 16 MiB; on the CPU at
    most 128 MiB, and 128 MiB where no worker has a memory limit.

    ``worker_memory``: the bytes each worker holds partitions in, its GPU's where ``on_device``,
    else its memory limit (0: none). A fragment grows several times once decompressed and
    decoded, and a join holds a few partitions at once, so 1/32 of the memory leaves room, and
    partitions that small can spill one by one.
    """
    limits = [memory for memory in worker_memory if memory > 0]
    if not limits:
        return CPU_PARTITION_BYTES
    share = max(MIN_PARTITION_BYTES, min(limits) // 32)
    return share if on_device else min(CPU_PARTITION_BYTES, share)


@dataclass(frozen=True)
class Fragment:
    """Units (row groups, stripes, byte ranges) of one file, read by one task on ``owner``."""

    index: int
    path: str
    units: tuple[int, ...]
    rows: int | None
    """Rows in the units; None where the format does not say (CSV)."""
    bytes: int
    hive_values: tuple[tuple[str, HiveValue], ...] = ()
    """The file's hive values, (key, value) in folder order."""
    owner: str | None = None

    __repr__ = repr_without_passwords


@dataclass
class ReadPlan:
    """What a read will fetch, where, and what was pruned; ``repr`` summarises it."""

    format: FileFormat
    fragments: list[Fragment]
    schema: pa.Schema
    """The result's columns: file columns, then hive columns, or ``columns=``."""
    hive_schema: pa.Schema
    """The columns the files' hive values make."""
    file_schema: pa.Schema
    """The columns of the files, as every file has them."""
    files: list[str]
    """Files left after hive values were checked against the filters."""
    files_total: int
    columns_read: list[str]
    """File columns fetched: the result's, then those only the filters need."""
    filters: Dnf | None
    units_total: int
    """Units of :attr:`files` (files dropped by hive values are not counted)."""
    units_kept: int
    result_bytes: int
    storage: StorageOptions
    concurrency: Concurrency | None
    partition_bytes: int
    footers: dict[str, FileMetadata] = field(repr=False)
    """Each file's metadata (:meth:`FileFormat.read_metadata`)."""
    versions: dict[str, RemoteVersion] = field(default_factory=dict, repr=False)
    """Each remote file's version as planning saw it: the read checks its store's answers
    against it."""
    reused: frozenset[str] = field(default_factory=frozenset, repr=False)
    """Files whose metadata planning took from :data:`~.metadata.PLANNED_METADATA` rather
    than read."""

    @property
    def total_bytes(self) -> int:
        """Bytes the read fetches: output columns plus filter-only columns."""
        return sum(f.bytes for f in self.fragments)

    @property
    def rows(self) -> int | None:
        """Rows in the kept units (an upper bound when filtering); None if a format can't say."""
        counts = [f.rows for f in self.fragments if f.rows is not None]
        return sum(counts) if len(counts) == len(self.fragments) else None

    def read_groups(self) -> list[list[int]]:
        """The fragments (indices) read together by one task, into one partition of the frame:
        runs of consecutive fragments with the same owner, packed while their bytes stay within
        :attr:`partition_bytes` (a larger fragment is a group alone), so the frame keeps the
        files' row order. Few large reads: cuDF decodes one call's files together, several
        times faster than file by file (benchmarks/results/2026-11-23-fixes-h200x2.md)."""
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
                f"{len(self.fragments)} fragments in {len(self.read_groups())} read groups, "
                f"{self.format.unit_name} {self.units_kept}/{self.units_total} kept, "
                f"{_mib(self.total_bytes)} to read for {_mib(self.result_bytes)} of result "
                f"columns, by worker {{{loads}}}, {self.concurrency!r}>")


class ValueRanges:
    """Each column's least and greatest value over a planned read's files, from their metadata
    (row group or stripe statistics), worked out as first asked: the plan's estimates take a
    range filter on a column to keep its share of that range, not a fixed share
    (:func:`gpuframe.plan.explain.estimated`). None for a column some file says nothing of."""

    def __init__(self, plan: ReadPlan) -> None:
        self._format = plan.format
        self._footers = [plan.footers[path] for path in plan.files if path in plan.footers]
        self._known: dict[str, tuple[Any, Any] | None] = {}

    def __call__(self, column: str) -> tuple[Any, Any] | None:
        if column not in self._known:
            ranges = [self._format.column_range(footer, column) for footer in self._footers]
            self._known[column] = value_range(
                None if known is None else (*known, None) for known in ranges)
        return self._known[column]


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f} MiB"


def plan_fragments(source: DatasetSource,
                   columns: Sequence[str] | None = None,
                   filters: Sequence[Any] | None = None,
                   partition_bytes: int | None = None,
                   storage: StorageOptions | Mapping[str, Any] | None = None,
                   workers: Sequence[str] | None = None,
                   format: str | FileFormat = "parquet",
                   worker_memory: Sequence[int] = (),
                   on_device: bool = False,
                   measure: Measure | None = None,
                   read_metadata: ReadMetadata | None = None,
                   ) -> ReadPlan:
    """Plan reading a dataset; see the module docstring for the steps.

    ``filters`` take pandas/pyarrow's DNF form: a list of ``(column, op, value)`` tuples (all
    must hold) or a list of such lists (any may hold); ``op`` is one of ``==, =, !=, <, <=, >,
    >=, in, not in``. Pruning is conservative: a unit without statistics is kept, and the read
    step applies the filters to rows. ``workers=None`` leaves fragments without owners.
    ``format``: 'parquet', 'orc', 'csv' or a :class:`~gpuframe.io.formats.base.FileFormat`.
    ``partition_bytes=None`` takes :func:`default_partition_bytes` of ``worker_memory``
    (the workers' GPUs' where ``on_device``, else their memory limits).
    ``measure(file, storage, partition_bytes)``: the store's :class:`Concurrency`, measured on
    the file the plan reads most of, where the reads will run
    (:func:`gpuframe.operators.scan.measure_on_workers`), for plans of at least
    ``storage.probe_min_bytes`` (smaller ones take
    :func:`~gpuframe.io.tuning.stores.unmeasured_concurrency`); None measures here
    (:func:`measure_here`). ``read_metadata(paths, storage, format, partition_bytes)``:
    each file's metadata or error, as :func:`~.metadata.read_metadata_each` (the default,
    here) gives them; :func:`gpuframe.operators.scan.metadata_on_workers` reads them on the
    workers instead.
    """
    fmt = format_for(format)
    storage = storage_options(storage)
    read_metadata = read_metadata or read_metadata_each
    if partition_bytes is None:
        partition_bytes = default_partition_bytes(worker_memory, on_device)
    if partition_bytes < 1:
        raise OptionError(f"partition_bytes={partition_bytes} must be at least 1")
    found = expand_source(source, storage)
    paths = [path for path, _ in found]
    hive_values = hive_values_of(found)
    hive_schema = hive_schema_of(hive_values)
    # The first file's metadata gives the schema to check columns and filters against; then,
    # where filters may drop files by their hive values, those are dropped before their
    # metadata is read. Otherwise every file's metadata comes at once: one round trip to the
    # workers, not two (benchmarks/results/2026-11-23-partition-ingest-h200-pm.md).
    prunable = bool(filters) and bool(hive_schema.names)
    planned = planned_metadata(paths[:1] if prunable else paths, read_metadata, storage, fmt,
                               partition_bytes)
    first_schema = fmt.resolve_schema(fmt.arrow_schema(paths[0], planned[paths[0]].metadata))
    _check_no_collision(first_schema, hive_schema, paths[0])
    full = pa.schema(list(first_schema) + list(hive_schema), first_schema.metadata)
    output = _select_columns(full, columns, paths[0])
    dnf = normalize_filters(filters, full, paths[0])
    kept_paths = [p for p in paths if hive_values_may_match(hive_values.get(p, {}), dnf)]
    others = [p for p in kept_paths if p != paths[0]]
    planned.update(planned_metadata([p for p in others if p not in planned], read_metadata,
                                    storage, fmt, partition_bytes))
    footers = {path: file.metadata for path, file in planned.items()}
    file_schema = fmt.resolve_schema(common_schema(paths[:1] + others, footers, fmt))
    if any(pa.types.is_null(f.type) for f in full if f.name in file_schema.names):
        # A column of nulls only in the first file takes the type the others give it.
        full = pa.schema([file_schema.field(f.name) if f.name in file_schema.names else f
                          for f in full], full.metadata)
        output = _select_columns(full, columns, paths[0])
        dnf = normalize_filters(filters, full, paths[0])
    filter_columns = [t[0] for conj in dnf or () for t in conj]
    names = output.names + [c for c in dict.fromkeys(filter_columns) if c not in output.names]
    columns_read = [c for c in names if c in file_schema.names]
    result_columns = [c for c in output.names if c in file_schema.names]

    packed = packed_units(fmt, kept_paths, footers, hive_values, columns_read, result_columns,
                          dnf, partition_bytes)
    fragments = list(packed.fragments)  # the remembered packing's own list stays as it is
    if (storage.requests_in_flight is None
            and sum(f.bytes for f in fragments) < storage.probe_min_bytes):
        concurrency = unmeasured_concurrency(storage)
    else:
        # The file read most: a probe reads at most half its file, and the first of hundreds
        # of small files would measure requests shorter than the plan's.
        planned_bytes: Counter[str] = Counter()
        for fragment in fragments:
            planned_bytes[fragment.path] += fragment.bytes
        probed = max(planned_bytes, key=planned_bytes.__getitem__, default=paths[0])
        concurrency = (measure or measure_here)(probed, storage, partition_bytes)
    if concurrency is not None:
        concurrency = fit_to_ranges(concurrency, packed.range_lengths(),
                                    storage.max_requests_in_flight)
    if workers is not None:
        owners = assign_owners([f.bytes for f in fragments], workers)
        fragments = [Fragment(f.index, f.path, f.units, f.rows, f.bytes, f.hive_values, o)
                     for f, o in zip(fragments, owners)]
    return ReadPlan(fmt, fragments, output, hive_schema, file_schema, kept_paths,
                    len(paths), columns_read, dnf, packed.units_total, packed.units_kept,
                    packed.result_bytes, storage,
                    concurrency, partition_bytes, footers,
                    {path: file.version for path, file in planned.items() if file.version},
                    frozenset(path for path, file in planned.items() if file.reused))


class PackedUnits:
    """The units of a plan's files that its filters keep, packed into fragments (no owners
    yet), with what they count and, as first asked, the lengths of the ranges they fetch."""

    def __init__(self, fmt: FileFormat, paths: Sequence[str],
                 footers: Mapping[str, FileMetadata], hive_values: Mapping[str, Any],
                 columns_read: Sequence[str], result_columns: Sequence[str], dnf: Dnf | None,
                 partition_bytes: int) -> None:
        self.footers = tuple(footers[path] for path in paths)
        self.fragments: list[Fragment] = []
        self.units_total = self.units_kept = self.result_bytes = 0
        self._format, self._columns_read = fmt, tuple(columns_read)
        self._footer_of = dict(zip(paths, self.footers))
        self._range_lengths: list[int] | None = None
        for path, metadata in zip(paths, self.footers):
            values = hive_values.get(path, {})
            chosen: list[int] = []
            rows: int | None = 0
            size = 0
            for unit in fmt.units(metadata, columns_read, result_columns):
                self.units_total += 1
                if not fmt.unit_may_match(metadata, unit, values, dnf):
                    continue
                self.units_kept += 1
                self.result_bytes += unit.result_bytes
                if chosen and size + unit.bytes > partition_bytes:
                    self._add(path, chosen, rows, size, values)
                    chosen, rows, size = [], 0, 0
                chosen.append(unit.index)
                rows = None if rows is None or unit.rows is None else rows + unit.rows
                size += unit.bytes
            if chosen:
                self._add(path, chosen, rows, size, values)

    def _add(self, path: str, units: list[int], rows: int | None, size: int,
             values: Mapping[str, Any]) -> None:
        self.fragments.append(Fragment(len(self.fragments), path, tuple(units), rows, size,
                                       tuple(values.items())))

    def range_lengths(self) -> list[int]:
        """The length of each byte range the fragments fetch."""
        if self._range_lengths is None:
            self._range_lengths = [
                length for f in self.fragments
                for _, length in self._format.ranges(self._footer_of[f.path], f.units,
                                                     self._columns_read)]
        return self._range_lengths


class Packings:
    """:class:`PackedUnits` by what they were packed from, the most recently used, holding at
    most ``budget`` bytes of footers alive (each holds its files')."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._kept: OrderedDict[tuple[Any, ...], tuple[PackedUnits, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...], footers: Sequence[FileMetadata]) -> PackedUnits | None:
        """The packing kept under ``key``, where it was packed from these very ``footers``."""
        with self._lock:
            found = self._kept.get(key)
            if found is None or any(a is not b for a, b in zip(found[0].footers, footers)):
                return None
            self._kept.move_to_end(key)
            return found[0]

    def keep(self, key: tuple[Any, ...], packed: PackedUnits, held: int) -> None:
        with self._lock:
            old = self._kept.pop(key, None)
            self._bytes += held - (old[1] if old else 0)
            self._kept[key] = (packed, held)
            while self._bytes > self.budget and len(self._kept) > 1:
                _, (_, freed) = self._kept.popitem(last=False)
                self._bytes -= freed


PACKINGS = Packings(256 * 2**20)
"""This process's remembered packings."""


def packed_units(fmt: FileFormat, paths: Sequence[str], footers: Mapping[str, FileMetadata],
                 hive_values: Mapping[str, Any], columns_read: Sequence[str],
                 result_columns: Sequence[str], dnf: Dnf | None,
                 partition_bytes: int) -> PackedUnits:
    """:class:`PackedUnits` of the files, remembered (:data:`PACKINGS`) while their footers are
    the very objects the metadata cache keeps for them unchanged
    (:class:`~.metadata.MetadataCache`): a query run again plans each read again, and pruning
    and packing every row group of a large dataset took milliseconds of each read's plan.
    Formats whose metadata is made anew for each plan (CSV's) pack anew."""
    def pack() -> PackedUnits:
        return PackedUnits(fmt, paths, footers, hive_values, columns_read, result_columns, dnf,
                           partition_bytes)

    if not fmt.reusable_metadata:
        return pack()
    try:
        key = (type(fmt), tuple(paths), tuple(id(footers[path]) for path in paths),
               tuple(tuple(sorted(hive_values.get(path, {}).items())) for path in paths),
               tuple(columns_read), tuple(result_columns), _dnf_key(dnf), partition_bytes)
        hash(key)
    except TypeError:  # a filter value that is no key (it still plans)
        return pack()
    packed = PACKINGS.get(key, [footers[path] for path in paths])
    if packed is None:
        packed = pack()
        PACKINGS.keep(key, packed, sum(fmt.metadata_bytes(f) for f in packed.footers))
    return packed


def _dnf_key(dnf: Dnf | None) -> tuple[Any, ...] | None:
    """``dnf`` as a hashable key: an ``in`` term's values as a tuple."""
    if dnf is None:
        return None
    return tuple(tuple((column, op, tuple(value) if isinstance(value, (list, set, frozenset))
                        else value) for column, op, value in conjunction)
                 for conjunction in dnf)


def _check_no_collision(file_schema: pa.Schema, hive_schema: pa.Schema, path: str) -> None:
    for name in hive_schema.names:
        if name in file_schema.names:
            raise SchemaMismatchError(f"hive key {name!r} is also a column of {path}")


def measure_here(path: str, storage: StorageOptions, partition_bytes: int) -> Concurrency:
    """The store's :class:`Concurrency`, measured from this process on ``path``: local files
    in the background while their first read goes on (:func:`concurrency_meanwhile`)."""
    if scheme_of(path) == "file":
        def probe() -> tuple[list[StoreProbe], int, int]:
            with open_source(path, storage) as source:
                return [probe_storage(source, storage)], 1, 0

        return concurrency_meanwhile(path, storage, probe, partition_bytes)
    with open_source(path, storage) as source:
        return measure_storage(source, storage, fragment_bytes=partition_bytes)


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
    worker's fragments are neighbours in the files' order and read in few groups
    (:meth:`ReadPlan.read_groups`). A fragment goes to the worker whose share holds its middle
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
