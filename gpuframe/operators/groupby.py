"""The groupby operator: partial aggregates where the rows lie, then one of three ways to finish.

Every partition is first reduced to its partial aggregates, one row per group it holds (the
tasks' code and state: :mod:`~.groupby_tasks`): a sum, count, size, min, max, first or last as
itself; a mean as a count and the mean times the count (in floats, as pandas' mean adds, where
a sum of int32 would wrap); a variance as (count, mean, M2), merged by Chan's formula, which
stays exact where a sum of squares would cancel; a nunique as the distinct (keys, value)
pairs, in a frame of its own (a *component*). Then, chosen when the plan runs:

- **local**: the input is already hash-partitioned on (a subset of) the keys, so each group lies
  in one partition: each is aggregated where it lies, nothing moves, and the placement stays;
- **tree**: the partials' rows, counted (or bounded by the plan: the input's rows, see
  :mod:`~gpuframe.plan.bounds`; or estimated by it, each tree task then checking the rows it
  takes), are few (``tree_max_rows``): they are combined in rounds of ``tree_fanin`` into one
  partition (in partition order where first/last need it);
- **shuffle**: the partials are hashed on the keys into ``partitions_per_worker`` buckets per
  worker, and each bucket finished by its owner; the result is hash-partitioned on the keys,
  which a later join or groupby on them reuses.

An aggregate of a join (through per-partition nodes that nothing else reads) has the join's
own tasks make the partials (:class:`~.groupby_tasks.PartialStep`), as the join's rows are
made: a task and a scheduler round trip fewer per partition, and the joined rows never leave
their task. A groupby does so where none of its keys is a column the join's output could be
found hashed on (:func:`~gpuframe.plan.explain.placeable_names`), which would have it finish
each group where it lies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial as partial_fn
from typing import Any

import numpy as np
import pandas as pd
from distributed import Future

from ..backend import Backend, get_backend
from ..exchange.exchange import exchange
from ..exchange.placement import Contiguous, HashPartitioning
from ..exchange.splitters import HashSplitter
from ..plan.aggregate import GroupBy
from ..plan.bounds import groups_at_most, rows_at_most
from ..plan.explain import placeable_names, tree_bound, tree_estimate
from ..plan.nodes import Join, MapPartitions, Node, Scan
from ..plan.sort import Sort
from ..plan.topk import TopK
from ..runtime.runner import Job, Partitions
from .groupby_tasks import (
    WHOLE,
    ClientFinish,
    CountOrFetch,
    HostPartials,
    HostStep,
    Partial,
    PartialStep,
    aggregate_local,
    combine_partials,
    component_rows,
    counted_rows,
    finish_bucket,
    finish_partials,
    partial_aggregate,
)
from .join import lower_join_partials
from .join_schema import hash_type
from .lowering import Lowering, begin, lower
from .scan import lower_scan_partials
from .steps import Chain, StepsAfter, StepsFirst, chain_ending, input_with_steps

TREE_SLACK = 2
"""How many times ``tree_max_rows`` the partials one task of a tree chosen by the plan's
estimate may take (:func:`_uncounted_tree`) before it fails its job, and the action runs again,
counting them: an estimate a little short costs a slower tree, running the action again costs
more, and one far short would have one worker finish more groups than it should."""
LABELS = "abcdefghijklmnopqrstuvwxyz"


def hash_types(meta: pd.DataFrame, keys: Sequence[str], backend: Backend) -> dict[str, Any]:
    """Each key's hash type on ``backend``: the one a join of it with itself would hash it as."""
    return {k: hash_type(meta[k].dtype, meta[k].dtype, backend) for k in keys}


def _serving(parts: Partitions, types: dict[str, Any]) -> HashPartitioning | None:
    """``parts``' placement where it puts rows of equal keys together: hashed on some of the
    keys, as their hash types."""
    placed = parts.partitioning
    if placed is None or not placed.keys or not set(placed.keys) <= set(types):
        return None
    wanted = tuple(str(types[k]) for k in placed.keys)
    return placed if wanted == placed.hash_types else None


@dataclass
class Local:
    """A groupby whose input holds each group in one partition (hashed on some of its keys, or
    a single partition): each partition is aggregated where it lies, after ``steps``."""

    partial: Partial
    inputs: Partitions
    steps: tuple[Any, ...]
    stage: str
    placed: HashPartitioning | None


