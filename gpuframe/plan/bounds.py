"""The most rows a plan node can give, and the most values a column of it can hold, known
before anything runs.

Estimates (:mod:`.explain`) guess what filters keep; a bound never guesses: a read gives at most
its files' rows, and filters, groupbys, distinct and semi joins only lower that; a join gives at
most the product of its sides' bounds (one side's, where the other is unique on the keys), plus
the unmatched rows it keeps. A join may broadcast a side so bounded without sampling it, a round
trip that waits for the side to be computed; and where the plan shows the side's keys unique
(:func:`unique_on`), without looking at its keys either.

A column holds at most as many values as its node has rows, fewer where the files' statistics
bound an integer column's range, or where it is a date part (twelve months; the years of its
dates' range) (:func:`values_at_most`): a groupby on such keys has at most their product of
groups, so its tree is chosen without counting its partials (:func:`~.explain.tree_bound`).
"""

from __future__ import annotations

import datetime
from collections.abc import Collection
from functools import singledispatch
from typing import Any

import numpy as np
import pandas as pd

from .aggregate import GroupBy
from .concat import Concat
from .distinct import Distinct
from .expr import Col, DatePart, Expr
from .nodes import Assign, AsType, Filter, FromPandas, Join, Persisted, Rename, Scan, Select
from .sort import Sort
from .topk import TopK

KEEPS_ROWS_OF = {"leftsemi": "left", "leftanti": "left", "left_anti": "left",
                 "right_anti": "right"}
"""Join types whose rows are some of one side's."""


@singledispatch
def rows_at_most(node: object) -> int | None:
    """None: no bound (a function's rows may be anything)."""
    return None


@rows_at_most.register
def _(node: Scan) -> int | None:
    return node.read.rows


@rows_at_most.register
def _(node: FromPandas) -> int | None:
    return len(node.data)


@rows_at_most.register
def _(node: Persisted) -> int | None:
    lengths = node.partitions.lengths
    return None if lengths is None else sum(lengths)


@rows_at_most.register(Filter)
@rows_at_most.register(Select)
@rows_at_most.register(Rename)
@rows_at_most.register(Assign)
@rows_at_most.register(AsType)
@rows_at_most.register(Sort)
@rows_at_most.register(Distinct)
def _(node: Filter | Select | Rename | Assign | AsType | Sort | Distinct) -> int | None:
    return rows_at_most(node.children[0])


@rows_at_most.register
def _(node: GroupBy) -> int | None:
    return 1 if not node.keys else rows_at_most(node.child)


@rows_at_most.register
def _(node: TopK) -> int | None:
    below = rows_at_most(node.child)
    return node.n if below is None else min(node.n, below)


@rows_at_most.register
def _(node: Concat) -> int | None:
    bounds = [rows_at_most(child) for child in node.inputs]
    return None if any(b is None for b in bounds) else sum(b for b in bounds if b is not None)


UNMATCHED_KEPT = {"inner": (), "cross": (), "left": ("left",), "right": ("right",),
                  "outer": ("left", "right")}
"""Join types by the sides whose unmatched rows they keep, once each."""


@rows_at_most.register
def _(node: Join) -> int | None:
    side = KEEPS_ROWS_OF.get(node.how)
    if side is not None:
        return rows_at_most(node.left if side == "left" else node.right)
    left, right = rows_at_most(node.left), rows_at_most(node.right)
    kept = UNMATCHED_KEPT.get(node.how)
    if kept is None or left is None or right is None:
        return None
    bounds = {"left": left, "right": right}
    # A row meets at most one row of a side unique on the keys, else at most all of them.
    unique = {"left": bool(node.left_keys) and unique_on(node.left, node.left_keys),
              "right": bool(node.right_keys) and unique_on(node.right, node.right_keys)}
    matched = min([left * right]
                  + [bounds[other] for side, other in (("left", "right"), ("right", "left"))
                     if unique[side]])
    return matched + sum(bounds[side] for side in kept)


@singledispatch
def unique_on(node: object, columns: Collection[str]) -> bool:
    """Whether no two rows of ``node`` agree on all of ``columns``, known from the plan (False:
    not known). A join that copies such a side to every worker needs no look at its keys: each
    row of the other side meets at most one of its rows."""
    bound = rows_at_most(node)
    return bound is not None and bound <= 1


@unique_on.register
def _(node: GroupBy, columns: Collection[str]) -> bool:
    return set(node.keys) <= set(columns)


@unique_on.register
def _(node: Distinct, columns: Collection[str]) -> bool:
    return set(node.subset) <= set(columns)


@unique_on.register(Filter)
@unique_on.register(Select)
@unique_on.register(Sort)
@unique_on.register(TopK)
def _(node: Filter | Select | Sort | TopK, columns: Collection[str]) -> bool:
    return unique_on(node.children[0], columns)


