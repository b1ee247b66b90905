"""The engine's record of its jobs, kept on the scheduler from Dask's own task records.

:class:`EngineMetrics` is a scheduler plugin. On every gpuframe task that finishes it keeps the
task's stage (from its key), worker, compute interval and result size, and the transfers Dask
timed for it; a transfer's bytes are those of the dependencies that were computed on another
worker. Read tasks' read events add the bytes each read fetched, the client's stage events the
stages that run on the client, not as tasks (planning a read), and workers' output events the
rows and bytes of each plan operator. The events and keys are those of :mod:`.stages`: io and the
operators name their keys and log events, and Dask does the rest. The direct exchange's
deliveries, which bypass Dask's transfers, come as send events and count as transfers.

Jobs are the client's: a record belongs to the job its key names, and a job runs from its start
event to its end event. Every record also goes to one log in order, from which
:func:`gpuframe.report` blocks, which may span jobs, read from a bookmark. Both are bounded: the
log keeps the latest :data:`MAX_RECORDS` records, and jobs past :data:`MAX_JOBS`, or past
:data:`MAX_RECORDS` records together, are dropped oldest first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice
from statistics import median
from typing import TYPE_CHECKING, Any

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.metrics import time

from .page import add_engine_page
from .stages import (
    CLIENT_EVENT_OP,
    JOB_EVENT_TOPIC,
    OUTPUT_EVENT_TOPIC,
    READ_EVENT_TOPIC,
    SEND_EVENT_TOPIC,
    STAGE_EVENT_TOPIC,
    JobEvent,
    OutputEvent,
    SendEvent,
    StageEvent,
    job_of,
    stage_of,
)
from .summary import (
    LIMITS,
    TRANSFER,
    IngestFigures,
    Limits,
    OperatorStats,
    PairFigures,
    StageFigures,
    Summary,
    WorkerLimits,
)

if TYPE_CHECKING:
    from dask.typing import Key
    from distributed import Scheduler

PLUGIN_NAME = "gpuframe-metrics"
CLIENT = "client"  # the worker column of client-side stages' records
MOVED = "moved"  # a dependency's bytes that crossed to another worker, in no stage's figures
SUBMITTED = ("waiting", "queued", "no-worker", "processing")
MAX_RECORDS = 200_000
MAX_JOBS = 64
WHICH = {"current": 1, "previous": 2}  # how far back from the latest started job


@dataclass(frozen=True)
class TaskRecord:
    """One stage's work on one worker: a task's compute, or a transfer into ``worker``."""

    stage: str
    worker: str
    start: float
    stop: float
    nbytes: int
    source: str | None = None


@dataclass
class Job:
    """One job as the scheduler saw it: its window, its records, and per plan operator (node)
    the rows and bytes of each output partition (a recomputed partition counts once)."""

    id: str
    name: str
    start: float
    stop: float | None = None
    records: deque[TaskRecord] = field(default_factory=deque)
    outputs: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)


class EngineMetrics(SchedulerPlugin):
    """Scheduler plugin: per-job stage times, bytes per worker pair, bytes read per worker and
    operator outputs, and the hardware limits measured at cluster start."""

    idempotent = True  # a second connect() keeps the records of the first

    def __init__(self, max_jobs: int = MAX_JOBS, max_records: int = MAX_RECORDS) -> None:
        self.scheduler: Scheduler | None = None
        self.max_jobs = max_jobs
        self.max_records = max_records
        self.records: deque[TaskRecord] = deque(maxlen=max_records)
        self.appended = 0
        self.jobs: dict[str, Job] = {}  # in the order they started
        self.job_records = 0
        self.stage_tasks: dict[str, list[int]] = {}  # stage -> [submitted, done], ever
        self.limits: dict[str, WorkerLimits] = {}
        self._origin: dict[Key, str] = {}
        self._moved: dict[Key, set[str]] = {}
        self._read_bytes: dict[Key, int] = {}

    async def start(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        add_engine_page(scheduler, self.job_summary)
        scheduler.stream_handlers[CLIENT_EVENT_OP] = self._client_event

    def _client_event(self, client: str, topic: str, msg: Any) -> None:
        """A client's event, sent on its stream: logged as ``Client.log_event`` would."""
        if self.scheduler is not None:
            self.scheduler.log_event(topic, msg)

    def transition(self, key: Key, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        stage = stage_of(key)
        if start == "processing" and finish == "memory":
            self._origin[key] = kwargs["worker"]
        if stage is not None:
            counts = self.stage_tasks.setdefault(stage, [0, 0])
            if start == "released" and finish in SUBMITTED:
                counts[0] += 1
            elif finish in ("memory", "erred") and start != "memory":
                counts[1] += 1
            if start == "processing" and finish == "memory":
                self._finished(key, stage, kwargs)
        if finish in ("released", "forgotten"):
            self._origin.pop(key, None)
            self._moved.pop(key, None)
            self._read_bytes.pop(key, None)

    def log_event(self, topic: str, msg: Any) -> None:
        """Jobs starting and ending, client-side stages, reads' bytes and operators' outputs.

        A read's event arrives before its task's end, on the same stream from the worker."""
        if topic == JOB_EVENT_TOPIC:
            self._job_event(msg)
        elif topic == STAGE_EVENT_TOPIC:
            self._stage_event(msg)
        elif topic == OUTPUT_EVENT_TOPIC:
            self._output_event(msg)
        elif topic == SEND_EVENT_TOPIC:
            self._send_event(msg)
        elif topic == READ_EVENT_TOPIC:
            task = self.scheduler.tasks.get(msg["key"]) if self.scheduler is not None else None
            if task is not None and task.state == "processing":
                self._read_bytes[msg["key"]] = int(msg["bytes_read"])

    def _job_event(self, msg: JobEvent) -> None:
        job = self._job(msg["job"], float(msg["time"]))
        if msg["phase"] == "start":
            job.name = str(msg["name"])
            job.start = min(job.start, float(msg["time"]))
        else:
            job.stop = float(msg["time"])

    def _job(self, job_id: str, start: float) -> Job:
        """The job of that id, made on first sight: its start event is not waited for, so a
        task of it may finish first."""
        job = self.jobs.get(job_id)
        if job is None:
            job = self.jobs[job_id] = Job(job_id, "", start)
            while len(self.jobs) > self.max_jobs:
                self._drop(next(iter(self.jobs.values())))
        return job

    def _stage_event(self, msg: StageEvent) -> None:
        stop = time()
        stage = str(msg["stage"]).split("-", 1)[0]
        record = TaskRecord(stage, CLIENT, stop - float(msg["seconds"]), stop, 0)
        self._record(record, self._job(msg["job"], record.start))

    def _output_event(self, msg: OutputEvent) -> None:
        partitions = self._job(msg["job"], time()).outputs.setdefault(int(msg["node"]), {})
        partitions[int(msg["partition"])] = (int(msg["rows"]), int(msg["bytes"]))

    def _send_event(self, msg: SendEvent) -> None:
        """A delivery of the direct exchange: a transfer between two workers, and its bytes."""
        job = self._job(msg["job"], float(msg["start"])) if msg["job"] else None
        source, destination = str(msg["source"]), str(msg["destination"])
        start, stop = float(msg["start"]), float(msg["stop"])
        self._record(TaskRecord(TRANSFER, destination, start, stop, 0, source=source), job)
        self._record(TaskRecord(MOVED, destination, stop, stop, int(msg["bytes"]),
                                source=source), job)

    def _finished(self, key: Key, stage: str, info: dict[str, Any]) -> None:
        job_id = job_of(key)
        job = self._job(job_id, time()) if job_id else None
        worker = info["worker"]
        nbytes = info.get("nbytes", 0)
        if stage == "read":
            nbytes = self._read_bytes.pop(key, nbytes)
        for startstop in info.get("startstops", ()):
            if startstop["action"] == "compute":
                self._record(TaskRecord(stage, worker, startstop["start"], startstop["stop"],
                                        nbytes), job)
            elif startstop["action"] == "transfer":
                self._record(TaskRecord(TRANSFER, worker, startstop["start"], startstop["stop"],
                                        0, source=startstop.get("source")), job)
        task = self.scheduler.tasks.get(key) if self.scheduler is not None else None
        for dependency in task.dependencies if task is not None else ():
            origin = self._origin.get(dependency.key)
            moved_to = self._moved.setdefault(dependency.key, set())
            if origin is None or origin == worker or worker in moved_to:
                continue
            moved_to.add(worker)
            now = time()
            self._record(TaskRecord(MOVED, worker, now, now, dependency.nbytes, source=origin),
                         job)

    def _record(self, record: TaskRecord, job: Job | None) -> None:
        self.records.append(record)
        self.appended += 1
        if job is None:
            return
        job.records.append(record)
        self.job_records += 1
        while self.job_records > self.max_records:
            oldest = next((j for j in self.jobs.values() if j is not job), None)
            if oldest is None:  # this job alone holds too many: it loses its oldest
                job.records.popleft()
                self.job_records -= 1
            else:
                self._drop(oldest)

    def _drop(self, job: Job) -> None:
        del self.jobs[job.id]
        self.job_records -= len(job.records)

    def set_limits(self, limits: dict[str, WorkerLimits]) -> None:
        self.limits.update(limits)

    def job(self, which: str) -> Job | None:
        """The 'current' (latest started) or 'previous' job, or the job of that id."""
        back = WHICH.get(which)
        if back is None:
            return self.jobs.get(which)
        return next(islice(reversed(self.jobs.values()), back - 1, None), None)

    def job_summary(self, which: str = "current") -> Summary | None:
        """The summary of :meth:`job`; None where the scheduler holds no such job."""
        job = self.job(which)
        if job is None:
            return None
        return self.summary(job.records, job.start, job.stop, job.id, job.name)

    def operator_stats(self, job_id: str) -> dict[int, OperatorStats]:
        """Per plan operator (node) of a job, its output rows, bytes and partitions."""
        job = self.jobs.get(job_id)
        if job is None:
            return {}
        return {node: OperatorStats(rows=sum(rows for rows, _ in parts.values()),
                                    bytes=sum(size for _, size in parts.values()),
                                    partitions=len(parts))
                for node, parts in sorted(job.outputs.items())}

    def summary_since(self, first: int) -> Summary:
        """The summary of the records made since :attr:`appended` was ``first``."""
        skip = max(0, first - (self.appended - len(self.records)))
        records = list(islice(self.records, skip, None))
        return self.summary(records, min((r.start for r in records), default=None),
                            max((r.stop for r in records), default=None))

    def summary(self, records: Iterable[TaskRecord], start: float | None, stop: float | None,
                job: str | None = None, name: str | None = None) -> Summary:
        """Records as plain data: stages, ingest per worker, worker pairs, limits."""
        records = list(records)
        workers = _ordered_workers(self.scheduler)
        return Summary(
            protocol=_protocol(self.scheduler),
            workers=workers,
            job=job,
            name=name,
            start=start,
            stop=stop,
            stages=_stages(records),
            ingest=_ingest(r for r in records if r.stage == "read"),
            pairs=_pairs(records),
            limits={w: self.limits[w] for w in workers if w in self.limits},
            typical_limits=typical_limits(self.limits.values()),
        )


def _ordered_workers(scheduler: Scheduler | None) -> list[str]:
    """Worker addresses in the engine's order: by worker name (a GPU cluster names workers by
    GPU), as :attr:`gpuframe.Engine.workers` orders them."""
    if scheduler is None:
        return []
    named = {address: str(state.name) for address, state in scheduler.workers.items()}
    return sorted(named, key=lambda a: ((len(named[a]), named[a]) if named[a].isdigit()
                                        else (float("inf"), named[a]), a))


def _protocol(scheduler: Scheduler | None) -> str:
    """The protocol the workers move data between them over: their addresses' (the scheduler
    may listen on another, :func:`~gpuframe.start_cluster`'s ``scheduler_protocol``)."""
    if scheduler is None:
        return "unknown"
    return next(iter(scheduler.workers), scheduler.address).split("://", 1)[0]


def union_seconds(intervals: list[tuple[float, float]]) -> float:
    """Wall time covered by possibly overlapping intervals (tasks run side by side)."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def _stages(records: list[TaskRecord]) -> dict[str, StageFigures]:
    """Per stage, in the order its first task started."""
    by_stage: dict[str, list[TaskRecord]] = {}
    for record in records:
        if record.stage != MOVED:
            by_stage.setdefault(record.stage, []).append(record)
    moved = sum(r.nbytes for r in records if r.stage == MOVED)
    result = {}
    for stage in sorted(by_stage, key=lambda s: min(r.start for r in by_stage[s])):
        chosen = by_stage[stage]
        result[stage] = StageFigures(
            tasks=len(chosen),
            wall_seconds=union_seconds([(r.start, r.stop) for r in chosen]),
            task_seconds=sum(r.stop - r.start for r in chosen),
            bytes=moved if stage == TRANSFER else sum(r.nbytes for r in chosen),
            first_start=min(r.start for r in chosen),
            last_stop=max(r.stop for r in chosen),
        )
    return result


def _ingest(records: Iterable[TaskRecord]) -> dict[str, IngestFigures]:
    by_worker: dict[str, list[TaskRecord]] = {}
    for record in records:
        by_worker.setdefault(record.worker, []).append(record)
    result = {}
    for worker, chosen in by_worker.items():
        seconds = union_seconds([(r.start, r.stop) for r in chosen])
        nbytes = sum(r.nbytes for r in chosen)
        result[worker] = IngestFigures(bytes=nbytes, seconds=seconds,
                                       rate=nbytes / seconds if seconds > 0 else 0.0)
    return result


def _pairs(records: list[TaskRecord]) -> list[PairFigures]:
    """Bytes moved per (source, destination), over the time the link was busy: the union of its
    transfers' intervals, as several transfers (the direct exchange's deliveries) may share
    the link at once."""
    pairs: dict[tuple[str, str], PairFigures] = {}
    busy: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for record in records:
        if record.source is None or record.stage not in (MOVED, TRANSFER):
            continue
        link = (record.source, record.worker)
        pair = pairs.setdefault(link, PairFigures(
            source=record.source, destination=record.worker, bytes=0, seconds=0.0, rate=None))
        if record.stage == MOVED:
            pair["bytes"] += record.nbytes
        else:
            busy.setdefault(link, []).append((record.start, record.stop))
    for link, pair in pairs.items():
        pair["seconds"] = union_seconds(busy.get(link, []))
        pair["rate"] = pair["bytes"] / pair["seconds"] if pair["seconds"] > 0 else None
    return sorted(pairs.values(), key=lambda p: (p["source"], p["destination"]))


def typical_limits(limits: Iterable[WorkerLimits]) -> Limits:
    """The median of each limit over the workers that measured it."""
    limits = list(limits)
    result: Limits = {}
    for name in LIMITS:
        values = [value for value in (lim.get(name) for lim in limits) if value is not None]
        result[name] = median(values) if values else None
    return result


def plugin_of(scheduler: Scheduler) -> EngineMetrics:
    plugin = scheduler.plugins[PLUGIN_NAME]
    if not isinstance(plugin, EngineMetrics):
        raise TypeError(f"the scheduler plugin {PLUGIN_NAME!r} is a {type(plugin).__name__}, "
                        "not gpuframe's EngineMetrics")
    return plugin


def _scheduler_job_summary(dask_scheduler: Scheduler, which: str) -> Summary | None:
    return plugin_of(dask_scheduler).job_summary(which)


def _scheduler_operator_stats(dask_scheduler: Scheduler, job: str) -> dict[int, OperatorStats]:
    return plugin_of(dask_scheduler).operator_stats(job)


def _scheduler_stage_tasks(dask_scheduler: Scheduler) -> dict[str, list[int]]:
    return {stage: list(counts) for stage, counts in plugin_of(dask_scheduler).stage_tasks.items()}


def _scheduler_mark(dask_scheduler: Scheduler) -> int:
    return plugin_of(dask_scheduler).appended


def _scheduler_summary_since(dask_scheduler: Scheduler, first: int) -> Summary:
    return plugin_of(dask_scheduler).summary_since(first)


def _scheduler_set_limits(dask_scheduler: Scheduler, limits: dict[str, WorkerLimits]) -> None:
    plugin_of(dask_scheduler).set_limits(limits)


def _scheduler_unmeasured(dask_scheduler: Scheduler) -> list[str]:
    """The workers whose limits the plugin does not hold yet."""
    plugin = plugin_of(dask_scheduler)
    return [w for w in dask_scheduler.workers if w not in plugin.limits]
