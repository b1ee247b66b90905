"""The groupby operator: partial aggregates where the rows lie, then one of three ways to finish.

Every partition is first reduced to its partial aggregates, one row per group it holds
(:class:`Partial`): a sum, count, size, min, max, first or last as itself; a mean as a count
and the mean times the count (in floats, as pandas' mean adds, where a sum of int32 would wrap);
a variance as (count, mean, M2), merged by Chan's formula, which stays exact where a sum
of squares would cancel; a nunique as the distinct (keys, value) pairs, in a frame of its own
(a *component*). Then, chosen when the plan runs:

- **local**: the input is already hash-partitioned on (a subset of) the keys, so each group lies
  in one partition: each is aggregated where it lies, nothing moves, and the placement stays;
- **tree**: the partials' rows, counted (or bounded by the plan: the input's rows, see
  :mod:`~gpuframe.plan.bounds`; or estimated by it, each tree task then checking the rows it
  takes), are few (``tree_max_rows``): they are combined in rounds of ``tree_fanin`` into one
  partition (in partition order where first/last need it);
- **shuffle**: the partials are hashed on the keys into ``partitions_per_worker`` buckets per
  worker, and each bucket finished by its owner; the result is hash-partitioned on the keys,
  which a later join or groupby on them reuses.

A whole-frame aggregate of a join (through per-partition nodes that nothing else reads) has the
join's own tasks make the partials (:class:`PartialStep`), as the join's rows are made: a task
and a scheduler round trip fewer per partition, and the joined rows never leave their task.

The same code runs on pandas and cuDF partitions: both share the groupby API used here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import pandas as pd
from distributed import Future

from ..backend import Backend, get_backend
from ..errors import SpeculationError
from ..exchange.exchange import exchange
from ..exchange.mailbox import arrivals
from ..exchange.placement import Contiguous, HashPartitioning
from ..exchange.splitters import HashSplitter, cast_keys
from ..plan.aggregate import Aggregation, GroupBy
from ..plan.explain import tree_bound, tree_estimate
from ..plan.nodes import Join, Node, Scan
from ..runtime.runner import Job, Partitions
from ..sent_schemas import SendsSchemas
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
WHOLE = "__gpuframe_all__"
"""The constant key a whole-frame aggregate groups by."""
ROWS = "__gpuframe_rows__"
"""A constant column whose count per group is the group's size (whatever the column that
``size`` names holds)."""
VALUE = "__gpuframe_value__"
"""The value column of a nunique's distinct (keys, value) pairs (which may be a key's)."""
LABELS = "abcdefghijklmnopqrstuvwxyz"


class PartialColumn(NamedTuple):
    """A column of the main partial: ``function`` of ``source`` per group in a partition, and
    ``merge`` of it per group across partials."""

    name: str
    source: str
    function: str
    merge: str


@dataclass(frozen=True)
class Partial(SendsSchemas):
    """What every task of one groupby needs: the keys (``WHOLE`` for a whole-frame aggregate),
    their casts to hash types, the aggregations, and the result's schema."""

    keys: tuple[str, ...]
    casts: dict[str, Any]
    aggregations: tuple[Aggregation, ...]
    dropna: bool
    whole: bool
    source: pd.DataFrame
    """The input's schema, whose empty partials stand in for buckets that got no rows."""
    meta: pd.DataFrame
    backend: str

    @property
    def distinct(self) -> list[Aggregation]:
        """The nunique aggregations, each partial as a component of its own."""
        return [a for a in self.aggregations if a.function == "nunique"]

    @property
    def ordered(self) -> bool:
        """Whether partials must be combined in partition order (first, last)."""
        return any(a.function in ("first", "last") for a in self.aggregations)

    def centred(self, column: str | None) -> str:
        """The name of ``column`` less its partition's least, which a variance is made of
        (:func:`partial_aggregate`): one per column, however many variances read it."""
        return f"__centred_{list(self.source.columns).index(column)}"

    def columns(self) -> list[PartialColumn]:
        """The main component's partial columns. A variance's mean merges as "first": after
        :func:`_chan` every partial row of a group holds the group's; a mean's and a
        variance's "mean" and "var" are turned into a sum and an m2 once made
        (:func:`partial_aggregate`)."""
        made = []
        for i, agg in enumerate(self.aggregations):
            source = agg.column if agg.column is not None else ROWS
            if agg.function == "size":
                made.append(PartialColumn(f"__{i}", ROWS, "count", "sum"))
            elif agg.function in ("var", "std"):
                centred = self.centred(source)
                made += [PartialColumn(f"__{i}_n", centred, "count", "sum"),
                         PartialColumn(f"__{i}_mean", centred, "mean", "first"),
                         PartialColumn(f"__{i}_m2", centred, "var", "sum")]
            elif agg.function == "mean":
                made += [PartialColumn(f"__{i}_sum", source, "mean", "sum"),
                         PartialColumn(f"__{i}_n", source, "count", "sum")]
            elif agg.function == "count":
                made.append(PartialColumn(f"__{i}", source, "count", "sum"))
            elif agg.function != "nunique":
                made.append(PartialColumn(f"__{i}", source, agg.function, agg.function))
        return made or [PartialColumn("__rows", ROWS, "count", "sum")]