@dataclass
class Begun:
    """A groupby's partials submitted, and the counts of their rows that its choice between a
    tree and a shuffle waits for (None where the choice needs none)."""

    partial: Partial
    partials: list[Future]
    owners: list[str]
    made: str
    counts: list[Future] | None
    """Each partial's rows, or the partial itself as host frames where the client may finish
    it (:class:`~.groupby_tasks.CountOrFetch`)."""
    types: tuple[str, ...]
    """The keys' hash types, which a shuffle's output placement names."""
    host: HostStep | None = None
    """The step that made the partials pandas frames for the client to finish, where one did
    (:func:`_client_step`)."""


@begin.register
def _(node: GroupBy, lowering: Lowering) -> Local | Begun:
    """The input lowered, and the partials and their counts submitted where it needs them."""
    job = lowering.job
    types = hash_types(node.child.meta, node.keys, get_backend(job.backend))
    casts = {k: t for k, t in types.items() if str(t) != str(node.child.meta[k].dtype)}
    whole = not node.keys
    partial = Partial(node.keys or (WHOLE,), casts, node.aggregations, node.dropna, whole,
                      node.child.meta, node.meta, job.backend)
    host = _client_step(node, lowering)
    after = (host,) if host is not None else ()
    made_below = _partials_below(node, lowering, partial, after)
    if made_below is not None:
        partials, owners, made = made_below
    else:
        inputs, steps, chain = input_with_steps(node.child, lowering)
        prefix = f"{chain.name}-" if chain is not None else ""
        if chain is not None:
            chain.fused(lowering, node)
        placed = None if whole else _serving(inputs, types)
        if placed is not None or len(inputs) == 1:
            lowering.note(node, f"local: input already {placed.describe()}"
                          if placed is not None else "local: one partition")
            return Local(partial, inputs, steps, f"{prefix}aggregate", placed)
        partials = job.stage(f"{prefix}partial").map(
            StepsFirst(steps, _then(partial_aggregate, after)), inputs, partial)
        owners, made = list(inputs.owners), ""
    counts = None
    if host is None and not whole and node.options.strategy == "auto" \
            and _uncounted_tree(node, job, len(partials)) is None and partials:
        count = job.stage("count-partial")
        counter = CountOrFetch(job.backend, node.options.client_rows) \
            if _finishes_on_client(node, lowering) else component_rows
        counts = [count.submit(counter, f, index=(i,), owner=o)
                  for i, (f, o) in enumerate(zip(partials, owners))]
    return Begun(partial, partials, owners, made, counts,
                 tuple(str(types[k]) for k in node.keys), host)


def _client_step(node: GroupBy, lowering: Lowering) -> HostStep | None:
    """Where the action fetches ``node``'s output: the step that makes each partial host frames
    for the client to finish, in the task that makes it, where the plan holds each to at most
    ``client_rows`` rows; where a job that speculates would choose the tree by the plan's
    estimate, the step that does so for partials of no more rows, and leaves larger ones to
    the workers' tree (their columns of types that go to pandas and back unchanged). None
    elsewhere."""
    limit = node.options.client_rows
    if not _finishes_on_client(node, lowering):
        return None
    distinct = any(a.function == "nunique" for a in node.aggregations)
    # A nunique's partials hold its distinct values too, however few the groups.
    groups = None if distinct else 1 if not node.keys else groups_at_most(node)
    bound = min(b for b in (groups, rows_at_most(node.child), limit + 1) if b is not None)
    if bound <= limit:
        return HostStep(lowering.job.backend)
    if lowering.job.speculates and tree_estimate(node) is not None and _round_trips(node):
        return HostStep(lowering.job.backend, limit)
    return None


def _round_trips(node: GroupBy) -> bool:
    """Whether the columns of ``node``'s partials come back from pandas as they were: numbers,
    booleans, dates and text."""
    names = {*node.keys, *(a.column for a in node.aggregations if a.column is not None)}
    return all(isinstance(dtype, pd.StringDtype)
               or (isinstance(dtype, np.dtype) and dtype.kind in "biufmM")
               for name, dtype in node.child.meta.dtypes.items() if name in names)


def _finishes_on_client(node: GroupBy, lowering: Lowering) -> bool:
    """Whether the action fetches ``node``'s output to the client (``to_client``), its strategy
    left to the engine ("auto"), through nodes that would run in the aggregate's last task (a
    sort into one partition, a top-k, and per-partition nodes besides map_partitions, whose
    function is for the workers' frames), none of them read by another."""
    if not lowering.to_client or lowering.shared(node) or node.options.client_rows <= 0 \
            or node.options.strategy != "auto":
        return False
    top = lowering.root
    if isinstance(top, TopK) or (isinstance(top, Sort) and top.npartitions in (None, 1)):
        top = top.child
    chain = chain_ending(top, lowering)
    base = chain.base if chain is not None else top
    return base is node and (chain is None or not any(isinstance(n, MapPartitions)
                                                      for n in chain.nodes))


