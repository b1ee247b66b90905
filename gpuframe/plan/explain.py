"""``frame.explain()``: the optimized plan as text, one node a line.

Each line gives the node's number, what it does (a read's columns and ``filters=``, where the
optimizer put them), its estimated rows and bytes, and, after a run, the rows and bytes its
output really had and what it decided (a join's strategy; a node fused into the task of the one
above it). Before a run, a join's strategy is predicted from the estimates and from where its
inputs' rows are expected to be.

Estimates are rough by design: a read knows its rows from the files' metadata, a filter keeps a
fixed share per kind of condition (a tenth for an equality, a third for a range), a join keeps
the rows of the side it preserves, a groupby a tenth of its input's (a whole-frame aggregate
one). They order operators by size; they are not a cost model.
"""

from __future__ import annotations

import datetime
import decimal
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import singledispatch
from typing import Any

import numpy as np
import pandas as pd

from ..exchange.placement import HashPartitioning
from ..remembered import schema_key
from ..units import byte_text
from .aggregate import GroupBy
from .bounds import groups_at_most, rows_at_most
from .concat import Concat
from .distinct import Distinct
from .expr import Between, Binary, Expr, IsIn, Unary
from .nodes import (
    Assign,
    AsType,
    Filter,
    FromDask,
    FromPandas,
    Join,
    MapPartitions,
    Node,
    Persisted,
    Rename,
    Scan,
    Select,
    placement_after,
)
from .topk import TopK

TEXT_WIDTH = 32
"""Bytes a string or object value is taken to hold, for estimates."""
GROUPS_SHARE = 0.1
"""The share of its input's rows a groupby is taken to keep (one per group)."""
RANGE_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
"""The filter terms a read's estimate measures against a column's range of values."""


@dataclass(frozen=True)
class Estimate:
    rows: float | None
    bytes: float | None
    whole: float | None = None
    """The rows of the relation these rows are a share of (:func:`_whole_rows`)."""


@dataclass(frozen=True)
class Actual:
    """What a node's output held after a run: summed over its partitions."""

    rows: int
    bytes: int
    partitions: int


def explain(root: Node, n_workers: int, actual: Mapping[int, Actual] | None = None,
            notes: Mapping[int, str] | None = None) -> str:
    """The plan under ``root`` as text (see the module's docstring); ``actual`` and ``notes``
    by node number, from a run of exactly this plan."""
    numbers: dict[int, int] = {}
    lines: list[str] = []
    estimates: dict[int, Estimate] = {}

    def walk(node: Node, depth: int) -> None:
        if id(node) in numbers:
            lines.append(f"{'  ' * depth}#{numbers[id(node)]} (shared, above)")
            return
        number = numbers[id(node)] = len(numbers)
        index = len(lines)
        lines.append("")
        for child in node.children:
            walk(child, depth + 1)
        estimate = estimates[id(node)] = _estimate(node, [estimates[id(c)]
                                                          for c in node.children])
        parts = [f"{'  ' * depth}#{number} {node.describe()}",
                 f"est. {_rows(estimate.rows)} rows, {_bytes(estimate.bytes)}"]
        if actual is not None and number in actual:
            seen = actual[number]
            parts.append(f"actual {seen.rows:,} rows, {_bytes(seen.bytes)} in "
                         f"{seen.partitions} partitions")
        if notes and number in notes:
            parts.append(notes[number])
        elif isinstance(node, Join):
            parts.append("strategy: " + predicted_strategy(
                node, estimates[id(node.left)], estimates[id(node.right)], n_workers)
                + " (predicted)")
        elif isinstance(node, GroupBy):
            parts.append("strategy: " + predicted_aggregation(node) + " (predicted)")
        lines[index] = " | ".join(parts)

    walk(root, 0)
    return "\n".join(lines)


# --- estimates --------------------------------------------------------------------------------

def estimated(node: Node) -> Estimate:
    """``node``'s estimated rows and bytes, as :func:`explain` shows them."""
    return _estimate(node, [estimated(child) for child in node.children])


def _estimate(node: Node, children: list[Estimate]) -> Estimate:
    rows = _estimated_rows(node, children)
    return Estimate(rows, None if rows is None else rows * row_width(node.meta),
                    _whole_rows(node, children, rows))


def _whole_rows(node: Node, children: list[Estimate], rows: float | None) -> float | None:
    """The rows of the relation ``node``'s rows are a share of: a read's table's; a join's
    input's of the larger whole (the fact table's, say), or the input's whose rows alone it
    keeps (a left, semi or anti join's left); a filter's, a projection's or a sort's input's;
    and the node's own where it makes rows of its own (an aggregate's groups, a top-k, a
    concat, a frame from the client)."""
    if isinstance(node, Scan):
        return node.read.rows
    if isinstance(node, Join):
        left, right = (child.whole for child in children)
        if node.how in ("left", "leftsemi", "leftanti", "left_anti"):
            return left
        if node.how in ("right", "right_anti"):
            return right
        return None if left is None or right is None else max(left, right)
    if len(children) == 1 and not isinstance(node, (GroupBy, TopK)):
        return children[0].whole
    return rows


