"""The cluster's workers as the scheduler last told the engine, not asked for by each job.

Every job, and every read it plans, places its tasks by the workers in engine order. Asking the
scheduler for them is a round trip each time, queued behind whatever the scheduler's event
loop is doing, and a query makes several. A scheduler plugin (:class:`RosterPlugin`) sends the
engine's client the workers and their names whenever one joins or leaves, on the client's
stream; the engine reads its :class:`Roster` instead. Each roster carries the plugin's count of
changes, so an older one never replaces a newer: the first, asked for once the client listens,
may arrive after a change.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from distributed.diagnostics.plugin import SchedulerPlugin

if TYPE_CHECKING:
    from distributed import Client, Scheduler

logger = logging.getLogger("gpuframe")

PLUGIN_NAME = "gpuframe-roster"
TOPIC = "gpuframe-roster"


class RosterPlugin(SchedulerPlugin):
    """On the scheduler: the workers and their names, numbered by change, published to the
    subscribed clients as workers join and leave."""

    idempotent = True  # engines that connect later share the first one's count of changes

    def __init__(self) -> None:
        self.changes = 0

    def add_worker(self, scheduler: Scheduler, worker: str) -> None:
        self._changed(scheduler, None)

    def remove_worker(self, scheduler: Scheduler, worker: str, **kwargs: Any) -> None:
        self._changed(scheduler, worker)

    def _changed(self, scheduler: Scheduler, gone: str | None) -> None:
        self.changes += 1
        scheduler.log_event(TOPIC, self.roster(scheduler, gone))

    def roster(self, scheduler: Scheduler, gone: str | None = None) -> dict[str, Any]:
        """The workers (``gone`` left out: a scheduler may still list the worker it removes)
        as [address, name] pairs, and the count of changes they follow."""
        return {"changes": self.changes,
                "workers": [[address, state.name] for address, state in scheduler.workers.items()
                            if address != gone]}


def _scheduler_roster(dask_scheduler: Scheduler) -> dict[str, Any]:
    plugin = dask_scheduler.plugins[PLUGIN_NAME]
    assert isinstance(plugin, RosterPlugin)
    return plugin.roster(dask_scheduler)


class Roster:
    """On the client: the newest roster the scheduler sent, as {address: name}."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changes = -1
        self.names: dict[str, Any] | None = None
        """None until the first roster arrives."""

    def update(self, roster: dict[str, Any]) -> None:
        with self._lock:
            if roster["changes"] > self._changes:
                self._changes = roster["changes"]
                self.names = {str(address): name for address, name in roster["workers"]}


def keep_roster(client: Client) -> Roster | None:
    """Listen for ``client``'s scheduler's rosters and ask for the current one; None where the
    scheduler cannot keep one (a scheduler without gpuframe): the engine then asks per job."""
    roster = Roster()
    try:
        client.subscribe_topic(TOPIC, lambda event: roster.update(event[1]))
        client.register_plugin(RosterPlugin(), name=PLUGIN_NAME)
        roster.update(client.run_on_scheduler(_scheduler_roster))
    except Exception as exc:  # noqa: BLE001 (only a round trip per job is at stake)
        logger.warning("gpuframe asks the scheduler for its workers at every job: %r", exc)
        return None
    return roster
