"""The plain data of a metrics summary: what the scheduler plugin folds its records into, and
what the dashboard page, the reports and :class:`~gpuframe.diagnostics.jobs.JobMetrics` read.

Times are seconds, sizes bytes, rates bytes per second.
"""

from __future__ import annotations

from typing import Literal, TypedDict

# Data moved between workers shows as this stage (Dask's "transfer" start-stops).
TRANSFER = "transfer"

# Per limit name (memcpy, disk_read, ...), bytes per second; None where not measurable.
Limits = dict[str, float | None]

LimitName = Literal["memcpy", "disk_read", "device_copy", "peer_copy", "host_device"]
LIMITS: tuple[LimitName, ...] = ("memcpy", "disk_read", "device_copy", "peer_copy",
                                 "host_device")
"""The limits a worker measures, in the order they are shown."""


class WorkerLimits(TypedDict):
    """One worker's limits, as :class:`~gpuframe.diagnostics.limits.HardwareLimits` measured
    them, with why a limit is None in ``notes``."""

    memcpy: float | None
    disk_read: float | None
    device_copy: float | None
    peer_copy: float | None
    host_device: float | None
    notes: dict[str, str]


class StageFigures(TypedDict):
    """One stage: wall seconds count tasks side by side once; bytes are those read (read),
    moved between workers (transfer) or produced (any other stage). ``first_start`` and
    ``last_stop`` (the scheduler's clock) place the stage in its job, so that the gaps between
    stages, where no task of the job runs, show."""

    tasks: int
    wall_seconds: float
    task_seconds: float
    bytes: int
    first_start: float
    last_stop: float


class IngestFigures(TypedDict):
    """What one worker read."""

    bytes: int
    seconds: float
    rate: float


class PairFigures(TypedDict):
    """What moved from one worker to another."""

    source: str
    destination: str
    bytes: int
    seconds: float
    rate: float | None


class OperatorStats(TypedDict):
    """The output of one plan operator, summed over its partitions."""

    rows: int
    bytes: int
    partitions: int


class Summary(TypedDict):
    """A job, or a :func:`gpuframe.report` block (``job`` and ``name`` None).

    A job's ``start`` and ``stop`` are its start and end events (``stop`` None while it runs);
    a block's are those of its first and last record. ``stages`` come in the order their first
    task started.
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
