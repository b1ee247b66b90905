"""Reading a planned Parquet dataset on the cluster: one task per fragment, on its owner.

:func:`read_parquet` plans on the client (:func:`gpuframe.io.plan.plan_fragments`) and runs one
``gpuframe-read-parquet-<token>-<i>`` task per fragment on the worker that owns it, so the task
stream shows the reads and later stages know where each partition lives. Each task receives its
file's footer from the plan and reads only the planned row groups and columns:

- pandas backend (:class:`ArrowReader`): local files through Arrow's own reader; remote files by
  fetching exactly the column chunks with :func:`gpuframe.io.remote.read_ranges` (requests in
  flight and their size from the plan's Little's-law numbers), then decoding them with Arrow from
  memory. With ``filters=``, the filter columns are read first and the other columns only for
  the row groups where some row survived.
- cudf backend (:class:`CudfReader`): cuDF's reader with KvikIO's thread count and task size set
  from the same numbers; cuDF is imported only on the workers that run it.

Every worker reports what it fetched as a Dask event (topic ``gpuframe-read``); the client folds
them into a :class:`ReadReport`: bytes read against compressed bytes of the result's columns.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..backend import get_backend
from .errors import SourceNotFoundError
from .plan import ReadPlan, column_chunk_ranges, plan_fragments
from .remote import RangeFile, StorageOptions, open_source, read_ranges, scheme_of, storage_options

logger = logging.getLogger("gpuframe")

EVENT_TOPIC = "gpuframe-read"
_ROW = "__gpuframe_row__"


@dataclass(frozen=True)
class FragmentTask:
    """Everything one read task needs; the footer travels with it (pickled as Thrift bytes)."""

    key: str
    path: str
    row_groups: tuple[int, ...]
    metadata: pq.FileMetaData
    file_columns: tuple[str, ...]
    schema: pa.Schema
    partition: tuple[tuple[str, Any], ...]
    partition_schema: pa.Schema
    filters: list | None
    storage: StorageOptions
    requests_in_flight: int
    request_size: int


@dataclass(frozen=True)
class FragmentStats:
    """What one task fetched: bytes over the wire (or from disk), row groups, rows, seconds."""

    key: str
    path: str
    bytes_read: int
    requests: int
    row_groups_read: int
    rows: int
    seconds: float


@dataclass(frozen=True)
class ReadReport:
    """What a whole read fetched, against what the plan expected and the result holds."""

    fragments: int
    bytes_read: int
    planned_bytes: int
    result_column_bytes: int
    requests: int
    rows: int
    row_groups_kept: int
    row_groups_total: int
    seconds: float

    def __repr__(self) -> str:
        return (f"<ReadReport {self.fragments} fragments, {self.rows} rows: read "
                f"{self.bytes_read / 2**20:.2f} MiB in {self.requests} requests (planned "
                f"{self.planned_bytes / 2**20:.2f} MiB) for "
                f"{self.result_column_bytes / 2**20:.2f} MiB of result columns; row groups "
                f"{self.row_groups_kept}/{self.row_groups_total} after statistics; "
                f"{self.seconds:.2f} s>")


class ArrowReader:
    """Reads a fragment with pyarrow; the pandas backend's reader."""

    def read(self, task: FragmentTask) -> tuple[pa.Table, FragmentStats]:
        start = time.perf_counter()
        with _Fetcher(task) as fetcher:
            table = _read_selective(task, fetcher)
            stats = FragmentStats(task.key, task.path, fetcher.bytes_read, fetcher.requests,
                                  fetcher.row_groups_read, table.num_rows,
                                  time.perf_counter() - start)
        return table, stats


class CudfReader:
    """Reads a fragment with cuDF, KvikIO's threads and task size set from the plan.

    Local files: cuDF's reader through KvikIO, which uses GPUDirect Storage where the host has
    it and its bounce buffers where not (``compat_mode`` auto). Remote files: the column chunks
    are fetched by :class:`ArrowReader`'s concurrent range reads and the table is moved to the
    GPU; cuDF 26.10's reader fetched whole files over HTTP (seen on an H200: three full GETs
    for one fragment), which a read must never do.
    """

    def read(self, task: FragmentTask) -> tuple[Any, FragmentStats]:
        import cudf
        import kvikio.defaults

        if scheme_of(task.path) != "file":
            table, stats = ArrowReader().read(task)
            return cudf.DataFrame.from_arrow(table), stats
        start = time.perf_counter()
        kvikio.defaults.set({"num_threads": task.requests_in_flight,
                             "task_size": task.request_size})
        frame = cudf.read_parquet(task.path, columns=list(task.file_columns),
                                  row_groups=[list(task.row_groups)])
        for name, value in task.partition:
            kind = task.partition_schema.field(name).type
            frame[name] = cudf.Series.from_arrow(pa.array([value] * len(frame), kind))
        if task.filters:
            table = frame.to_arrow().filter(pq.filters_to_expression(task.filters))
            frame = cudf.DataFrame.from_arrow(table)
        frame = frame[task.schema.names].reset_index(drop=True)
        planned = sum(n for _, n in column_chunk_ranges(task.metadata, task.row_groups,
                                                        task.file_columns))
        stats = FragmentStats(task.key, task.path, planned, 0, len(task.row_groups), len(frame),
                              time.perf_counter() - start)
        return frame, stats


