"""What a join decides from its key sample (:func:`decide`): copy a side to every worker or
shuffle both, and then how many join tasks each worker runs, which keys to split over several
workers, and how many partitions one send task takes; or refuse the join up front. The client
decides; for a shuffle sent before its sample returned, a verdict task on a worker weighs the
same sample instead (:func:`speculation_stands`), so that its join tasks know on their workers
whether they stand (:mod:`~.join`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..cluster.memory import WorkerMemory
from ..config import JoinOptions
from ..errors import MemoryLimitError
from .join_size import OutputEstimate, check_fits, estimate_output, split_hashes
from .skew import SideProfile, SkewPlan, plan_skew, profiles_of

SIDES = ("left", "right")
BROADCAST_SLACK = 1.5
"""How many times ``broadcast_bytes`` a side the plan's estimates chose to copy may sample at and
still be copied (:func:`broadcast_stands`): the estimates take strings at a fixed width and
filters at guessed shares, so a side estimated under the cap may sample a little past it, and
running the action again (its reads and samples too) costs more than copying such a side."""
OUTPUT_COPIES = 4
"""The bytes a join task holds at its peak, in multiples of its output's: the output, the row
indexers and columns the merge builds on the way, and as much again for the results its worker
keeps in memory until it spills (tests/reliability/test_memory.py's many-to-many join is the
case that needs the last)."""


@dataclass(frozen=True)
class JoinShape:
    """What a join's sample is weighed against (:func:`decide`), on the client and in the
    verdict task on a worker: the join's type, keys, the sides it may copy to every worker,
    whether it may split heavy keys, its options, the workers, each side's partitions, and
    its name for errors."""

    how: str
    keys: dict[str, list[str]]
    copyable: tuple[str, ...]
    split: bool
    options: JoinOptions
    workers: tuple[str, ...]
    partitions: dict[str, int]
    name: str


@dataclass(frozen=True)
class Decision:
    """What a join's sample decides: each side's sampled bytes; the side to copy to every
    worker (None: shuffle); else the estimated output, the heavy keys to split, the join tasks
    per worker, and the most partitions of each side one send task takes."""

    sizes: dict[str, int]
    broadcast: str | None
    output: OutputEstimate | None = None
    skew: SkewPlan | None = None
    per_worker: int = 1
    batches: dict[str, int | None] = field(default_factory=dict)

    def shuffles_as(self, per_worker: int) -> bool:
        """Whether this is the shuffle a speculation made: ``per_worker`` join tasks a
        worker, no key split, a worker's share of a side in one send task."""
        return self.broadcast is None and self.skew is None and self.per_worker == per_worker \
            and all(b is None for b in self.batches.values())


def decide(shape: JoinShape, profiles: dict[str, SideProfile]) -> Decision:
    """The join's strategy from its sample (the module's docstring); raises
    :class:`~gpuframe.errors.MemoryLimitError` where it surely cannot complete. A function of
    its arguments alone, so that a worker's verdict and the client agree."""
    sizes = {side: profiles[side].nbytes for side in SIDES}
    opts, workers = shape.options, len(shape.workers)
    if shape.how == "cross":
        return Decision(sizes, "right" if sizes["right"] <= sizes["left"] else "left")
    output = estimate_output(profiles["left"], profiles["right"], shape.how)
    task_bytes = _task_bytes(profiles, opts.join_memory_fraction)
    made = OUTPUT_COPIES * output.nbytes
    for small, big in (("right", "left"), ("left", "right")):
        if small in shape.copyable and opts.broadcasts(sizes[small], sizes[big], workers) \
                and _copy_fits(shape, small, sizes[small], made, task_bytes):
            return Decision(sizes, small)
    key_bytes = None if task_bytes is None else task_bytes / OUTPUT_COPIES
    skew = plan_skew(profiles["left"], profiles["right"], shape.how, shape.keys["left"],
                     shape.keys["right"], workers, opts.skew_threshold or 0.0,
                     output.most_rows_of_a_key(key_bytes)) if shape.split else None
    check_fits(output, _workers_memory(profiles, shape.workers),
               split_hashes(skew.left if skew else None, profiles["left"].samples), shape.name)
    per_worker = opts.partitions_per_worker or tasks_per_worker(
        profiles["left"].nbytes + profiles["right"].nbytes + made, workers, task_bytes)
    batches = {side: send_batch(profiles[side], shape.partitions[side], workers, task_bytes)
               for side in SIDES}
    return Decision(sizes, None, output, skew, per_worker, batches)