def _grouped(frame: Any, keys: Sequence[str], columns: Sequence[tuple[str, str, str]],
             dropna: bool) -> Any:
    """``frame`` grouped on ``keys``, each (name, column, function) of ``columns`` made, the
    keys as columns. By lists of functions per column, the form pandas and cuDF both take;
    a (column, function) pair that several names ask for is computed once."""
    first: dict[tuple[str, str], str] = {}
    for name, column, function in columns:
        first.setdefault((column, function), name)
    spec: dict[str, list[str]] = {}
    for column, function in first:
        spec.setdefault(column, []).append(function)
    result = frame.groupby(list(keys), dropna=dropna, sort=False).agg(spec)
    result.columns = [first[(column, function)] for column in spec for function in spec[column]]
    for name, column, function in columns:
        if first[(column, function)] != name:
            result[name] = result[first[(column, function)]]
    return result.reset_index()


def partial_aggregate(part: Any, partial: Partial) -> list[Any]:
    """On a worker: one partition's partials, the main component first, then each nunique's
    distinct (keys, value) pairs."""
    part = cast_keys(part, partial.casts)
    added: dict[str, Any] = {WHOLE: 0} if partial.whole else {}
    if any(c.source == ROWS for c in partial.columns()):
        added[ROWS] = 0
    # A variance's values are taken less the partition's least (it does not change with a
    # shift): cuDF's groupby variance of one large group of values far from 0 cancels, as a
    # sum of squares does (wrong in the fourth digit, differently each run).
    least: dict[str | None, float] = {agg.column: _least(part[agg.column])
                                      for agg in partial.aggregations
                                      if agg.function in ("var", "std")}
    for column, shift in least.items():
        added[partial.centred(column)] = part[column].astype("float64") - shift
    if added:
        part = part.assign(**added)
    keys = list(partial.keys)
    made = partial.columns()
    main = _grouped(part, keys, [(c.name, c.source, c.function) for c in made], partial.dropna)
    for i, agg in enumerate(partial.aggregations):
        if agg.function in ("var", "std"):
            m2 = main[f"__{i}_m2"] * (main[f"__{i}_n"] - 1)
            main[f"__{i}_m2"] = m2.fillna(0)
            main[f"__{i}_mean"] = main[f"__{i}_mean"] + least[agg.column]
        elif agg.function == "mean":
            main[f"__{i}_sum"] = (main[f"__{i}_sum"] * main[f"__{i}_n"]).fillna(0)
    components = [main]
    for agg in partial.distinct:
        pairs = part[keys].assign(**{VALUE: part[agg.column]})
        if partial.dropna:
            pairs = pairs.dropna(subset=keys)
        components.append(pairs.drop_duplicates())
    return components


