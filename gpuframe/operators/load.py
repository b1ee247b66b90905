"""Leaves that hold data: a pandas frame from the client, a dask collection, or partitions
already on the workers."""

from __future__ import annotations

import math
from typing import Any

import dask

from ..backend import get_backend
from ..diagnostics.stages import task_key
from ..plan.nodes import FromDask, FromPandas, Persisted
from ..runtime.runner import Partitions
from .lowering import Lowering, lower


@lower.register
def _(node: FromPandas, lowering: Lowering) -> Partitions:
    """Contiguous row ranges, one per partition, placed on the workers round robin."""
    job = lowering.job
    workers, data = job.workers, node.data
    npartitions = node.npartitions or len(workers)
    step = max(1, math.ceil(len(data) / npartitions))
    starts = range(0, max(len(data), 1), step)
    owners = [workers[i % len(workers)] for i in range(len(starts))]
    stage = job.stage("load-pandas")
    futures = []
    for i, (start, owner) in enumerate(zip(starts, owners)):
        piece = job.engine.client.scatter(data.iloc[start:start + step], workers=[owner],
                                          hash=False)
        futures.append(stage.submit(to_backend, piece, job.backend, index=(i,), owner=owner,
                                    node=lowering.number(node)))
    return Partitions(futures, owners, node.meta)


@lower.register
def _(node: FromDask, lowering: Lowering) -> Partitions:
    """The collection's partitions computed where Dask puts them; their owners asked after."""
    job = lowering.job
    stage = job.stage("load-dask")
    converted = [
        dask.delayed(to_backend)(part, job.backend,
                                 dask_key_name=task_key(stage.name, job.id, stage.step, i))
        for i, part in enumerate(node.collection.to_delayed())
    ]
    futures = job.engine.client.compute(converted)
    job.track(stage.name, futures)
    job.wait(futures)
    where = job.engine.client.who_has(futures)
    owners = [sorted(where[f.key])[0] for f in futures]
    return Partitions(futures, owners, node.meta)


@lower.register
def _(node: Persisted, lowering: Lowering) -> Partitions:
    return node.partitions


def to_backend(partition: Any, backend: str) -> Any:
    """A partition of either library as a frame of ``backend``."""
    return get_backend(backend).adopt(partition)