@singledispatch
def _estimated_rows(node: Node, children: list[Estimate]) -> float | None:
    return children[0].rows if children else None


@_estimated_rows.register
def _(node: Scan, children: list[Estimate]) -> float | None:
    if node.read.rows is None:
        return None
    share = 1.0
    if node.filters:
        share = min(1.0, sum(_terms_share(alternative, node.read.ranges)
                             for alternative in node.filters))
    return node.read.rows * share


def _terms_share(terms: list[tuple], ranges: Callable[[str], tuple[Any, Any] | None] | None
                 ) -> float:
    """The share of a read's rows that the terms of one alternative of its filters keep: the
    range terms on a column whose least and greatest values the files say (``ranges``) keep the
    share of that range between their bounds, as if its values were spread evenly (one month of
    seven years keeps 1.2%, not a third squared); any other term its fixed share."""
    share = 1.0
    bounds: dict[str, list[tuple[str, Any]]] = {}
    for column, op, value in terms:
        if op in RANGE_OPS and ranges is not None:
            bounds.setdefault(column, []).append((op, value))
        else:
            share *= _term_share(op)
    for column, column_terms in bounds.items():
        kept = _range_share(ranges(column), column_terms) if ranges is not None else None
        share *= kept if kept is not None else float(
            np.prod([_term_share(op) for op, _ in column_terms]))
    return share


def _range_share(known: tuple[Any, Any] | None, terms: list[tuple[str, Any]]) -> float | None:
    """The share of [least, greatest] (``known``) that the range ``terms`` keep; None where
    the values do not measure (strings, say)."""
    if known is None:
        return None
    low, high = _measure(known[0]), _measure(known[1])
    if low is None or high is None or not low <= high:
        return None
    start, stop, holds = low, high, True
    for op, term_value in terms:
        value = _measure(term_value)
        if value is None:
            return None
        holds = holds and RANGE_OPS[op](low, value)
        if op in (">", ">="):
            start = max(start, value)
        else:
            stop = min(stop, value)
    if high == low:  # one value: the terms keep all of it or none
        return 1.0 if holds else 0.0
    return max(0.0, stop - start) / (high - low)