def _least(column: Any) -> float:
    """``column``'s least value as a float; 0 where it has none."""
    least = column.min() if len(column) else None
    return 0.0 if least is None or pd.isna(least) else float(least)


def combine(components: list[Any], partial: Partial) -> list[Any]:
    """Partials (each a list of frames, concatenated per component) merged into one."""
    keys = list(partial.keys)
    main = components[0]
    for i, agg in enumerate(partial.aggregations):
        if agg.function in ("var", "std"):
            main = _chan(main, keys, f"__{i}")
    merged = _grouped(main, keys, [(c.name, c.name, c.merge) for c in partial.columns()],
                      dropna=False)
    return [merged] + [frame.drop_duplicates() for frame in components[1:]]


def _chan(main: Any, keys: list[str], prefix: str) -> Any:
    """Each partial's (n, mean, m2) turned into its share of the merged group's: the mean
    becomes the group's, and m2 gains ``n * (mean - group mean)**2`` (Chan et al.)."""
    n, mean, m2 = main[f"{prefix}_n"], main[f"{prefix}_mean"], main[f"{prefix}_m2"]
    weighted = (mean * n).fillna(0)
    main = main.assign(**{f"{prefix}_weighted": weighted})
    grouped = main.groupby(keys, dropna=False, sort=False)
    total = grouped[f"{prefix}_n"].transform("sum")
    group_mean = grouped[f"{prefix}_weighted"].transform("sum") / total
    spread = (m2 + n * (mean - group_mean) ** 2).where(n > 0, 0)
    return main.drop(columns=[f"{prefix}_weighted"]).assign(
        **{f"{prefix}_mean": group_mean, f"{prefix}_m2": spread})


def finalize(components: list[Any], partial: Partial) -> Any:
    """The result of merged partials: each aggregation from its partial columns, in the
    schema's columns and dtypes."""
    frames = get_backend(partial.backend)
    keys = list(partial.keys)
    main = components[0]
    out = main[keys].copy()
    for i, agg in enumerate(partial.aggregations):
        if agg.function == "mean":
            out[agg.name] = main[f"__{i}_sum"] / main[f"__{i}_n"].where(main[f"__{i}_n"] > 0)
        elif agg.function in ("var", "std"):
            n = main[f"__{i}_n"]
            var = main[f"__{i}_m2"] / (n - 1).where(n > 1)
            out[agg.name] = var if agg.function == "var" else var ** 0.5
        elif agg.function != "nunique":
            out[agg.name] = main[f"__{i}"]
    # Joined last: a join gives its rows in an order of its own, which main's no longer match.
    # The pairs are distinct (partial_aggregate and combine drop duplicates): a group's distinct
    # values are its pairs of a value, counted faster than nunique counts them.
    for agg, pairs in zip(partial.distinct, components[1:]):
        counted = pairs.groupby(keys, dropna=False, sort=False)[VALUE].count()
        counted = counted.reset_index()
        counted.columns = keys + [agg.name]
        out = frames.join(out, counted, "left", keys, keys, ("", "_nunique"))
    if partial.whole and not len(out):
        return _empty_whole(partial, frames)
    out = out[list(partial.meta.columns)].reset_index(drop=True)
    return frames.astype(out, _dtypes_for(out, partial))


def _dtypes_for(out: Any, partial: Partial) -> list[Any]:
    """The schema's dtypes, but for a key of objects holding other values than text (1 beside
    "1"): pandas types a key of objects as text only where every value is one, and leaves
    others objects; cast to text, its distinct groups would look alike. The schema, made
    before any value is seen, says text; such a partition's column stays objects."""
    dtypes = dict(partial.meta.dtypes)
    for key in partial.keys:
        if (key in dtypes and isinstance(dtypes[key], pd.StringDtype)
                and pd.api.types.is_object_dtype(out[key].dtype)
                and pd.api.types.infer_dtype(out[key], skipna=True) not in ("string", "empty")):
            dtypes[key] = out[key].dtype
    return list(dtypes.values())


