"""The client side of the engine's metrics: attach them to a cluster, and read them back.

:func:`attach` runs when an engine starts or connects: it registers the
:class:`~gpuframe.diagnostics.metrics.EngineMetrics` scheduler plugin (which also adds the engine
page to the dashboard) and measures the hardware limits of workers not measured before.
:func:`job_metrics` returns what the engine recorded for a job.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..cluster.engine import Engine, current_engine
from ..errors import OptionError
from .limits import calibrate_worker
from .metrics import (
    PLUGIN_NAME,
    EngineMetrics,
    _scheduler_limits,
    _scheduler_set_limits,
    _scheduler_job_summary,
    _scheduler_mark,
    _scheduler_summary_since,
)

logger = logging.getLogger("gpuframe")

WHICH = ("current", "previous")


@dataclass(frozen=True)
class JobMetrics:
    """What the engine recorded over one job (or one :func:`gpuframe.report` block).

    Times are seconds, sizes bytes, rates bytes per second. ``stages``: per stage, its task
    count, wall seconds (tasks side by side counted once), task seconds and bytes (read: bytes
    fetched; transfer: bytes moved between workers). ``ingest``: per worker, bytes read,
    seconds and rate. ``pairs``: per (source, destination) worker pair, bytes moved, transfer
    seconds and rate. ``limits``: per worker, the hardware limits measured at cluster start
    (None where not measurable); ``typical_limits`` their median over the workers.
    """

    protocol: str
    workers: list[str]
    start: float | None
    stop: float | None
    stages: dict[str, dict[str, float]]
    ingest: dict[str, dict[str, float]]
    pairs: list[dict[str, Any]]
    limits: dict[str, dict[str, Any]]
    typical_limits: dict[str, float | None]


def attach(engine: Engine) -> None:
    """Give ``engine``'s scheduler the metrics plugin and its workers' measured limits.

    Diagnostics never stop a cluster from starting: a scheduler that cannot take the plugin
    (one without gpuframe installed) is logged and the engine works on without them.
    """
    client = engine.client
    try:
        client.register_plugin(EngineMetrics(), name=PLUGIN_NAME)
        known = client.run_on_scheduler(_scheduler_limits)
        missing = [w for w in engine.workers if w not in known]
        if missing:
            measured = client.run(calibrate_worker, workers=missing)
            client.run_on_scheduler(_scheduler_set_limits, limits=measured)
    except Exception as exc:  # any failure here only loses the diagnostics
        logger.warning("gpuframe diagnostics not attached to %s: %r",
                       client.scheduler.address, exc)


def job_metrics(which: str = "current", engine: Engine | None = None) -> JobMetrics | None:
    """The metrics of the 'current' (latest) or 'previous' job; None before any job ran."""
    if which not in WHICH:
        raise OptionError(f"which={which!r}: choose one of {', '.join(WHICH)}")
    engine = current_engine(engine)
    summary = engine.client.run_on_scheduler(_scheduler_job_summary, which=which)
    return None if summary is None else JobMetrics(**summary)


def mark(engine: Engine) -> int:
    """A bookmark in the engine's records: :func:`metrics_since` it covers what ran after."""
    return engine.client.run_on_scheduler(_scheduler_mark)


def metrics_since(engine: Engine, bookmark: int) -> JobMetrics:
    """The metrics of every gpuframe task that finished since ``bookmark``."""
    return JobMetrics(**engine.client.run_on_scheduler(_scheduler_summary_since, first=bookmark))


def operator_stats(job: str, engine: Engine | None = None) -> dict[int, dict[str, int]]:
    return {}