def _measure(value: Any) -> float | None:
    """``value`` on a line: a number as itself, a date or time as nanoseconds; None for what
    has no distance between values (strings, say)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float, np.integer, np.floating, decimal.Decimal)):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, (datetime.date, np.datetime64)):
        stamp = pd.Timestamp(value)
        return None if stamp is pd.NaT else float(stamp.value)
    return None


@_estimated_rows.register
def _(node: FromPandas, children: list[Estimate]) -> float | None:
    return float(len(node.data))


@_estimated_rows.register
def _(node: Persisted, children: list[Estimate]) -> float | None:
    lengths = node.partitions.lengths
    return None if lengths is None else float(sum(lengths))


@_estimated_rows.register
def _(node: FromDask, children: list[Estimate]) -> float | None:
    return None


@_estimated_rows.register
def _(node: MapPartitions, children: list[Estimate]) -> float | None:
    return children[0].rows


@_estimated_rows.register
def _(node: Filter, children: list[Estimate]) -> float | None:
    rows = children[0].rows
    return None if rows is None else rows * selectivity(node.predicate)


@_estimated_rows.register
def _(node: Join, children: list[Estimate]) -> float | None:
    left, right = children
    if left.rows is None or right.rows is None:
        return None
    if node.how == "inner":
        return _inner_rows(left.rows, right.rows, left.whole, right.whole)
    return {"left": left.rows, "right": right.rows, "outer": left.rows + right.rows,
            "leftsemi": left.rows / 2, "leftanti": left.rows / 2, "left_anti": left.rows / 2,
            "right_anti": right.rows / 2, "cross": left.rows * right.rows}[node.how]


def _inner_rows(left: float, right: float, left_whole: float | None,
                right_whole: float | None) -> float:
    """An inner join's rows: the input of the larger whole (a fact table, say) keeps the share
    of its rows that the other input (a dimension, filtered) kept of its own whole, each key
    taken to hold as many of the first's rows; without wholes, the larger input's rows. A
    chain of joins under filtered dimensions is then estimated as small as it comes out, not
    as large as its fact table, so that its result is copied rather than shuffled where it
    may be (:func:`~gpuframe.operators.join._speculated`)."""
    if not left_whole or not right_whole:
        return max(left, right)
    if left_whole <= right_whole:
        return right * min(1.0, left / left_whole)
    return left * min(1.0, right / right_whole)


@_estimated_rows.register
def _(node: TopK, children: list[Estimate]) -> float | None:
    rows = children[0].rows
    return float(node.n) if rows is None else min(float(node.n), rows)


@_estimated_rows.register
def _(node: Concat, children: list[Estimate]) -> float | None:
    rows = [c.rows for c in children]
    return None if any(r is None for r in rows) else float(sum(r for r in rows if r))


@_estimated_rows.register
def _(node: GroupBy, children: list[Estimate]) -> float | None:
    rows = children[0].rows
    if not node.keys:
        return 1.0
    return None if rows is None else max(1.0, rows * GROUPS_SHARE)


def selectivity(predicate: Expr) -> float:
    """The share of rows ``predicate`` is taken to keep."""
    if isinstance(predicate, Binary) and predicate.op == "&":
        return selectivity(predicate.left) * selectivity(predicate.right)
    if isinstance(predicate, Binary) and predicate.op == "|":
        a, b = selectivity(predicate.left), selectivity(predicate.right)
        return a + b - a * b
    if isinstance(predicate, Unary) and predicate.op == "~":
        return 1.0 - selectivity(predicate.operand)
    if isinstance(predicate, Binary):
        return _term_share(predicate.op)
    if isinstance(predicate, IsIn):
        return min(1.0, 0.1 * len(predicate.values))
    if isinstance(predicate, Between):
        return 0.25
    if isinstance(predicate, Unary) and predicate.op in ("isna", "notna"):
        return 0.1 if predicate.op == "isna" else 0.9
    return 0.5


def _term_share(op: str) -> float:
    return {"==": 0.1, "=": 0.1, "in": 0.3, "!=": 0.9, "not in": 0.7}.get(op, 1 / 3)


def row_width(meta: pd.DataFrame) -> float:
    """Bytes a row of ``meta``'s columns is taken to hold."""
    return float(sum(dtype.itemsize if isinstance(dtype, np.dtype) and dtype.kind != "O"
                     else TEXT_WIDTH for _, dtype in schema_key(meta)))


# --- strategies ---------------------------------------------------------------------------------

def expected_placement(node: Node) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The (keys, hash types) ``node``'s rows are expected to be hashed on after a run."""
    if isinstance(node, Persisted):
        placed = node.partitions.partitioning
        return None if placed is None else (placed.keys, placed.hash_types)
    if isinstance(node, Join):
        return None  # its output placement depends on the strategy chosen at run time
    if len(node.children) != 1:
        return None
    below = expected_placement(node.children[0])
    if below is None:
        return None
    kept = placement_after(node, HashPartitioning(below[0], below[1], 1, ("",)))
    return None if kept is None else (kept.keys, kept.hash_types)


def placeable_names(node: Node) -> frozenset[str] | None:
    """The columns of ``node``'s output that its rows may be found hashed on once it has run,
    whatever strategies its joins and groupbys choose then (None: not known): a join's keys, a
    groupby's or a distinct's, a persisted frame's placement, and those carried up from below
    through per-partition nodes and the sides of joins. More names than may be, never fewer."""
    if isinstance(node, Persisted):
        placed = node.partitions.partitioning
        return frozenset(placed.keys if placed is not None else ())
    if isinstance(node, (Scan, FromPandas)):
        return frozenset()
    if isinstance(node, GroupBy):
        return frozenset(node.keys)
    if isinstance(node, Distinct):
        return frozenset(node.subset)
    if isinstance(node, Join):
        sources = node.sources()
        carried = {"left": placeable_names(node.left), "right": placeable_names(node.right)}
        left, right = carried["left"], carried["right"]
        if not sources or left is None or right is None:
            return None
        placeable = {"left": left | set(node.left_keys), "right": right | set(node.right_keys)}
        return frozenset(name for name, (side, source) in sources.items()
                         if source in placeable[side])
    if isinstance(node, (Filter, Select, Rename, Assign, AsType)):
        below = placeable_names(node.children[0])
        if below is None:
            return None
        if isinstance(node, Rename):
            below = frozenset(node.mapping.get(name, name) for name in below)
        return below & frozenset(node.meta.columns)
    return None


