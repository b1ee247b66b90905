"""The all-to-all exchange: every partition is cut into buckets where it lies (by a
:mod:`splitter <gpuframe.exchange.splitters>`), and each bucket travels straight to the worker
that consumes it.

Buckets are separate Dask keys computed on the source worker, so the consumer's task pulls each
one from its source over the cluster's comm layer (UCX or TCP) as an ordinary dependency
transfer: worker to worker, never through the client or the scheduler (over TCP, cuDF buckets are
wrapped to cross through pinned memory: :mod:`~gpuframe.exchange.bucket`). On the task stream the
stages show as ``gpuframe-split-*`` and ``gpuframe-send-*``, the transfers as transfers.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distributed import Future

from ..runtime.runner import Job, Partitions
from .bucket import DeviceBucket
from .placement import OwnerPolicy
from .splitters import Splitter


@dataclass(frozen=True)
class Buckets:
    """An exchange's output: ``parts[b][i]`` is input partition ``i``'s rows of bucket ``b``,
    held on that partition's owner until the task on ``owners[b]`` that consumes bucket ``b``
    fetches it."""

    parts: list[list[Future]]
    owners: list[str]


@dataclass(frozen=True)
class Given:
    """Buckets go to workers already chosen (those of a placement being reused)."""

    chosen: Sequence[str]

    def owners(self, workers: Sequence[str], n: int) -> list[str]:
        return list(self.chosen)


def exchange(job: Job, inputs: Partitions, splitter: Splitter, owners: OwnerPolicy, label: str,
             wrap: bool = False) -> Buckets:
    """Cut every partition of ``inputs`` into ``splitter``'s buckets where it lies, bound for
    the workers ``owners`` gives them. ``label`` (alphabetic) tells this exchange's stages apart
    within the job (``split-left``, ``send-left``). ``wrap``: buckets travel as
    :class:`~gpuframe.exchange.bucket.DeviceBucket`."""
    split = job.stage(f"split-{label}")
    send = job.stage(f"send-{label}")
    parts: list[list[Future]] = [[] for _ in range(splitter.n)]
    for i, (part, owner) in enumerate(zip(inputs.futures, inputs.owners)):
        pieces = split.submit(split_rows, part, splitter, i, wrap, index=(i,), owner=owner)
        for b in range(splitter.n):
            parts[b].append(send.submit(operator.getitem, pieces, b, index=(i, b),
                                        owner=owner))
    return Buckets(parts, owners.owners(job.workers, splitter.n))


def split_rows(part: Any, splitter: Splitter, index: int, wrap: bool = False) -> list[Any]:
    """On the source worker: ``part``'s rows per bucket, each in a
    :class:`~gpuframe.exchange.bucket.DeviceBucket` if ``wrap``."""
    buckets = splitter.split(part, index)
    return [DeviceBucket(bucket) for bucket in buckets] if wrap else buckets
