"""The engine's record of its jobs, kept on the scheduler from Dask's own task records.

:class:`EngineMetrics` is a scheduler plugin. On every gpuframe task that finishes it keeps the
task's stage (from its key), worker, compute interval and result size, and the transfers Dask
timed for it; a transfer's bytes are those of the dependencies that were computed on another
worker. Read tasks' ``gpuframe-read`` events add the bytes each read fetched, and the client's
``gpuframe-stage`` events the stages that run on the client, not as tasks (planning a read). io
and shuffle import nothing from here: they name their keys and log events; Dask does the rest.

A job is a run of gpuframe tasks with no idle gap longer than :data:`JOB_GAP` seconds between
them. :meth:`EngineMetrics.summary` folds the records of a job, or of a
:func:`gpuframe.report` block, into plain data; :func:`gpuframe.job_metrics` fetches it to the
client.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import islice
from statistics import median
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.metrics import time

from .stages import STAGES, TRANSFER, stage_of

PLUGIN_NAME = "gpuframe-metrics"
READ_EVENT_TOPIC = "gpuframe-read"  # what gpuframe.io.read logs per fragment
STAGE_EVENT_TOPIC = "gpuframe-stage"  # {"stage", "seconds"}: client-side work just ended
CLIENT = "client"  # the worker column of client-side stages' records
JOB_GAP = 2.0
SUBMITTED = ("waiting", "queued", "no-worker", "processing")
MAX_RECORDS = 200_000


@dataclass(frozen=True)
class TaskRecord:
    """One stage's work on one worker: a task's compute, or a transfer into ``worker``."""

    stage: str
    worker: str
    start: float
    stop: float
    nbytes: int
    source: str | None = None
    job: int = 0


class EngineMetrics(SchedulerPlugin):
    """Scheduler plugin: per-stage task times, bytes per worker pair, bytes read per worker,
    the jobs they make up, and the hardware limits measured at cluster start."""

    idempotent = True  # a second connect() keeps the records of the first

    def __init__(self) -> None:
        self.scheduler: Any = None
        self.records: deque[TaskRecord] = deque(maxlen=MAX_RECORDS)
        self.jobs: deque[list[float]] = deque(maxlen=20)
        self.job = 0
        self.appended = 0
        self.stage_tasks: dict[str, list[int]] = {}  # stage -> [submitted, done], ever
        self.limits: dict[str, dict[str, Any]] = {}
        self.in_flight = 0
        self._origin: dict[Any, str] = {}
        self._moved: dict[Any, set[str]] = {}
        self._read_bytes: dict[Any, int] = {}

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        from .page import add_engine_page

        add_engine_page(scheduler)

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        stage = stage_of(key)
        if start == "processing" and finish == "memory":
            self._origin[key] = kwargs["worker"]
        if stage is not None:
            counts = self.stage_tasks.setdefault(stage, [0, 0])
            if start == "released" and finish in SUBMITTED:
                counts[0] += 1
            elif finish in ("memory", "erred") and start != "memory":
                counts[1] += 1
        if stage is not None and start == "processing" and self.jobs:
            self.in_flight = max(0, self.in_flight - 1)
            self.jobs[-1][1] = time()
            if finish == "memory":
                self._finished(key, stage, kwargs)
        elif stage is not None and finish == "processing":
            self._enter_job(time())
            self.in_flight += 1
        if finish in ("released", "forgotten"):
            self._origin.pop(key, None)
            self._moved.pop(key, None)
            self._read_bytes.pop(key, None)

    def _enter_job(self, now: float) -> None:
        """Start a new job at ``now`` unless work is in flight or ended less than JOB_GAP ago."""
        if not self.jobs or (self.in_flight == 0 and now - self.jobs[-1][1] > JOB_GAP):
            self.jobs.append([now, now])
            self.job += 1

    def log_event(self, topic: Any, msg: Any) -> None:
        """A read task's own count of the bytes it fetched (it arrives before the task's end,
        on the same stream from the worker), or a client-side stage that just ended."""
        if topic == STAGE_EVENT_TOPIC and isinstance(msg, dict) and "stage" in msg:
            stop = time()
            start = stop - float(msg.get("seconds", 0.0))
            self._enter_job(start)
            self.jobs[-1][1] = max(self.jobs[-1][1], stop)
            self._record(TaskRecord(str(msg["stage"]), CLIENT, start, stop, 0, job=self.job))
        elif topic == READ_EVENT_TOPIC and isinstance(msg, dict) and "key" in msg:
            task = self.scheduler.tasks.get(msg["key"]) if self.scheduler is not None else None
            if task is not None and task.state == "processing":
                self._read_bytes[msg["key"]] = int(msg.get("bytes_read", 0))

    def _finished(self, key: Any, stage: str, info: dict[str, Any]) -> None:
        worker = info["worker"]
        nbytes = info.get("nbytes", 0)
        if stage == "read":
            nbytes = self._read_bytes.pop(key, nbytes)
        for startstop in info.get("startstops", ()):
            if startstop["action"] == "compute":
                self._record(TaskRecord(stage, worker, startstop["start"], startstop["stop"],
                                        nbytes, job=self.job))
            elif startstop["action"] == "transfer":
                self._record(TaskRecord(TRANSFER, worker, startstop["start"], startstop["stop"],
                                        0, source=startstop.get("source"), job=self.job))
        task = self.scheduler.tasks.get(key) if self.scheduler is not None else None
        for dependency in task.dependencies if task is not None else ():
            origin = self._origin.get(dependency.key)
            moved_to = self._moved.setdefault(dependency.key, set())
            if origin is None or origin == worker or worker in moved_to:
                continue
            moved_to.add(worker)
            now = time()
            self._record(TaskRecord("moved", worker, now, now, dependency.nbytes,
                                    source=origin, job=self.job))

    def _record(self, record: TaskRecord) -> None:
        self.records.append(record)
        self.appended += 1

    def set_limits(self, limits: dict[str, dict[str, Any]]) -> None:
        self.limits.update(limits)

    def job_window(self, which: str = "current") -> tuple[float, float] | None:
        """(start, stop) scheduler times of the 'current' (latest) or 'previous' job."""
        index = {"current": -1, "previous": -2}[which]
        if len(self.jobs) < -index:
            return None
        start, stop = self.jobs[index]
        return start, (time() if which == "current" and self.in_flight else stop)

    def job_summary(self, which: str = "current") -> dict[str, Any] | None:
        """The summary of the 'current' (latest) or 'previous' job; None if there is none."""
        job = self.job - {"current": 0, "previous": 1}[which]
        if job < 1:
            return None
        chosen = []
        for record in reversed(self.records):  # jobs are appended in order: read back to it
            if record.job < job:
                break
            if record.job == job:
                chosen.append(record)
        return self.summary(chosen[::-1])

    def summary_since(self, first: int) -> dict[str, Any]:
        """The summary of the records made since :attr:`appended` was ``first``."""
        skip = max(0, first - (self.appended - len(self.records)))
        return self.summary(list(islice(self.records, skip, None)))

    def summary(self, records: list[TaskRecord]) -> dict[str, Any]:
        """Records as plain data: stages, ingest per worker, worker pairs, limits."""
        workers = _ordered_workers(self.scheduler)
        return {
            "protocol": _protocol(self.scheduler),
            "workers": workers,
            "start": min((r.start for r in records), default=None),
            "stop": max((r.stop for r in records), default=None),
            "stages": _stages(records),
            "ingest": _ingest(r for r in records if r.stage == "read"),
            "pairs": _pairs(records),
            "limits": {w: self.limits[w] for w in workers if w in self.limits},
            "typical_limits": typical_limits(self.limits.values()),
        }


def _ordered_workers(scheduler: Any) -> list[str]:
    """Worker addresses in the engine's order: by worker name (a GPU cluster names workers by
    GPU), as :attr:`gpuframe.Engine.workers` orders them."""
    if scheduler is None:
        return []
    named = {address: str(state.name) for address, state in scheduler.workers.items()}
    return sorted(named, key=lambda a: ((len(named[a]), named[a]) if named[a].isdigit()
                                        else (float("inf"), named[a]), a))


def _protocol(scheduler: Any) -> str:
    return scheduler.address.split("://", 1)[0] if scheduler is not None else "unknown"


def union_seconds(intervals: list[tuple[float, float]]) -> float:
    """Wall time covered by possibly overlapping intervals (tasks run side by side)."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def _stages(records: list[TaskRecord]) -> dict[str, dict[str, float]]:
    by_stage: dict[str, list[TaskRecord]] = {}
    for record in records:
        if record.stage != "moved":
            by_stage.setdefault(record.stage, []).append(record)
    moved = sum(r.nbytes for r in records if r.stage == "moved")
    result = {}
    for stage in sorted(by_stage, key=lambda s: STAGES.index(s) if s in STAGES else len(STAGES)):
        chosen = by_stage[stage]
        result[stage] = {
            "tasks": len(chosen),
            "wall_seconds": union_seconds([(r.start, r.stop) for r in chosen]),
            "task_seconds": sum(r.stop - r.start for r in chosen),
            "bytes": moved if stage == TRANSFER else sum(r.nbytes for r in chosen),
        }
    return result


