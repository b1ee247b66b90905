"""The read operator: plan a scan with the columns and filters the optimizer pushed into it, then
read each worker's fragments where they will stay.

Planning runs on the client (:func:`~gpuframe.io.planning.plan.plan_fragments`) and asks the
workers what only they can see: the files' metadata (``gpuframe-plan-metadata`` tasks, files
dealt round robin) and, for a large remote read, the store's latency and bandwidth
(``gpuframe-plan-measure`` tasks, one per worker at once, each sharing the store as the reads
will). Then one ``gpuframe-read-<format>`` task per read group (a worker's fragments packed up
to the partition budget) runs on its owner. A plan that took a file's metadata from the cache of
earlier plans is made once more, reading it anew, where the read finds the file changed since.

:func:`plan_scan` also serves the lazy frame: ``read_parquet`` plans once, without measuring, to
learn the schema, rows and bytes it shows before anything runs.
"""

from __future__ import annotations

import functools
import logging
import time
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
from distributed.comm import get_address_host

from ..backend import Backend
from ..io.errors import FileChangedError
from ..io.planning.metadata import PLANNED_METADATA, MetadataResult, read_metadata_each
from ..io.planning.plan import ReadPlan, measure_here, plan_fragments
from ..io.readers.device import device_memory
from ..io.readers.task import read_group, take_kept_stats
from ..io.report import ReadReport
from ..io.storage.base import StorageOptions, scheme_of
from ..io.storage.sealed import Secrets, unsealed
from ..io.tasks import fragment_tasks
from ..io.tuning.model import Concurrency, StoreProbe
from ..io.tuning.probe import probe_store
from ..io.tuning.stores import remembered_concurrency, unmeasured_concurrency
from ..plan.nodes import Scan
from ..runtime.runner import Job, Partitions
from .lowering import Lowering, ScanRecord, lower
from .steps import Chain, StepsAfter

logger = logging.getLogger("gpuframe")

if TYPE_CHECKING:
    from ..cluster.engine import Engine
    from ..io.formats.base import FileFormat
    from ..io.planning.sources import DatasetSource


def plan_scan(job: Job, source: DatasetSource, fmt: FileFormat,
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
        worker_memory=worker_memory(engine, workers), on_device=engine.backend.on_device,
        measure=measurer,
        read_metadata=lambda *args: metadata_on_workers(job, *args))
    job.client_stage("plan", time.perf_counter() - started)
    return planned


@lower.register
def _(node: Scan, lowering: Lowering) -> Partitions:
    return lower_scan(node, lowering)


def lower_scan(node: Scan, lowering: Lowering, chain: Chain | None = None) -> Partitions:
    """``node``'s read; with ``chain`` (per-partition nodes above it that nothing else reads),
    the chain's output, its steps applied in the read's own tasks."""
    if chain is None:
        return _plan_and_read(node, lowering, (), lowering.number(node), node.meta, "")
    parts = _plan_and_read(node, lowering, chain.steps, lowering.number(chain.top),
                           chain.top.meta, f"; {chain.name} fused into its tasks")
    chain.fused(lowering, node)
    return chain.placed(parts)


def lower_scan_partials(node: Scan, lowering: Lowering, steps: tuple[Any, ...]) -> Partitions:
    """``node``'s read, each of its tasks handing on what ``steps`` make of what it read: the
    partials of the aggregate above (:mod:`~.groupby`), made with no task of their own,
    reported as no plan node's output."""
    return _plan_and_read(node, lowering, steps, None, None,
                          "; its tasks also make the partials of the aggregate above")


def _plan_and_read(node: Scan, lowering: Lowering, steps: tuple[Any, ...], number: int | None,
                   meta: pd.DataFrame | None, fused: str) -> Partitions:
    """The read planned, then read (:func:`_read`); planned and read once more where a file
    whose footer came from the cache has changed since."""
    job, read = lowering.job, node.read
    columns = list(node.read_columns) if node.read_columns is not None else None

    def plan() -> ReadPlan:
        return plan_scan(job, read.source, read.format, read.storage,
                         read.partition_bytes, columns, node.filters)

    first = plan()
    try:
        return _read(node, lowering, first, steps, number, meta, fused)
    except FileChangedError as exc:
        if exc.path not in first.reused:
            raise  # it changed while this read planned and read it: reading again may too
        PLANNED_METADATA.forget(first.reused)
    return _read(node, lowering, plan(), steps, number, meta, fused)