def _empty_whole(partial: Partial, frames: Backend) -> Any:
    """The one row a whole-frame aggregate of no rows gives, as pandas' reductions of empty
    columns: counts and sums of 0, and missing values elsewhere (in float64 where the schema's
    dtype, an integer's, holds none)."""
    zero = {"count": 0, "size": 0, "nunique": 0, "sum": 0}
    row = pd.DataFrame({a.name: [zero.get(a.function)] for a in partial.aggregations})
    for name, dtype in partial.meta.dtypes.items():
        try:
            row[name] = row[name].astype(dtype)
        except (TypeError, ValueError):
            row[name] = row[name].astype("float64")
    return frames.from_pandas(row)


def aggregate_local(part: Any, partial: Partial) -> Any:
    """The local task: a partition that holds its groups whole, aggregated."""
    return finalize(partial_aggregate(part, partial), partial)


def empty_partials(partial: Partial) -> list[Any]:
    """The partials of a partition with no rows."""
    return partial_aggregate(get_backend(partial.backend).from_pandas(partial.source), partial)


def combine_partials(partials: list[list[Any]], partial: Partial,
                     most_rows: float | None = None) -> list[Any]:
    """A tree task: several partials merged into one (none: those of no rows). With
    ``most_rows`` (a tree chosen by the plan's estimate), once they are found to hold no more
    rows, else :class:`~gpuframe.errors.SpeculationError`, which fails the job, and the action
    runs again, counting them."""
    if most_rows is not None:
        rows = sum(component_rows(p) for p in partials)
        if rows > most_rows:
            raise SpeculationError(f"a task of the aggregate's tree takes {rows:,} partial "
                                   f"rows, past {most_rows:,.0f}: more groups than the plan "
                                   "estimated")
    frames = get_backend(partial.backend)
    partials = partials or [empty_partials(partial)]
    return combine([frames.concat([p[c] for p in partials]) for c in range(len(partials[0]))],
                   partial)


def finish_partials(partials: list[list[Any]], partial: Partial,
                    most_rows: float | None = None) -> Any:
    """The tree's last task: the remaining partials merged (:func:`combine_partials`) and
    finalized."""
    return finalize(combine_partials(partials, partial, most_rows), partial)


def finish_bucket(buckets: list[list[Any]], partial: Partial) -> Any:
    """A shuffle task: one bucket of every component (``buckets[c]``: its parts from every
    input partition, in partition order) merged and finalized."""
    frames = get_backend(partial.backend)
    pieces = [arrivals(parts) for parts in buckets]
    # Made only where some component got no rows: an aggregate of no rows is a device
    # groupby's fixed cost on a GPU.
    empty = empty_partials(partial) if not all(pieces) else []
    components = [frames.concat(parts) if parts else empty[c] for c, parts in enumerate(pieces)]
    return finalize(combine(components, partial), partial)


def component_rows(partial_parts: list[Any]) -> int:
    """Rows of one partition's partials, all components together."""
    return sum(len(frame) for frame in partial_parts)


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


@dataclass(frozen=True)
class PartialStep:
    """A partition's partials as the last step of the task that makes the partition (a join's,
    :func:`~.join.lower_join_partials`): the partials leave that task rather than the partition,
    and no task of its own is waited for."""

    partial: Partial

    def apply(self, frame: Any) -> list[Any]:
        return partial_aggregate(frame, self.partial)


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
    types: tuple[str, ...]
    """The keys' hash types, which a shuffle's output placement names."""