def speculation_stands(shape: JoinShape, per_worker: int, *sampled: Any) -> bool:
    """The verdict task, on a worker: whether the join's sample (its sampling tasks' results,
    the left side's then the right's) decides the shuffle its speculation made with
    ``per_worker`` join tasks a worker (:meth:`Decision.shuffles_as`), were neither side
    copied: a side the sample finds small enough to copy has been sent already, and the
    shuffle serves as well, where its tasks fit and no key is heavy. False where the join
    surely cannot complete, which the action's second run, deciding on the client, reports."""
    profiles = _sampled_profiles(shape, sampled)
    try:
        return decide(replace(shape, copyable=()), profiles).shuffles_as(per_worker)
    except MemoryLimitError:
        return False


def broadcast_stands(shape: JoinShape, small: str, *sampled: Any) -> bool:
    """The verdict task of a speculative broadcast, on a worker: whether the join's sample
    (as for :func:`speculation_stands`) lets ``small``, which the plan's estimates chose, be
    copied to every worker: it fits ``broadcast_bytes`` (:data:`BROADCAST_SLACK` times), and
    the output its join tasks make fits them, as :func:`decide` asks of a copy. How the sides'
    sizes compare only says which way is faster, and running the action again costs more than
    the slower way: it stands."""
    profiles = _sampled_profiles(shape, sampled)
    output = estimate_output(profiles["left"], profiles["right"], shape.how)
    task_bytes = _task_bytes(profiles, shape.options.join_memory_fraction)
    return profiles[small].nbytes <= BROADCAST_SLACK * shape.options.broadcast_bytes \
        and _copy_fits(shape, small, profiles[small].nbytes, OUTPUT_COPIES * output.nbytes,
                       task_bytes)


def _sampled_profiles(shape: JoinShape, sampled: Sequence[Any]) -> dict[str, SideProfile]:
    """Each side's profile from the sampling tasks' results, the left side's first."""
    left = shape.partitions["left"]
    return profiles_of({"left": list(sampled[:left]), "right": list(sampled[left:])})


def _copy_fits(shape: JoinShape, small: str, copy: float, made: float,
               task_bytes: float | None) -> bool:
    """Whether a copy of ``small`` (``copy`` bytes, which every join task holds whole: the
    cap on a copy, ``broadcast_bytes``, is set for a GPU's memory, and a worker may have far
    less) and the output (``made`` bytes, held at once) of joining it with each partition of
    the other side fit those join tasks."""
    big = "left" if small == "right" else "right"
    return task_bytes is None or (copy <= task_bytes
                                  and made <= task_bytes * shape.partitions[big])


def tasks_per_worker(nbytes: float, n_workers: int, task_bytes: float | None) -> int:
    """Join tasks per worker such that one task's even share of ``nbytes``, both sides' buckets
    and the estimated output, which it holds at once, takes at most ``task_bytes``. Dask
    refuses to run a task whose inputs exceed its worker's limit, spilling or not, and a task's
    output is made in memory whole, so a join larger than the workers' memory, or one whose
    keys fan out many times its inputs, must be cut into several tasks per worker to complete
    by spilling."""
    if task_bytes is None:
        return 1
    return max(1, math.ceil(nbytes / n_workers / task_bytes))


def send_batch(profile: SideProfile, partitions: int, workers: int,
               task_bytes: float | None) -> int | None:
    """The most partitions of a side one send task takes: as many as fit half of what a join
    task may hold (:func:`_task_bytes`), since it also cuts them into buckets; None (all of a
    worker's) where a worker's share fits, or no worker has a limit."""
    budget = None if task_bytes is None else task_bytes / 2
    if budget is None or not partitions or profile.nbytes / max(1, workers) <= budget:
        return None
    return max(1, int(budget // max(1.0, profile.nbytes / partitions)))


def _task_bytes(profiles: dict[str, SideProfile], fraction: float) -> float | None:
    """The bytes one join task may hold: ``fraction`` of the smallest worker memory limit
    (None: no worker has one)."""
    limits = [m.limit for p in profiles.values() for m in p.memory.values() if m.limit]
    return fraction * min(limits) if limits else None


def _workers_memory(profiles: dict[str, SideProfile], workers: Sequence[str]
                    ) -> list[WorkerMemory]:
    """Each of ``workers``' memory, as the sampling tasks found it; a worker that sampled
    nothing is taken to have the least memory of those that did."""
    known = {a: m for p in profiles.values() for a, m in p.memory.items()}
    if not known:
        return []
    least = min(known.values(), key=lambda m: (m.limit or math.inf, m.room or math.inf))
    return [known.get(worker, least) for worker in workers]
