"""The optimizer: rewrite a plan so that it reads, moves and computes less, with the same result.

Passes, each a walk of the tree that rebuilds what it changes: predicate pushdown; a groupby
that a join then cuts to its other side's keys made of those keys' rows only
(:mod:`~.group_prefilter`); projection pushdown; and a dataset read in several places read once
(:mod:`~.shared_reads`):

- **Predicate pushdown** (:func:`push_filters`): a filter's conditions (cut at ``&``) move down
  through selections, renames, the assignments and casts they do not read, and the side of a join
  that they read where the join type keeps that side's rows as they are (both sides of an inner
  join, the left of a left join, ...), until they reach a read, where those a reader applies
  exactly become its ``filters=`` (so row groups and pages that cannot match are never fetched).
  What cannot move stays as a filter where it stopped.
- **Projection pushdown** (:func:`prune_columns`): each node is asked only for the columns that
  later nodes use, down to the readers' ``columns=``, so a column that nothing needs is never
  read, sent or joined. A join keeps both columns of a pair whose names clash whenever either is
  used, so that the suffixes it gives stay what the user saw.

Through a groupby, a condition on its keys alone moves below it (it keeps or drops whole
groups), and its input is asked only for the keys and the columns that the aggregates still
wanted read.

Reuse of hash partitioning is decided when the plan runs, from where the inputs' rows really are
(:class:`~gpuframe.exchange.placement.HashPartitioning`): a join whose input is already hashed on
its keys does not move that input again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import singledispatch

from ..remembered import schema_key
from .aggregate import GroupBy
from .concat import Concat
from .distinct import Distinct
from .expr import Expr
from .group_prefilter import prefilter_groups
from .nodes import (
    Assign,
    AsType,
    Filter,
    FromPandas,
    Join,
    MapPartitions,
    Node,
    Rename,
    Scan,
    Select,
    every_node,
)
from .predicates import as_reader_filters, conjunction, conjuncts
from .shared_reads import share_reads
from .sort import Sort
from .topk import TopK

PRESERVED_SIDES = {
    "inner": ("left", "right"), "left": ("left",), "right": ("right",), "outer": (),
    "leftsemi": ("left", "right"), "leftanti": ("left",), "left_anti": ("left",),
    "right_anti": ("right",), "cross": ("left", "right"),
}
"""Per join type, the sides whose rows reach the output unchanged or not at all: a condition on
one of their columns may filter that side before the join. (A semi join's right side: a right
row that fails the condition matches nothing after the filter either.)"""
MAX_ALTERNATIVES = 64
"""Most alternatives (OR-ed term lists) a reader's filters may grow to by pushdown."""


def optimize(root: Node) -> Node:
    """``root`` with filters pushed down, groupbys that joins cut made of the rows they keep,
    projections pushed down, and a dataset it reads in several places read once where that
    reads no more; the same columns, rows and types."""
    pushed = prefilter_groups(push_filters(root))
    pruned = share_reads(prune_columns(pushed, root.columns))
    return pruned if pruned.columns == root.columns else Select(pruned, tuple(root.columns))


# --- predicate pushdown ------------------------------------------------------------------------

MOVING = (GroupBy, Join, Sort, TopK, Distinct)
"""Nodes that move rows between partitions: two runs of one may differ (a GPU adds floats in
no fixed order; rows of equal keys come in the order they arrive)."""


class Memo(dict[tuple[int, frozenset[str]], Node]):
    """Rewritten nodes by (original node, columns asked of it): a node that several parents read
    (a self-join's input) is rewritten once per ask. ``shared``: the moving nodes that the plan
    reaches by several paths (several parents read them, or a node above them: a joined frame
    that a query aggregates twice, under the columns it assigns), rewritten once alone, with no
    condition of any parent's and the columns all of them ask for (``columns``: found by
    :func:`prune_columns`; every column where not given), so that they run once and every
    parent sees the same rows (sums compared with their own maximum must be the same sums).
    Reads and per-partition nodes give the same rows each run, and are rewritten per parent,
    each reading only what it needs."""

    def __init__(self, root: Node, columns: dict[int, set[str]] | None = None) -> None:
        super().__init__()
        self.columns = columns or {}
        self.asked: dict[int, set[str]] = {}
        """The columns the parents of each shared node asked of it in this rewrite."""
        self.shared = {id(node) for node in reached_by_paths(root)
                       if isinstance(node, MOVING)}


