"""Operations that order rows or take them whole across partitions: sort, top-k, distinct rows
and concatenation, as functions of :class:`~gpuframe.frame.DistributedFrame` (whose methods of
the same names call them).

Each builds a plan node (:mod:`gpuframe.plan`) over its inputs' plans; importing this module
also registers the operators that lower them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from .operators import sort as _sort_operator  # noqa: F401  (registers the lowering)
from .plan.sort import Sort, SortKeys

if TYPE_CHECKING:
    from .cluster.engine import Engine
    from .plan.nodes import Node


class Frame(Protocol):
    """What these functions take of a frame: its engine and its plan, and the constructor of
    the frames they return (a DistributedFrame's)."""

    engine: Engine

    def __init__(self, engine: Engine, plan: Node) -> None: ...

    @property
    def plan(self) -> Node: ...


F = TypeVar("F", bound=Frame)


def sort_values(frame: F, by: str | Sequence[str], ascending: bool | Sequence[bool] = True,
                na_position: str = "last", npartitions: int | None = None) -> F:
    """``frame`` ordered as ``pandas.DataFrame.sort_values(by, ascending=, na_position=,
    kind="stable")`` orders it: ``to_pandas()`` gives the rows in that order, and partition i
    holds rows that order before partition i + 1's. ``npartitions``: the output's partitions
    (None: by the data's size, at least one per worker)."""
    keys = SortKeys.of(frame.plan.meta, by, ascending, na_position, "sort_values")
    return type(frame)(frame.engine, Sort(frame.plan, keys, npartitions))
