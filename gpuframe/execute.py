"""Running a plan: optimize it, lower every node to its operator's stages within the job of a
user action, and wait for the root's partitions.

The operators register their lowerings with :func:`~gpuframe.operators.lowering.lower` when their
modules are imported; :data:`OPERATORS` names them all, so a run finds every operator.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import pandas as pd
from distributed import Future

from .cluster.engine import Engine
from .errors import SpeculationError
from .operators import concat, distinct, groupby, join, load, scan, sort, topk
from .operators import map as per_partition
from .operators.lowering import Lowering, ScanRecord
from .plan.nodes import Node
from .plan.optimize import optimize
from .runtime.runner import Job, Partitions

logger = logging.getLogger("gpuframe")

T = TypeVar("T")

OPERATORS = (concat, distinct, groupby, join, load, per_partition, scan, sort, topk)
"""The operator modules; importing them registers their lowerings."""


@dataclass
class Execution:
    """A run: the optimized plan it ran, its root's partitions (in worker memory once it has
    finished), and what ``explain()`` shows of it."""

    plan: Node
    output: Partitions
    job: str
    notes: dict[int, str] = field(default_factory=dict)
    scans: list[ScanRecord] = field(default_factory=list)
    finish: Callable[[Job, list[Future]], pd.DataFrame | Partitions] | None = None
    """Where the client makes the result (:attr:`~.operators.lowering.Lowering.finish`): the
    output's partitions are then its inputs, not the frame's."""


def run_plan(job: Job, root: Node, keep_read_stats: bool = False) -> Execution:
    """Run the plan under ``root`` within ``job``; raise naming the first failed task (the
    job's tasks all cancelled) rather than return a partial result. ``keep_read_stats``: read
    tasks keep what they fetched for a read report."""
    execution = submit_plan(job, root, keep_read_stats)
    job.wait(execution.output.futures)
    return execution


def submit_plan(job: Job, root: Node, keep_read_stats: bool = False,
                to_client: bool = False) -> Execution:
    """The plan under ``root`` lowered within ``job``, its tasks submitted and maybe still
    running: an action that adds tasks of its own above the root's partitions submits them at
    once and waits for those alone, a round trip to the client fewer than waiting twice.
    ``to_client``: the action fetches the output as pandas, and an operator may leave its last
    step to the client (:attr:`Execution.finish`)."""
    plan = optimize(root)
    lowering = Lowering(job, plan, keep_read_stats, to_client)
    lowering.start()
    output = lowering.input(plan)
    return Execution(plan, output, job.id, job.notes, lowering.scans, lowering.finish)


def in_job(engine: Engine, name: str, action: Callable[[Job], T]) -> T:
    """``action`` run within a new job named ``name``; where a speculation failed on the
    workers (:class:`~gpuframe.errors.SpeculationError` from a join's, or an aggregate's tree
    chosen by estimate; the first job's tasks cancelled), once more in a job that does not
    speculate."""
    try:
        with Job(engine, name) as job:
            return action(job)
    except SpeculationError as exc:
        logger.info("%s: %s; running it again without speculating", name, exc)
    with Job(engine, name, speculates=False) as job:
        return action(job)