def _read(node: Scan, lowering: Lowering, plan: ReadPlan, steps: tuple[Any, ...],
          number: int | None, meta: pd.DataFrame | None, fused: str) -> Partitions:
    """``plan``'s read tasks, ``steps`` applied to what each read, their output reported as
    plan node ``number``'s, of schema ``meta`` (by default the read's)."""
    parts, record = read_planned(lowering.job, plan, meta, number, lowering.keep_read_stats,
                                 steps)
    lowering.scans.append(record)
    lowering.note(node, f"{len(plan.fragments)} fragments in {len(parts)} partitions, "
                        f"{plan.units_kept}/{plan.units_total} {plan.format.unit_name} kept, "
                        f"{plan.total_bytes / 2**20:.2f} MiB planned{fused}")
    return parts


def read_planned(job: Job, plan: ReadPlan, meta: pd.DataFrame | None = None,
                 node: int | None = None, keep_stats: bool = False,
                 steps: tuple[Any, ...] = ()) -> tuple[Partitions, ScanRecord]:
    """Run ``plan``'s read tasks, one per read group on its owner, as a stage of ``job``.
    They are waited for where a remote file's metadata came from the cache (one changed since
    must be planned again before anything reads the frame) and where ``keep_stats`` asks for
    the read's seconds; otherwise the next stages are lowered while they run, and the reads of
    a query's tables overlap. ``node``: the plan node whose output this is; ``steps``: what
    each task applies to what it read (:mod:`~.steps`), ``meta`` being their schema."""
    stage = job.stage(f"read-{plan.format.name}")
    secrets = Secrets()
    tasks = [secrets.redact(task) for task in fragment_tasks(plan)]
    sealed = secrets.seal(job.engine.client)
    workers = set(job.workers)
    started = time.perf_counter()
    reader = StepsAfter(read_group, steps) if steps else read_group
    futures, owners = [], []
    for i, group in enumerate(plan.read_groups()):
        owner = plan.fragments[group[0]].owner
        owner = owner if owner in workers else job.workers[i % len(job.workers)]
        futures.append(stage.submit(reader, stage.key(i), [tasks[j] for j in group],
                                    job.backend, keep_stats, sealed, index=(i,), owner=owner,
                                    node=node))
        owners.append(owner)
    if keep_stats or any(scheme_of(path) != "file" for path in plan.reused):
        job.wait(futures)
    record = ScanRecord(plan, [str(f.key) for f in futures], time.perf_counter() - started)
    if meta is None:
        meta = frame_meta(plan, job.engine.backend)
    return Partitions(futures, owners, meta), record


def read_report(job: Job, record: ScanRecord) -> ReadReport:
    """What one scan fetched (the read tasks' stats, kept on their workers), against what its
    plan expected and its result holds."""
    kept = job.engine.client.run(take_kept_stats, sorted(record.keys))
    latest = {s["key"]: s for stats in kept.values() for s in stats}
    if len(latest) < len(record.keys):  # a worker restarted since its task ran, its stats too
        logger.warning("the report of a %s read counts %d of its %d tasks: the others' workers "
                       "no longer hold their stats", record.plan.format.name, len(latest),
                       len(record.keys))
    return ReadReport.from_stats(record.plan, latest.values(), record.seconds)


def measure_on_workers(job: Job, path: str, storage: StorageOptions,
                       fragment_bytes: int) -> Concurrency:
    """The store's :class:`~gpuframe.io.tuning.Concurrency`, measured where the reads run: one
    task per worker, all at once, each probing ``path``, so each sees the store shared as during
    the read and its own process's limits, not the client's. Every worker thread reads a
    fragment at a time, so the store's bandwidth is shared by that many readers, and those of
    one host lease their requests from one budget (:mod:`~gpuframe.io.tuning.budget`).
    Remembered per store. Local files are measured here: a round trip to the workers would cost
    more than the measurement."""
    if scheme_of(path) == "file":
        return measure_here(path, storage, fragment_bytes)

    def probe() -> tuple[list[StoreProbe], int, int]:
        threads = job.engine.client.nthreads()
        stage = job.stage("plan-measure")
        secrets = Secrets()
        hidden = (secrets.redact(path), secrets.redact(storage))
        sealed = secrets.seal(job.engine.client)
        futures = [stage.submit(probe_sealed, *hidden, sealed, index=(i,), owner=worker)
                   for i, worker in enumerate(sorted(threads))]
        hosts: Counter[str] = Counter()
        for worker, count in threads.items():
            hosts[get_address_host(worker)] += count
        return job.gather(futures), sum(threads.values()), max(hosts.values(), default=0)

    return remembered_concurrency(path, storage, probe, fragment_bytes)