READERS = {"pandas": ArrowReader, "cudf": CudfReader}


class _Fetcher:
    """Row groups and columns of one file as an Arrow table, counting what it fetched.

    Local files go through Arrow's reader (the bytes counted are the chunks' sizes); remote
    files are fetched chunk by chunk with :func:`read_ranges` and decoded from memory.
    """

    def __init__(self, task: FragmentTask):
        self.task = task
        self.local = scheme_of(task.path) == "file"
        self.source = None if self.local else open_source(task.path, task.storage)
        self._local_bytes = 0
        self._local_requests = 0
        self.row_groups_read = 0

    @property
    def bytes_read(self) -> int:
        return self._local_bytes if self.source is None else self.source.bytes_read

    @property
    def requests(self) -> int:
        return self._local_requests if self.source is None else self.source.requests

    def read(self, row_groups: Sequence[int], columns: Sequence[str]) -> pa.Table:
        metadata = self.task.metadata
        ranges = column_chunk_ranges(metadata, row_groups, columns)
        self.row_groups_read = max(self.row_groups_read, len(row_groups))
        if self.source is None:
            self._local_bytes += sum(n for _, n in ranges)
            self._local_requests += len(ranges)
            try:
                parquet = pq.ParquetFile(self.task.path, metadata=metadata)
            except FileNotFoundError as exc:
                raise SourceNotFoundError(f"no such file: {self.task.path} (it was planned, "
                                          "then removed before the read)") from exc
        else:
            fetched = read_ranges(self.source, ranges, self.task.requests_in_flight,
                                  self.task.request_size)
            prefetched = {offset: data for (offset, _), data in zip(ranges, fetched)}
            handle = pa.PythonFile(RangeFile(self.source, prefetched), mode="r")
            parquet = pq.ParquetFile(handle, metadata=metadata)
        return parquet.read_row_groups(list(row_groups), columns=list(columns),
                                       use_threads=False)

    def __enter__(self) -> _Fetcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.source is not None:
            self.source.close()


def _read_selective(task: FragmentTask, fetcher: _Fetcher) -> pa.Table:
    """The fragment's rows that pass the filters, in the output schema.

    When filters are given and some result columns are not filter columns, the filter columns
    are read first; the others are fetched only for row groups where a row survived.
    """
    filter_names = list(dict.fromkeys(t[0] for conj in task.filters or () for t in conj))
    head_columns = [c for c in task.file_columns if c in filter_names]
    rest_columns = [c for c in task.file_columns if c not in filter_names]
    if not task.filters or not rest_columns:
        table = _with_partition(fetcher.read(task.row_groups, task.file_columns), task)
        if task.filters:
            table = table.filter(pq.filters_to_expression(task.filters))
        return _finish(table, task)
    head = _with_partition(fetcher.read(task.row_groups, head_columns), task)
    head = head.append_column(_ROW, pa.array(np.arange(head.num_rows, dtype=np.int64)))
    survivors = head.filter(pq.filters_to_expression(task.filters))
    rows = survivors[_ROW].to_numpy()
    sizes = np.array([task.metadata.row_group(g).num_rows for g in task.row_groups])
    starts = np.concatenate([[0], np.cumsum(sizes)])
    group_of_row = np.searchsorted(starts, rows, side="right") - 1
    kept = np.unique(group_of_row)
    if len(kept) == 0:
        return _finish(survivors.drop_columns([_ROW]), task, empty_rest=rest_columns)
    rest = fetcher.read([task.row_groups[i] for i in kept], rest_columns)
    kept_starts = np.concatenate([[0], np.cumsum(sizes[kept])])
    local = rows - starts[group_of_row] + kept_starts[np.searchsorted(kept, group_of_row)]
    rest = rest.take(pa.array(local))
    table = survivors.drop_columns([_ROW])
    for name in rest_columns:
        table = table.append_column(rest.schema.field(name), rest[name])
    return _finish(table, task)


def _with_partition(table: pa.Table, task: FragmentTask) -> pa.Table:
    for name, value in task.partition:
        kind = task.partition_schema.field(name).type
        column = (pa.nulls(table.num_rows, kind) if value is None
                  else pa.array(np.full(table.num_rows, value) if kind == pa.int32()
                                else [value] * table.num_rows, kind))
        table = table.append_column(pa.field(name, kind), column)
    return table


def _finish(table: pa.Table, task: FragmentTask, empty_rest: Sequence[str] = ()) -> pa.Table:
    for name in empty_rest:
        kind = task.schema.field(name).type if name in task.schema.names else pa.null()
        table = table.append_column(pa.field(name, kind), pa.nulls(table.num_rows, kind))
    return table.select(task.schema.names).cast(task.schema)