DATE_PART_VALUES = {"month": 12, "quarter": 4, "day": 31, "dayofweek": 7, "day_of_week": 7,
                    "weekday": 7, "dayofyear": 366, "day_of_year": 366, "hour": 24,
                    "minute": 60, "second": 60}
"""Date parts by the values they can take, whatever the dates (a year's: its dates' range)."""


def values_at_most(node: object, column: str) -> int | None:
    """The most distinct values (null one of them) ``column`` can hold in ``node``'s output;
    None: no bound."""
    rows = rows_at_most(node)
    known = _values(node, column)
    if known is None:
        return rows
    return known if rows is None else min(known, rows)


def groups_at_most(node: GroupBy) -> int | None:
    """The most groups ``node`` can make: the product of its keys' values; None: no bound."""
    bound = 1
    for key in node.keys:
        values = values_at_most(node.child, key)
        if values is None:
            return None
        bound *= values
    return bound


@singledispatch
def _source(node: object, column: str) -> tuple[object, str] | None:
    """Where ``column`` of ``node``'s output comes from, its values as they are: the child and
    the column's name there; None where ``node`` makes it (or it is not followed)."""
    return None


@_source.register(Filter)
@_source.register(Select)
@_source.register(Sort)
@_source.register(TopK)
@_source.register(Distinct)
def _(node: Filter | Select | Sort | TopK | Distinct, column: str) -> tuple[object, str] | None:
    return node.children[0], column


@_source.register
def _(node: Rename, column: str) -> tuple[object, str] | None:
    return node.child, next((old for old, new in node.mapping.items() if new == column), column)


@_source.register
def _(node: Assign, column: str) -> tuple[object, str] | None:
    assigned, expr = _assigned(node, column)
    if not assigned:
        return node.child, column
    return (node.child, expr.name) if isinstance(expr, Col) else None


@_source.register
def _(node: GroupBy, column: str) -> tuple[object, str] | None:
    return (node.child, column) if column in node.keys else None


@_source.register
def _(node: Join, column: str) -> tuple[object, str] | None:
    """The side whose column it is, where only one side has a column of that name (a name both
    have may be either's, or suffixed)."""
    sides = [side for side in (node.left, node.right) if column in side.meta]
    return (sides[0], column) if len(sides) == 1 and column in node.meta else None


@singledispatch
def _values(node: object, column: str) -> int | None:
    source = _source(node, column)
    return None if source is None else values_at_most(*source)


@_values.register
def _(node: Scan, column: str) -> int | None:
    known = node.read.ranges(column) if node.read.ranges is not None else None
    if known is None or column not in node.meta or node.meta[column].dtype.kind not in "iu":
        return None
    low, high = known
    return int(high) - int(low) + 2  # its integers, and null


@_values.register
def _(node: AsType, column: str) -> int | None:
    return values_at_most(node.child, column)  # a cast merges values, never splits one


@_values.register
def _(node: Assign, column: str) -> int | None:
    assigned, expr = _assigned(node, column)
    if assigned and expr is not None and not isinstance(expr, Col):
        return _expression_values(expr, node.child)
    source = _source(node, column)
    return None if source is None else values_at_most(*source)


def _assigned(node: Assign, column: str) -> tuple[bool, Expr | None]:
    """Whether ``node`` assigns ``column``, and the expression (its last) over the node's
    input; None for one that reads a column assigned before it in the same node, whose bounds
    are not followed."""
    names = [name for name, _ in node.items]
    if column not in names:
        return False, None
    index = len(names) - 1 - names[::-1].index(column)
    expr = node.items[index][1]
    return True, None if set(expr.columns()) & set(names[:index]) else expr


def _expression_values(expr: Expr, child: object) -> int | None:
    """The most values a date part of ``child``'s columns can take; None for other
    expressions."""
    if isinstance(expr, DatePart) and expr.part in DATE_PART_VALUES:
        return DATE_PART_VALUES[expr.part] + 1
    if isinstance(expr, DatePart) and expr.part == "year" and isinstance(expr.operand, Col):
        known = values_within(child, expr.operand.name)
        first, last = (None, None) if known is None else (_year(known[0]), _year(known[1]))
        if first is None or last is None:
            return None
        # its years, a year more each side (the statistics' instants may lie in another year
        # in the column's time zone), and null
        return last - first + 4
    return None


@singledispatch
def values_within(node: object, column: str) -> tuple[Any, Any] | None:
    """The least and greatest value ``column`` can hold in ``node``'s output, where the files'
    statistics say and the nodes above them keep the values as they are; None: not known."""
    source = _source(node, column)
    return None if source is None else values_within(*source)


@values_within.register
def _(node: Scan, column: str) -> tuple[Any, Any] | None:
    return node.read.ranges(column) if node.read.ranges is not None else None


def _year(value: Any) -> int | None:
    """The year of a date or time from the files' statistics; None for anything else."""
    if isinstance(value, (datetime.date, np.datetime64)):
        stamp = pd.Timestamp(value)
        return None if stamp is pd.NaT else stamp.year
    return None