def _ingest(records: Any) -> dict[str, dict[str, float]]:
    by_worker: dict[str, list[TaskRecord]] = {}
    for record in records:
        by_worker.setdefault(record.worker, []).append(record)
    result = {}
    for worker, chosen in by_worker.items():
        seconds = union_seconds([(r.start, r.stop) for r in chosen])
        nbytes = sum(r.nbytes for r in chosen)
        result[worker] = {"bytes": nbytes, "seconds": seconds,
                          "rate": nbytes / seconds if seconds > 0 else 0.0}
    return result


def _pairs(records: list[TaskRecord]) -> list[dict[str, Any]]:
    pairs: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        if record.source is None or record.stage not in ("moved", TRANSFER):
            continue
        pair = pairs.setdefault((record.source, record.worker),
                                {"source": record.source, "destination": record.worker,
                                 "bytes": 0, "seconds": 0.0})
        if record.stage == "moved":
            pair["bytes"] += record.nbytes
        else:
            pair["seconds"] += record.stop - record.start
    for pair in pairs.values():
        pair["rate"] = pair["bytes"] / pair["seconds"] if pair["seconds"] > 0 else None
    return sorted(pairs.values(), key=lambda p: (p["source"], p["destination"]))


def typical_limits(limits: Any) -> dict[str, float | None]:
    """The median of each limit over the workers that measured it."""
    limits = list(limits)
    names = ("memcpy", "disk_read", "device_copy", "peer_copy", "host_device")
    result: dict[str, float | None] = {}
    for name in names:
        values = [lim[name] for lim in limits if lim.get(name) is not None]
        result[name] = median(values) if values else None
    return result


def plugin_of(scheduler: Any) -> EngineMetrics:
    return scheduler.plugins[PLUGIN_NAME]


def _scheduler_job_summary(dask_scheduler: Any, which: str) -> dict[str, Any] | None:
    return plugin_of(dask_scheduler).job_summary(which)


def _scheduler_stage_tasks(dask_scheduler: Any) -> dict[str, list[int]]:
    return {stage: list(counts) for stage, counts in plugin_of(dask_scheduler).stage_tasks.items()}


def _scheduler_mark(dask_scheduler: Any) -> int:
    return plugin_of(dask_scheduler).appended


def _scheduler_summary_since(dask_scheduler: Any, first: int) -> dict[str, Any]:
    return plugin_of(dask_scheduler).summary_since(first)


def _scheduler_set_limits(dask_scheduler: Any, limits: dict[str, dict[str, Any]]) -> None:
    plugin_of(dask_scheduler).set_limits(limits)


def _scheduler_limits(dask_scheduler: Any) -> dict[str, dict[str, Any]]:
    return dict(plugin_of(dask_scheduler).limits)
