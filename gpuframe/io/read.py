"""Reading a planned dataset on the cluster: one task per partition, on its owner.

:func:`read_parquet`, :func:`read_orc` and :func:`read_csv` plan on the client
(:func:`gpuframe.io.plan.plan_fragments`) and run one ``gpuframe-read-<format>-<token>-<i>``
task per partition (a worker's fragments packed up to the partition budget,
:meth:`~gpuframe.io.plan.ReadPlan.partitions`) on the worker that owns it, so the task stream
shows the reads and later stages know where each partition lives. A remote store's first read
is measured on the workers too (:func:`measure_on_workers`, ``gpuframe-plan-measure-<token>-<i>``
tasks), since their processes, not the client's, make the requests. Each task receives its
files' metadata from the plan and reads only the planned units and columns; what differs
between formats is asked of the plan's :class:`~gpuframe.io.formats.FileFormat`:

- pandas backend (:class:`ArrowReader`): local Parquet and ORC files through Arrow's own reader;
  remote files, and CSV byte ranges everywhere, by fetching exactly the planned bytes
  (:func:`~gpuframe.io.remote.read_ranges_into`, CSV :func:`~gpuframe.io.remote.read_ranges`;
  requests in flight and their size from the plan's Little's-law numbers), then decoding them
  with Arrow from memory. With ``filters=``, where the format reads columns of a unit
  separately (Parquet, ORC), the filter columns are read first and the other columns only for
  the units where some row survived.
- cudf backend (:class:`CudfReader`): cuDF's reader (``read_parquet``, ``read_orc``,
  ``read_csv`` with ``byte_range``), one call per partition, with KvikIO's thread count and
  task size set from the same numbers; remote Parquet and ORC decoded from copies in device
  memory (:func:`read_device_copies`), fetched by KvikIO's remote reads where it can make
  them; cuDF is imported only on the workers that run it.

Bytes that do not decode at read time (a file cut, rewritten or corrupted since planning) raise
the engine's errors naming the file and unit (:func:`read_failure`), and the first failed task's
error reaches the caller as itself (:func:`raise_dataset_error`).

Every read task reports what it fetched as a Dask event (topic ``gpuframe-read``, for the
dashboard's figures) and, where the client wants a :class:`ReadReport` (bytes read against
bytes of the result's columns), keeps it on its worker for the client to take.
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import time
import weakref
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from distributed import wait

from ..backend import get_backend
from .device import CopyJob, copy_batches, fetch_device_copies
from .errors import (
    AccessDeniedError,
    CorruptFileError,
    DatasetError,
    FileChangedError,
    RemoteError,
    SourceNotFoundError,
    TruncatedFileError,
    UnreachableError,
)
from .formats import FileFormat, format_for
from .planning.metadata import PLANNED_METADATA, read_metadata_each
from .planning.plan import ReadPlan, measure_here, plan_fragments
from .tasks import FragmentTask, fragment_tasks
from .storage import open_source
from .storage.base import RemoteVersion, StorageOptions, scheme_of, storage_options
from .storage.ranges import read_ranges, read_ranges_into
from .tuning.model import DEFAULT_REQUEST_SIZE, Concurrency, StoreProbe, fit_to_ranges
from .tuning.probe import probe_store
from .tuning.stores import remembered_concurrency

logger = logging.getLogger("gpuframe")

EVENT_TOPIC = "gpuframe-read"
KVIKIO_TASK_SIZE = 16 * 2**20
"""The least task size KvikIO gets for local files, whatever requests a local disk's latency
asks for (1 MiB): each task is a bounce-buffer copy of its own, and a disk reads long requests
faster. 16 Parquet files of 2 GiB on an H200, 16 threads, one cuDF call, page cache dropped
before each read (medians of 4, interleaved with a 16-thread pread of 16 MiB chunks): int
columns 1.088 s at 4 MiB, 0.989 s at 16 MiB (raw 0.905 s); strings 1.089 and 0.997 s (raw
1.032 s). Warm, through read_parquet, 16 MiB costs 87 -> 92 ms (int) and 130 -> 134 ms
(strings); 1 MiB was slower still (0.100 s against 0.081 s at 4 MiB)."""
STAGE_EVENT_TOPIC = "gpuframe-stage"  # client-side stages: {"stage": ..., "seconds": ...}
KEPT_STATS = 65536
"""Read tasks' :class:`ReadStats` a worker keeps until the report of their read takes them
(the oldest go first, should a read fail before): a report asks the workers, since the
scheduler keeps only the last 1000 events of a topic (``distributed.admin.low-level-log-length``),
fewer than a large read has tasks, and a report built from them undercounted."""
_kept_stats: OrderedDict[str, dict[str, Any]] = OrderedDict()
_kept_stats_lock = threading.Lock()
DECODE_ERRORS = (OSError, ValueError, RuntimeError, IndexError, EOFError, pa.ArrowException)
"""What decoding bytes that are not what planning saw raises: Arrow's ``OSError`` ('Corrupt
snappy compressed data.') and ``ArrowInvalid``, cuDF's ``RuntimeError``, and the
``EOFError`` of a range that ends early (:meth:`Fetcher.bytes`). :func:`read_failure` turns
them into the engine's errors naming the file; ``MemoryError`` is never one of them."""
_ROW = "__gpuframe_row__"




