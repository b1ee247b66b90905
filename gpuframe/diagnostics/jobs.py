"""The client side of the engine's metrics: what the scheduler recorded, read back per job.

:func:`job_metrics` returns the figures of a job (the latest, the one before it, or one by id),
:func:`operator_stats` the rows and bytes each plan operator of a job put out, and
:func:`mark` / :func:`metrics_since` the figures of a :func:`gpuframe.report` block, which may
span several jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cluster.engine import Engine, current_engine
from ..errors import OptionError
from .metrics import (
    WHICH,
    _scheduler_job_summary,
    _scheduler_mark,
    _scheduler_operator_stats,
    _scheduler_summary_since,
)
from .summary import (
    IngestFigures,
    Limits,
    OperatorStats,
    PairFigures,
    StageFigures,
    Summary,
    WorkerLimits,
)


@dataclass(frozen=True)
class JobMetrics:
    """What the engine recorded over one job (or one :func:`gpuframe.report` block).

    Times are seconds, sizes bytes, rates bytes per second. ``job`` and ``name``: the job's id and
    name (None for a block). ``start`` and ``stop``: the job's start and end (``stop`` None while
    it runs), or a block's first and last task. ``stages``: per stage in the order it started,
    its task count, wall seconds (tasks side by side counted once), task seconds and bytes (read:
    bytes fetched; transfer: bytes moved between workers). ``ingest``: per worker, bytes read,
    seconds and rate. ``pairs``: per (source, destination) worker pair, bytes moved, seconds
    the link was busy (overlapping transfers counted once) and rate. ``limits``: per worker, the
    hardware limits measured at cluster start (None where not measurable); ``typical_limits``
    their median over the workers.
    """

    protocol: str
    workers: list[str]
    job: str | None
    name: str | None
    start: float | None
    stop: float | None
    stages: dict[str, StageFigures]
    ingest: dict[str, IngestFigures]
    pairs: list[PairFigures]
    limits: dict[str, WorkerLimits]
    typical_limits: Limits

    @property
    def running(self) -> bool:
        """Whether the job has started but not ended."""
        return self.job is not None and self.stop is None

    def as_summary(self) -> Summary:
        """The figures as the scheduler gave them, which the dashboard's figures draw."""
        return Summary(protocol=self.protocol, workers=self.workers, job=self.job,
                       name=self.name, start=self.start, stop=self.stop, stages=self.stages,
                       ingest=self.ingest, pairs=self.pairs, limits=self.limits,
                       typical_limits=self.typical_limits)


def job_metrics(which: str = "current", engine: Engine | None = None,
                job: str | None = None) -> JobMetrics | None:
    """The metrics of job ``job`` if given, else of the 'current' (latest started) or 'previous'
    job; None where the scheduler holds no such job (none started yet, or dropped as old)."""
    if which not in WHICH:
        raise OptionError(f"which={which!r}: choose one of {', '.join(WHICH)}")
    engine = current_engine(engine)
    summary = engine.client.run_on_scheduler(_scheduler_job_summary, which=job or which)
    return None if summary is None else JobMetrics(**summary)


def operator_stats(job: str, engine: Engine | None = None) -> dict[int, OperatorStats]:
    """Per plan operator (node) of ``job``: the rows, bytes and partitions it put out, from the
    workers' output events; empty where the scheduler holds no such job."""
    engine = current_engine(engine)
    return engine.client.run_on_scheduler(_scheduler_operator_stats, job=job)


def mark(engine: Engine) -> int:
    """A bookmark in the engine's records: :func:`metrics_since` it covers what ran after."""
    return engine.client.run_on_scheduler(_scheduler_mark)


def metrics_since(engine: Engine, bookmark: int) -> JobMetrics:
    """The metrics of every gpuframe task that finished since ``bookmark``."""
    return JobMetrics(**engine.client.run_on_scheduler(_scheduler_summary_since, first=bookmark))

