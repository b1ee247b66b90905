"""Semi and anti joins of a small left side with a large right one: the right side first cut,
where it lies, to the rows whose keys the left side holds (:func:`reduce_semi_joins`), where
the join's ``cut_semi_joins`` option asks (off until measured on GPUs: on 2 CPU cores the copy
and the local join cost as much as the shuffle they save, benchmarks/results/2026-11-28-s34-cpu.md).

A semi or anti join keeps each left row by whether its keys appear on the right, so only the
right rows whose keys the left holds can matter. The join may copy only its right side to every
worker, and copying the larger side costs more than shuffling both, so a join whose right side
is the large one shuffles that side whole: in TPC-H's q4, every late line item to find the
orders of one quarter among them. Here the left side's keys are copied to every worker instead
(a semi join of the right side with them, which copies its small right side without sampling),
each partition of the right side keeps the rows those keys match, and the join moves what is
left of it. The result is the same for either type: a left key matches a right row exactly when
it matches one whose key the left side holds.
"""

from __future__ import annotations

from .explain import UNSAMPLED_SHARE, copied_by_estimates, estimated, placeable_names
from .nodes import Join, Node, Select

REDUCED_TYPES = ("leftsemi", "leftanti")
KEPT_SHARE = 1 / 2
"""The largest share of its whole relation (the table it filters) the left side is estimated
to keep for the right side to be cut by its keys: a left side that keeps most of its table
(every order, say) leaves most right rows matched, and the cut saves little of the shuffle."""


def reduce_semi_joins(root: Node, n_workers: int) -> Node:
    """``root`` with each semi or anti join whose right side is worth cutting first
    (:func:`_reduced`) joined with that side cut to the rows its left keys match; a node that
    several parents read stays one."""
    done: dict[int, Node] = {}

    def walk(node: Node) -> Node:
        if id(node) not in done:
            children = [walk(child) for child in node.children]
            rebuilt = node if all(new is old for new, old in zip(children, node.children)) \
                else node.with_children(children)
            done[id(node)] = _reduced(rebuilt, n_workers) if isinstance(rebuilt, Join) \
                else rebuilt
        return done[id(node)]

    return walk(root)


def _reduced(join: Join, n_workers: int) -> Node:
    """``join`` with its right side cut by its left keys where its options ask
    (``cut_semi_joins``) and, by the plan's estimates, the left side keeps at most
    :data:`KEPT_SHARE` of its whole relation, the keys would be copied without sampling
    (:func:`~.explain.copied_by_estimates`: within half the copy's cap and its ratio to the
    right side), and the right side may not be hashed on its keys already (the join would then
    move the left side alone); else ``join`` itself."""
    if not join.options.cut_semi_joins or join.how not in REDUCED_TYPES \
            or len(set(join.left_keys)) != len(join.left_keys):
        return join
    left = estimated(join.left)
    if left.rows is None or not left.whole or left.rows > KEPT_SHARE * left.whole:
        return join
    placed = placeable_names(join.right)
    if placed is None or set(join.right_keys) <= placed:
        return join
    cut = Join(join.right, Select(join.left, join.left_keys), "leftsemi", join.right_keys,
               join.left_keys, join.suffixes, join.options, join.backend)
    sizes = {"left": estimated(cut.left).bytes, "right": estimated(cut.right).bytes}
    if copied_by_estimates(cut, sizes, n_workers,
                           UNSAMPLED_SHARE * join.options.broadcast_bytes) != "right":
        return join
    return join.with_children([join.left, cut])