@dataclass(frozen=True)
class ReadStats:
    """What one read task fetched for its fragments: bytes over the wire (or from disk),
    requests, units, rows, seconds. ``path``: the first fragment's file."""

    key: str
    path: str
    bytes_read: int
    requests: int
    units_read: int
    rows: int
    seconds: float


@dataclass(frozen=True)
class ReadReport:
    """What a whole read fetched, against what the plan expected and the result holds."""

    format: str
    fragments: int
    bytes_read: int
    planned_bytes: int
    result_column_bytes: int
    requests: int
    rows: int
    units_kept: int
    units_total: int
    seconds: float

    def __repr__(self) -> str:
        return (f"<ReadReport {self.format}: {self.fragments} fragments, {self.rows} rows: read "
                f"{self.bytes_read / 2**20:.2f} MiB in {self.requests} requests (planned "
                f"{self.planned_bytes / 2**20:.2f} MiB) for "
                f"{self.result_column_bytes / 2**20:.2f} MiB of result columns; units "
                f"{self.units_kept}/{self.units_total} after statistics; "
                f"{self.seconds:.2f} s>")


class ArrowReader:
    """Reads fragments with pyarrow; the pandas backend's reader.

    Remote fragments are read at once, by as many threads as the task has requests in flight,
    which they share (:class:`Fetcher`): a selective read waits for three rounds of requests
    per fragment (filter columns, page indexes, pages), and one fragment after another left the
    store idle in each round's tail and during each decode (a GPU host's task holds all 16
    files of benchmarks/ingest_selective.py)."""

    def read(self, key: str, tasks: Sequence[FragmentTask]) -> tuple[pa.Table, ReadStats]:
        start = time.perf_counter()
        at_once = min(len(tasks), tasks[0].concurrency.requests_in_flight)
        if at_once > 1 and any(scheme_of(task.path) != "file" for task in tasks):
            with ThreadPoolExecutor(at_once, thread_name_prefix="gpuframe-fragment") as pool:
                results = list(pool.map(lambda task: _read_fragment(task, at_once), tasks))
        else:
            results = [_read_fragment(task, 1) for task in tasks]
        tables = [table for table, _ in results]
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        fetched, requests, units = (sum(counts[i] for _, counts in results) for i in range(3))
        return table, ReadStats(key, tasks[0].path, fetched, requests, units, table.num_rows,
                                time.perf_counter() - start)


def _read_fragment(task: FragmentTask, sharing: int) -> tuple[pa.Table, tuple[int, int, int]]:
    """One fragment's rows, and (bytes, requests, units) fetched for them; ``sharing``: the
    fragments read at once with it."""
    with Fetcher(task, sharing) as fetcher:
        table = _read_selective(task, fetcher)
        return table, (fetcher.bytes_read, fetcher.requests, fetcher.units_read)


class CudfReader:
    """Reads fragments with cuDF, KvikIO's threads and task size set from the plan.

    Local files: one call of the format's cuDF reader for all the task's fragments, through
    KvikIO, which uses GPUDirect Storage where the host has it and its bounce buffers where not
    (``compat_mode`` auto). One call matters: on an H200, 16 warm Parquet files read one by one
    ran at 5.7 GiB/s, in one call at 22 GiB/s (cuDF decodes the files' pages together).
    Remote Parquet and ORC: the planned ranges are fetched concurrently (Little's law's
    requests in flight: KvikIO's threads and task size, or gpuframe's own requests where
    KvikIO cannot make them, :func:`~gpuframe.io.device.fetch_by_kvikio`) into copies of the
    files in device memory, which cuDF decodes in one call (:func:`read_device_copies`);
    cuDF 26.10's own remote reader fetched whole files over
    HTTP (seen on an H200: three full GETs for one fragment), which a read must never do.
    Remote CSV, and remote reads with filters (selective: the filter columns first), go
    through :class:`ArrowReader` and are moved to the GPU.
    """

    def read(self, key: str, tasks: Sequence[FragmentTask]) -> tuple[Any, ReadStats]:
        import cudf

        first = tasks[0]
        local = all(scheme_of(task.path) == "file" for task in tasks)
        if not local and (not first.format.sparse_copies
                          or (first.filters and first.format.selective)):
            # selective reads fetch the other columns only where rows survive: fewer bytes
            # over the wire is worth decoding on the CPU
            table, stats = ArrowReader().read(key, tasks)
            return cudf.DataFrame.from_arrow(table), stats
        start = time.perf_counter()
        if local:
            import kvikio.defaults

            # One call reads every file's chunks at once: a thread per file at least keeps
            # each file's reads going (16 files: 13 GiB/s with 4 threads, 22 with 16, H200).
            kvikio.defaults.set({"num_threads": max(first.concurrency.requests_in_flight,
                                                    len(tasks)),
                                 "task_size": max(first.concurrency.request_size,
                                                  KVIKIO_TASK_SIZE)})
            with naming_cudf_failures(tasks, lambda i: first.format.read_cudf([tasks[i]])):
                frame, rows = first.format.read_cudf(tasks)
            fetched = sum(n for task in tasks
                          for _, n in task.format.ranges(task.metadata, task.units,
                                                         task.file_columns))
            requests = 0
        else:
            with contextlib.ExitStack() as stack:
                fetchers = [stack.enter_context(Fetcher(task)) for task in tasks]
                frame, rows = read_device_copies(tasks, fetchers)
            fetched = sum(fetcher.bytes_read for fetcher in fetchers)
            requests = sum(fetcher.requests for fetcher in fetchers)
        for name in first.hive_schema.names:
            column = pa.chunked_array(
                [_constant(dict(task.hive_values)[name], first.hive_schema.field(name).type,
                           n) for task, n in zip(tasks, rows)],
                first.hive_schema.field(name).type)
            frame[name] = cudf.Series.from_arrow(column.combine_chunks())
        if first.filters:
            table = frame.to_arrow().filter(pq.filters_to_expression(first.filters))
            frame = cudf.DataFrame.from_arrow(table)
        frame = frame[first.schema.names].reset_index(drop=True)
        units = sum(len(task.units) for task in tasks)
        return frame, ReadStats(key, first.path, fetched, requests, units, len(frame),
                                time.perf_counter() - start)


