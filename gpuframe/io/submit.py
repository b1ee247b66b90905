"""Reading a dataset on the cluster: the client's side, the only io module that talks to Dask's
client, the cluster's engine and the frame.

:func:`read_parquet`, :func:`read_orc` and :func:`read_csv` plan on the client
(:func:`~gpuframe.io.planning.plan.plan_fragments`, which asks the workers through two
callbacks: :func:`measure_on_workers` for a remote store's first read, ``gpuframe-plan-measure``
tasks, and :func:`metadata_on_workers` for the files' metadata, ``gpuframe-plan-metadata``
tasks), then run one ``gpuframe-read-<format>-<token>-<i>`` task per read group
(:meth:`~gpuframe.io.planning.plan.ReadPlan.read_groups`) on the worker that owns it: the plain
function :func:`~gpuframe.io.readers.task.read_group` over the group's
:func:`~gpuframe.io.tasks.fragment_tasks`. So the task stream shows the reads, and later stages
know where each partition lives.

The first failed task's error reaches the caller as itself (:func:`raise_dataset_error`), and a
plan made with metadata kept from an earlier read is made again where a file changed since.
:func:`read_with_report` also returns the :class:`ReadReport` of bytes read against bytes of
the result's columns (:mod:`~gpuframe.io.report`), from the stats the read tasks kept on their
workers.

The cluster and the frame are imported when a read runs, not with gpuframe.io.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from distributed import Client, Future, wait

from .errors import DatasetError, FileChangedError
from .formats import format_for
from .formats.base import FileFormat
from .planning.metadata import PLANNED_METADATA, MetadataResult, read_metadata_each
from .planning.plan import ReadPlan, measure_here, plan_fragments
from .planning.sources import DatasetSource
from .readers.device import device_memory
from .readers.task import read_group, take_kept_stats
from .report import ReadReport
from .storage.base import StorageOptions, scheme_of, storage_options
from .tasks import fragment_tasks
from .tuning.model import Concurrency, StoreProbe
from .tuning.probe import probe_store
from .tuning.stores import remembered_concurrency

if TYPE_CHECKING:
    from ..cluster.engine import Engine
    from ..frame import DistributedFrame

logger = logging.getLogger("gpuframe")

STAGE_EVENT_TOPIC = "gpuframe-stage"  # client-side stages: {"stage": ..., "seconds": ...}


def read_parquet(source: DatasetSource, columns: Sequence[str] | None = None,
                 filters: Sequence[Any] | None = None, *, partition_bytes: int | None = None,
                 storage: StorageOptions | dict | None = None, engine: Engine | None = None,
                 **storage_overrides: Any) -> DistributedFrame:
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


def read_orc(source: DatasetSource, columns: Sequence[str] | None = None,
             filters: Sequence[Any] | None = None, *, partition_bytes: int | None = None,
             storage: StorageOptions | dict | None = None, engine: Engine | None = None,
             **storage_overrides: Any) -> DistributedFrame:
    """An ORC dataset as a :class:`gpuframe.DistributedFrame`: :func:`read_parquet`'s sources
    and options, with stripes for row groups: filters skip the stripes whose statistics prove
    no row matches (:func:`~gpuframe.io.formats.orc_tail.stripe_statistics`), then apply to rows."""
    return _read(source, "orc", columns, filters, partition_bytes, storage, engine,
                 storage_overrides, with_report=False)[0]


def read_csv(source: DatasetSource, columns: Sequence[str] | None = None,
             filters: Sequence[Any] | None = None, *, delimiter: str = ",", header: bool = True,
             schema: pa.Schema | dict | None = None, newlines_in_values: bool = False,
             partition_bytes: int | None = None,
             storage: StorageOptions | dict | None = None, engine: Engine | None = None,
             **storage_overrides: Any) -> DistributedFrame:
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


def read_parquet_with_report(source: DatasetSource, columns: Sequence[str] | None = None,
                             filters: Sequence[Any] | None = None, **options: Any,
                             ) -> tuple[DistributedFrame, ReadReport]:
    """:func:`read_parquet`, also returning the :class:`ReadReport` of what was fetched."""
    return read_with_report(source, "parquet", columns, filters, **options)


def read_with_report(source: DatasetSource, format: str | FileFormat = "parquet",
                     columns: Sequence[str] | None = None,
                     filters: Sequence[Any] | None = None, *,
                     partition_bytes: int | None = None,
                     storage: StorageOptions | dict | None = None, engine: Engine | None = None,
                     **storage_overrides: Any) -> tuple[DistributedFrame, ReadReport]:
    """Plan and read a dataset of ``format`` ('parquet', 'orc', 'csv' or a
    :class:`~gpuframe.io.formats.base.FileFormat`); the frame and the :class:`ReadReport`."""
    return _read(source, format, columns, filters, partition_bytes, storage, engine,
                 storage_overrides, with_report=True)


def _read(source: DatasetSource, format: str | FileFormat, columns: Sequence[str] | None,
          filters: Sequence[Any] | None, partition_bytes: int | None,
          storage: StorageOptions | dict | None, engine: Engine | None,
          storage_overrides: dict[str, Any], with_report: bool
          ) -> tuple[DistributedFrame, ReadReport | None]:
    """Plan and read; the report only ``with_report``: it asks the workers for their read
    tasks' stats, a round trip that the plain readers skip. The workers are asked for once
    (each ask is a round trip too) and serve every step of planning and reading. A plan that
    took a remote file's metadata from :data:`~.planning.metadata.PLANNED_METADATA` is made once
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


