"""Reads of one dataset that a plan makes more than once, made once (:func:`share_reads`).

Pushdown rewrites a read per parent, each with the columns and filters that parent needs, so a
query that reads a table in two places (a subquery and the main query, a table joined with
itself) reads and decodes its files twice: on a GPU, decoding is most of a read task's time.
This pass, run after pushdown, reads such a table once and gives each parent its own rows and
columns of that read (a selection, and a filter where its own ``filters=`` differ from the
read's, as an expression that keeps the same rows: :func:`~.predicates.from_reader_filters`).
Those run in tasks of their own, where a read's tasks ran the chain of its one parent: a few
milliseconds a partition, beside a decode of the whole table.

It merges only where the one read fetches no more than the reads apart, whatever the files'
statistics let filters skip (which the plan cannot know before it runs):

- reads that filter alike (the same row groups and rows) become one read of their columns;
- a read that keeps every row serves every other whose columns, and the columns of its filters,
  it reads too: a read that skips most row groups by its filters is never widened to the rows
  another wants, nor to columns it did not read.
"""

from __future__ import annotations

from collections.abc import Sequence

from .nodes import Filter, Node, Scan, Select, every_node
from .predicates import from_reader_filters


def share_reads(root: Node) -> Node:
    """``root`` with the reads of one dataset that it makes more than once made once where that
    reads no more; the same columns, rows and types."""
    groups: dict[int, list[Scan]] = {}
    for node in every_node(root):
        if isinstance(node, Scan):
            groups.setdefault(id(node.read), []).append(node)
    replacements: dict[int, Node] = {}
    for scans in groups.values():
        for group in _merged_groups(scans):
            replacements.update(_replacing(group))
    return _replaced(root, replacements, {}) if replacements else root


def _merged_groups(scans: list[Scan]) -> list[list[Scan]]:
    """The sets of ``scans`` (reads of one dataset) to make as one read each: each read that
    keeps every row with those it serves (:func:`_serves`), the widest first; then those left
    that filter alike."""
    groups: list[list[Scan]] = []
    left = list(scans)
    for anchor in sorted(scans, key=lambda scan: len(scan.columns), reverse=True):
        if anchor.filters is not None or not any(scan is anchor for scan in left):
            continue
        served = [scan for scan in left if scan is anchor or _serves(anchor, scan)]
        if len(served) > 1:
            groups.append(served)
            left = [scan for scan in left if not any(scan is s for s in served)]
    alike: dict[str, list[Scan]] = {}
    for scan in left:
        alike.setdefault(repr(scan.filters), []).append(scan)
    return groups + [group for group in alike.values() if len(group) > 1]


def _serves(anchor: Scan, scan: Scan) -> bool:
    """Whether ``anchor``, a read of every row, holds what ``scan`` reads: its columns, and
    those of its filters, which a filter above the shared read then applies."""
    if scan.filters is None:
        return set(scan.columns) <= set(anchor.columns)
    if from_reader_filters(scan.filters, scan.read.full_meta) is None:
        return False
    needed = set(scan.columns) | {column for terms in scan.filters for column, _, _ in terms}
    return needed <= set(anchor.columns)


def _merged(scans: Sequence[Scan]) -> Scan:
    """One read of what ``scans`` read (a set :func:`_merged_groups` made): their columns, and
    the filters of all of them, or none where one reads every row."""
    filters = scans[0].filters if all(s.filters == scans[0].filters for s in scans) else None
    wanted: set[str] = set()
    for scan in scans:
        wanted |= set(scan.columns)
    read = scans[0].read
    names = tuple(c for c in read.full_meta.columns if c in wanted)
    return Scan(read, None if len(names) == len(read.full_meta.columns) else names, filters)


def _replacing(scans: list[Scan]) -> dict[int, Node]:
    """Each of ``scans`` by its rows and columns of their one read."""
    shared = _merged(scans)
    replacements: dict[int, Node] = {}
    for scan in scans:
        node: Node = shared
        if scan.filters != shared.filters:
            assert scan.filters is not None  # the shared read keeps every row of one without
            condition = from_reader_filters(scan.filters, scan.read.full_meta)
            assert condition is not None  # _serves took only those it can write
            node = Filter(node, condition)
        if node.columns != scan.columns:
            node = Select(node, tuple(scan.columns))
        replacements[id(scan)] = node
    return replacements


def _replaced(node: Node, replacements: dict[int, Node], done: dict[int, Node]) -> Node:
    """``node`` with the nodes ``replacements`` names replaced, each node rebuilt once, so
    that a node several parents read still is one."""
    if id(node) in replacements:
        return replacements[id(node)]
    if id(node) not in done:
        children = [_replaced(child, replacements, done) for child in node.children]
        same = all(new is old for new, old in zip(children, node.children))
        done[id(node)] = node if same else node.with_children(children)
    return done[id(node)]