def copy_layouts(tasks: Sequence[FragmentTask], fetchers: Sequence[Fetcher]) -> list[CopyJob]:
    """How each task's remote file is copied for cuDF: its source, the planned ranges (at
    their own offsets), and the copy's length and known bytes (magic numbers, footer) as the
    format lays them out (:meth:`~gpuframe.io.formats.FileFormat.sparse_layout`). The layout
    needs each file's size: the one planning saw (:attr:`FragmentTask.version`), no request
    (a HEAD per file took 11 ms for 16 files over loopback HTTP on an H200 host, 20-50 ms
    apiece on an object store)."""
    jobs = []
    for task, fetcher in zip(tasks, fetchers):
        length, known = task.format.sparse_layout(task.metadata, fetcher.source.size())
        jobs.append((fetcher.source,
                     task.format.ranges(task.metadata, task.units, task.file_columns),
                     length, known))
    return jobs


def read_device_copies(tasks: Sequence[FragmentTask], fetchers: Sequence[Fetcher]
                       ) -> tuple[Any, list[int]]:
    """The tasks' remote files decoded by cuDF from copies in device memory holding only what
    the tasks read (:func:`copy_layouts`), and the rows each task gave. Each batch of files
    (:func:`~gpuframe.io.device.copy_batches`: all of them, unless gaps between skipped
    columns would make the copies too large) is fetched by one pool of the plan's requests in
    flight (:func:`~gpuframe.io.device.fetch_device_copies`) and decoded in one call."""
    import cudf

    jobs = copy_layouts(tasks, fetchers)
    concurrency = tasks[0].concurrency
    frames, rows = [], []
    for batch in copy_batches(jobs):
        fetched = sum(n for i in batch for _, n in jobs[i][1])
        copies = fetch_device_copies([jobs[i] for i in batch], concurrency.requests_in_flight,
                                     concurrency.request_size_for(fetched))
        batch_tasks = [tasks[i] for i in batch]
        with naming_cudf_failures(batch_tasks, lambda i: tasks[0].format.read_cudf(
                [batch_tasks[i]], [copies[i]])):
            frame, counts = tasks[0].format.read_cudf(batch_tasks, copies)
        del copies  # before the next batch's are allocated
        frames.append(frame)
        rows.extend(counts)
    for task, fetcher in zip(tasks, fetchers):
        fetcher.units_read = len(task.units)
    return (frames[0] if len(frames) == 1 else cudf.concat(frames, ignore_index=True)), rows


def fetch_sparse_copies(jobs: Sequence[CopyJob], requests_in_flight: int,
                        request_size: int | None) -> list[io.BytesIO]:
    """A file object per job ``(source, ranges, length, known)``: ``length`` bytes holding
    ``source``'s ``ranges`` at their offsets, fetched straight into place by one pool of
    ``requests_in_flight`` requests over all the jobs (a failed request raises naming its
    file), and the ``known`` bytes at theirs; the rest reads as zeros.

    The CPU reader's copies (:meth:`Fetcher.file`; the GPU's are in device memory,
    :func:`read_device_copies`). Each is a ``BytesIO`` over a fresh ``bytes(length)`` that it
    alone holds: CPython then lets ``getbuffer()`` write into those bytes in place (it copies them
    only while another reference exists), and Arrow reads that buffer without a copy.
    ``bytes(length)`` is ``calloc``'d: above glibc's mmap threshold (32 MiB at most),
    fresh pages that the kernel zeroes when a fetch thread first writes them, and pages never
    written cost nothing; below it, a ``memset`` of recycled heap. (A ``BytesIO`` extended by
    seeking past its end is zeroed whole, serially, before any fetch: 0.85 s of a 1.9 s read
    of 2 GiB on an H200.)"""
    copies = [io.BytesIO(bytes(length)) for _, _, length, _ in jobs]
    views = [copy.getbuffer() for copy in copies]
    try:
        read_ranges_into([(source, ranges, view)
                          for (source, ranges, _, _), view in zip(jobs, views)],
                         requests_in_flight, request_size)
        for (_, _, _, known), view in zip(jobs, views):
            for offset, data in known.items():
                view[offset:offset + len(data)] = data
    finally:
        for view in views:
            view.release()
    return copies


READERS = {"pandas": ArrowReader, "cudf": CudfReader}


