"""The read operator: plan a scan with the columns and filters the optimizer pushed into it, then
read each worker's fragments where they will stay.

Planning runs on the client (:func:`~gpuframe.io.plan.plan_fragments`) and asks the workers what
only they can see: the files' metadata (``gpuframe-plan-metadata`` tasks, files dealt round
robin) and, for a large remote read, the store's latency and bandwidth
(``gpuframe-plan-measure`` tasks, one per worker at once, each sharing the store as the reads
will). Then one ``gpuframe-read-<format>`` task per read group (a worker's fragments packed up
to the partition budget) runs on its owner. A plan that took a file's metadata from the cache of
earlier plans is made once more, reading it anew, where the read finds the file changed since.

:func:`plan_scan` also serves the lazy frame: ``read_parquet`` plans once, without measuring, to
learn the schema, rows and bytes it shows before anything runs.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..backend import get_backend
from ..io.errors import FileChangedError
from ..io.plan import PLANNED_METADATA, ReadPlan, measure_here, plan_fragments, read_metadata_each
from ..io.read import ReadReport, fragment_tasks, read_fragments, take_kept_stats
from ..io.remote import StorageOptions, scheme_of
from ..io.tuning import (
    Concurrency,
    StoreProbe,
    probe_store,
    remembered_concurrency,
    unmeasured_concurrency,
)
from ..plan.nodes import Scan
from ..runtime.runner import Job, Partitions
from .lowering import Lowering, ScanRecord, lower

if TYPE_CHECKING:
    from ..cluster.engine import Engine
    from ..io.formats import FileFormat


def plan_scan(job: Job, source: Any, fmt: FileFormat,
              storage: StorageOptions, partition_bytes: int | None,
              columns: Sequence[str] | None, filters: Any, measure: bool = True) -> ReadPlan:
    """Plan a read as part of ``job``: metadata read by the workers, the store measured by
    them where ``measure`` and the read is large enough to be worth it."""
    engine, workers = job.engine, job.workers
    measurer: Callable[[str, StorageOptions, int], Concurrency]
    if measure:
        def measurer(path: str, options: StorageOptions, fragment_bytes: int) -> Concurrency:
            return measure_on_workers(job, path, options, fragment_bytes)
    else:
        def measurer(path: str, options: StorageOptions, fragment_bytes: int) -> Concurrency:
            return unmeasured_concurrency(options)
    started = time.perf_counter()
    planned = plan_fragments(
        source, columns, filters, partition_bytes, storage, workers, format=fmt,
        device_memory=worker_device_memory(engine, workers), measure=measurer,
        read_metadata=lambda *args: metadata_on_workers(job, *args))
    job.client_stage("plan", time.perf_counter() - started)
    return planned


@lower.register
def _(node: Scan, lowering: Lowering) -> Partitions:
    job, read = lowering.job, node.read
    columns = list(node.read_columns) if node.read_columns is not None else None

    def plan() -> ReadPlan:
        return plan_scan(job, read.source, read.format, read.storage,
                         read.partition_bytes, columns, node.filters)

    first = plan()
    try:
        return _read(node, lowering, first)
    except FileChangedError as exc:
        if exc.path not in first.reused:
            raise  # it changed while this read planned and read it: reading again may too
        PLANNED_METADATA.forget(first.reused)
    return _read(node, lowering, plan())


def _read(node: Scan, lowering: Lowering, plan: ReadPlan) -> Partitions:
    """Submit ``plan``'s read tasks; a scan waits for them (a file changed since its metadata
    was cached must be planned again before anything reads the frame)."""
    job = lowering.job
    stage = job.stage(f"read-{plan.format.name}")
    tasks = fragment_tasks(plan)
    workers = set(job.workers)
    started = time.perf_counter()
    futures, owners, keys = [], [], []
    for i, group in enumerate(plan.partitions()):
        owner = plan.fragments[group[0]].owner
        owner = owner if owner in workers else job.workers[i % len(job.workers)]
        future = stage.submit(read_fragments, stage.key(i), [tasks[j] for j in group],
                              job.backend,
                              lowering.keep_read_stats, index=(i,), owner=owner,
                              node=lowering.number(node))
        futures.append(future)
        owners.append(owner)
        keys.append(future.key)
    job.wait(futures)
    lowering.scans.append(ScanRecord(plan, keys, time.perf_counter() - started))
    lowering.note(node, f"{len(plan.fragments)} fragments in {len(futures)} partitions, "
                        f"{plan.units_kept}/{plan.units_total} {plan.format.unit_name} kept, "
                        f"{plan.total_bytes / 2**20:.2f} MiB planned")
    return Partitions(futures, owners, node.meta)


def read_report(job: Job, record: ScanRecord) -> ReadReport:
    """What one scan fetched (the read tasks' stats, kept on their workers), against what its
    plan expected and its result holds."""
    kept = job.engine.client.run(take_kept_stats, sorted(record.keys))
    latest = {s["key"]: s for stats in kept.values() for s in stats}
    plan = record.plan
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
        seconds=record.seconds,
    )


def measure_on_workers(job: Job, path: str, storage: StorageOptions,
                       fragment_bytes: int | None = None) -> Concurrency:
    """The store's :class:`~gpuframe.io.tuning.Concurrency`, measured where the reads run: one
    task per worker, all at once, each probing ``path``, so each sees the store shared as during
    the read and its own process's limits, not the client's. Every worker thread reads a
    fragment at a time, so the store's bandwidth is shared by that many readers. Remembered per
    store. Local files are measured here: a round trip to the workers would cost more than the
    measurement."""
    if scheme_of(path) == "file":
        return measure_here(path, storage, fragment_bytes)

    def probe() -> tuple[list[StoreProbe], int]:
        threads = job.engine.client.nthreads()
        stage = job.stage("plan-measure")
        futures = [stage.submit(probe_store, path, storage, index=(i,), owner=worker)
                   for i, worker in enumerate(sorted(threads))]
        return job.gather(futures), sum(threads.values())

    return remembered_concurrency(path, storage, probe, fragment_bytes)


def metadata_on_workers(job: Job, paths: Sequence[str], storage: StorageOptions,
                        fmt: FileFormat, partition_bytes: int) -> list[Any]:
    """Each file's metadata or error, read on the workers (the files dealt round robin), so
    planning shows on the task stream and a worker reads the files where it will read their
    data (on several hosts, paths the client may not see)."""
    workers = job.workers
    stage = job.stage("plan-metadata")
    shares = [list(paths[i::len(workers)]) for i in range(len(workers))]
    futures = [stage.submit(read_metadata_each, share, storage, fmt, partition_bytes,
                            index=(i,), owner=worker)
               for i, (share, worker) in enumerate(zip(shares, workers)) if share]
    results: list[Any] = [None] * len(paths)
    for i, share_results in enumerate(job.gather(futures)):
        results[i::len(workers)] = share_results
    return results


def worker_device_memory(engine: Engine, workers: Sequence[str]) -> list[int]:
    """Bytes of each worker's GPU, asked of each worker once per engine (a GPU's size does not
    change); [] where the backend holds partitions in host memory."""
    if not engine.backend.name == "cudf":
        return []
    known = _device_memory_of.setdefault(engine, {})
    missing = [worker for worker in workers if worker not in known]
    if missing:
        known.update(engine.client.run(_device_memory, workers=missing))
    return sorted(known[worker] for worker in workers)


_device_memory_of: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()


def _device_memory() -> int:
    import cupy

    return int(cupy.cuda.Device().mem_info[1])


def frame_meta(plan: ReadPlan) -> pd.DataFrame:
    """The pandas schema of ``plan``'s result, as the backend's partitions will have it."""
    return get_backend("pandas").from_arrow(plan.schema.empty_table())
