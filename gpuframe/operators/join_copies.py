"""The sides a join copies to every worker: which one, where no sample decides it (the plan's
bounds, a bound learnt as its input ran, the plan's estimates), and the broadcast tasks that
gather each worker's copy, one a side, or one for all the sides that joins run in another
join's tasks copy (:func:`~.join._fused`).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from distributed import Future

from ..plan.bounds import rows_at_most, unique_on
from ..plan.explain import copied_by_estimates, estimated, row_width, unsampled_broadcast
from ..plan.nodes import Join
from ..runtime.runner import Job, Partitions
from ..units import byte_text
from .join_decision import BROADCAST_SLACK, SIDES
from .join_tasks import LocalJoin, gather_each, gather_side, gather_side_after, gather_unsampled
from .lowering import Lowering

UNSAMPLED_SHARE = 1 / 2
"""The most of ``broadcast_bytes`` that the plan's estimate of a side may be for the join to copy
it without sampling either side (:func:`copied_by_estimate`): a sample's tasks and its verdict
wait for both sides to be computed, the large one too, while such a side is gathered once it is;
half the cap leaves the estimate room to be three times short (strings wider than taken, a
filter keeping more) before the copy outgrows :data:`~.join_decision.BROADCAST_SLACK` times it,
and the action runs again."""


@dataclass(frozen=True)
class Copy:
    """How a broadcast gathers its copied side (:func:`gather_call`): once ``verdict`` has
    passed; with ``counted_on`` (keys), as a :class:`~.join_tasks.CountedSide` (a side copied
    without a sample, whose keys may repeat); with ``most_bytes``, once its parts are found to
    hold no more (a side copied by the plan's estimates)."""

    verdict: Future | None = None
    counted_on: list[str] | None = None
    most_bytes: float | None = None


def copied_unsampled(node: Join, lowering: Lowering,
                     inputs: dict[str, Partitions] | None = None) -> tuple[str, Copy] | None:
    """The side ``node`` copies to every worker without sampling either side, and how, noted
    on ``node``: one the plan bounds (:func:`~gpuframe.plan.explain.unsampled_broadcast`), or,
    given the lowered ``inputs``, one bounded as it ran (:func:`counted_broadcast`), where its
    keys are unique or the job speculates (its join tasks then check their output); else one
    the plan's estimates copy (:func:`copied_by_estimate`), its size checked as it is
    gathered. None where the join samples."""
    job = lowering.job
    keys = {"left": list(node.left_keys), "right": list(node.right_keys)}
    unsampled = unsampled_broadcast(node)
    counted = None if unsampled is not None or inputs is None \
        else counted_broadcast(node, inputs)
    copied = unsampled or counted
    may_repeat = copied is not None and _output_grows(node, copied, keys[copied])
    if copied is not None and not (may_repeat and not job.speculates):
        lowering.note(node, f"broadcast {copied} side (at most "
                            + (f"{rows_at_most(getattr(node, copied))} rows, unsampled)"
                               if unsampled or inputs is None else
                               f"{inputs[copied].rows_at_most} rows, counted as it ran)"))
        return copied, Copy(counted_on=keys[copied] if may_repeat else None)
    estimates = side_estimates(node)
    estimated_copy = copied_by_estimate(node, job, estimates)
    if estimated_copy is None:
        return None
    may_repeat = _output_grows(node, estimated_copy, keys[estimated_copy])
    lowering.note(node, f"broadcast {estimated_copy} side (estimated at "
                        f"{byte_text(estimates[estimated_copy] or 0)}, unsampled; its size "
                        "checked as it is gathered)")
    return estimated_copy, Copy(counted_on=keys[estimated_copy] if may_repeat else None,
                                most_bytes=BROADCAST_SLACK * node.options.broadcast_bytes)


KEEPS_ROWS_ONCE = ("leftsemi", "leftanti", "left_anti", "right_anti")
"""Join types that keep each row of the side they do not copy at most once, however often the
copied side repeats its key."""


def _output_grows(node: Join, copied: str, keys: list[str]) -> bool:
    """Whether a row of the other side may meet several rows of the ``copied`` side, so that the
    join tasks must check their output against the most repeats of its keys
    (:class:`~.join_tasks.CountedSide`): not for a cross join, whose every row joins every row
    as asked, nor for a semi or anti join (:data:`KEEPS_ROWS_ONCE`), nor where the plan shows
    the copied side unique on ``keys``."""
    return node.how != "cross" and node.how not in KEEPS_ROWS_ONCE \
        and not unique_on(getattr(node, copied), keys)


def copied_by_estimate(node: Join, job: Job, sizes: dict[str, float | None]) -> str | None:
    """The side the join copies to every worker without sampling either side, by the plan's
    estimates of its sides' bytes (``sizes``) alone: one estimated at most
    :data:`UNSAMPLED_SHARE` of ``broadcast_bytes`` that the estimates would copy
    (:func:`~gpuframe.plan.explain.copied_by_estimates`). Its broadcast tasks check what they
    gather against the cap (:func:`~.join_tasks.gather_unsampled`), and its join tasks their
    output where its keys may repeat (:func:`~.join_tasks.join_copied`); where either fails, so
    does the job, and the action runs again, sampling. On one worker, the smaller side within
    that share (:func:`smaller_side`). None where the job does not speculate, and for a cross
    join."""
    if node.how == "cross" or not job.speculates:
        return None
    most_bytes = UNSAMPLED_SHARE * node.options.broadcast_bytes
    if len(job.workers) == 1:
        return smaller_side(node, sizes, most_bytes)
    return copied_by_estimates(node, sizes, len(job.workers), most_bytes)


def smaller_side(node: Join, sizes: dict[str, float | None], most_bytes: float) -> str | None:
    """Of a join on one worker, of the sides it may copy that the estimates (``sizes``) put at
    most ``most_bytes``, the smaller (the right one on a tie); None where either side has no
    estimate. A copy to the one worker moves nothing: each join task takes that side whole
    beside a partition of the other, as a shuffle into the worker's one bucket would take both
    whole, with no sample, verdict or send first. ``broadcast_ratio``, which weighs every
    worker's copy against its share of a shuffle, has nothing to weigh."""
    if sizes["left"] is None or sizes["right"] is None:
        return None
    fitting = [side for side in ("right", "left")
               if node.may_copy(side) and (sizes[side] or 0) <= most_bytes]
    return min(fitting, key=lambda side: sizes[side] or 0) if fitting else None


def counted_broadcast(node: Join, inputs: dict[str, Partitions]) -> str | None:
    """The side the join copies to every worker without sampling because its rows were
    bounded as it ran (:attr:`Partitions.rows_at_most`), as :func:`unsampled_broadcast` does
    with the plan's bounds; None where neither side's is small enough."""
    opts = node.options
    bounded = [(bound, side) for side in ("right", "left")
               if (bound := inputs[side].rows_at_most) is not None and node.may_copy(side)
               and bound <= opts.broadcast_rows
               and bound * row_width(inputs[side].meta) <= opts.broadcast_bytes]
    return min(bounded, key=lambda found: found[0])[1] if bounded else None


def side_estimates(node: Join) -> dict[str, float | None]:
    """Each side's bytes as the plan estimates them (None: no estimate)."""
    return {side: estimated(getattr(node, side)).bytes for side in SIDES}


def gather_call(job: Job, parts: Partitions, local: LocalJoin, side: str, copy: Copy,
                fraction: float) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """What gathers ``side`` on a worker: all of ``parts`` as one frame, as ``copy`` says
    (:func:`gather_side`, :func:`gather_side_after`, :func:`gather_unsampled`, which holds a
    copy to ``fraction`` of its worker's memory), and its arguments."""
    casts = local.types.left if side == "left" else local.types.right
    if copy.counted_on is not None or copy.most_bytes is not None:
        return gather_unsampled, (parts.futures, casts, job.backend, side, copy.counted_on,
                                  copy.most_bytes, fraction)
    if copy.verdict is None:
        return gather_side, (parts.futures, casts, job.backend)
    return gather_side_after, (copy.verdict, parts.futures, casts, job.backend)


def all_on(holders: AbstractSet[str], owner: str) -> bool:
    """Whether every part of a copy lies on ``owner`` (its parts' ``holders``): a task there
    that gathers the copy itself moves nothing."""
    return holders <= {owner}


@dataclass
class SideCopies:
    """The sides that the broadcast joins run in a join's tasks (:func:`~.join._fused`) copy to
    every worker: on each worker, one broadcast task gathers them all, in the order of the steps'
    slots, submitted the first time a join task there needs them (a task a side would cost a
    round trip through the scheduler each, before the join task can start)."""

    job: Job
    calls: tuple[tuple[Callable[..., Any], tuple[Any, ...]], ...] = ()
    """Per side, what gathers it and its arguments (:func:`gather_call`)."""
    holders: frozenset[str] = frozenset()
    """The workers that hold the copied sides' parts."""
    made: dict[str, Future] = field(default_factory=dict)

    def plus(self, call: tuple[Callable[..., Any], tuple[Any, ...]], parts: Partitions
             ) -> SideCopies:
        """These copies and one more, of ``parts``, in the next slot."""
        return SideCopies(self.job, self.calls + (call,), self.holders | set(parts.owners))

    def lie_on(self, owner: str) -> bool:
        """Whether there are copies and all of their parts lie on ``owner``: gathering them
        there moves nothing."""
        return bool(self.calls) and all_on(self.holders, owner)

    def on(self, owner: str) -> Future | None:
        """``owner``'s copies (a list, once gathered), their broadcast task submitted once;
        None where there are none."""
        if not self.calls:
            return None
        if owner not in self.made:
            self.made[owner] = self.job.stage("broadcast").submit(
                gather_each, list(self.calls), index=(len(self.made),), owner=owner)
        return self.made[owner]
