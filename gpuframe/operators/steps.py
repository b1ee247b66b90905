"""Per-partition steps, and the chains of plan nodes they come from.

Select, filter, assign, rename, astype and map_partitions each work on one partition alone, where
it lies. A chain of them that no other node reads in between needs no task of its own: each node
becomes a step (a small picklable object that applies it to a frame of either backend), and the
steps run inside the task of whatever reads the chain's output or makes its input: the read
below it (:mod:`~gpuframe.operators.scan`), the aggregate above it
(:mod:`~gpuframe.operators.groupby`), or else one task per partition of their own
(:mod:`~gpuframe.operators.map`). Every task saved is a scheduler round trip per partition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from distributed import Future

from ..plan.expr import Expr, evaluate_mask
from ..plan.nodes import (
    Assign,
    AsType,
    Filter,
    MapPartitions,
    Node,
    Rename,
    Select,
    apply_assign,
    placement_after,
)
from ..runtime.runner import Partitions
from .lowering import Lowering

NARROW = (Select, Filter, Assign, Rename, AsType, MapPartitions)
STAGE_NAMES = {Select: "select", Filter: "filter", Assign: "assign", Rename: "rename",
               AsType: "astype", MapPartitions: "map"}


@dataclass(frozen=True)
class SelectStep:
    names: tuple[str, ...]

    def apply(self, frame: Any) -> Any:
        return frame[list(self.names)]


@dataclass(frozen=True)
class FilterStep:
    predicate: Expr

    def apply(self, frame: Any) -> Any:
        return frame[evaluate_mask(self.predicate, frame)]


@dataclass(frozen=True)
class AssignStep:
    items: tuple[tuple[str, Expr], ...]
    dtypes: dict[str, Any]
    """The plan's dtype of each assigned column: where the backend computes another (cuDF's
    ``dt.year`` is int16, pandas' int32), the column is cast to it, so every partition has the
    frame's schema."""

    def apply(self, frame: Any) -> Any:
        frame = apply_assign(frame, self.items)
        casts = {name: dtype for name, dtype in self.dtypes.items()
                 if isinstance(dtype, np.dtype) and frame[name].dtype != dtype}
        return frame.astype(casts) if casts else frame


@dataclass(frozen=True)
class RenameStep:
    mapping: dict[str, str]

    def apply(self, frame: Any) -> Any:
        return frame.rename(columns=self.mapping)


@dataclass(frozen=True)
class AsTypeStep:
    dtypes: dict[str, Any]

    def apply(self, frame: Any) -> Any:
        return frame.astype(self.dtypes)


@dataclass(frozen=True)
class MapStep:
    fn: Callable[..., Any]
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def apply(self, frame: Any) -> Any:
        return self.fn(frame, *self.args, **self.kwargs)


def step_of(node: Node) -> Any:
    """The step that applies ``node`` to one partition."""
    if isinstance(node, Select):
        return SelectStep(node.names)
    if isinstance(node, Filter):
        return FilterStep(node.predicate)
    if isinstance(node, Assign):
        return AssignStep(node.items, {name: node.meta[name].dtype for name, _ in node.items})
    if isinstance(node, Rename):
        return RenameStep(node.mapping)
    if isinstance(node, AsType):
        return AsTypeStep(node.dtypes)
    assert isinstance(node, MapPartitions)
    return MapStep(node.fn, node.args, node.kwargs)


class CopyStep:
    """A step that joins each partition with a side copied to its worker: a broadcast join run
    in the task that makes the partition (:mod:`~.join`). The task is given the copies its
    steps join with; ``slot`` is this step's among them."""

    slot: int

    def apply_copy(self, frame: Any, copy: Any) -> Any:
        raise NotImplementedError


def apply_steps(frame: Any, steps: tuple[Any, ...], copies: Sequence[Any] = ()) -> Any:
    """On a worker: ``steps`` applied to one partition in order, a :class:`CopyStep` with its
    copy of ``copies``."""
    for step in steps:
        frame = step.apply_copy(frame, copies[step.slot]) if isinstance(step, CopyStep) \
            else step.apply(frame)
    return frame


