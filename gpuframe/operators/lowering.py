"""The operator contract: how a plan node becomes tasks.

Each operator module registers, with :func:`lower`, a function for its node type that takes the
node and the :class:`Lowering` of the plan being run, asks the lowering for its inputs' partitions
(:meth:`Lowering.input`), submits its stages through the lowering's
:class:`~gpuframe.runtime.runner.Job`, and returns its own
:class:`~gpuframe.runtime.runner.Partitions` (futures, owners, schema, placement). It declares
what placement it needs of its inputs by asking for it (a join reads ``partitioning``), and the
job does the rest: names, pinning, failure, metrics.

An operator that waits on the client for figures of its input (a groupby's count of its
partials) also registers, with :func:`begin`, the part of its lowering that submits the tasks
leading to that wait: the lowering begins every such node before it waits for any, so that
independent waits overlap rather than follow one another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import singledispatch
from typing import TYPE_CHECKING, Any

import pandas as pd
from distributed import Future

from ..plan.nodes import Join, Node
from ..runtime.runner import Job, Partitions

if TYPE_CHECKING:
    from ..io.planning.plan import ReadPlan


@dataclass
class ScanRecord:
    """What one read of a run fetched: its plan, its tasks' keys and its seconds, for a
    :class:`~gpuframe.io.report.ReadReport`."""

    plan: ReadPlan
    keys: list[str]
    seconds: float


class Lowering:
    """One run of an optimized plan: its job, each node's number, and each node's output once
    lowered (a node two parents share runs once)."""

    def __init__(self, job: Job, root: Node, keep_read_stats: bool = False,
                 to_client: bool = False) -> None:
        self.job = job
        self.root = root
        self.keep_read_stats = keep_read_stats
        """Whether read tasks keep their stats on their workers for a read report."""
        self.to_client = to_client
        """Whether the action fetches the root's output to the client as pandas."""
        self.finish: Callable[[Job, list[Future]], pd.DataFrame | Partitions] | None = None
        """Where an operator left the root's last step to the client (``to_client`` only): what
        waits for the root's partitions and gives the result from them, or the partitions the
        workers finish the root into after all."""
        self.scans: list[ScanRecord] = []
        """What each read of the run fetched, for read reports."""
        self.numbers: dict[int, int] = {}
        self.parents: dict[int, int] = {}
        self._outputs: dict[int, Partitions] = {}
        self._begun: dict[int, Any] = {}
        self._waits: dict[int, bool] = {}
        self._number(root)

    def _number(self, node: Node) -> None:
        self.parents[id(node)] = self.parents.get(id(node), 0) + 1
        if id(node) in self.numbers:
            return
        self.numbers[id(node)] = len(self.numbers)
        for child in node.children:
            self._number(child)

    def number(self, node: Node) -> int:
        """The node's number in the plan (pre-order), as ``explain()`` names it."""
        return self.numbers[id(node)]

    def shared(self, node: Node) -> bool:
        """Whether more than one parent reads ``node``'s output."""
        return self.parents.get(id(node), 0) > 1

    def input(self, node: Node) -> Partitions:
        """``node``'s output partitions, lowering it the first time it is asked for. Only a
        node that several parents read is kept here once asked for: another's partitions are
        released as soon as the tasks that read them have run."""
        if id(node) in self._outputs:
            return self._outputs[id(node)] if self.shared(node) \
                else self._outputs.pop(id(node))
        output = lower(node, self)
        if self.shared(node):
            self._outputs[id(node)] = output
        return output

    def start(self) -> None:
        """Submit, before the lowering waits for anything, what later waits would hold back:

        - every node that holds no join and no begun node below it is begun (:func:`begin`):
          two groupbys' counts are then taken at once, not one after the other's;
        - every input of a join that holds no join itself (a read, with its filters and
          projections, perhaps a groupby) is lowered, in plan order, those that wait for a
          begun node last: a join waits on the client for its sample or its copied side's
          check before the lowering goes on, and an input lowered only after the joins below
          it had each waited would be read only then. So every table of a chain of joins is
          read at once, from the start, and each join waits for its own work alone. The
          inputs of the deepest joins go first: a worker runs tasks of one priority in the
          order they came (Dask's), and the innermost join of a chain runs first, its joins'
          steps (samples, verdicts, copies) one after another while the outer joins' larger
          tables are read, not after."""
        self._begin_under(self.root)
        depths: dict[int, int] = {}
        _join_depths(self.root, 0, depths)
        sides = [(depths[id(join)], side) for join in _joins(self.root, set())
                 for side in join.children if not _joins(side, set())]
        for _, side in sorted(sides, key=lambda pair: (self._waits[id(pair[1])], -pair[0])):
            if id(side) not in self._outputs:
                self._outputs[id(side)] = lower(side, self)

    def _begin_under(self, node: Node) -> bool:
        """Begin ``node`` and every node under it that holds no join and no begun node: whether
        ``node`` holds (or is) either, so that its lowering would wait."""
        if id(node) in self._waits:
            return self._waits[id(node)]
        below = [self._begin_under(child) for child in node.children]
        waits = isinstance(node, Join) or any(below)
        if not waits:
            state = begin(node, self)
            if state is not None:
                self._begun[id(node)] = state
                waits = True
        self._waits[id(node)] = waits
        return waits

    def begun(self, node: Node) -> Any:
        """What :func:`begin` returned for ``node`` where the lowering began it (once), else
        None: its operator lowers on from there."""
        return self._begun.pop(id(node), None)

    def note(self, node: Node, text: str) -> None:
        """Record what ``node`` decided at run time, for ``explain()``."""
        self.job.notes[self.number(node)] = text


def _joins(node: Node, seen: set[int]) -> list[Join]:
    """The joins of the plan under ``node`` (itself too), parents first, each once."""
    if id(node) in seen:
        return []
    seen.add(id(node))
    found = [node] if isinstance(node, Join) else []
    for child in node.children:
        found += _joins(child, seen)
    return found


def _join_depths(node: Node, above: int, depths: dict[int, int]) -> None:
    """Each node under ``node`` (itself too) by the most joins above it, in ``depths``."""
    if depths.get(id(node), -1) >= above:
        return
    depths[id(node)] = above
    for child in node.children:
        _join_depths(child, above + isinstance(node, Join), depths)


@singledispatch
def lower(node: Node, lowering: Lowering) -> Partitions:
    """Submit ``node``'s tasks; its output partitions (their tasks may still be running)."""
    raise NotImplementedError(f"no operator lowers {type(node).__name__} nodes")


@singledispatch
def begin(node: Node, lowering: Lowering) -> Any:
    """Submit the tasks of ``node`` that lead to a wait on the client, and return what its
    :func:`lower` goes on from (:meth:`Lowering.begun`); None for an operator that never waits."""
    return None
