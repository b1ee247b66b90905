"""What a groupby's tasks run (:mod:`~.groupby` lowers the operator to them): each partition's
partial aggregates (:func:`partial_aggregate`, or :class:`PartialStep` as the last step of the
task that makes the partition), partials merged (:func:`combine`, :func:`combine_partials`) and
finalized into the result's rows (:func:`finalize`, :func:`finish_partials`,
:func:`finish_bucket`), all to one :class:`Partial`, the state every task of one groupby holds;
or, for an action that fetches a small aggregate, the partials made host frames where they are
(:class:`HostStep`) and finished by the client (:class:`ClientFinish`).

The same code runs on pandas and cuDF partitions: both share the groupby API used here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any, NamedTuple

import pandas as pd

from ..backend import Backend, get_backend
from ..errors import SpeculationError
from ..exchange.mailbox import arrivals
from ..exchange.splitters import cast_keys
from ..plan.aggregate import Aggregation
from ..sent_schemas import SendsSchemas

WHOLE = "__gpuframe_all__"
"""The constant key a whole-frame aggregate groups by."""
ROWS = "__gpuframe_rows__"
"""A constant column whose count per group is the group's size (whatever the column that
``size`` names holds)."""
VALUE = "__gpuframe_value__"
"""The value column of a nunique's distinct (keys, value) pairs (which may be a key's)."""


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
    main = get_backend(partial.backend).grouped(
        part, keys, [(c.name, c.source, c.function) for c in made], partial.dropna)
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
            main = _chan(main, keys, f"__{i}", get_backend(partial.backend))
    merged = get_backend(partial.backend).grouped(
        main, keys, [(c.name, c.name, c.merge) for c in partial.columns()], dropna=False)
    return [merged] + [frame.drop_duplicates() for frame in components[1:]]


def _chan(main: Any, keys: list[str], prefix: str, frames: Backend) -> Any:
    """Each partial's (n, mean, m2) turned into its share of the merged group's: the mean
    becomes the group's, and m2 gains ``n * (mean - group mean)**2`` (Chan et al.)."""
    n, mean, m2 = main[f"{prefix}_n"], main[f"{prefix}_mean"], main[f"{prefix}_m2"]
    weighted = (mean * n).fillna(0)
    main = main.assign(**{f"{prefix}_weighted": weighted})
    grouped = main.groupby(keys, dropna=False, sort=False)
    total = grouped[f"{prefix}_n"].transform("sum")
    group_mean = frames.divide(grouped[f"{prefix}_weighted"].transform("sum"), total)
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
            out[agg.name] = frames.divide(main[f"__{i}_sum"],
                                          main[f"__{i}_n"].where(main[f"__{i}_n"] > 0))
        elif agg.function in ("var", "std"):
            n = main[f"__{i}_n"]
            var = frames.divide(main[f"__{i}_m2"], (n - 1).where(n > 1))
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
    # Partials made for the client (:class:`HostStep`), where some others were not: the
    # workers finish them all.
    partials = [[frames.adopt(c) for c in p] if isinstance(p, HostPartials) else p
                for p in partials] or [empty_partials(partial)]
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


@dataclass(frozen=True)
class PartialStep:
    """A partition's partials as the last step of the task that makes the partition (a join's,
    :func:`~.join.lower_join_partials`): the partials leave that task rather than the partition,
    and no task of its own is waited for."""

    partial: Partial

    def apply(self, frame: Any) -> list[Any]:
        return partial_aggregate(frame, self.partial)


class HostPartials(list):
    """A partition's partials as pandas frames (:class:`HostStep`), whatever the workers'
    backend: the type the client learns as each finishes tells it that it may gather them."""

    @classmethod
    def of(cls, components: list[Any], backend: str) -> HostPartials:
        return cls(get_backend(backend).to_pandas(frame) for frame in components)


@dataclass(frozen=True)
class HostStep:
    """A partition's partials as pandas (:class:`HostPartials`), as the last step of the task
    that makes them, for the client to finish (:class:`ClientFinish`). With ``keep_past`` (the
    plan did not bound them), partials of more rows stay as they are, for the workers' tree."""

    backend: str
    keep_past: int | None = None

    def apply(self, components: list[Any]) -> list[Any]:
        if self.keep_past is not None and component_rows(components) > self.keep_past:
            return components
        return HostPartials.of(components, self.backend)


@dataclass(frozen=True)
class CountOrFetch:
    """The count task of partials the client may finish: their rows, or, where they hold at
    most ``limit``, the partials themselves as host frames (:class:`HostPartials`), which the
    count's own gather brings to the client: it finishes them with no task and no round trip
    more (a conversion stage and a gather of its output)."""

    backend: str
    limit: int

    def __call__(self, components: list[Any]) -> int | HostPartials:
        rows = component_rows(components)
        return rows if rows > self.limit else HostPartials.of(components, self.backend)


def counted_rows(counted: int | HostPartials) -> int:
    """Rows a :class:`CountOrFetch` task found."""
    return counted if isinstance(counted, int) else component_rows(counted)


@dataclass(frozen=True)
class ClientFinish:
    """On the client, an action's result from its aggregate's partials, fetched as pandas: the
    partials merged and finalized, then ``steps`` (the per-partition nodes, sort or top-k above
    the aggregate) applied, all on the pandas backend. Where a query's answer is a few groups,
    this replaces a transfer to one worker, its task and a conversion task, each a scheduler
    round trip, with pandas' work on a few rows."""

    partial: Partial
    steps: tuple[Any, ...]

    @classmethod
    def of(cls, partial: Partial, steps: tuple[Any, ...]) -> ClientFinish:
        """The finish of ``partial``'s groupby and of ``steps``, made for the pandas backend
        (their ``backend`` fields named it) whatever the workers' is."""
        return cls(replace(partial, backend="pandas"), tuple(_on_pandas(s) for s in steps))

    def __call__(self, partials: list[list[pd.DataFrame]]) -> pd.DataFrame:
        frame = finish_partials(partials, self.partial)
        for step in self.steps:
            frame = step.apply(frame)
        return frame.reset_index(drop=True)


def _on_pandas(step: Any) -> Any:
    """``step`` for the pandas backend: one that names a backend, with pandas' name."""
    named = is_dataclass(step) and any(f.name == "backend" for f in fields(step))
    return replace(step, backend="pandas") if named else step