def reached_by_paths(root: Node) -> list[Node]:
    """The nodes under ``root`` that it reaches by more than one path: those that several
    parents read, and every node under one of them."""
    nodes = every_node(root)
    edges: dict[int, int] = {}
    for node in nodes:
        for child in node.children:
            edges[id(child)] = edges.get(id(child), 0) + 1
    several = {id(node) for node in nodes if edges.get(id(node), 0) > 1}
    left = dict(edges)
    ready = [root]
    while ready:  # parents before children: a node is done once every edge into it is
        node = ready.pop()
        for child in node.children:
            if id(node) in several:
                several.add(id(child))
            left[id(child)] -= 1
            if not left[id(child)]:
                ready.append(child)
    return [node for node in nodes if id(node) in several]


def push_filters(node: Node, conditions: Sequence[Expr] = ()) -> Node:
    """``node`` with ``conditions`` (which must all hold) applied as low in it as they go."""
    return _pushed(node, list(conditions), Memo(node))


def _pushed(node: Node, conditions: list[Expr], memo: Memo) -> Node:
    if conditions and id(node) in memo.shared:
        return _above(_pushed(node, [], memo), conditions)
    if conditions:
        return _push(node, conditions, memo)
    if (id(node), frozenset()) not in memo:
        memo[id(node), frozenset()] = _push(node, [], memo)
    return memo[id(node), frozenset()]


@singledispatch
def _push(node: Node, conditions: list[Expr], memo: Memo) -> Node:
    """A node nothing moves through: its children are optimized on their own."""
    return _above(node.with_children([_pushed(child, [], memo) for child in node.children]),
                  conditions)


def _above(node: Node, conditions: list[Expr]) -> Node:
    return Filter(node, conjunction(conditions)) if conditions else node


@_push.register
def _(node: Filter, conditions: list[Expr], memo: Memo) -> Node:
    return _pushed(node.child, conjuncts(node.predicate) + conditions, memo)


@_push.register
def _(node: Select, conditions: list[Expr], memo: Memo) -> Node:
    return Select(_pushed(node.child, conditions, memo), node.names)


@_push.register
def _(node: Rename, conditions: list[Expr], memo: Memo) -> Node:
    back = {new: old for old, new in node.mapping.items() if old in node.child.meta}
    return node.with_children([_pushed(node.child, [c.rename(back) for c in conditions], memo)])


@_push.register
def _(node: Assign, conditions: list[Expr], memo: Memo) -> Node:
    made = {name for name, _ in node.items}
    return _split_through(node, conditions, lambda c: not (c.columns() & made), memo)


@_push.register
def _(node: AsType, conditions: list[Expr], memo: Memo) -> Node:
    cast = set(node.dtypes)
    return _split_through(node, conditions, lambda c: not (c.columns() & cast), memo)


@_push.register
def _(node: MapPartitions, conditions: list[Expr], memo: Memo) -> Node:
    return _above(node.with_children([_pushed(node.child, [], memo)]), conditions)


def _split_through(node: Node, conditions: list[Expr], passes: Callable[[Expr], bool],
                   memo: Memo) -> Node:
    below = [c for c in conditions if passes(c)]
    above = [c for c in conditions if not passes(c)]
    return _above(node.with_children([_pushed(node.children[0], below, memo)]), above)


@_push.register
def _(node: Sort, conditions: list[Expr], memo: Memo) -> Node:
    # A stable sort of fewer rows orders them as it would have among the rest.
    return _split_through(node, conditions, lambda c: True, memo)


@_push.register
def _(node: Distinct, conditions: list[Expr], memo: Memo) -> Node:
    # A condition on the subset keeps or drops all rows of a duplicate group alike.
    subset = set(node.subset)
    return _split_through(node, conditions, lambda c: c.columns() <= subset, memo)


@_push.register
def _(node: GroupBy, conditions: list[Expr], memo: Memo) -> Node:
    keys = set(node.keys)
    return _split_through(node, conditions, lambda c: bool(c.columns()) and c.columns() <= keys,
                          memo)