def read_failure(task: FragmentTask, units: Sequence[int], exc: BaseException) -> DatasetError:
    """``exc``, raised decoding ``units`` of the task's file, as the engine's error naming the
    file and units. The file is looked at again, since at read time the likeliest cause is a
    change after planning: a file gone is a :class:`SourceNotFoundError`, one that ends before
    the planned ranges a :class:`TruncatedFileError`, else a :class:`CorruptFileError` (with
    the size planning saw, where the format knows it and it changed)."""
    where = f"{task.path} ({task.format.describe_units(task.metadata, units)})"
    try:
        with open_source(task.path, task.storage) as source:
            size: int | None = source.size()
    except SourceNotFoundError as gone:
        return SourceNotFoundError(f"{where}: the file went away after planning: {gone}")
    except DatasetError:
        size = None  # the store cannot say now; the decoding error stands
    ranges = task.format.ranges(task.metadata, units, task.file_columns)
    end = max((offset + length for offset, length in ranges), default=0)
    if size is not None and size < end:
        return TruncatedFileError(f"{where}: the file ends at byte {size}, the plan reads up "
                                  f"to byte {end}: it was cut or rewritten after planning "
                                  f"({type(exc).__name__}: {exc})")
    planned = task.format.file_size(task.metadata)
    changed = (f"; it was {planned} bytes at planning, {size} now"
               if None not in (planned, size) and planned != size else "")
    return CorruptFileError(f"{where} cannot be decoded: {type(exc).__name__}: {exc}{changed}")


@contextlib.contextmanager
def naming_cudf_failures(tasks: Sequence[FragmentTask],
                         read_alone: Callable[[int], Any]) -> Iterator[None]:
    """Failures of cuDF decoding the tasks' files (in one call: its errors name no file) raised
    as :func:`read_failure`'s errors for the file at fault (:func:`_file_at_fault`).

    A corrupt page can make cuDF's kernels touch memory out of bounds (cuDF 26.10 on an H200, a
    Parquet file with zeroed pages: ``cudaErrorIllegalAddress``), after which the process's
    CUDA context is lost: every later CUDA call fails, allocations as ``MemoryError``, and
    reading each file again with cuDF would blame the next file read. Such an error carries
    ``gpu_context_lost`` and a note saying so, and the client restarts the worker
    (:func:`raise_dataset_error`)."""
    try:
        yield
    except DatasetError:
        raise
    except (MemoryError, *DECODE_ERRORS) as exc:
        backend = get_backend("cudf")
        lost = backend.device_lost()
        if isinstance(exc, MemoryError) and not lost:
            raise  # the device is full: no file is at fault
        error = _file_at_fault(tasks, exc, None if lost else read_alone)
        if lost or backend.device_lost():
            error.gpu_context_lost = True
            error.add_note("decoding it lost this worker's CUDA context (a sticky CUDA error): "
                           "the worker's GPU runs nothing more until the worker restarts")
        raise error from exc


def _file_at_fault(tasks: Sequence[FragmentTask], exc: BaseException,
                   read_alone: Callable[[int], Any] | None) -> DatasetError:
    """The error naming the file at fault for ``exc``, raised decoding all of ``tasks`` at once:
    a lone task's; else the first that pyarrow cannot read on the host (no CUDA call, which a
    lost context would fail); else, given ``read_alone(i)`` (cuDF reading ``tasks[i]``), the
    first that cuDF cannot read alone (a file that pyarrow reads and cuDF does not). Where no
    file is found at fault, the error names them all, and says so if a read alone ran out of
    device memory before one was."""
    if len(tasks) == 1:
        return read_failure(tasks[0], tasks[0].units, exc)
    for task in tasks:
        try:
            _read_fragment(task, 1)
        except DatasetError as named:
            return named
        except DECODE_ERRORS as alone:
            return read_failure(task, task.units, alone)
    paths = ", ".join(t.path for t in tasks)
    for i, task in enumerate(tasks if read_alone else ()):
        try:
            read_alone(i)
        except DECODE_ERRORS as alone:
            return read_failure(task, task.units, alone)
        except MemoryError as full:
            return CorruptFileError(f"{len(tasks)} files read in one call cannot be decoded "
                                    f"({paths}): {type(exc).__name__}: {exc}; which one is at "
                                    f"fault is not known: reading {task.path} alone ran out of "
                                    f"device memory ({full})")
    return CorruptFileError(f"{len(tasks)} files read in one call cannot be decoded together, "
                            f"though each can alone ({paths}): {type(exc).__name__}: {exc}")


