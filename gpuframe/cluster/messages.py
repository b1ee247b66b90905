"""Prompt messages between the engine's client, the scheduler and the workers.

Dask batches each stream's messages (``BatchedSend``): a worker's reports, the scheduler's
orders to a worker and the client's submissions each wait out a fixed interval of a few
milliseconds after the stream's last send, the client's the longest. A task whose input
finished as part of a busy stream waits those intervals at each step from one task to the
next, and a query of many short stages pays them at every stage. The engine shortens them
to :class:`~gpuframe.config.RuntimeOptions`' ``message_interval``: still a batch under a burst
of messages, without the wait of a step that follows one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin

if TYPE_CHECKING:
    from distributed import Client, Scheduler, Worker

PLUGIN_NAME = "gpuframe-prompt-messages"


class PromptScheduler(SchedulerPlugin):
    """Shortens the scheduler's streams to its workers, now and as they join, and to the
    clients already connected (the engine's among them)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval

    async def start(self, scheduler: Scheduler) -> None:
        for stream in [*scheduler.stream_comms.values(), *scheduler.client_comms.values()]:
            stream.interval = self.interval

    def add_worker(self, scheduler: Scheduler, worker: str) -> None:
        stream = scheduler.stream_comms.get(worker)
        if stream is not None:
            stream.interval = self.interval


class PromptWorker(WorkerPlugin):
    """Shortens a worker's stream to the scheduler: its reports of finished tasks."""

    idempotent = True

    def __init__(self, interval: float) -> None:
        self.interval = interval

    def setup(self, worker: Worker) -> None:
        worker.batched_stream.interval = self.interval


def prompt(client: Client, interval: float) -> None:
    """Send the messages of ``client``, its scheduler and its workers (and every later worker)
    at most ``interval`` seconds after the last one of the same stream."""
    client.register_plugin(PromptScheduler(interval), name=PLUGIN_NAME)
    client.register_plugin(PromptWorker(interval), name=PLUGIN_NAME)
    stream = client.scheduler_comm
    if stream is not None:
        stream.interval = interval
