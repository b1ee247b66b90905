"""The cudf backend's reader: fragments read by cuDF, local files through KvikIO in one call,
remote Parquet and ORC decoded from copies in device memory (:mod:`.device`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from ..storage import open_source
from ..storage.base import scheme_of
from ..tasks import FragmentTask
from ..tuning.budget import node_budget
from .arrow import ArrowReader, hive_column, read_fragment
from .base import ReadStats
from .device import KVIKIO, CopyJob, copy_batches, fetch_device_copies
from .device_filters import kept_rows
from .failures import check_planned_size, naming_cudf_failures
from .fetch import FileFetcher

if TYPE_CHECKING:
    import cudf
    import rmm

KVIKIO_TASK_SIZE = 16 * 2**20
"""The least task size KvikIO gets for local files, whatever requests a local disk's latency
asks for (1 MiB): each task is a bounce-buffer copy of its own, and a disk reads long requests
faster; cold reads gain more than warm ones lose (benchmarks/results/2026-11-24-ingest-h200.md;
1 MiB tasks: benchmarks/results/2026-11-23-remote-device-copies-h200.md)."""


class CudfReader:
    """Reads fragments with cuDF, KvikIO's threads and task size set from the plan.

    Local files: one call of the format's cuDF reader for all the task's fragments, through
    KvikIO, which uses GPUDirect Storage where the host has it and its bounce buffers where not
    (``compat_mode`` auto). One call matters: cuDF decodes the files' pages together, several
    times faster than file by file (benchmarks/results/2026-11-23-fixes-h200x2.md).
    Remote Parquet and ORC: the planned ranges are fetched concurrently (Little's law's
    requests in flight: KvikIO's threads and task size, or gpuframe's own requests where
    KvikIO cannot make them, :func:`~.device.fetch_by_kvikio`) into copies of the files in
    device memory, which cuDF decodes in one call (:func:`read_device_copies`); cuDF's own
    remote reader fetches whole files over HTTP
    (benchmarks/results/2026-11-25-figures-from-io-comments.md), which a read must never do.
    Remote CSV, remote reads with filters (selective: the filter columns first), and formats
    cuDF cannot decode (a CSV in another encoding than UTF-8) go through :class:`ArrowReader`
    and are moved to the GPU.
    """

    def read(self, key: str, tasks: Sequence[FragmentTask]
             ) -> tuple[cudf.DataFrame, ReadStats]:
        import cudf

        first = tasks[0]
        local = all(scheme_of(task.path) == "file" for task in tasks)
        if not first.format.device_decodes or (
                not local and (not first.format.sparse_copies
                               or (first.filters and first.format.selective))):
            # selective reads fetch the other columns only where rows survive: fewer bytes
            # over the wire is worth decoding on the CPU
            table, stats = ArrowReader().read(key, tasks)
            return cudf.DataFrame.from_arrow(table), stats
        start = time.perf_counter()
        if local:
            # One call reads every file's chunks at once: a thread per file at least keeps
            # each file's reads going (benchmarks/results/2026-11-23-fixes-h200x2.md).
            for task in tasks:
                with open_source(task.path) as source:
                    check_planned_size(task, source)
            settings = {"num_threads": max(first.concurrency.requests_in_flight, len(tasks)),
                        "task_size": max(first.concurrency.request_size, KVIKIO_TASK_SIZE)}
            with KVIKIO.using(settings, wait=False), naming_cudf_failures(
                    tasks, read_fragment, lambda i: first.format.read_cudf([tasks[i]])):
                frame, rows = first.format.read_cudf(tasks)
            fetched = sum(task.format.fetched_bytes(task.metadata, task.units,
                                                    task.file_columns) for task in tasks)
            requests = 0
        else:
            with contextlib.ExitStack() as stack:
                fetchers = [stack.enter_context(FileFetcher(task)) for task in tasks]
                frame, rows = read_device_copies(tasks, fetchers)
            fetched = sum(fetcher.bytes_read for fetcher in fetchers)
            requests = sum(fetcher.requests for fetcher in fetchers)
        for name in first.hive_schema.names:
            column = pa.chunked_array(
                [hive_column(dict(task.hive_values)[name], first.hive_schema.field(name).type,
                             n) for task, n in zip(tasks, rows)],
                first.hive_schema.field(name).type)
            frame[name] = cudf.Series.from_arrow(column.combine_chunks())
        if first.filters:
            frame = kept_rows(frame, first.filters)
        frame = frame[first.schema.names].reset_index(drop=True)
        units = sum(len(task.units) for task in tasks)
        return frame, ReadStats(key, first.path, fetched, requests, units, len(frame),
                                time.perf_counter() - start)


def copy_layouts(tasks: Sequence[FragmentTask], fetchers: Sequence[FileFetcher]
                 ) -> list[CopyJob]:
    """How each task's remote file is copied for cuDF: its source, the planned ranges (at
    their own offsets), and the copy's length and known bytes (magic numbers, footer) as the
    format lays them out (:meth:`~gpuframe.io.formats.base.FileFormat.sparse_layout`). The layout
    needs each file's size: the one planning saw (:attr:`FragmentTask.version`), no request
    (a HEAD per file: benchmarks/results/2026-11-24-remote-versions-h200.md, and
    benchmarks/results/2026-11-25-figures-from-io-comments.md for an object store)."""
    jobs: list[CopyJob] = []
    for task, fetcher in zip(tasks, fetchers):
        layout = task.format.sparse_layout(task.metadata, fetcher.source.size())
        if layout is None:
            raise ValueError(f"{task.path}: {task.format.name} files have no sparse layout to "
                             "copy to the device")
        length, known = layout
        jobs.append((fetcher.source,
                     task.format.ranges(task.metadata, task.units, task.file_columns),
                     length, known))
    return jobs


def read_device_copies(tasks: Sequence[FragmentTask], fetchers: Sequence[FileFetcher]
                       ) -> tuple[cudf.DataFrame, list[int]]:
    """The tasks' remote files decoded by cuDF from copies in device memory holding only what
    the tasks read (:func:`copy_layouts`), and the rows each task gave. Each batch of files
    (:func:`~.device.copy_batches`: all of them, unless gaps between skipped
    columns would make the copies too large) is fetched by one pool of the plan's requests in
    flight, or with the host's budget for the store (:func:`~.device.fetch_device_copies`),
    and decoded in one call."""
    import cudf

    jobs = copy_layouts(tasks, fetchers)
    concurrency = tasks[0].concurrency
    budget = node_budget(tasks[0].path, tasks[0].storage, concurrency)
    frames, rows = [], []
    for batch in copy_batches(jobs):
        fetched = sum(n for i in batch for _, n in jobs[i][1])
        copies = fetch_device_copies([jobs[i] for i in batch], concurrency.requests_in_flight,
                                     concurrency.request_size_for(fetched), budget)
        frame, counts = _decode_copies([tasks[i] for i in batch], copies)
        del copies  # before the next batch's are allocated
        frames.append(frame)
        rows.extend(counts)
    for task, fetcher in zip(tasks, fetchers):
        fetcher.units_read = len(task.units)
    return (frames[0] if len(frames) == 1 else cudf.concat(frames, ignore_index=True)), rows


def _decode_copies(tasks: Sequence[FragmentTask], copies: Sequence[rmm.DeviceBuffer]
                   ) -> tuple[cudf.DataFrame, list[int]]:
    """The tasks' device copies decoded by one cuDF call, a failure naming the file at fault."""
    fmt = tasks[0].format
    with naming_cudf_failures(tasks, read_fragment,
                              lambda i: fmt.read_cudf([tasks[i]], [copies[i]])):
        return fmt.read_cudf(tasks, copies)