def metadata_on_workers(job: Job, paths: Sequence[str], storage: StorageOptions,
                        fmt: FileFormat, partition_bytes: int) -> list[MetadataResult]:
    """Each file's metadata or error, read on the workers (the files dealt round robin), so
    planning shows on the task stream and a worker reads the files where it will read their
    data (on several hosts, paths the client may not see)."""
    workers = job.workers
    stage = job.stage("plan-metadata")
    secrets = Secrets()
    shares = [[secrets.redact(path) for path in paths[i::len(workers)]]
              for i in range(len(workers))]
    hidden = secrets.redact(storage)
    sealed = secrets.seal(job.engine.client)
    futures = [stage.submit(read_metadata_sealed, share, hidden, fmt, partition_bytes, sealed,
                            index=(i,), owner=worker)
               for i, (share, worker) in enumerate(zip(shares, workers)) if share]
    results: list[MetadataResult | None] = [None] * len(paths)
    for i, share_results in enumerate(job.gather(futures)):
        results[i::len(workers)] = share_results
    return results  # type: ignore[return-value]  # every file's slot is filled


def probe_sealed(path: str, storage: StorageOptions, sealed: str | None) -> StoreProbe:
    """The measuring task: :func:`~gpuframe.io.tuning.probe.probe_store` of the path and
    options the secrets ``sealed`` names restore."""
    return probe_store(unsealed(path, sealed), unsealed(storage, sealed))


def read_metadata_sealed(paths: list[str], storage: StorageOptions, fmt: FileFormat,
                         partition_bytes: int, sealed: str | None) -> list[MetadataResult]:
    """The planning task: :func:`~gpuframe.io.planning.metadata.read_metadata_each` of the
    paths and options the secrets ``sealed`` names restore."""
    return read_metadata_each(unsealed(paths, sealed), unsealed(storage, sealed), fmt,
                              partition_bytes)


def worker_memory(engine: Engine, workers: Sequence[str]) -> list[int]:
    """Bytes each worker holds partitions in: its GPU's on a device backend, else its memory
    limit as the scheduler knows it (0: none). Asked once per worker and engine: neither
    changes while a worker lives."""
    known = _memory_of.setdefault(engine, {})
    missing = [worker for worker in workers if worker not in known]
    if missing and engine.backend.on_device:
        known.update(engine.client.run(device_memory, workers=missing))
    elif missing:
        info = engine.client.sync(engine.scheduler.identity, n_workers=-1)["workers"]
        known.update({worker: int(info.get(worker, {}).get("memory_limit") or 0)
                      for worker in missing})
    return sorted(known[worker] for worker in workers)


_memory_of: weakref.WeakKeyDictionary[Engine, dict[str, int]] = weakref.WeakKeyDictionary()


def frame_meta(plan: ReadPlan, backend: Backend) -> pd.DataFrame:
    """The pandas schema of ``plan``'s result, as ``backend``'s partitions will have it."""
    schema = plan.schema
    # Arrow's schemas compare equal whatever their metadata, which pandas reads dtypes from.
    metadata = tuple(sorted(schema.metadata.items())) if schema.metadata else ()
    return _meta_of(backend, schema, metadata).copy()


@functools.lru_cache(maxsize=256)
def _meta_of(backend: Backend, schema: pa.Schema, metadata: tuple) -> pd.DataFrame:
    # Remembered: every read of a table (each query's) asks again, and pandas takes
    # milliseconds to make an empty frame of a wide schema.
    return backend.meta_from_arrow(schema)
