"""Groupbys that a join then cuts to the keys of its other side, made of those keys' rows only
(:func:`prefilter_groups`): a semi-join reduction, as databases' optimizers push a join's keys
below an aggregate.

A query written in the pandas idiom aggregates first and joins after: TPC-H q20 sums a year of
``lineitem`` by (part, supplier), millions of groups, and keeps those of the 1% of parts a
filtered ``partsupp`` names; q21 counts the suppliers of every order, and keeps the few orders of
one nation's late suppliers. The aggregate shuffles all its groups between workers, and the join
drops nearly all of them. Where the join drops (or never shows) the rows of the groupby's side
whose keys the other side lacks, and the join's keys are the groupby's keys, a group of such a
key may as well not be made: its input is first semi-joined with the other side's keys, which
keeps or drops whole groups (their aggregates are unchanged), by the same join semantics as the
join above (the same key types and casts, missing keys alike). The other side is then computed
once for both (a shared node), and its keys copied to every worker.

It applies only where the plan's estimates say the other side is filtered (fewer rows than the
relation it is a share of: a side that holds every key would cut nothing) and smaller than the
groupby's input, with its keys within ``broadcast_bytes``; where the groupby and the nodes between
it and the join have no other parent (another would see the cut groups); and not under
``validate=`` (which checks the keys of every row, matched or not). ``prefilter_groups=False``
among the join's options turns it off.
"""

from __future__ import annotations

import dataclasses

from .aggregate import GroupBy
from .explain import estimated, row_width
from .nodes import Assign, AsType, Filter, Join, Node, Rename, Select, every_node

CUT_SIDES = {
    "right": ("inner", "left", "leftsemi", "leftanti", "left_anti"),
    "left": ("inner", "right", "leftsemi", "right_anti"),
}
"""Per side of a join, the join types under which that side's rows whose keys the other side
lacks never reach the output: dropped (inner, the other side's outer join, a semi join's
either side) or only looked for (an anti join's other side)."""

PASSING = (Filter, Select, Rename, Assign, AsType)
"""Nodes between a groupby and a join that pass each group's row on whole or not at all (an
assignment or a cast that leaves the keys as they are)."""


def prefilter_groups(root: Node) -> Node:
    """``root`` with each groupby that a join cuts to its other side's keys aggregating the rows
    of those keys only (see the module); the same columns, rows and types."""
    parents: dict[int, int] = {}
    for node in every_node(root):
        for child in node.children:
            parents[id(child)] = parents.get(id(child), 0) + 1
    rebuilt: dict[int, Node] = {}

    def rebuild(node: Node) -> Node:
        if id(node) in rebuilt:
            return rebuilt[id(node)]
        children = [rebuild(child) for child in node.children]
        new = node if all(a is b for a, b in zip(children, node.children)) \
            else node.with_children(children)
        if isinstance(node, Join) and isinstance(new, Join):
            new = _cut(node, new, parents)
        rebuilt[id(node)] = new
        return new

    return rebuild(root)


def _cut(original: Join, join: Join, parents: dict[int, int]) -> Join:
    """``join`` (``original`` rebuilt) with its groupby side made of the rows of the other
    side's keys, where a side qualifies (the right tried first: the pandas idiom joins an
    aggregate on the right)."""
    if not join.options.prefilter_groups or join.validate is not None:
        return join
    for side, other in (("right", "left"), ("left", "right")):
        if join.how not in CUT_SIDES[side]:
            continue
        keys = join.right_keys if side == "right" else join.left_keys
        other_keys = join.left_keys if side == "right" else join.right_keys
        path = _path_to_groupby(getattr(original, side), keys, parents)
        if path is None:
            continue
        cut = _cut_side(getattr(join, side), path, getattr(join, other), other_keys, join)
        if cut is not None:
            return dataclasses.replace(join, left=cut) if side == "left" \
                else dataclasses.replace(join, right=cut)
    return join


def _path_to_groupby(node: Node, keys: tuple[str, ...], parents: dict[int, int]
                     ) -> tuple[str, ...] | None:
    """The groupby input's names for ``keys`` (the join's names for them at ``node``), where
    ``node`` reaches a groupby through :data:`PASSING` nodes, each of one parent, and its keys
    are all the groupby's; else None."""
    while True:
        if parents.get(id(node), 0) != 1:
            return None
        if isinstance(node, GroupBy):
            return keys if set(keys) <= set(node.keys) else None
        if not isinstance(node, PASSING):
            return None
        written = [name for name, _ in node.items] if isinstance(node, Assign) \
            else list(node.dtypes) if isinstance(node, AsType) else []
        if set(written) & set(keys):
            return None
        if isinstance(node, Rename):
            before = {node.mapping.get(name, name): name for name in node.child.columns}
            keys = tuple(before[key] for key in keys)
        node = node.children[0]


def _cut_side(node: Node, keys: tuple[str, ...], other: Node, other_keys: tuple[str, ...],
              join: Join) -> Node | None:
    """``node`` (the join's side, through :data:`PASSING` nodes to a groupby) with the groupby's
    input semi-joined with ``other``'s ``other_keys`` on its ``keys``; None where the estimates
    say it would cut little (see the module)."""
    if not isinstance(node, GroupBy):
        child = _cut_side(node.children[0], keys, other, other_keys, join)
        return None if child is None else node.with_children([child])
    if len(set(other_keys)) != len(other_keys) or \
            any(found is node for found in every_node(other)):
        return None
    provider = Select(other, other_keys)
    given = estimated(other)
    rows, whole, taken = given.rows, given.whole, estimated(node.child).rows
    if rows is None or whole is None or taken is None or not (
            rows < whole and rows < taken
            and rows * row_width(provider.meta) <= join.options.broadcast_bytes):
        return None
    semi = Join(node.child, provider, "leftsemi", keys, other_keys, join.suffixes,
                join.options, join.backend)
    return node.with_children([semi])