@begin.register
def _(node: GroupBy, lowering: Lowering) -> Local | Begun:
    """The input lowered, and the partials and their counts submitted where it needs them."""
    job = lowering.job
    types = hash_types(node.child.meta, node.keys, get_backend(job.backend))
    casts = {k: t for k, t in types.items() if str(t) != str(node.child.meta[k].dtype)}
    whole = not node.keys
    partial = Partial(node.keys or (WHOLE,), casts, node.aggregations, node.dropna, whole,
                      node.child.meta, node.meta, job.backend)
    made_below = _partials_below(node, lowering, partial)
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
        partials = job.stage(f"{prefix}partial").map(StepsFirst(steps, partial_aggregate),
                                                     inputs, partial)
        owners, made = list(inputs.owners), ""
    counts = None
    if not whole and node.options.strategy == "auto" and _uncounted_tree(node, job) is None \
            and partials:
        count = job.stage("count-partial")
        counts = [count.submit(component_rows, f, index=(i,), owner=o)
                  for i, (f, o) in enumerate(zip(partials, owners))]
    return Begun(partial, partials, owners, made, counts,
                 tuple(str(types[k]) for k in node.keys))


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
    if begun.counts is not None:
        rows = sum(job.gather(begun.counts))
        strategy = "tree" if rows <= opts.tree_max_rows else "shuffle"
        seen = f" ({rows:,} partial rows)"
    elif strategy == "auto" and (uncounted := _uncounted_tree(node, job)) is not None:
        strategy, seen, rows, most_rows = "tree", *uncounted
    if strategy == "tree" or not partials:
        lowering.note(node, f"tree: {len(partials)} partials{begun.made} combined "
                            f"{opts.tree_fanin} at a time{seen}")
        ran = last is not None
        reported, steps = finished if ran else (number, after)
        tree = _tree(lowering, node, partial, partials, owners, reported, steps, most_rows)
        # Each group takes one row, and each group has a partial row.
        tree.rows_at_most = 1 if whole else rows
        return tree, ran
    n = len(job.workers) * opts.partitions_per_worker
    lowering.note(node, f"shuffle: partials hashed into {n} buckets{seen}")
    return _shuffle(lowering, node, partial, partials, owners, n, begun.types, number,
                    after), False


def _then(fn: Callable[..., Any], after: tuple[Any, ...]) -> Callable[..., Any]:
    """``fn``, followed by the steps ``after`` where there are any."""
    return StepsAfter(fn, after) if after else fn


def _partials_below(node: GroupBy, lowering: Lowering, partial: Partial
                    ) -> tuple[list[Future], list[str], str] | None:
    """Where ``node`` aggregates, through per-partition nodes that nothing else reads, a read
    or (for a whole-frame aggregate) a join that nothing else reads: the partials, each made
    in the task that makes the partition, after those nodes' steps, so that no task of their
    own waits for it (a scan's partitions hold no placement an aggregate could use; a
    whole-frame aggregate's partials need none, so the join's strategy, decided as it runs,
    cannot matter); their owners, and where they were made. None elsewhere."""
    chain = chain_ending(node.child, lowering)
    base = chain.base if chain is not None else node.child
    if lowering.shared(base) or not (isinstance(base, Scan)
                                     or (isinstance(base, Join) and not node.keys)):
        return None
    if chain is not None:
        chain.fused(lowering, node)
    steps = (chain.steps if chain is not None else ()) + (PartialStep(partial),)
    if isinstance(base, Scan):
        parts, made = lower_scan_partials(base, lowering, steps), ", made in the read's tasks,"
    else:
        parts, made = lower_join_partials(base, lowering, steps), ", made in the join's tasks,"
    return parts.futures, list(parts.owners), made


def _uncounted_tree(node: GroupBy, job: Job) -> tuple[str, int | None, float | None] | None:
    """Where the tree is chosen without counting the partials (a round trip that waits for
    every one of them): by the plan's bound on their rows (:func:`tree_bound`), or, in a job
    that speculates, its estimate (:func:`tree_estimate`), whose tasks then check the rows they
    take (:data:`TREE_SLACK`). The choice's note, the bound on the output's rows, and the most
    rows a tree task may take; None where the partials are counted."""
    if node.options.strategy != "auto":
        return None
    bound = tree_bound(node)
    if bound is not None:
        return f" (at most {bound:,} input rows, uncounted)", bound, None
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

    def split(self, frame: list[Any], index: int) -> list[Any]:
        return self.splitter.split(frame[self.component], index)


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

