"""The all-to-all exchange: every partition is cut into buckets where it lies (by a
:mod:`splitter <gpuframe.exchange.splitters>`), and each bucket travels straight to the worker
that consumes it, worker to worker, never through the client or the scheduler.

Two ways, by the job's ``exchange`` option (:class:`~gpuframe.config.RuntimeOptions`):

- ``direct`` (the default): one send task per worker delivers its buckets to the peers'
  mailboxes over the comm layer (:mod:`~gpuframe.exchange.mailbox`); a stage is ``W + B``
  tasks. The stage shows as ``gpuframe-send-*``, and its deliveries as transfers on the engine
  page.
- ``tasks``: buckets are separate Dask keys computed on the source worker, which the consumer's
  task pulls as ordinary dependency transfers; a stage is ``P x B`` keys, shown as
  ``gpuframe-split-*`` and ``gpuframe-send-*``.

Over TCP, cuDF buckets travel wrapped to cross through pinned memory either way
(:mod:`~gpuframe.exchange.bucket`). A consuming task reads its bucket with
:func:`~gpuframe.exchange.mailbox.arrivals`, whichever way it came.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..runtime.runner import Job, Partitions
from .bucket import DeviceBucket, wrapped
from .mailbox import Claim, send
from .placement import OwnerPolicy
from .splitters import Splitter


@dataclass(frozen=True)
class Buckets:
    """An exchange's output: ``parts[b]`` is what the task on ``owners[b]`` that consumes
    bucket ``b`` takes as an argument and reads with
    :func:`~gpuframe.exchange.mailbox.arrivals`: input partition ``i``'s rows of the bucket at
    ``parts[b][i]`` (the task exchange), or a claim on the mailbox followed by the send tasks'
    receipts (the direct one)."""

    parts: list[list[Any]]
    owners: list[str]


@dataclass(frozen=True)
class Given:
    """Buckets go to workers already chosen (those of a placement being reused)."""

    chosen: Sequence[str]

    def owners(self, workers: Sequence[str], n: int) -> list[str]:
        return list(self.chosen)


def exchange(job: Job, inputs: Partitions, splitter: Splitter, owners: OwnerPolicy, label: str,
             batch: int | None = None) -> Buckets:
    """Cut every partition of ``inputs`` into ``splitter``'s buckets where it lies, bound for
    the workers ``owners`` gives them. ``label`` (alphabetic) tells this exchange's stages apart
    within the job (``send-left``). cuDF buckets travel as
    :class:`~gpuframe.exchange.bucket.DeviceBucket` over TCP. ``batch``: the most partitions
    one send task of the direct exchange takes (None: all that its worker holds)."""
    destinations = owners.owners(job.workers, splitter.n)
    wrap = wrapped(job.engine.backend.on_device, job.engine.protocol)
    if job.exchange == "direct":
        return Buckets(_direct(job, inputs, splitter, destinations, label, wrap, batch),
                       destinations)
    split = job.stage(f"split-{label}")
    send_stage = job.stage(f"send-{label}")
    parts: list[list[Any]] = [[] for _ in range(splitter.n)]
    for i, (part, owner) in enumerate(zip(inputs.futures, inputs.owners)):
        pieces = split.submit(split_rows, part, splitter, i, wrap, index=(i,), owner=owner)
        for b in range(splitter.n):
            parts[b].append(send_stage.submit(operator.getitem, pieces, b, index=(i, b),
                                              owner=owner))
    return Buckets(parts, destinations)


def _direct(job: Job, inputs: Partitions, splitter: Splitter, destinations: list[str],
            label: str, wrap: bool, batch: int | None) -> list[list[Any]]:
    """The direct exchange's send tasks, one per worker holding partitions (or per ``batch``
    of them: a task's partitions are in memory at once, which a side larger than its workers'
    memory cannot be), and per bucket the claim and the receipts its consumer takes."""
    stage = job.stage(f"send-{label}")
    exchange_id = stage.key()
    held: dict[str, list[int]] = {}
    for i, owner in enumerate(inputs.owners):
        held.setdefault(owner, []).append(i)
    sends = [(owner, sources[start:start + (batch or len(sources))])
             for owner, sources in held.items()
             for start in range(0, len(sources), batch or len(sources))]
    receipts = []
    for w, (owner, sources) in enumerate(sends):
        receipts.append(stage.submit(send, stage.key(w), exchange_id, splitter,
                                     tuple(destinations), sources, wrap,
                                     *(inputs.futures[i] for i in sources),
                                     index=(w,), owner=owner))
    return [[Claim(exchange_id, b), *receipts] for b in range(splitter.n)]


def split_rows(part: Any, splitter: Splitter, index: int, wrap: bool = False) -> list[Any]:
    """On the source worker: ``part``'s rows per bucket, each in a
    :class:`~gpuframe.exchange.bucket.DeviceBucket` if ``wrap``."""
    buckets = splitter.split(part, index)
    return [DeviceBucket(bucket) for bucket in buckets] if wrap else buckets