@lower.register
def _(node: GroupBy, lowering: Lowering) -> Partitions:
    return lower_groupby(node, lowering)


def lower_groupby(node: GroupBy, lowering: Lowering, chain: Chain | None = None) -> Partitions:
    """``node``'s aggregate; with ``chain`` (per-partition nodes above it that nothing else
    reads), the chain's output, its steps applied in the aggregate's last tasks."""
    return _lower(node, lowering, chain, None, None)[0]


def lower_into_one_task(node: Node, lowering: Lowering, last: Any, number: int
                        ) -> tuple[Partitions, bool]:
    """``node``'s output for an operator that finishes a single partition in one task (a
    sort's, a top-k's): where ``node`` is an aggregate, or per-partition nodes over one, that
    nothing else reads and the aggregate makes one partition, that task's step ``last`` runs in
    the aggregate's last task too, its output reported as plan node ``number``'s, and True (no
    task, and no hop, of its own); else ``node``'s partitions, and False."""
    chain = chain_ending(node, lowering)
    base = chain.base if chain is not None else node
    if not isinstance(base, GroupBy) or lowering.shared(base):
        return lowering.input(node), False
    return _lower(base, lowering, chain, last, number)


def _lower(node: GroupBy, lowering: Lowering, chain: Chain | None, last: Any,
           last_number: int | None) -> tuple[Partitions, bool]:
    """:func:`lower_groupby`, and ``last`` as :func:`lower_into_one_task` runs it."""
    if chain is None:
        return _aggregate(node, lowering, lowering.number(node), (), last, last_number)
    chain.fused(lowering, node)
    parts, ran = _aggregate(node, lowering, lowering.number(chain.top), chain.steps, last,
                            last_number)
    return chain.placed(parts), ran


def _aggregate(node: GroupBy, lowering: Lowering, number: int, after: tuple[Any, ...],
               last: Any, last_number: int | None) -> tuple[Partitions, bool]:
    """The aggregate's tasks from where :func:`begin` left it, their output reported as plan
    node ``number``'s, after ``after``; where it makes one partition, after ``last`` too,
    reported as ``last_number``'s (and True)."""
    begun = lowering.begun(node) or begin(node, lowering)
    job, opts, whole = lowering.job, node.options, not node.keys
    finished = (last_number if last_number is not None else number), after + (last,)
    if isinstance(begun, Local):
        ran = last is not None and len(begun.inputs) == 1
        reported, steps = finished if ran else (number, after)
        futures = job.stage(begun.stage).map(
            StepsFirst(begun.steps, _then(aggregate_local, steps)), begun.inputs,
            begun.partial, node=reported)
        return Partitions(futures, list(begun.inputs.owners), node.meta, begun.placed), ran
    partial, partials, owners = begun.partial, begun.partials, begun.owners
    strategy, seen, rows, most_rows = ("tree" if whole else opts.strategy), "", None, None
    if begun.host is not None:
        fallback = None
        if begun.host.keep_past is not None:
            reported, steps = finished if last is not None else (number, after)
            fallback = partial_fn(_workers_tree, lowering, node, begun, reported, steps)
        return _on_client(lowering, node, begun, partials, after + (last,), "", fallback), \
            last is not None
    if begun.counts is not None:
        counted = job.gather(begun.counts)
        rows = sum(counted_rows(c) for c in counted)
        strategy = "tree" if rows <= opts.tree_max_rows else "shuffle"
        seen = f" ({rows:,} partial rows)"
        if all(isinstance(c, HostPartials) for c in counted):
            return _on_client(lowering, node, begun, partials, after + (last,), seen, None,
                              counted), last is not None
    elif strategy == "auto" and (uncounted := _uncounted_tree(node, job,
                                                             len(partials))) is not None:
        strategy, seen, rows, most_rows = "tree", *uncounted
    if strategy == "tree" or not partials:
        lowering.note(node, f"tree: {len(partials)} partials{begun.made} combined "
                            f"{opts.tree_fanin} at a time{seen}")
        ran = last is not None
        reported, steps = finished if ran else (number, after)
        tree = _tree(lowering, node, partial, partials, owners, reported, steps, most_rows)
        # Each group takes one row, and each group has a partial row.
        tree.rows_at_most = 1 if whole else rows
        if len(job.workers) == 1 and not whole:  # placed as a shuffle into its one bucket
            tree.partitioning = HashPartitioning(node.keys, begun.types, 1, tuple(tree.owners))
        return tree, ran
    n = len(job.workers) * opts.partitions_per_worker
    lowering.note(node, f"shuffle: partials{begun.made} hashed into {n} buckets{seen}")
    return _shuffle(lowering, node, partial, partials, owners, n, begun.types, number,
                    after), False


