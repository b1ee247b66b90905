"""Give a cluster the engine's metrics, from the client, when an engine starts or connects.

The cluster package calls :func:`attach` with its client; nothing here knows the engine, so
bring-up needs no more of the diagnostics than the plugin and the limits it measures.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from distributed import Client

from .limits import calibrate_worker
from .metrics import (
    PLUGIN_NAME,
    EngineMetrics,
    _scheduler_set_limits,
    _scheduler_unmeasured,
)
from .stages import CLIENT_EVENT_OP

if TYPE_CHECKING:
    from distributed import Scheduler

logger = logging.getLogger("gpuframe")


def attach(client: Client) -> bool:
    """Register the :class:`~gpuframe.diagnostics.metrics.EngineMetrics` scheduler plugin
    (which also adds the engine page to the dashboard and takes the client's events on its
    stream) and measure the hardware limits of the workers not measured before. Whether the
    scheduler takes those events (a scheduler's stream closes on an operation it lacks).

    Diagnostics never stop a cluster from starting: a scheduler that cannot take the plugin
    (one without gpuframe installed) is logged and the engine works on without them.
    """
    try:
        client.register_plugin(EngineMetrics(), name=PLUGIN_NAME)
        takes_events = bool(client.run_on_scheduler(_scheduler_takes_events))
        missing = client.run_on_scheduler(_scheduler_unmeasured)
        if missing:
            measured = client.run(calibrate_worker, workers=missing)
            client.run_on_scheduler(_scheduler_set_limits, limits=measured)
    except Exception as exc:  # noqa: BLE001 (any failure here only loses the diagnostics)
        scheduler = client.scheduler
        logger.warning("gpuframe diagnostics not attached to %s: %r",
                       scheduler.address if scheduler is not None else "no scheduler", exc)
        return False
    return takes_events


def _scheduler_takes_events(dask_scheduler: Scheduler) -> bool:
    return CLIENT_EVENT_OP in dask_scheduler.stream_handlers
