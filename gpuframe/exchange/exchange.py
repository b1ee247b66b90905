"""The all-to-all exchange: every partition is hash-partitioned where it lies into one bucket per
worker, and each bucket travels straight to its destination worker.

Buckets are separate Dask keys computed on the source worker, so the destination's join task pulls
each one from its source over the cluster's comm layer (UCX or TCP) as an ordinary dependency
transfer: worker to worker, never through the client or the scheduler (over TCP, cuDF buckets
are wrapped to cross through pinned memory: :mod:`~gpuframe.exchange.bucket`). On the task stream
the stages show as ``gpuframe-partition-*`` and ``gpuframe-send-*``, the transfers as transfers.
"""

from __future__ import annotations

import operator
from typing import Any

from distributed import Future

from ..backend import get_backend
from ..frame import DistributedFrame
from .bucket import HOST_PROTOCOLS, DeviceBucket
from .partition import hash_split
from ..operators.skew import SideSkew, split_heavy


def exchange(frame: DistributedFrame, keys: list[str], casts: dict[str, Any],
             destinations: list[str], side: str, token: str,
             skew: SideSkew | None = None, per_destination: int = 1) -> list[list[Future]]:
    """``buckets[b]``: for each partition of ``frame``, the future of its rows of bucket ``b``,
    bound for ``destinations[b // per_destination]`` (the caller's one snapshot of the workers,
    so buckets and joins agree). Several buckets per destination keep each join task's inputs a
    fraction of a worker's memory.

    ``casts`` gives key columns their common join type first, so equal keys hash equally.
    ``skew``'s heavy keys are dealt round robin or copied to every bucket instead of hashed
    (see :mod:`~gpuframe.operators.skew`).
    """
    client, backend = frame.engine.client, frame.engine.backend.name
    n = len(destinations) * per_destination
    skew = skew if skew else None
    wrap = backend == "cudf" and frame.engine.protocol in HOST_PROTOCOLS
    buckets: list[list[Future]] = [[] for _ in range(n)]
    for i, (part, owner) in enumerate(zip(frame.futures, frame.owners)):
        packed = client.submit(partition_rows, part, keys, casts, n, backend, skew, i, wrap,
                               key=f"gpuframe-partition-{side}-{token}-{i}", workers=[owner])
        for j in range(n):
            buckets[j].append(client.submit(operator.getitem, packed, j,
                                            key=f"gpuframe-send-{side}-{token}-{i}-{j}",
                                            workers=[owner]))
    return buckets


def partition_rows(part: Any, keys: list[str], casts: dict[str, Any], n: int, backend: str,
                   skew: SideSkew | None = None, index: int = 0, wrap: bool = False
                   ) -> list[Any]:
    """On the source worker: cast the keys, then split the rows into one bucket per worker
    (``index``: the partition's number, where heavy keys' rows start their round robin), each
    in a :class:`~gpuframe.exchange.bucket.DeviceBucket` if ``wrap``."""
    part = cast_keys(part, casts)
    if skew is None:
        buckets = hash_split(part, keys, n)
    else:
        rest, extra = split_heavy(part, keys, skew, n, index, backend)
        frames = get_backend(backend)
        buckets = [frames.concat([bucket, *pieces]) if pieces else bucket
                   for bucket, pieces in zip(hash_split(rest, keys, n), extra)]
    return [DeviceBucket(bucket) for bucket in buckets] if wrap else buckets


def cast_keys(frame: Any, casts: dict[str, Any]) -> Any:
    """``frame`` with its key columns in their common join types (itself when none differ)."""
    return frame.astype(casts) if casts else frame