def _on_client(lowering: Lowering, node: GroupBy, begun: Begun, partials: list[Future],
               steps: tuple[Any, ...], seen: str, tree: Callable[[], Partitions] | None,
               fetched: list[list[Any]] | None = None) -> Partitions:
    """The aggregate left to the client (:class:`OnClient`, then ``steps``): its output is
    the host ``partials``, or those already ``fetched``."""
    lowering.note(node, f"on the client: {len(partials)} partials{begun.made} fetched as "
                        f"pandas and finished there{seen}")
    finish = ClientFinish.of(begun.partial, tuple(s for s in steps if s is not None))
    lowering.finish = OnClient(finish, tree, fetched)
    return Partitions(partials, list(begun.owners), node.meta)


@dataclass(frozen=True)
class OnClient:
    """What the client does with a root aggregate's partials once they have all been made:
    finish them (``finish``), or, where ``tree`` is given and some stayed on their workers
    (:class:`~.groupby_tasks.HostStep`'s ``keep_past``; the client knows each result's type
    as it finishes), submit the workers' tree over them all, and hand on its output. Partials
    the client already holds (``fetched``, by their count's gather) are finished as they
    are."""

    finish: ClientFinish
    tree: Callable[[], Partitions] | None
    fetched: list[list[Any]] | None = None

    def __call__(self, job: Job, partials: list[Future]) -> pd.DataFrame | Partitions:
        if self.fetched is not None:
            return self.finish(self.fetched)
        if self.tree is not None:
            job.wait(partials)  # each result's type is known once it is made
            if not all(f.type is HostPartials for f in partials):
                return self.tree()
        return self.finish(job.gather(partials))


def _workers_tree(lowering: Lowering, node: GroupBy, begun: Begun, number: int,
                  steps: tuple[Any, ...]) -> Partitions:
    """The tree the plan's estimate chose (:func:`_uncounted_tree`), over partials some of
    which were made for the client, its last task running ``steps``."""
    job = lowering.job
    seen, rows, most_rows = _uncounted_tree(node, job, len(begun.partials)) or ("", None, None)
    lowering.note(node, f"tree: {len(begun.partials)} partials{begun.made} combined "
                        f"{node.options.tree_fanin} at a time{seen}; some past client_rows")
    tree = _tree(lowering, node, begun.partial, begun.partials, begun.owners, number, steps,
                 most_rows)
    tree.rows_at_most = rows
    return tree


def _then(fn: Callable[..., Any], after: tuple[Any, ...]) -> Callable[..., Any]:
    """``fn``, followed by the steps ``after`` where there are any."""
    return StepsAfter(fn, after) if after else fn


def _partials_below(node: GroupBy, lowering: Lowering, partial: Partial,
                    after: tuple[Any, ...]) -> tuple[list[Future], list[str], str] | None:
    """Where ``node`` aggregates, through per-partition nodes that nothing else reads, a read
    or a join that nothing else reads: the partials, each made in the task that makes the
    partition, after those nodes' steps (and then ``after``), so that no task of their own
    waits for it (a scan's partitions hold no placement an aggregate could use; a join's,
    decided as it runs, may hold one only on names that
    :func:`~gpuframe.plan.explain.placeable_names` gives, and a whole-frame aggregate needs
    none); their owners, and where they were made. None elsewhere."""
    chain = chain_ending(node.child, lowering)
    base = chain.base if chain is not None else node.child
    if lowering.shared(base) or not (isinstance(base, Scan)
                                     or (isinstance(base, Join) and _never_served(node))):
        return None
    if chain is not None:
        chain.fused(lowering, node)
    steps = (chain.steps if chain is not None else ()) + (PartialStep(partial),) + after
    if isinstance(base, Scan):
        parts, made = lower_scan_partials(base, lowering, steps), ", made in the read's tasks,"
    else:
        parts, made = lower_join_partials(base, lowering, steps), ", made in the join's tasks,"
    return parts.futures, list(parts.owners), made