@dataclass(frozen=True, repr=False)
class StepsFirst:
    """``fn(partition, *args)`` after ``steps`` made the partition: a chain run in the task of
    the operator that reads its output."""

    steps: tuple[Any, ...]
    fn: Callable[..., Any]

    def __call__(self, part: Any, *args: Any) -> Any:
        return self.fn(apply_steps(part, self.steps), *args)

    def __repr__(self) -> str:
        return chain_repr(self)


@dataclass(frozen=True, repr=False)
class StepsAfter:
    """``steps`` applied to what ``fn(*args)`` makes: a chain run in the task that makes its
    input."""

    fn: Callable[..., Any]
    steps: tuple[Any, ...]

    def __call__(self, *args: Any) -> Any:
        return apply_steps(self.fn(*args), self.steps)

    def __repr__(self) -> str:
        return chain_repr(self)


def chain_repr(chain: StepsFirst | StepsAfter) -> str:
    """A task function's short repr: Dask names one without a ``__name__`` by its repr, made
    at every submit (``dask.utils.funcname``), and the steps' expressions and schemas took a
    millisecond to print."""
    steps = ", ".join(type(step).__name__ for step in chain.steps)
    return f"{type(chain).__name__}({getattr(chain.fn, '__name__', '?')}; {steps})"


@dataclass(frozen=True)
class Chain:
    """The per-partition nodes from ``base``'s parent up to ``top`` (input first), that no
    other node reads: their steps, and the name they give a task."""

    top: Node
    base: Node
    nodes: tuple[Node, ...]

    @property
    def steps(self) -> tuple[Any, ...]:
        return tuple(step_of(n) for n in self.nodes)

    @property
    def name(self) -> str:
        return "-".join(dict.fromkeys(STAGE_NAMES[type(n)] for n in self.nodes))

    def placed(self, inputs: Partitions, futures: list[Future] | None = None) -> Partitions:
        """The chain's output over ``inputs`` (the base's output): ``futures``, or by default
        ``inputs``' own (their tasks ran the steps, or a reader of them will), on ``inputs``'
        owners, with the chain's schema, placement and bound on rows."""
        placed = inputs.partitioning
        for node in self.nodes:
            placed = placement_after(node, placed)
        # Only map_partitions may make rows; the others keep or drop them.
        bound = None if any(isinstance(n, MapPartitions) for n in self.nodes) \
            else inputs.rows_at_most
        return Partitions(inputs.futures if futures is None else futures, inputs.owners,
                          self.top.meta, placed, rows_at_most=bound)

    def fused(self, lowering: Lowering, into: Node) -> None:
        """Note on each node that its step ran in the task of plan node ``into``."""
        for node in self.nodes:
            if node is not into:
                lowering.note(node, f"fused into the task of #{lowering.number(into)}")


def chain_below(node: Node, lowering: Lowering) -> Chain:
    """The chain of per-partition nodes that ends at ``node`` (one itself): ``node`` and the
    ones below it that no other node reads."""
    nodes = [node]
    base = node.children[0]
    while isinstance(base, NARROW) and not lowering.shared(base):
        nodes.append(base)
        base = base.children[0]
    return Chain(node, base, tuple(reversed(nodes)))


def chain_ending(node: Node, lowering: Lowering) -> Chain | None:
    """The chain that ends at ``node`` where it is a per-partition node that nothing else reads
    (:func:`chain_below`); None elsewhere."""
    if not isinstance(node, NARROW) or lowering.shared(node):
        return None
    return chain_below(node, lowering)


def input_with_steps(node: Node, lowering: Lowering) -> tuple[Partitions, tuple[Any, ...],
                                                               Chain | None]:
    """``node``'s output for an operator that reads it one partition per task: where ``node``
    ends a chain that nothing else reads, the chain's input placed as its output
    (:meth:`Chain.placed`) and the steps that task must apply first; else ``node``'s
    partitions and no steps."""
    chain = chain_ending(node, lowering)
    if chain is None:
        return lowering.input(node), (), None
    return chain.placed(lowering.input(chain.base)), chain.steps, chain