@_push.register
def _(node: Join, conditions: list[Expr], memo: Memo) -> Node:
    sources = node.sources()
    sides: dict[str, list[Expr]] = {"left": [], "right": []}
    above = []
    for condition in conditions:
        traced = {sources.get(name) for name in condition.columns()}
        side_names = {t[0] for t in traced if t is not None}
        if None in traced or len(side_names) != 1:
            above.append(condition)
            continue
        side = side_names.pop()
        if side not in PRESERVED_SIDES[node.how]:
            above.append(condition)
            continue
        mapping = {name: sources[name][1] for name in condition.columns()}
        sides[side].append(condition.rename(mapping))
    pushed = node.with_children([_pushed(node.left, sides["left"], memo),
                                 _pushed(node.right, sides["right"], memo)])
    return _above(pushed, above)


@_push.register
def _(node: Scan, conditions: list[Expr], memo: Memo) -> Node:
    dtypes = dict(schema_key(node.read.full_meta))
    filters = node.filters
    above = []
    for condition in conditions:
        terms = as_reader_filters(condition, dtypes)
        if terms is None:
            above.append(condition)
            continue
        combined = terms if filters is None else [a + b for a in filters for b in terms]
        if len(combined) > MAX_ALTERNATIVES:
            above.append(condition)
        else:
            filters = combined
    return _above(Scan(node.read, node.read_columns, filters), above)


# --- projection pushdown -----------------------------------------------------------------------

def prune_columns(node: Node, wanted: Sequence[str]) -> Node:
    """``node`` computing as few columns as it can while still giving those in ``wanted``
    (exactly those, in ``node``'s order, where a reader or a join decides).

    A shared moving node computes the columns its parents ask for, together. What they ask
    depends on what the shared nodes above them compute, so the plan is rewritten again, each
    shared node given what its parents asked in the rewrite before (a first rewrite keeps all
    of their columns), until the asks no longer change: then each computes exactly what its
    parents ask. The asks only shrink, and those of a shared node settle a rewrite after those
    of the shared nodes above it, so one rewrite per shared node and one more suffice (a chain
    of joins under a shared node is as many shared nodes); should they not, each keeps every
    column, which reads columns no one needs (a table's comments under a self-joined
    subquery)."""
    columns: dict[int, set[str]] = {}
    for _ in range(len(Memo(node).shared) + 2):
        memo = Memo(node, columns)
        pruned = _pruned(node, set(wanted), memo)
        if not memo.shared or memo.asked == columns:
            return pruned
        columns = memo.asked
    return _pruned(node, set(wanted), Memo(node))


def _pruned(node: Node, wanted: set[str], memo: Memo) -> Node:
    if id(node) in memo.shared:
        memo.asked.setdefault(id(node), set()).update(wanted)
        columns = memo.columns.get(id(node), set(node.columns))
        key = (id(node), frozenset(columns))
        if key not in memo:
            memo[key] = _prune(node, columns, memo)
        return _exactly(memo[key], wanted)
    key = (id(node), frozenset(wanted))
    if key not in memo:
        memo[key] = _prune(node, wanted, memo)
    return memo[key]


def _exactly(node: Node, wanted: set[str]) -> Node:
    """``node`` narrowed to the ``wanted`` columns, in its order."""
    names = tuple(c for c in node.columns if c in wanted)
    return node if list(names) == node.columns else Select(node, names)


@singledispatch
def _prune(node: Node, wanted: set[str], memo: Memo) -> Node:
    """A node whose inputs all its columns need: its children keep theirs."""
    kept = node.with_children([_pruned(child, set(child.columns), memo)
                               for child in node.children])
    return _exactly(kept, wanted)


@_prune.register
def _(node: Scan, wanted: set[str], memo: Memo) -> Node:
    names = tuple(c for c in node.columns if c in wanted) or tuple(node.columns[:1])
    return Scan(node.read, names, node.filters)


@_prune.register
def _(node: FromPandas, wanted: set[str], memo: Memo) -> Node:
    names = [c for c in node.columns if c in wanted]
    if names == node.columns:
        return node
    return FromPandas(node.data[names], node.npartitions)


