"""The lazy distributed frame: a logical plan on one engine, run when its data is asked for.

Readers, :func:`from_pandas`, :func:`from_dask` and every operator return a
:class:`DistributedFrame` that holds a plan (:mod:`gpuframe.plan`); nothing runs until an action:
``persist()``, ``compute()``/``to_pandas()``, ``len()``, ``head()``, ``to_dask()``, or asking for
the partitions themselves (``futures``, ``owners``, ``npartitions``, ``partition_lengths()``).
An action optimizes the plan, runs it as one job (:mod:`gpuframe.execute`), and the frame keeps
the result's partitions on the workers for later actions, as ``persist()`` would, while it
lives. A frame built on a run frame starts from its partitions.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TextIO

import pandas as pd
from distributed import Future

from . import groupby as grouping
from . import ordering, writers
from .backend import get_backend
from .cluster import memory
from .cluster.engine import Engine, current_engine
from .config import JoinOptions, resolve
from .diagnostics.jobs import operator_stats
from .errors import JoinError, MemoryLimitError, OptionError, UnknownColumnError
from .execute import Execution, in_job, run_plan, submit_plan
from .plan.bounds import rows_at_most
from .plan.explain import Actual, explain
from .plan.expr import Col, Expr, as_expr
from .plan.nodes import (
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
    Select,
)
from .plan.optimize import optimize
from .plan.topk import head_of
from .runtime.runner import Job, Partitions
from .units import byte_text

if TYPE_CHECKING:
    from .exchange.placement import Partitioning
    from .writers import WrittenDataset


class DistributedFrame:
    """A dataframe whose partitions live, once computed, on the workers of one engine."""

    def __init__(self, engine: Engine, plan: Node) -> None:
        self.engine = engine
        self._plan = plan
        self._execution: Execution | None = None
        self._explained: Execution | None = None
        """The last run that ``explain()`` shows: the frame's own, or a ``to_pandas()`` whose
        result the client finished (its output not the frame's partitions)."""

    # --- schema -----------------------------------------------------------------------------

    @property
    def meta(self) -> pd.DataFrame:
        """The schema: an empty pandas frame with the columns and dtypes of ``to_pandas()``."""
        return self._plan.meta

    @property
    def columns(self) -> pd.Index:
        return self.meta.columns

    @property
    def dtypes(self) -> pd.Series:
        return self.meta.dtypes

    @property
    def plan(self) -> Node:
        """What later operators build on: the partitions once run, else the plan."""
        if self._execution is not None:
            return Persisted(self._execution.output)
        return self._plan

    # --- building ---------------------------------------------------------------------------

    def _derive(self, plan: Node) -> DistributedFrame:
        return DistributedFrame(self.engine, plan)

    def __getitem__(self, key: Any) -> Any:
        """``frame["x"]``: the column as an expression; ``frame[["a", "b"]]``: those columns;
        ``frame[condition]``: the rows where it holds."""
        if isinstance(key, Expr):
            return self.filter(key)
        if isinstance(key, (list, tuple, pd.Index)):
            return self._derive(Select(self.plan, tuple(key)))
        if key not in self.columns:
            raise UnknownColumnError(f"column {key!r} is not among the frame's columns "
                                     f"{list(self.columns)}")
        return Col(key)

    def __getattr__(self, name: str) -> Col:
        """``frame.x``: the column ``x`` as an expression, where no attribute has the name."""
        plan = self.__dict__.get("_plan")
        if name.startswith("_") or plan is None or name not in plan.meta.columns:
            raise AttributeError(f"{type(self).__name__} has no attribute or column {name!r}")
        return Col(name)

    def __setitem__(self, name: str, value: Any) -> None:
        """``frame["c"] = expression``: the frame becomes itself with that column."""
        self._plan = Assign(self.plan, ((name, as_expr(value)),))
        self._execution = self._explained = None

    def filter(self, condition: Expr) -> DistributedFrame:
        """The rows where ``condition`` holds (a missing result keeps no row)."""
        return self._derive(Filter(self.plan, condition))

    def select(self, *names: str) -> DistributedFrame:
        return self._derive(Select(self.plan, names))

    def assign(self, **columns: Any) -> DistributedFrame:
        """New or replaced columns, each an expression (or a scalar) over the columns before
        it, in the order given."""
        items = tuple((name, as_expr(value)) for name, value in columns.items())
        return self._derive(Assign(self.plan, items))

    def rename(self, columns: dict[str, str] | None = None, *,
               errors: str = "ignore") -> DistributedFrame:
        """Columns renamed by ``columns``; ``errors="raise"`` refuses names not in the frame."""
        mapping = dict(columns or {})
        if errors not in ("ignore", "raise"):
            raise OptionError(f"errors={errors!r}: choose 'ignore' or 'raise'")
        missing = [name for name in mapping if name not in self.columns]
        if errors == "raise" and missing:
            raise UnknownColumnError(f"rename: column(s) {missing} not among the frame's "
                                     f"columns {list(self.columns)}")
        return self._derive(Rename(self.plan, mapping))

    def astype(self, dtype: Any) -> DistributedFrame:
        """Columns cast: ``dtype`` is one dtype for all, or ``{column: dtype}``."""
        dtypes = dict(dtype) if isinstance(dtype, dict) else {c: dtype for c in self.columns}
        return self._derive(AsType(self.plan, dtypes))

    def map_partitions(self, fn: Callable[..., Any], *args: Any, meta: pd.DataFrame | None = None,
                       **kwargs: Any) -> DistributedFrame:
        """``fn(partition, *args, **kwargs)`` on every partition, where it lies (a pandas or
        cuDF frame in, one out). ``meta``: the result's schema (an empty pandas frame); by
        default ``fn`` is called on an empty partition to learn it."""
        return self._derive(MapPartitions(self.plan, fn, args, kwargs, meta))

    def merge(self, other: DistributedFrame, on: Any = None, **kwargs: Any) -> DistributedFrame:
        """Join with ``other`` like ``pandas.merge``; see :func:`gpuframe.merge`."""
        return merge(self, other, on, **kwargs)

    def groupby(self, by: str | Sequence[str], dropna: bool = True, **options: Any
                ) -> grouping.GroupBy[DistributedFrame]:
        """Groups of rows by ``by``, to aggregate (``.agg(total=("x", "sum"))``); the keys
        come back as columns (pandas' ``as_index=False``). See :mod:`gpuframe.groupby`."""
        return grouping.groupby(self, by, dropna=dropna, **options)

    def agg(self, spec: dict[str, Any] | None = None, /, **named: Any) -> DistributedFrame:
        """The whole frame aggregated into one row: ``frame.agg(total=("x", "sum"))``."""
        return grouping.aggregate(self, spec, **named)

    def value_counts(self, subset: str | Sequence[str] | None = None, sort: bool = True,
                     ascending: bool = False, dropna: bool = True) -> DistributedFrame:
        """Rows per distinct value of ``subset`` (all columns by default), as pandas'
        ``DataFrame.value_counts``, with the values as columns beside ``count``."""
        keys = list(self.columns) if subset is None else (
            [subset] if isinstance(subset, str) else list(subset))
        counted = grouping.groupby(self, keys, dropna=dropna).agg(count=(keys[0], "size"))
        return ordering.sort_values(counted, "count", ascending=ascending) if sort else counted

    def sort_values(self, by: str | Sequence[str], ascending: bool | Sequence[bool] = True,
                    na_position: str = "last") -> DistributedFrame:
        """Rows in pandas' (stable) order of ``by``, range-partitioned: ``to_pandas()`` comes
        back sorted, and ``head(n)`` right after is a top-k that sorts nothing whole."""
        return ordering.sort_values(self, by, ascending, na_position)

    def nlargest(self, n: int, columns: str | Sequence[str], keep: str = "first"
                 ) -> DistributedFrame:
        """The ``n`` rows of largest ``columns``, as pandas'; no full sort."""
        return ordering.nlargest(self, n, columns, keep)

    def nsmallest(self, n: int, columns: str | Sequence[str], keep: str = "first"
                  ) -> DistributedFrame:
        """The ``n`` rows of smallest ``columns``, as pandas'; no full sort."""
        return ordering.nsmallest(self, n, columns, keep)

    def drop_duplicates(self, subset: str | Sequence[str] | None = None,
                        keep: str | bool = "first") -> DistributedFrame:
        """pandas' ``drop_duplicates``: the same rows kept, hash-partitioned on ``subset``."""
        return ordering.drop_duplicates(self, subset, keep)

    # --- actions ------------------------------------------------------------------------------

    def run_within(self, job: Job, keep_read_stats: bool = False) -> Execution:
        """Run the frame's plan within ``job`` the first time it is asked; the run."""
        if self._execution is None:
            self._execution = run_plan(job, self._plan, keep_read_stats)
        return self._execution

    def _run(self, job: Job) -> Partitions:
        return self.run_within(job).output

    def persist(self) -> DistributedFrame:
        """Run the plan (once) and keep the partitions on the workers; returns this frame."""
        in_job(self.engine, "persist", self._run)
        return self

    @property
    def partitions(self) -> Partitions:
        """The computed partitions (running the plan first if it has not run)."""
        if self._execution is None:
            self.persist()
        assert self._execution is not None
        return self._execution.output

    @property
    def futures(self) -> list[Future]:
        return self.partitions.futures

    @property
    def owners(self) -> list[str]:
        """The worker that holds each partition."""
        return self.partitions.owners

    @property
    def npartitions(self) -> int:
        return len(self.partitions)

    @property
    def partitioning(self) -> Partitioning | None:
        """How the computed rows are placed (None: nothing known)."""
        return self.partitions.partitioning

    def partition_lengths(self) -> list[int]:
        """Rows in each partition, counted on the workers once and remembered."""
        def count(job: Job) -> list[int]:
            parts = self._run(job)
            if parts.lengths is None:
                parts.lengths = job.gather(job.stage("count").map(len, parts, strict=False))
            return list(parts.lengths)

        return in_job(self.engine, "count", count)

    def __len__(self) -> int:
        return sum(self.partition_lengths())

    def nbytes(self) -> int:
        """Bytes the partitions hold in worker memory (device memory on the cudf backend)."""
        def held(job: Job) -> int:
            parts = self._run(job)
            stage = job.stage("nbytes")
            return sum(job.gather(stage.map(_nbytes, parts, job.backend, strict=False)))

        return in_job(self.engine, "nbytes", held)

    def head(self, n: int = 5) -> pd.DataFrame:
        """The first ``n`` rows as pandas, fetched from as few partitions as hold them (all of
        them for a merge with ``sort=True``, whose order exists only once gathered)."""
        if isinstance(self._plan, Join) and self._plan.sort:
            return self.to_pandas().head(n)
        top = head_of(self._plan, n) if self._execution is None else None
        if top is not None:  # a sort not run yet: its first rows without sorting it whole
            return self._derive(top).to_pandas()
        lengths = self.partition_lengths()

        def first_rows(job: Job) -> pd.DataFrame:
            parts = self._run(job)
            stage = job.stage("head")
            futures, need = [], n
            for i, (future, length, owner) in enumerate(zip(parts.futures, lengths,
                                                            parts.owners)):
                if need <= 0:
                    break
                if length:
                    futures.append(stage.submit(_head_as_pandas, future, need, job.backend,
                                                index=(i,), owner=owner, strict=False))
                    need -= length
            if not futures:
                return self.meta.head(0)
            return pd.concat(job.gather(futures), ignore_index=True)

        return in_job(self.engine, "head", first_rows)

    def to_pandas(self) -> pd.DataFrame:
        """Every partition, converted to pandas on its worker and concatenated in order, with
        a RangeIndex as pandas gives a merge's result. A merge with ``sort=True`` is sorted
        here, on the client: its partitions are hashed on the keys, not ranged. A frame the
        client has no memory for raises :class:`~gpuframe.errors.MemoryLimitError` before
        anything is gathered."""
        def gather(job: Job) -> pd.DataFrame:
            execution = self._execution or submit_plan(job, self._plan, to_client=True)
            parts = execution.output
            if execution.finish is not None:
                # Its partitions are the inputs of the client's last step, not the frame's:
                # the run is kept for explain() alone, unless the workers finish after all.
                self._explained = execution
                done = execution.finish(job, parts.futures)
                if isinstance(done, pd.DataFrame):
                    return done
                execution, parts = replace(execution, output=done, finish=None), done
            converted = job.stage("gather").map(_as_pandas, parts, job.backend, strict=False)
            job.wait(converted)  # and so the partitions they convert
            self._execution = execution
            if not converted:
                return self.meta.copy()
            bound = parts.rows_at_most if parts.rows_at_most is not None \
                else rows_at_most(execution.plan)
            if bound is None or bound > UNMEASURED_ROWS:
                _check_fits_here(job.held_bytes(converted), len(converted))
            return pd.concat(job.gather(converted), ignore_index=True)

        gathered = in_job(self.engine, "to_pandas", gather)
        if isinstance(self._plan, Join) and self._plan.sort:
            return sorted_by_keys(gathered, self._plan)
        return gathered

    compute = to_pandas

    def to_dask(self) -> Any:
        """A dask.dataframe over the same partitions (dask_cudf-backed on the cudf backend)."""
        import dask
        import dask.dataframe as dd

        parts = self.partitions
        meta = self.engine.backend.from_pandas(self.meta)
        return dd.from_delayed([dask.delayed(f) for f in parts.futures], meta=meta,
                               verify_meta=False)

    def write_parquet(self, path: str | os.PathLike[str], **options: Any) -> WrittenDataset:
        """Write the frame as a Parquet dataset, atomically: see
        :func:`gpuframe.writers.write_parquet` for ``partition_on=``, ``compression=``,
        ``overwrite=`` and the storage options."""
        return writers.write_parquet(self, path, **options)

    def explain(self, file: TextIO | None = None) -> None:
        """Print the optimized plan: every operator with its estimated rows and bytes, where
        filters and projections landed, each join's strategy, and, once the frame has run,
        what each operator really output and decided."""
        workers = len(self.engine.workers)
        ran = self._execution or self._explained
        if ran is None:
            text = explain(optimize(self._plan), workers)
        else:
            stats = operator_stats(ran.job, self.engine)
            actual = {node: Actual(s["rows"], s["bytes"], s["partitions"])
                      for node, s in stats.items()}
            text = explain(ran.plan, workers, actual, ran.notes)
        print(text, file=file or sys.stdout)

    def __repr__(self) -> str:
        columns = ", ".join(f"{c}: {t}" for c, t in self.meta.dtypes.items())
        state = (f"npartitions={self.npartitions}" if self._execution is not None
                 else "lazy")
        return (f"<gpuframe DistributedFrame {state} backend={self.engine.backend.name} "
                f"[{columns}]>")


GATHER_COPIES = 2
"""The bytes ``to_pandas()`` holds at its peak, in multiples of the frame's: the gathered
partitions, and their concatenation."""
UNMEASURED_ROWS = 1_000
"""``to_pandas()`` of a frame the plan bounds to this many rows (an aggregate's, a head's) is
gathered without asking the scheduler what its partitions hold: a round trip to the scheduler
at the end of every such query, for rows that no client lacks the memory for."""


def _check_fits_here(nbytes: int, npartitions: int) -> None:
    """Raise :class:`MemoryLimitError` where gathering ``nbytes`` of partitions into one frame
    needs more memory than this process has available."""
    needed = GATHER_COPIES * nbytes
    available = memory.available_here()
    if needed > available:
        raise MemoryLimitError(
            f"to_pandas(): the frame's {npartitions} partitions hold {byte_text(nbytes)} on the "
            f"workers; gathering and concatenating them here needs about {byte_text(needed)}, "
            f"and this process has {byte_text(available)} of memory available. Reduce the "
            "frame first (filter, select, aggregate), take head(), or write it with "
            "write_parquet()")


def _as_pandas(partition: Any, backend: str) -> pd.DataFrame:
    return get_backend(backend).to_pandas(partition)


def _nbytes(partition: Any, backend: str) -> int:
    return get_backend(backend).nbytes(partition)


def _head_as_pandas(partition: Any, n: int, backend: str) -> pd.DataFrame:
    return get_backend(backend).to_pandas(partition.head(n))


def from_pandas(frame: pd.DataFrame, npartitions: int | None = None,
                engine: Engine | None = None) -> DistributedFrame:
    """``frame`` cut into ``npartitions`` contiguous row ranges (default: one per worker),
    placed on the workers round robin when the frame runs."""
    engine = current_engine(engine)
    return DistributedFrame(engine, FromPandas(engine.backend.held(frame), npartitions))


def from_dask(collection: Any, engine: Engine | None = None) -> DistributedFrame:
    """A dask.dataframe collection, computed on the engine's cluster when the frame runs."""
    return DistributedFrame(current_engine(engine), FromDask(collection))


def merge(left: DistributedFrame, right: DistributedFrame, on: str | Sequence[str] | None = None,
          *, left_on: str | Sequence[str] | None = None,
          right_on: str | Sequence[str] | None = None, how: str = "inner",
          suffixes: Sequence[str] = ("_x", "_y"), indicator: bool | str = False,
          validate: str | None = None, sort: bool = False, left_index: bool = False,
          right_index: bool = False, **options: Any) -> DistributedFrame:
    """Join two frames of one engine like ``pandas.merge`` (plus 'leftsemi' and 'leftanti',
    which keep the left side's columns only; pandas 3's 'left_anti'/'right_anti' keep both
    sides' columns, as pandas).

    - ``how="cross"``: every left row with every right row; no keys; the smaller side is
      copied to every partition of the other.
    - ``validate=``: checked by the join tasks, each on all the rows of the keys it holds; a
      side whose keys repeat raises :class:`~gpuframe.operators.join_schema.KeysNotUniqueError`
      (a ``pandas.errors.MergeError``) when the join runs.
    - ``indicator=``: True (``_merge``) or a column name, categorical as pandas'.
    - ``sort=True``: ``to_pandas()`` of this frame comes sorted by the keys, sorted as it is
      gathered; the partitions, and frames built on this one, are not sorted (sort_values is).
      Rows of equal keys come in the order the join tasks give them, which is pandas' where
      one key's rows come from one partition of each side.
    - ``left_index``/``right_index``: refused. A gpuframe frame has no index: each partition's
      RangeIndex counts its own rows only, so pandas' join on a RangeIndex (a join on row
      numbers) has nothing to join on; join on a column of row numbers instead.

    ``options`` are the fields of :class:`~gpuframe.config.JoinOptions`: when to broadcast,
    how to split heavy keys, how many join tasks per worker.
    """
    opts = resolve(JoinOptions, options,
                   defaults={"broadcast_bytes": left.engine.backend.broadcast_bytes})
    if left.engine is not right.engine:
        raise JoinError("both frames of a join must live on the same engine")
    for name, value in (("left_index", left_index), ("right_index", right_index)):
        if value:
            raise JoinError(f"{name}=True: gpuframe frames have no index (a partition's "
                            "RangeIndex counts its own rows only); join on a column instead")
    if indicator is True:
        indicator = "_merge"
    plan = Join.of(left.plan, right.plan, on, left_on, right_on, how, tuple(suffixes), opts,
                   left.engine.backend.name, indicator or None, validate, sort)
    return DistributedFrame(left.engine, plan)


def sorted_by_keys(frame: pd.DataFrame, join: Join) -> pd.DataFrame:
    """``frame``, the gathered rows of ``join``, in the order ``pandas.merge(sort=True)`` gives:
    by the keys lexicographically, stable; an outer join of keys named differently sorts by
    the left key, the right one where the row has no left side."""
    side = "right" if join.how in ("right", "right_anti") else "left"
    names = join.key_columns(side)
    if not names:
        return frame
    keys = frame[names].set_axis(range(len(names)), axis=1)
    if join.how == "outer":
        right = frame[join.key_columns("right")].set_axis(range(len(names)), axis=1)
        keys = keys.where(keys.notna(), right)
    order = keys.sort_values(list(keys.columns), kind="stable").index
    return frame.take(order).reset_index(drop=True)