def read_fragment(task: FragmentTask, backend: str) -> Any:
    """The read task: one fragment as a partition of ``backend``; reports a Dask event."""
    frame, stats = READERS[backend]().read(task)
    try:
        from distributed import get_worker

        get_worker().log_event(EVENT_TOPIC, stats.__dict__)
    except ValueError:
        pass  # not on a worker (called directly)
    if backend == "pandas":
        return get_backend(backend).from_arrow(frame)
    return frame


def read_parquet(source: Any, columns: Sequence[str] | None = None,
                 filters: Sequence[Any] | None = None, *, partition_bytes: int | None = None,
                 storage: StorageOptions | dict | None = None, engine: Any = None,
                 **storage_overrides: Any) -> Any:
    """A Parquet dataset as a :class:`gpuframe.DistributedFrame`, read on the workers.

    ``source``: a path, glob, directory (hive ``key=value`` folders become columns), an
    ``http(s)://`` or ``s3://`` URL, or a list of them. ``columns``: the columns to return
    (filter columns are read as needed). ``filters``: pandas/pyarrow DNF, used to skip row
    groups and applied to rows. ``partition_bytes``: compressed bytes per partition. Storage
    options (``endpoint``, ``key``, ``secret``, ``region``, ``anonymous``,
    ``requests_in_flight``, ``task_size``, ...) come as ``storage=`` or keywords. Raises if any
    partition fails; never returns a partial frame.
    """
    frame, report = read_parquet_with_report(
        source, columns, filters, partition_bytes=partition_bytes, storage=storage,
        engine=engine, **storage_overrides)
    return frame


def read_parquet_with_report(source: Any, columns: Sequence[str] | None = None,
                             filters: Sequence[Any] | None = None, *,
                             partition_bytes: int | None = None,
                             storage: StorageOptions | dict | None = None, engine: Any = None,
                             **storage_overrides: Any) -> tuple[Any, ReadReport]:
    """:func:`read_parquet`, also returning the :class:`ReadReport` of what was fetched."""
    from ..cluster.engine import current_engine

    engine = current_engine(engine)
    plan = plan_fragments(source, columns, filters, partition_bytes,
                          storage_options(storage, **storage_overrides), engine.workers)
    logger.info("read_parquet plan: %r", plan)
    return read_plan(plan, engine)


def fragment_tasks(plan: ReadPlan, prefix: str) -> list[FragmentTask]:
    """The task of each fragment of ``plan``, keyed ``<prefix>-<i>``."""
    concurrency = plan.concurrency
    in_flight = concurrency.requests_in_flight if concurrency else 1
    request_size = concurrency.request_size if concurrency else plan.storage.task_size
    return [FragmentTask(f"{prefix}-{i}", f.path, f.row_groups, plan.footers[f.path],
                         tuple(plan.columns_read), plan.schema, f.partition,
                         plan.partition_schema, plan.filters, plan.storage, in_flight,
                         request_size)
            for i, f in enumerate(plan.fragments)]


def read_plan(plan: ReadPlan, engine: Any = None) -> tuple[Any, ReadReport]:
    """Run ``plan`` on the engine's cluster: one task per fragment, pinned to its owner."""
    from ..cluster.engine import current_engine
    from ..frame import DistributedFrame, new_token

    engine = current_engine(engine)
    backend = engine.backend.name
    workers = set(engine.workers)
    token = new_token()
    futures, owners = [], []
    start = time.perf_counter()
    for i, task in enumerate(fragment_tasks(plan, f"gpuframe-read-parquet-{token}")):
        owner = plan.fragments[i].owner
        owner = owner if owner in workers else sorted(workers)[i % len(workers)]
        futures.append(engine.client.submit(read_fragment, task, backend, key=task.key,
                                            workers=[owner], pure=False))
        owners.append(owner)
    meta = plan.schema.empty_table().to_pandas()
    frame = DistributedFrame(engine, futures, meta, owners)
    try:
        frame.persist()
    except BaseException:
        engine.client.cancel(futures)  # no partial frame survives a failed read
        raise
    report = _report(plan, engine, {f.key for f in futures}, time.perf_counter() - start)
    logger.info("read_parquet: %r", report)
    return frame, report


def _report(plan: ReadPlan, engine: Any, keys: set[str], seconds: float) -> ReadReport:
    stats = [msg for _, msg in engine.client.get_events(EVENT_TOPIC)
             if isinstance(msg, dict) and msg.get("key") in keys]
    latest = {s["key"]: s for s in stats}
    return ReadReport(
        fragments=len(plan.fragments),
        bytes_read=sum(s["bytes_read"] for s in latest.values()),
        planned_bytes=plan.total_bytes,
        result_column_bytes=plan.result_bytes,
        requests=sum(s["requests"] for s in latest.values()),
        rows=sum(s["rows"] for s in latest.values()),
        row_groups_kept=plan.row_groups_kept,
        row_groups_total=plan.row_groups_total,
        seconds=seconds,
    )