@_prune.register
def _(node: Select, wanted: set[str], memo: Memo) -> Node:
    names = tuple(n for n in node.names if n in wanted)
    child = _pruned(node.child, set(names), memo)
    return child if child.columns == list(names) else Select(child, names)


@_prune.register
def _(node: Filter, wanted: set[str], memo: Memo) -> Node:
    child = _pruned(node.child, wanted | node.predicate.columns(), memo)
    return Filter(child, node.predicate)


@_prune.register
def _(node: Assign, wanted: set[str], memo: Memo) -> Node:
    needed = set(wanted)
    kept = []
    for name, expr in reversed(node.items):
        if name in needed:
            kept.append((name, expr))
            needed.discard(name)
            needed |= expr.columns()
    child = _pruned(node.child, needed, memo)
    return Assign(child, tuple(reversed(kept))) if kept else child


@_prune.register
def _(node: Rename, wanted: set[str], memo: Memo) -> Node:
    back = {new: old for old, new in node.mapping.items() if old in node.child.meta}
    return node.with_children([_pruned(node.child, {back.get(c, c) for c in wanted}, memo)])


@_prune.register
def _(node: AsType, wanted: set[str], memo: Memo) -> Node:
    return node.with_children([_pruned(node.child, wanted, memo)])


@_prune.register
def _(node: Join, wanted: set[str], memo: Memo) -> Node:
    sources = node.sources()
    if not sources:
        return _exactly(node.with_children([_pruned(node.left, set(node.left.columns), memo),
                                            _pruned(node.right, set(node.right.columns),
                                                    memo)]),
                        wanted)
    needed: dict[str, set[str]] = {"left": set(node.left_keys), "right": set(node.right_keys)}
    for name in wanted:
        if name in sources:
            side, column = sources[name]
            needed[side].add(column)
    if node.how == "cross":  # a side of no columns would lose its rows too
        for side, child in (("left", node.left), ("right", node.right)):
            if not needed[side]:
                needed[side].add(child.columns[0])
    if node.how not in ("leftsemi", "leftanti"):
        # Names that clash get suffixes: keep both of a pair or neither, so names stay.
        clashes = (set(node.left.columns) & set(node.right.columns)) - (
            {lk for lk, rk in zip(node.left_keys, node.right_keys) if lk == rk})
        for name in clashes:
            if name in needed["left"] or name in needed["right"]:
                needed["left"].add(name)
                needed["right"].add(name)
    left = _exactly(_pruned(node.left, needed["left"], memo), needed["left"])
    right = _exactly(_pruned(node.right, needed["right"], memo), needed["right"])
    return node.with_children([left, right])


@_prune.register
def _(node: Sort, wanted: set[str], memo: Memo) -> Node:
    child = _pruned(node.child, wanted | set(node.keys.by), memo)
    return _exactly(node.with_children([child]), wanted)


@_prune.register
def _(node: TopK, wanted: set[str], memo: Memo) -> Node:
    child = _pruned(node.child, wanted | set(node.keys.by), memo)
    return _exactly(node.with_children([child]), wanted)


@_prune.register
def _(node: Distinct, wanted: set[str], memo: Memo) -> Node:
    child = _pruned(node.child, wanted | set(node.subset), memo)
    return _exactly(node.with_children([child]), wanted)


@_prune.register
def _(node: Concat, wanted: set[str], memo: Memo) -> Node:
    # Each input keeps at least one column: one of none would lose its rows.
    inputs = []
    for child in node.inputs:
        mine = (wanted & set(child.columns)) or {child.columns[0]}
        inputs.append(_exactly(_pruned(child, mine, memo), mine))
    return _exactly(node.with_children(inputs), wanted)


@_prune.register
def _(node: GroupBy, wanted: set[str], memo: Memo) -> Node:
    kept = tuple(a for a in node.aggregations if a.name in wanted) or node.aggregations[:1]
    narrowed = GroupBy(node.child, node.keys, kept, node.dropna, node.options)
    child = _pruned(node.child, narrowed.inputs, memo)
    return _exactly(narrowed.with_children([child]), wanted)