def unsampled_broadcast(node: Join) -> str | None:
    """The side that ``node`` copies to every worker without sampling, if any: of those it may
    copy that the plan bounds to at most ``broadcast_rows`` rows
    (:func:`~.bounds.rows_at_most`), within ``broadcast_bytes`` at the plan's row width, the
    one of fewer rows (the right one of as many)."""
    opts = node.options
    bounded = []
    for side, child in (("right", node.right), ("left", node.left)):
        bound = rows_at_most(child)
        if node.may_copy(side) and bound is not None and bound <= opts.broadcast_rows \
                and bound * row_width(child.meta) <= opts.broadcast_bytes:
            bounded.append((bound, side))
    return min(bounded, key=lambda found: found[0])[1] if bounded else None


def predicted_strategy(node: Join, left: Estimate, right: Estimate, n_workers: int) -> str:
    """The strategy the join is expected to take (see :mod:`gpuframe.operators.join`)."""
    unsampled = unsampled_broadcast(node)
    if unsampled is not None:
        return f"broadcast {unsampled} side (unsampled)"
    if node.how == "cross":  # the smaller side goes to every partition of the other
        smaller = "left" if (left.bytes or 0) < (right.bytes or 0) else "right"
        return f"broadcast {smaller} side"
    hash_types = tuple(str(node.types.left.get(k, node.left.meta[k].dtype))
                       for k in node.left_keys)
    placed = {side: expected_placement(child) == (keys, hash_types)
              for side, child, keys in (("left", node.left, node.left_keys),
                                        ("right", node.right, node.right_keys))}
    if placed["left"] and placed["right"]:
        return "none (both sides hashed on the keys)"
    if placed["left"] or placed["right"]:
        return "shuffle " + ("right" if placed["left"] else "left") + " side only"
    copied = copied_by_estimates(node, {"left": left.bytes, "right": right.bytes}, n_workers)
    return "shuffle" if copied is None else f"broadcast {copied} side"


def copied_by_estimates(node: Join, sizes: Mapping[str, float | None], n_workers: int,
                        most_bytes: float = math.inf) -> str | None:
    """The side ``node`` copies to every worker by its sides' estimated ``sizes`` (bytes,
    None: no estimate): the right one, else the left, where the join may copy it, it is
    estimated at most ``most_bytes``, and ``broadcast_bytes`` and ``broadcast_ratio`` allow
    it."""
    for small, big in (("right", "left"), ("left", "right")):
        small_bytes, big_bytes = sizes[small], sizes[big]
        if node.may_copy(small) and small_bytes is not None and big_bytes is not None \
                and small_bytes <= most_bytes \
                and node.options.broadcasts(small_bytes, big_bytes, n_workers):
            return small
    return None


def predicted_aggregation(node: GroupBy) -> str:
    """The way the groupby is expected to finish (see :mod:`gpuframe.operators.groupby`): the
    tree or the shuffle is chosen once the partials' rows are counted, unless the plan bounds
    them already (:func:`tree_bound`) or estimates them few (:func:`tree_estimate`)."""
    if not node.keys:
        return "tree"
    below = expected_placement(node.child)
    if below is not None and set(below[0]) <= set(node.keys):
        return "local (input hashed on the keys)"
    if node.options.strategy != "auto":
        return node.options.strategy
    bound = tree_bound(node)
    if bound is not None:
        return f"tree (at most {bound:,} rows, uncounted)"
    guess = tree_estimate(node)
    if guess is not None:
        return f"tree (about {guess:,.0f} rows estimated, uncounted)"
    return f"tree up to {node.options.tree_max_rows:,} partial rows, else shuffle"


def tree_bound(node: GroupBy, partials: int | None = None) -> int | None:
    """The plan's bound on the groupby's partials' rows, where it is at most
    ``tree_max_rows``: its input's rows, or, for ``partials`` partial aggregates, its most
    groups (:func:`~.bounds.groups_at_most`) in each (a nunique's partials hold its distinct
    values besides); the tree is then chosen without counting them (a round trip that waits
    for every partial). None otherwise."""
    bound = rows_at_most(node.child)
    distinct = any(a.function == "nunique" for a in node.aggregations)
    groups = groups_at_most(node) if partials is not None and not distinct else None
    if groups is not None and partials is not None:
        bound = groups * partials if bound is None else min(bound, groups * partials)
    return bound if bound is not None and bound <= node.options.tree_max_rows else None


def tree_estimate(node: GroupBy) -> float | None:
    """The plan's estimate of the groupby's input rows, and so of its partials' at most, where
    it is at most ``tree_max_rows``: the tree is then chosen without counting the partials, its
    tasks checking what they take (:mod:`~gpuframe.operators.groupby`); None otherwise."""
    rows = estimated(node.child).rows
    return rows if rows is not None and rows <= node.options.tree_max_rows else None


def _rows(rows: float | None) -> str:
    return "?" if rows is None else f"{rows:,.0f}"


def _bytes(nbytes: float | None) -> str:
    return "? B" if nbytes is None else byte_text(nbytes)