def _never_served(node: GroupBy) -> bool:
    """Whether no placement its input may be found in once run would let ``node`` finish each
    group where it lies: a whole-frame aggregate, or none of its keys a name the input's rows
    may be hashed on."""
    placeable = placeable_names(node.child)
    return not node.keys or (placeable is not None and not placeable & set(node.keys))


def _uncounted_tree(node: GroupBy, job: Job, partials: int
                    ) -> tuple[str, int | None, float | None] | None:
    """Where the tree is chosen without counting the ``partials`` partial aggregates (a round
    trip that waits for every one of them): by the plan's bound on their rows
    (:func:`tree_bound`); on a cluster of one worker that a shuffle would give one bucket, as
    its one task would take every partial just as the tree's last task does; or, in a job that
    speculates, by the plan's estimate (:func:`tree_estimate`), whose tasks then check the rows
    they take (:data:`TREE_SLACK`). The choice's note, the bound on the output's rows, and the
    most rows a tree task may take; None where the partials are counted."""
    if node.options.strategy != "auto":
        return None
    bound = tree_bound(node, partials)
    if bound is not None:
        return f" (at most {bound:,} partial rows, uncounted)", bound, None
    if len(job.workers) == 1 and node.options.partitions_per_worker == 1:
        return " (one worker, one bucket: uncounted)", None, None
    guess = tree_estimate(node) if job.speculates else None
    if guess is not None:
        return (f" (about {guess:,.0f} input rows estimated, uncounted)", None,
                TREE_SLACK * node.options.tree_max_rows)
    return None


def _tree(lowering: Lowering, node: GroupBy, partial: Partial, partials: list[Future],
          owners: list[str], number: int, after: tuple[Any, ...],
          most_rows: float | None = None) -> Partitions:
    """Partials combined ``tree_fanin`` at a time until one task finishes the rest, each task
    taking at most ``most_rows`` partial rows (:func:`combine_partials`). Without first/last,
    partials are taken worker by worker, so the first round moves nothing."""
    job = lowering.job
    fanin = max(2, node.options.tree_fanin)
    level = list(zip(partials, owners))
    if not partial.ordered:
        level.sort(key=lambda item: item[1])
    while len(level) > fanin:
        stage = job.stage("combine")
        level = [(stage.submit(combine_partials, [f for f, _ in chunk], partial, most_rows,
                               index=(i,), owner=chunk[0][1]), chunk[0][1])
                 for i, chunk in enumerate(_chunks(level, fanin))]
    stage = job.stage("aggregate")
    owner = level[0][1] if level else job.workers[0]
    future = stage.submit(_then(finish_partials, after), [f for f, _ in level], partial,
                          most_rows, index=(0,), owner=owner, node=number)
    return Partitions([future], [owner], node.meta, None)


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


@dataclass(frozen=True)
class ComponentSplitter:
    """``splitter`` over component ``component`` of a partition's partials (a list of frames):
    the exchange's send tasks take the partials as they are, and no task of its own per
    partition picks each component out first."""

    splitter: HashSplitter
    component: int

    @property
    def n(self) -> int:
        return self.splitter.n

    def split(self, frame: list[Any], index: int, sealed: bool = False) -> list[Any]:
        return self.splitter.split(frame[self.component], index, sealed)


def _shuffle(lowering: Lowering, node: GroupBy, partial: Partial, partials: list[Future],
             owners: list[str], n: int, types: tuple[str, ...], number: int,
             after: tuple[Any, ...]) -> Partitions:
    """Each component of the partials hashed on the keys into ``n`` buckets, each bucket's
    parts merged and finalized by its owner."""
    job = lowering.job
    splitter = HashSplitter(partial.keys, n)
    parts = Partitions(partials, owners, node.meta)
    buckets = []
    for c in range(1 + len(partial.distinct)):
        label = "partial" if c == 0 else "distinct" + LABELS[(c - 1) % len(LABELS)]
        buckets.append(exchange(job, parts, ComponentSplitter(splitter, c), Contiguous(), label))
    out_owners = buckets[0].owners
    stage = job.stage("aggregate")
    futures = [stage.submit(_then(finish_bucket, after), [b.parts[i] for b in buckets],
                            partial, index=(i,), owner=owner, node=number)
               for i, owner in enumerate(out_owners)]
    placement = HashPartitioning(node.keys, types, n, tuple(out_owners))
    return Partitions(futures, out_owners, node.meta, placement)

