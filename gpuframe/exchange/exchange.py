"""The all-to-all exchange: every partition is cut into buckets where it lies (by a
:mod:`splitter <gpuframe.exchange.splitters>`), and each bucket travels straight to the worker
that consumes it.

Buckets are separate Dask keys computed on the source worker, so the consumer's task pulls each
one from its source over the cluster's comm layer (UCX or TCP) as an ordinary dependency
transfer: worker to worker, never through the client or the scheduler (over TCP, cuDF buckets are
wrapped to cross through pinned memory: :mod:`~gpuframe.exchange.bucket`). On the task stream the
stages show as ``gpuframe-partition-*`` and ``gpuframe-send-*``, the transfers as transfers.
"""

from __future__ import annotations

import operator
from typing import Any

from distributed import Future

from ..runtime.runner import Job, Partitions
from .bucket import DeviceBucket
from .splitters import Splitter


def exchange(job: Job, inputs: Partitions, splitter: Splitter, label: str,
             wrap: bool = False) -> list[list[Future]]:
    """``buckets[b][i]``: partition ``i``'s rows of bucket ``b``, held on partition ``i``'s
    owner until its consumer fetches it. ``label`` (alphabetic) tells this exchange's stages
    apart within the job (``partition-left``, ``send-left``). ``wrap``: buckets travel as
    :class:`~gpuframe.exchange.bucket.DeviceBucket`."""
    split = job.stage(f"partition-{label}")
    send = job.stage(f"send-{label}")
    buckets: list[list[Future]] = [[] for _ in range(splitter.n)]
    for i, (part, owner) in enumerate(zip(inputs.futures, inputs.owners)):
        pieces = split.submit(split_rows, part, splitter, i, wrap, index=(i,), owner=owner)
        for b in range(splitter.n):
            buckets[b].append(send.submit(operator.getitem, pieces, b, index=(i, b),
                                          owner=owner))
    return buckets


def split_rows(part: Any, splitter: Splitter, index: int, wrap: bool = False) -> list[Any]:
    """On the source worker: ``part``'s rows per bucket, each in a
    :class:`~gpuframe.exchange.bucket.DeviceBucket` if ``wrap``."""
    buckets = splitter.split(part, index)
    return [DeviceBucket(bucket) for bucket in buckets] if wrap else buckets
