"""The sort node, and the sort keys it shares with top-k: which columns order the rows, in which
direction, and where missing values go, checked against the frame's schema when built."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from ..errors import ColumnTypeError, OptionError
from ..exchange.placement import RangeOrdering
from .nodes import Node, check_columns

NA_POSITIONS = ("last", "first")


@dataclass(frozen=True)
class SortKeys:
    """The order of ``DataFrame.sort_values(by, ascending=, na_position=)``: one direction per
    key column; missing values (NaN with them) all first or all last, whatever the direction."""

    by: tuple[str, ...]
    ascending: tuple[bool, ...]
    na_position: str = "last"

    @classmethod
    def of(cls, meta: pd.DataFrame, by: str | Sequence[str], ascending: bool | Sequence[bool],
           na_position: str, what: str) -> SortKeys:
        """The keys as pandas takes them, checked against ``meta`` (``what`` names the
        operation in errors)."""
        names = (by,) if isinstance(by, str) else tuple(by)
        if not names:
            raise OptionError(f"{what}: give at least one column to order by")
        check_columns(names, meta, what)
        if isinstance(ascending, bool):
            directions = (ascending,) * len(names)
        else:
            directions = tuple(ascending)
            if len(directions) != len(names) or not all(isinstance(a, bool)
                                                        for a in directions):
                raise OptionError(f"{what}: ascending={ascending!r} must be a bool or one bool "
                                  f"per column of {list(names)}")
        if na_position not in NA_POSITIONS:
            raise OptionError(f"{what}: na_position={na_position!r}: choose 'last' or 'first'")
        for name in names:
            if isinstance(meta[name].dtype, pd.CategoricalDtype):
                raise ColumnTypeError(f"{what}: column {name!r} is categorical, which sorts by "
                                      f"its categories' order: cast it to its values first")
        return cls(names, directions, na_position)

    @property
    def nulls_last(self) -> bool:
        return self.na_position == "last"

    @property
    def ordering(self) -> RangeOrdering:
        """The ordering of a frame sorted by these keys."""
        return RangeOrdering(self.by, self.ascending, self.nulls_last)

    def describe(self) -> str:
        keys = ", ".join(f"{name} {'asc' if up else 'desc'}"
                         for name, up in zip(self.by, self.ascending))
        return f"[{keys}] nulls {self.na_position}"


@dataclass(eq=False)
class Sort(Node):
    """The rows ordered by ``keys``, equal keys in their input order (a stable sort): partition
    i holds rows that order before those of partition i + 1, so the partitions in order are the
    sorted frame. ``npartitions``: the output's partitions (None: the operator decides from the
    data's size)."""

    child: Node
    keys: SortKeys
    npartitions: int | None = None
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.npartitions is not None and self.npartitions < 1:
            raise OptionError(f"sort: npartitions={self.npartitions} must be at least 1")
        self.meta = self.child.meta

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    def with_children(self, children: Sequence[Node]) -> Node:
        return Sort(children[0], self.keys, self.npartitions)

    def describe(self) -> str:
        return f"Sort {self.keys.describe()}"
