"""The frame API of ``pandas_engine`` on a dask.dataframe collection, as a baseline for gpuframe.

The TPC-H queries run on it unchanged: with the pandas backend on CPU workers, or as dask_cudf
(``dask.config`` ``"dataframe.backend": "cudf"``) on GPU workers, whose partitions are cuDF
frames. Filters and new columns evaluate gpuframe's expressions on each partition; joins, groupbys
and sorts are dask.dataframe's own. Everything stays lazy until ``head`` or ``to_pandas``, which
compute on the current Dask client and give a pandas frame.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dask.dataframe as dd
import pandas as pd
from dask.dataframe.utils import meta_nonempty

from gpuframe.plan.expr import Expr

from .pandas_engine import PandasFrame, PandasGroupBy, evaluated

COMBINE = {"sum": "sum", "count": "sum", "size": "sum", "min": "min", "max": "max"}
"""How the partitions' partial results of a whole-frame aggregate combine; a mean is a sum and
a count."""


class DaskGroupBy(PandasGroupBy):
    def agg(self, **named: tuple[str, str]) -> PandasFrame:
        """dask.dataframe's ``agg`` has no ``nunique``: each is a ``SeriesGroupBy.nunique``,
        joined to the other aggregates on the keys."""
        grouped = self._grouped()
        distinct = {name: column for name, (column, how) in named.items() if how == "nunique"}
        others = {name: spec for name, spec in named.items() if name not in distinct}
        parts = [grouped[column].nunique().rename(name).reset_index()
                 for name, column in distinct.items()]
        if others:
            parts.insert(0, _named(grouped, others).reset_index())
        joined = functools.reduce(lambda left, right: left.merge(right, on=self._keys), parts)
        return self._frame._new(joined[[*self._keys, *named]])


class DaskFrame(PandasFrame):
    """A dask.dataframe collection behind gpuframe's frame API."""

    grouping = DaskGroupBy

    def _evaluated(self, data: Any, expression: Expr, mask: bool = False) -> Any:
        """``expression`` on every partition of the columns it reads, so that Dask's optimizer
        still prunes the columns the read fetches (a function of whole partitions would need
        them all); the meta is the expression on the collection's meta."""
        used = data[sorted(expression.columns())]
        return used.map_partitions(evaluated, expression, mask,
                                   meta=evaluated(used._meta, expression, mask))

    @staticmethod
    def _cross(left: Any, right: Any, suffixes: tuple[str, ...]) -> Any:
        """A join on one constant key: dask.dataframe has no cross join. The queries' right
        side is a one-row aggregate, one partition, which Dask sends to every left one."""
        return (left.assign(_cross=0).merge(right.assign(_cross=0), on="_cross",
                                            suffixes=suffixes).drop(columns="_cross"))

    def agg(self, **named: tuple[str, str]) -> DaskFrame:
        """A one-row frame of whole-frame aggregates, reduced as a tree of partial
        aggregates."""
        data = self._data
        meta = _totals(_partials(meta_nonempty(data._meta), named), named)
        return DaskFrame(data.reduction(_partials, aggregate=_totals, combine=_combined,
                                        meta=meta, named=named))

    def head(self, n: int = 5) -> pd.DataFrame:
        """The first ``n`` rows, computed: they may lie in any partitions."""
        return _pandas(self._data.head(n, npartitions=-1))

    def to_pandas(self) -> pd.DataFrame:
        return _pandas(self._data.compute()).reset_index(drop=True)

    compute = to_pandas


def _named(grouped: Any, named: dict[str, tuple[str, str]]) -> Any:
    """Named aggregations in the form dask_cudf takes too (cuDF's groupby has no named ones):
    lists of functions per column, the result's columns renamed."""
    spec: dict[str, list[str]] = {}
    for column, how in named.values():
        if how not in spec.setdefault(column, []):
            spec[column].append(how)
    result = grouped.agg(spec)
    result.columns = [f"{column}/{how}" for column, hows in spec.items() for how in hows]
    picked = result[[f"{column}/{how}" for column, how in named.values()]]
    picked.columns = list(named)
    return picked


def _partials(data: Any, named: dict[str, tuple[str, str]]) -> Any:
    """One row of the aggregates' partial results on ``data``, in the backend's type."""
    row = {}
    for name, (column, how) in named.items():
        if how not in COMBINE and how != "mean":
            raise ValueError(f"agg({name}=({column!r}, {how!r})): the whole-frame aggregates "
                             f"here are {', '.join([*COMBINE, 'mean'])}")
        for part in ("sum", "count") if how == "mean" else (how,):
            values = data[column]
            row[f"{name}/{part}"] = len(values) if part == "size" else getattr(values, part)()
    return type(data)({key: [value] for key, value in row.items()})


def _combined(partials: Any, named: dict[str, tuple[str, str]]) -> Any:
    return type(partials)({key: [getattr(partials[key], COMBINE[key.rpartition("/")[2]])()]
                           for key in partials.columns})


def _totals(partials: Any, named: dict[str, tuple[str, str]]) -> Any:
    row = _combined(partials, named)
    return type(row)({
        name: row[f"{name}/sum"] / row[f"{name}/count"] if how == "mean" else row[f"{name}/{how}"]
        for name, (_, how) in named.items()})


def _pandas(frame: Any) -> pd.DataFrame:
    """A computed result as pandas (dask_cudf's are cuDF frames)."""
    return frame if isinstance(frame, pd.DataFrame) else frame.to_pandas()


def read_parquet(path: str | Path, columns: Sequence[str] | None = None) -> DaskFrame:
    """A table's Parquet folder as a collection of the current ``dataframe.backend``."""
    return DaskFrame(dd.read_parquet(str(path), columns=None if columns is None else list(columns)))
