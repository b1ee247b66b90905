"""The top-k operator: each partition's first ``n`` rows where it lies, then a tree of merges.

Every partition keeps its own first ``n`` rows of the order, with their positions
(:mod:`~gpuframe.operators.positions`) so that equal keys keep their input order across
partitions; groups of :data:`FAN_IN` of those lists are merged (each merge on the worker of its
group's first list) until one remains, which is the answer. Nothing but ``n`` rows per partition
ever moves, and no partition is sorted as a whole frame would be; the result is one partition.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pandas as pd
from distributed import Future

from ..backend import get_backend
from ..plan.sort import SortKeys
from ..plan.topk import TopK
from ..runtime.runner import Job, Partitions
from ..sent_schemas import SendsSchemas
from .groupby import lower_into_one_task
from .lowering import Lowering, lower
from .positions import position_column, with_positions
from .sort import sort_with_positions

FAN_IN = 8
"""Lists merged per merge task: a few merge rounds even for thousands of partitions."""


@dataclass(frozen=True)
class LocalTop(SendsSchemas):
    """The first ``n`` rows of a frame in the order of ``keys`` and then of the positions in
    ``position``, ascending where ``first``."""

    n: int
    keys: SortKeys
    position: str
    first: bool
    meta: pd.DataFrame
    backend: str

    def top(self, frame: Any) -> Any:
        return sort_with_positions(frame, self.keys, self.position, self.first).head(self.n)

    def apply(self, frame: Any) -> Any:
        """The answer over one whole partition, as the last step of the task that makes it."""
        return single_top(frame, self)


def partition_top(part: Any, local: LocalTop, partition: int) -> Any:
    """On the partition's owner: its first ``n`` rows, with their positions."""
    return local.top(with_positions(part, partition, local.position))


def merge_tops(local: LocalTop, tops: list[Any], last: bool) -> Any:
    """The first ``n`` rows of several partitions' lists; without positions if ``last``."""
    frames = get_backend(local.backend)
    top = local.top(frames.concat(tops))
    if not last:
        return top
    return frames.astype(top.drop(columns=[local.position]), list(local.meta.dtypes))


def single_top(part: Any, local: LocalTop) -> Any:
    """The answer of a top-k over one partition, in one task."""
    return merge_tops(local, [partition_top(part, local, 0)], last=True)


@lower.register
def _(node: TopK, lowering: Lowering) -> Partitions:
    job = lowering.job
    local = LocalTop(node.n, node.keys, position_column(node.meta.columns),
                     node.ties == "first", node.meta, job.backend)
    inputs, topped_there = lower_into_one_task(node.child, lowering, local,
                                               lowering.number(node))
    if topped_there:
        lowering.note(node, f"top {node.n} where the aggregate finishes (its last task, or the "
                            "client): one partition")
        return Partitions(inputs.futures, inputs.owners, node.meta, ordering=node.keys.ordering)
    if not inputs.futures:
        return Partitions([], [], node.meta)
    if lowering.to_client and lowering.root is node:
        return _on_client(lowering, node, local, inputs)
    if len(inputs.futures) == 1:
        # One list is already the answer: a merge round would only add a task.
        lowering.note(node, f"top {node.n} of one partition")
        top = job.stage("top").submit(single_top, inputs.futures[0], local, index=(0,),
                                      owner=inputs.owners[0], node=lowering.number(node))
        return Partitions([top], list(inputs.owners), node.meta, ordering=node.keys.ordering)
    stage = job.stage("top")
    tops: list[Future] = [stage.submit(partition_top, part, local, i, index=(i,), owner=owner)
                          for i, (part, owner) in enumerate(zip(inputs.futures,
                                                                inputs.owners))]
    owners = list(inputs.owners)
    rounds = 0
    while True:
        rounds += 1
        last = len(tops) <= FAN_IN
        merge = job.stage("merge-top")
        groups = range(0, len(tops), FAN_IN)
        tops = [merge.submit(merge_tops, local, tops[g:g + FAN_IN], last, index=(g // FAN_IN,),
                             owner=owners[g], node=lowering.number(node) if last else None)
                for g in groups]
        owners = [owners[g] for g in groups]
        if last:
            break
    lowering.note(node, f"top {node.n} of {len(inputs)} partitions in {rounds} merge "
                        f"round{'s' if rounds > 1 else ''}")
    return Partitions(tops, owners, node.meta, ordering=node.keys.ordering)


def host_top(part: Any, local: LocalTop, partition: int) -> pd.DataFrame:
    """On the partition's owner: its first ``n`` rows, with their positions, as pandas."""
    return get_backend(local.backend).to_pandas(partition_top(part, local, partition))


@dataclass(frozen=True)
class ClientTop:
    """On the client, the answer of a top-k that an action fetches: every partition's first
    ``n`` rows, fetched as pandas, merged there (``local`` for the pandas backend). Where the
    workers would merge them in a task of their own, each list travels there, and the answer
    then to the client, after a task that converts it: two scheduler round trips more."""

    local: LocalTop

    def __call__(self, job: Job, tops: list[Future]) -> pd.DataFrame:
        return merge_tops(self.local, job.gather(tops), last=True).reset_index(drop=True)


def _on_client(lowering: Lowering, node: TopK, local: LocalTop, inputs: Partitions
               ) -> Partitions:
    """The top-k of the plan's root, for an action that fetches it: each partition's list made
    pandas where it lies, merged by the client (:class:`ClientTop`)."""
    stage = lowering.job.stage("top")
    tops = [stage.submit(host_top, part, local, i, index=(i,), owner=owner)
            for i, (part, owner) in enumerate(zip(inputs.futures, inputs.owners))]
    lowering.note(node, f"top {node.n} of {len(inputs)} partitions, merged on the client")
    lowering.finish = ClientTop(replace(local, backend="pandas"))
    return Partitions(tops, list(inputs.owners), node.meta)
