"""Per-partition operators: select, filter, assign, rename, astype and map_partitions.

Each works on one partition alone, where it lies, so a chain of them (that no other node reads
in between) runs as one task per partition: one pass over the data and one name on the task
stream (``gpuframe-filter-assign-...``). Each node of the chain is a step, a small picklable
object that applies it to a frame of either backend.

Placement survives what does not touch the keys
(:func:`~gpuframe.plan.nodes.placement_after`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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
from .lowering import Lowering, lower

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


def apply_steps(frame: Any, steps: tuple[Any, ...]) -> Any:
    """On a worker: ``steps`` applied to one partition in order."""
    for step in steps:
        frame = step.apply(frame)
    return frame


def lower_chain(node: Node, lowering: Lowering) -> Partitions:
    """``node`` and the per-partition nodes below it that nothing else reads, as one task per
    partition."""
    chain = [node]
    base = node.children[0]
    while isinstance(base, NARROW) and not lowering.shared(base):
        chain.append(base)
        base = base.children[0]
    chain.reverse()
    inputs = lowering.input(base)
    names = list(dict.fromkeys(STAGE_NAMES[type(n)] for n in chain))
    stage = lowering.job.stage("-".join(names))
    futures = stage.map(apply_steps, inputs, tuple(step_of(n) for n in chain),
                        node=lowering.number(node))
    placed = inputs.partitioning
    for step_node in chain:
        placed = placement_after(step_node, placed)
    for inner in chain[:-1]:
        lowering.note(inner, f"fused into the task of #{lowering.number(node)}")
    return Partitions(futures, list(inputs.owners), node.meta, placed)


for _kind in NARROW:
    lower.register(_kind, lower_chain)