class Fetcher:
    """The bytes of one file's units, counting what it fetched.

    :meth:`file` hands a format's Arrow reader something to open: a local path (Arrow reads
    it; the planned bytes are counted) or, for remote files, a sparse copy holding the planned
    ranges (:func:`fetch_sparse_copies`). :meth:`bytes` fetches ranges for formats
    that parse bytes themselves (CSV, Parquet pages), local or remote, many requests in flight.
    ``sharing``: the fragments read at once with this one, which share the task's requests in
    flight (:meth:`requests_in_flight`).
    """

    def __init__(self, task: FragmentTask, sharing: int = 1):
        self.task = task
        self.sharing = sharing
        self.local = scheme_of(task.path) == "file"
        self.source = open_source(task.path, task.storage, task.version)
        self._local_bytes = 0
        self._local_requests = 0
        self.units_read = 0

    @property
    def bytes_read(self) -> int:
        return self._local_bytes + self.source.bytes_read

    @property
    def requests(self) -> int:
        return self._local_requests + self.source.requests

    def requests_in_flight(self, ranges: Sequence[tuple[int, int]]) -> int:
        """This fragment's share of the task's requests in flight for ``ranges``: Little's law
        asks for more where they are shorter than the plan's requests (a selective read's pages,
        from KiBs to a MiB against requests of 16 MiB), so that as many bytes stay in flight
        (:func:`~gpuframe.io.tuning.fit_to_ranges`)."""
        fitted = fit_to_ranges(self.task.concurrency, [n for _, n in ranges],
                               self.task.storage.max_requests_in_flight)
        return max(1, fitted.requests_in_flight // self.sharing)

    def file(self, ranges: Sequence[tuple[int, int]],
             known: dict[int, bytes] | None = None) -> Any:
        """``known``: bytes the plan already holds (by offset), served without a request.

        A remote file becomes a sparse copy of it (:func:`fetch_sparse_copies`): pages never
        written cost no memory, and Arrow reads its buffer natively (a Python file object would
        hold the GIL on every read). The copy ends with the last byte it holds, not at the
        file's end (whose bytes it need not hold, nor its size: a HEAD where the task has no
        planned version): Arrow's Parquet reader, handed the footer, reads the planned chunks
        alone, and the ORC tail that Arrow reads from the file's end is among the known
        bytes."""
        if self.local:
            self._local_bytes += sum(n for _, n in ranges)
            self._local_requests += len(ranges)
            return self.task.path
        known = known or {}
        length = max([offset + n for offset, n in ranges]
                     + [offset + len(data) for offset, data in known.items()], default=0)
        [copy] = fetch_sparse_copies([(self.source, ranges, length, known)],
                                     self.requests_in_flight(ranges),
                                     self.task.concurrency.request_size)
        return pa.BufferReader(copy.getbuffer())

    def bytes(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of ``ranges``; an ``EOFError`` where the file ends before one of them
        does (cut since planning), which :meth:`naming_failures` names: a short range parsed
        as CSV would be fewer rows, silently."""
        data = read_ranges(self.source, ranges, self.requests_in_flight(ranges),
                           self.task.concurrency.request_size)
        for (offset, length), got in zip(ranges, data):
            if len(got) != length:
                raise EOFError(f"bytes {offset}-{offset + length} ended after {len(got)}")
        return data

    def read(self, units: Sequence[int], columns: Sequence[str]) -> pa.Table:
        self.units_read = max(self.units_read, len(units))
        with self.naming_failures(units):
            return self.task.format.read_units(self.task, self, units, columns)

    def read_rows(self, rows: Mapping[int, np.ndarray], columns: Sequence[str]) -> pa.Table:
        """``columns`` at ``rows`` (unit -> row indices in it), fetching what the format
        needs for them alone (:meth:`~gpuframe.io.formats.FileFormat.read_rows`)."""
        self.units_read = max(self.units_read, len(rows))
        with self.naming_failures(list(rows)):
            return self.task.format.read_rows(self.task, self, rows, columns)

    @contextlib.contextmanager
    def naming_failures(self, units: Sequence[int]) -> Iterator[None]:
        """Failures of decoding ``units`` raised as :func:`read_failure`'s errors; a format
        that reads units one by one narrows them to the unit at fault."""
        try:
            yield
        except (UnreachableError, AccessDeniedError, MemoryError):
            raise
        except RemoteError as exc:  # a short answer: the file may have been cut since planning
            failure = read_failure(self.task, units, exc)
            if isinstance(failure, (TruncatedFileError, SourceNotFoundError)):
                raise failure from exc
            raise
        except DatasetError:
            raise
        except DECODE_ERRORS as exc:
            raise read_failure(self.task, units, exc) from exc

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.source.close()


def _read_selective(task: FragmentTask, fetcher: Fetcher) -> pa.Table:
    """The fragment's rows that pass the filters, in the output schema.

    When filters are given, the format reads units column by column, and some result columns
    are not filter columns, the filter columns are read first; the others are fetched only at
    the surviving rows (Parquet with a page index: only the pages holding them; else the units
    holding them).
    """
    filter_names = list(dict.fromkeys(t[0] for conj in task.filters or () for t in conj))
    head_columns = [c for c in task.file_columns if c in filter_names]
    rest_columns = [c for c in task.file_columns if c not in filter_names]
    if not task.filters or not rest_columns or not task.format.selective:
        table = _with_partition(fetcher.read(task.units, task.file_columns), task)
        if task.filters:
            table = table.filter(pq.filters_to_expression(task.filters))
        return _finish(table, task)
    head = _with_partition(fetcher.read(task.units, head_columns), task)
    head = head.append_column(_ROW, pa.array(np.arange(head.num_rows, dtype=np.int64)))
    survivors = head.filter(pq.filters_to_expression(task.filters))
    rows = survivors[_ROW].to_numpy()
    sizes = np.array([task.format.unit_rows(task.metadata, u) for u in task.units])
    starts = np.concatenate([[0], np.cumsum(sizes)])
    bounds = np.searchsorted(rows, starts)  # rows are in order: a unit's are a run of them
    kept = {task.units[i]: rows[a:b] - starts[i]
            for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])) if b > a}
    if not kept:
        return _finish(survivors.drop_columns([_ROW]), task, empty_rest=rest_columns)
    rest = fetcher.read_rows(kept, rest_columns)
    table = survivors.drop_columns([_ROW])
    for name in rest_columns:
        table = table.append_column(rest.schema.field(name), rest[name])
    return _finish(table, task)


def _with_partition(table: pa.Table, task: FragmentTask) -> pa.Table:
    for name, value in task.hive_values:
        kind = task.hive_schema.field(name).type
        table = table.append_column(pa.field(name, kind), _constant(value, kind, table.num_rows))
    return table


def _constant(value: Any, kind: pa.DataType, rows: int) -> pa.Array:
    """``rows`` copies of a hive partition value (a null where it is None)."""
    if value is None:
        return pa.nulls(rows, kind)
    indices = pa.array(np.zeros(rows, dtype=np.int32))
    return pa.DictionaryArray.from_arrays(indices, pa.array([value], kind)).cast(kind)


def _finish(table: pa.Table, task: FragmentTask, empty_rest: Sequence[str] = ()) -> pa.Table:
    for name in empty_rest:
        kind = task.schema.field(name).type if name in task.schema.names else pa.null()
        table = table.append_column(pa.field(name, kind), pa.nulls(table.num_rows, kind))
    return table.select(task.schema.names).cast(task.schema)


def read_fragments(key: str, tasks: Sequence[FragmentTask], backend: str,
                   keep_stats: bool = False) -> Any:
    """The read task: ``tasks``' fragments (one worker's, packed up to the partition budget) as
    one partition of ``backend``; reports one Dask event for them, and keeps their
    :class:`ReadStats` for the client's report where it wants one (:func:`take_kept_stats`)."""
    frame, stats = READERS[backend]().read(key, tasks)
    if keep_stats:
        with _kept_stats_lock:
            _kept_stats[key] = stats.__dict__
            while len(_kept_stats) > KEPT_STATS:
                _kept_stats.popitem(last=False)
    try:  # for the dashboard's figures (EngineMetrics)
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
    groups and applied to rows. ``partition_bytes``: compressed bytes per partition (default:
    1/32 of the workers' smallest GPU, 128 MiB without GPUs). Storage options (``endpoint``,
    ``key``, ``secret``, ``region``, ``anonymous``, ``requests_in_flight``, ``task_size``, ...)
    come as ``storage=`` or keywords. Raises if any partition fails; never returns a partial
    frame. A read task's own error reaches the caller as itself, naming the file (and unit):
    a file deleted, cut or corrupted after planning is a ``SourceNotFoundError``
    (a ``FileNotFoundError``), ``TruncatedFileError`` or ``CorruptFileError``.
    """
    return _read(source, "parquet", columns, filters, partition_bytes, storage, engine,
                 storage_overrides, with_report=False)[0]


def read_orc(source: Any, columns: Sequence[str] | None = None,
             filters: Sequence[Any] | None = None, *, partition_bytes: int | None = None,
             storage: StorageOptions | dict | None = None, engine: Any = None,
             **storage_overrides: Any) -> Any:
    """An ORC dataset as a :class:`gpuframe.DistributedFrame`: :func:`read_parquet`'s sources
    and options, with stripes for row groups: filters skip the stripes whose statistics prove
    no row matches (:func:`~gpuframe.io.orc_tail.stripe_statistics`), then apply to rows."""
    return _read(source, "orc", columns, filters, partition_bytes, storage, engine,
                 storage_overrides, with_report=False)[0]


def read_csv(source: Any, columns: Sequence[str] | None = None,
             filters: Sequence[Any] | None = None, *, delimiter: str = ",", header: bool = True,
             schema: pa.Schema | dict | None = None, newlines_in_values: bool = False,
             partition_bytes: int | None = None,
             storage: StorageOptions | dict | None = None, engine: Any = None,
             **storage_overrides: Any) -> Any:
    """A CSV dataset as a :class:`gpuframe.DistributedFrame`: :func:`read_parquet`'s sources
    and options, each file split into byte ranges of about ``partition_bytes`` on line
    boundaries (local and remote alike, by range reads).

    ``header``: the first line names the columns (else they are ``f0, f1, ...``).
    ``schema``: column types (a ``pyarrow.Schema`` or ``{name: type}``) for some or all
    columns; the others are inferred from each file's first MiB. Empty fields are nulls.
    ``filters`` apply to rows after parsing (CSV has no statistics).
    ``newlines_in_values``: quoted fields may hold newlines, so a file cannot be split at a
    line's end found by a small read: each file is read whole, by one task.
    """
    fmt = format_for("csv", delimiter=delimiter, header=header, schema=schema,
                     newlines_in_values=newlines_in_values)
    return _read(source, fmt, columns, filters, partition_bytes, storage, engine,
                 storage_overrides, with_report=False)[0]


def read_parquet_with_report(source: Any, columns: Sequence[str] | None = None,
                             filters: Sequence[Any] | None = None, **options: Any,
                             ) -> tuple[Any, ReadReport]:
    """:func:`read_parquet`, also returning the :class:`ReadReport` of what was fetched."""
    return read_with_report(source, "parquet", columns, filters, **options)


def read_with_report(source: Any, format: str | FileFormat = "parquet",
                     columns: Sequence[str] | None = None,
                     filters: Sequence[Any] | None = None, *,
                     partition_bytes: int | None = None,
                     storage: StorageOptions | dict | None = None, engine: Any = None,
                     **storage_overrides: Any) -> tuple[Any, ReadReport]:
    """Plan and read a dataset of ``format`` ('parquet', 'orc', 'csv' or a
    :class:`~gpuframe.io.formats.FileFormat`); the frame and the :class:`ReadReport`."""
    return _read(source, format, columns, filters, partition_bytes, storage, engine,
                 storage_overrides, with_report=True)


def _read(source: Any, format: str | FileFormat, columns: Sequence[str] | None,
          filters: Sequence[Any] | None, partition_bytes: int | None,
          storage: StorageOptions | dict | None, engine: Any, storage_overrides: dict,
          with_report: bool) -> tuple[Any, ReadReport | None]:
    """Plan and read; the report only ``with_report``: it asks the scheduler for the read
    tasks' events, a round trip that the plain readers skip. The workers are asked for once
    (each ask is a round trip too) and serve every step of planning and reading. A plan that
    took a remote file's metadata from :data:`~gpuframe.io.plan.PLANNED_METADATA` is made once
    more, reading it anew, where the read finds the file changed since."""
    from ..cluster.engine import current_engine

    engine = current_engine(engine)
    workers = engine.workers

    def plan() -> ReadPlan:
        started = time.perf_counter()
        planned = plan_fragments(
            source, columns, filters, partition_bytes,
            storage_options(storage, **storage_overrides), workers, format=format,
            device_memory=worker_device_memory(engine, workers),
            measure=lambda path, options, fragment_bytes: measure_on_workers(
                engine, path, options, fragment_bytes),
            read_metadata=lambda *args: metadata_on_workers(engine, workers, *args))
        # The client's own share of planning (pruning, packing, placing) is no task: say so,
        # for the dashboard's stage timings, without waiting for the scheduler's answer.
        engine.client.loop.add_callback(
            engine.client.scheduler.log_event, topic=STAGE_EVENT_TOPIC,
            msg={"stage": "plan", "seconds": time.perf_counter() - started})
        logger.info("read plan: %r", planned)
        return planned

    first = plan()
    try:
        return read_plan(first, engine, workers, with_report=with_report)
    except FileChangedError as exc:
        if exc.path not in first.reused:
            raise  # it changed while this read planned and read it: reading again may too
        # Planned with metadata kept from an earlier read: the file has changed since. Plan
        # once more, reading the metadata of every file the first plan took as kept.
        logger.info("%s; planning again", exc)
        PLANNED_METADATA.forget(first.reused)
    return read_plan(plan(), engine, workers, with_report=with_report)


def measure_on_workers(engine: Any, path: str, storage: StorageOptions,
                       fragment_bytes: int | None = None) -> Concurrency:
    """The store's :class:`Concurrency`, measured where the reads run: one
    ``gpuframe-plan-measure-<token>-<i>`` task per worker, all at once, each probing ``path``
    (:func:`~gpuframe.io.tuning.probe_store`), so each sees the store shared as during the
    read and its own process's limits, not the client's. Every worker thread reads a fragment
    at a time, so the store's bandwidth is shared by that many readers. Remembered per store
    like :func:`~gpuframe.io.tuning.measure_storage`. Local files are measured here: a
    round trip to the workers would cost more than the measurement.
    """
    from ..frame import new_token

    if scheme_of(path) == "file":
        return measure_here(path, storage, fragment_bytes)

    def probe() -> tuple[list[StoreProbe], int]:
        threads = engine.client.nthreads()
        workers = sorted(threads)
        token = new_token()
        futures = [engine.client.submit(probe_store, path, storage, workers=[worker],
                                        allow_other_workers=False, pure=False,
                                        key=f"gpuframe-plan-measure-{token}-{i}")
                   for i, worker in enumerate(workers)]
        return engine.client.gather(futures), sum(threads.values())

    return remembered_concurrency(path, storage, probe, fragment_bytes)


def metadata_on_workers(engine: Any, workers: Sequence[str], paths: Sequence[str],
                        storage: StorageOptions, format: FileFormat,
                        partition_bytes: int) -> list[Any]:
    """Each file's metadata or error (:func:`~gpuframe.io.plan.read_metadata_each`), read on
    ``workers``: ``gpuframe-plan-metadata-<token>-<i>`` tasks, the files dealt round robin. So
    planning shows on the task stream, and a worker reads files where it will read their data
    (on several hosts, paths the client may not see)."""
    from ..frame import new_token

    token = new_token()
    shares = [list(paths[i::len(workers)]) for i in range(len(workers))]
    futures = [engine.client.submit(read_metadata_each, share, storage, format,
                                    partition_bytes, key=f"gpuframe-plan-metadata-{token}-{i}",
                                    workers=[worker], pure=False)
               for i, (share, worker) in enumerate(zip(shares, workers)) if share]
    results: list[Any] = [None] * len(paths)
    for i, share_results in enumerate(engine.client.gather(futures)):
        results[i::len(workers)] = share_results
    return results


def worker_device_memory(engine: Any, workers: Sequence[str] | None = None) -> list[int]:
    """Bytes of each of ``workers``' GPU (default: the engine's workers), asked of each worker
    once per engine, since a GPU's size does not change (a round trip a read saved); [] on a
    cluster without GPUs. (The scheduler's NVML startup information is absent where pynvml
    is: seen on an H200 host, where every GPU read then planned the CPU's 128 MiB
    partitions.)"""
    if engine.backend.name != "cudf":
        return []
    workers = list(engine.workers if workers is None else workers)
    known = _device_memory_of.setdefault(engine, {})
    missing = [worker for worker in workers if worker not in known]
    if missing:
        known.update(engine.client.run(_device_memory, workers=missing))
    return sorted(known[worker] for worker in workers)


_device_memory_of: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()
"""Each engine's workers' GPU bytes, by worker address (:func:`worker_device_memory`)."""


def _device_memory() -> int:
    import cupy

    return int(cupy.cuda.Device().mem_info[1])




def read_plan(plan: ReadPlan, engine: Any = None, workers: Sequence[str] | None = None, *,
              with_report: bool = True) -> tuple[Any, ReadReport | None]:
    """Run ``plan`` on the engine's cluster: one task per partition (:meth:`ReadPlan.partitions`),
    pinned to its owner if among ``workers`` (default: the engine's); the frame, and the
    :class:`ReadReport` ``with_report`` (else None)."""
    from ..cluster.engine import current_engine
    from ..frame import DistributedFrame, new_token

    engine = current_engine(engine)
    backend = engine.backend.name
    workers = set(engine.workers if workers is None else workers)
    token = new_token()
    futures, owners = [], []
    start = time.perf_counter()
    prefix = f"gpuframe-read-{plan.format.name}-{token}"
    tasks = fragment_tasks(plan)
    reporting = with_report or logger.isEnabledFor(logging.INFO)
    for i, group in enumerate(plan.read_groups()):
        owner = plan.fragments[group[0]].owner
        owner = owner if owner in workers else sorted(workers)[i % len(workers)]
        key = f"{prefix}-{i}"
        futures.append(engine.client.submit(read_fragments, key, [tasks[j] for j in group],
                                            backend, reporting, key=key, workers=[owner],
                                            pure=False))
        owners.append(owner)
    meta = plan.schema.empty_table().to_pandas()
    frame = DistributedFrame(engine, futures, meta, owners)
    try:
        wait(futures)
        raise_dataset_error(engine.client, futures, owners)
        frame.persist(pinned=True)
    except BaseException:
        engine.client.cancel(futures)  # no partial frame survives a failed read
        raise
    if not reporting:
        return frame, None
    report = _report(plan, engine, {f.key for f in futures}, time.perf_counter() - start)
    logger.info("read %s: %r", plan.format.name, report)
    return frame, report


def raise_dataset_error(client: Any, futures: Sequence[Any], owners: Sequence[str]) -> None:
    """Raise the first failed read task's :class:`~gpuframe.io.errors.DatasetError` as itself,
    the worker's traceback and a note of the task and worker added, so a caller catches a file
    gone between planning and reading with ``except FileNotFoundError`` like one gone before
    (the frame's ``PartitionError`` would hide the class). Other failures are left to
    :meth:`~gpuframe.frame.DistributedFrame.persist`.

    A worker whose CUDA context the read lost (``gpu_context_lost``, see
    :func:`naming_cudf_failures`) is restarted first by its nanny: its GPU would fail every
    later task, and what it held in device memory is gone with the context anyway."""
    for index, (future, owner) in enumerate(zip(futures, owners)):
        if future.status != "error":
            continue
        error = future.exception()
        if isinstance(error, DatasetError):
            error.add_note(f"raised by read task {future.key} (partition {index}) on {owner}")
            if getattr(error, "gpu_context_lost", False):
                error.add_note(_restart_worker(client, owner))
            raise error.with_traceback(future.traceback())


def _restart_worker(client: Any, worker: str) -> str:
    """Restart ``worker`` through its nanny; a note of what became of it."""
    try:
        status = client.restart_workers([worker]).get(worker)
    except Exception as exc:  # no nanny, or it did not come back: say so, the error stands
        return (f"{worker} could not be restarted ({type(exc).__name__}: {exc}): restart the "
                f"cluster")
    return f"{worker} was restarted ({status}): the partitions it held are lost"


def take_kept_stats(keys: Sequence[str]) -> list[dict[str, Any]]:
    """The :class:`ReadStats` this worker kept for ``keys`` (as dicts), no longer kept."""
    with _kept_stats_lock:
        return [_kept_stats.pop(key) for key in keys if key in _kept_stats]


def _report(plan: ReadPlan, engine: Any, keys: set[str], seconds: float) -> ReadReport:
    kept = engine.client.run(take_kept_stats, sorted(keys))
    latest = {s["key"]: s for stats in kept.values() for s in stats}
    if len(latest) < len(keys):  # a worker restarted since its task ran, its stats with it
        logger.warning("the report of read %s counts %d of its %d tasks: the others' workers "
                       "no longer hold their stats", plan.format.name, len(latest), len(keys))
    return ReadReport(
        format=plan.format.name,
        fragments=len(plan.fragments),
        bytes_read=sum(s["bytes_read"] for s in latest.values()),
        planned_bytes=plan.total_bytes,
        result_column_bytes=plan.result_bytes,
        requests=sum(s["requests"] for s in latest.values()),
        rows=sum(s["rows"] for s in latest.values()),
        units_kept=plan.units_kept,
        units_total=plan.units_total,
        seconds=seconds,
    )
