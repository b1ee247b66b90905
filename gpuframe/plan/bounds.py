"""The most rows a plan node can give, known before anything runs.

Estimates (:mod:`.explain`) guess what filters keep; a bound never guesses: a read gives at most
its files' rows, and filters, groupbys, distinct and semi joins only lower that; a join gives at
most the product of its sides' bounds (one side's, where the other is unique on the keys), plus
the unmatched rows it keeps. A join may broadcast a side so bounded without sampling it, a round
trip that waits for the side to be computed; and where the plan shows the side's keys unique
(:func:`unique_on`), without looking at its keys either.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import singledispatch

from .aggregate import GroupBy
from .concat import Concat
from .distinct import Distinct
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