def measure_on_workers(engine: Engine, path: str, storage: StorageOptions,
                       fragment_bytes: int | None = None) -> Concurrency:
    """The store's :class:`Concurrency`, measured where the reads run: one
    ``gpuframe-plan-measure-<token>-<i>`` task per worker, all at once, each probing ``path``
    (:func:`~.tuning.probe.probe_store`), so each sees the store shared as during the
    read and its own process's limits, not the client's. Every worker thread reads a fragment
    at a time, so the store's bandwidth is shared by that many readers. Remembered per store
    like :func:`~.tuning.stores.measure_storage`. Local files are measured here: a
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


def metadata_on_workers(engine: Engine, workers: Sequence[str], paths: Sequence[str],
                        storage: StorageOptions, format: FileFormat,
                        partition_bytes: int) -> list[MetadataResult]:
    """Each file's metadata or error (:func:`~.planning.metadata.read_metadata_each`), read on
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
    results: list[MetadataResult | None] = [None] * len(paths)
    for i, share_results in enumerate(engine.client.gather(futures)):
        results[i::len(workers)] = share_results
    return results


def worker_device_memory(engine: Engine, workers: Sequence[str] | None = None) -> list[int]:
    """Bytes of each of ``workers``' GPU (default: the engine's workers), asked of each worker
    once per engine, since a GPU's size does not change (a round trip a read saved); [] on a
    cluster without GPUs. The scheduler's NVML startup information is not asked: it is absent
    where pynvml is, and reads then planned the CPU's partitions on GPUs
    (benchmarks/results/2026-11-25-figures-from-io-comments.md)."""
    if engine.backend.name != "cudf":
        return []
    workers = list(engine.workers if workers is None else workers)
    known = _device_memory_of.setdefault(engine, {})
    missing = [worker for worker in workers if worker not in known]
    if missing:
        known.update(engine.client.run(device_memory, workers=missing))
    return sorted(known[worker] for worker in workers)


_device_memory_of: weakref.WeakKeyDictionary[Engine, dict[str, int]] = (
    weakref.WeakKeyDictionary())


def read_plan(plan: ReadPlan, engine: Engine | None = None,
              workers: Sequence[str] | None = None, *,
              with_report: bool = True) -> tuple[DistributedFrame, ReadReport | None]:
    """Run ``plan`` on the engine's cluster: one task per read group
    (:meth:`~.planning.plan.ReadPlan.read_groups`), giving one partition of the frame, pinned
    to its owner if among ``workers`` (default: the engine's); the frame, and the
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
        futures.append(engine.client.submit(read_group, key, [tasks[j] for j in group],
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


def raise_dataset_error(client: Client, futures: Sequence[Future], owners: Sequence[str]
                        ) -> None:
    """Raise the first failed read task's :class:`~gpuframe.io.errors.DatasetError` as itself,
    the worker's traceback and a note of the task and worker added, so a caller catches a file
    gone between planning and reading with ``except FileNotFoundError`` like one gone before
    (the frame's ``PartitionError`` would hide the class). Other failures are left to
    :meth:`~gpuframe.frame.DistributedFrame.persist`.

    A worker whose CUDA context the read lost (``gpu_context_lost``, see
    :func:`~.readers.failures.naming_cudf_failures`) is restarted first by its nanny: its GPU
    would fail every later task, and what it held in device memory is gone with the context
    anyway."""
    for index, (future, owner) in enumerate(zip(futures, owners)):
        if future.status != "error":
            continue
        error = future.exception()
        if isinstance(error, DatasetError):
            error.add_note(f"raised by read task {future.key} (partition {index}) on {owner}")
            if getattr(error, "gpu_context_lost", False):
                error.add_note(_restart_worker(client, owner))
            raise error.with_traceback(future.traceback())


def _restart_worker(client: Client, worker: str) -> str:
    """Restart ``worker`` through its nanny; a note of what became of it."""
    try:
        status = client.restart_workers([worker]).get(worker)
    # No nanny, or the worker did not come back: whatever the failure, the read's error stands
    # and the note says so.
    except Exception as exc:  # noqa: BLE001
        return (f"{worker} could not be restarted ({type(exc).__name__}: {exc}): restart the "
                f"cluster")
    return f"{worker} was restarted ({status}): the partitions it held are lost"


def _report(plan: ReadPlan, engine: Engine, keys: set[str], seconds: float) -> ReadReport:
    kept = engine.client.run(take_kept_stats, sorted(keys))
    latest = {s["key"]: s for stats in kept.values() for s in stats}
    if len(latest) < len(keys):  # a worker restarted since its task ran, its stats with it
        logger.warning("the report of read %s counts %d of its %d tasks: the others' workers "
                       "no longer hold their stats", plan.format.name, len(latest), len(keys))
    return ReadReport.from_stats(plan, latest.values(), seconds)
