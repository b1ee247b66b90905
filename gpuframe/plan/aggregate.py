"""The aggregation node: ``groupby(keys).agg(...)``, and an aggregate of the whole frame.

A :class:`GroupBy` names its keys and its :class:`Aggregation` s, each an output column made by
one function of one input column, as pandas' named aggregation does. Its schema is what pandas
gives for ``frame.groupby(keys, as_index=False, dropna=...).agg(**named)``: the keys as columns,
then the aggregates in the order given. With no keys it aggregates the whole frame into one row.
How it runs: :mod:`gpuframe.operators.groupby`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..config import GroupByOptions
from ..errors import OptionError
from ..remembered import schema_key
from .nodes import Node, check_columns

FUNCTIONS = ("sum", "count", "size", "mean", "min", "max", "var", "std", "nunique", "first",
             "last")
"""The aggregation functions, with pandas' meanings (var and std with ddof=1; count, nunique,
first and last skip missing values)."""
STRATEGIES = ("auto", "tree", "shuffle")


@dataclass(frozen=True)
class Aggregation:
    """Output column ``name`` is ``function`` of input ``column`` per group (``size`` reads no
    column: ``column`` is None)."""

    name: str
    column: str | None
    function: str

    def describe(self) -> str:
        return f"{self.name}={self.function}({self.column or ''})"


@dataclass(eq=False)
class GroupBy(Node):
    """One row per distinct ``keys`` (missing keys form a group unless ``dropna``), holding
    the ``aggregations``; with no keys, one row for the whole frame."""

    child: Node
    keys: tuple[str, ...]
    aggregations: tuple[Aggregation, ...]
    dropna: bool = True
    options: GroupByOptions = field(default_factory=GroupByOptions)
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_columns(self.keys, self.child.meta, "groupby")
        if len(set(self.keys)) != len(self.keys):
            raise OptionError(f"groupby: keys {list(self.keys)} name one column twice")
        if not self.aggregations:
            raise OptionError("groupby: no aggregation given")
        if self.options.strategy not in STRATEGIES:
            raise OptionError(f"groupby strategy={self.options.strategy!r}: choose one of "
                              f"{', '.join(STRATEGIES)}")
        for agg in self.aggregations:
            if agg.function not in FUNCTIONS:
                raise OptionError(f"aggregation {agg.name}: unknown function {agg.function!r}; "
                                  f"choose one of {', '.join(FUNCTIONS)}")
            if agg.column is None and agg.function != "size":
                raise OptionError(f"aggregation {agg.name}: {agg.function} needs a column")
        check_columns([a.column for a in self.aggregations if a.column is not None],
                      self.child.meta, "aggregate")
        names = list(self.keys) + [a.name for a in self.aggregations]
        if len(set(names)) != len(names):
            raise OptionError(f"groupby: output columns {names} name one column twice")
        self.meta = aggregate_schema(self.child.meta, self.keys, self.aggregations)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    def with_children(self, children: Sequence[Node]) -> Node:
        return GroupBy(children[0], self.keys, self.aggregations, self.dropna, self.options)

    @property
    def inputs(self) -> set[str]:
        """The input columns the aggregate reads: the keys and the aggregated columns."""
        return set(self.keys) | {a.column for a in self.aggregations if a.column is not None}

    def describe(self) -> str:
        aggs = ", ".join(a.describe() for a in self.aggregations)
        if not self.keys:
            return f"Aggregate {aggs}"
        dropna = "" if self.dropna else " dropna=False"
        return f"GroupBy [{', '.join(self.keys)}]{dropna} {aggs}"


def aggregate_schema(meta: pd.DataFrame, keys: Sequence[str],
                     aggregations: Sequence[Aggregation]) -> pd.DataFrame:
    """The schema pandas gives the aggregate of a frame of schema ``meta``, learnt from one
    row of it (on no rows pandas gives some means another dtype than on data). A sum of
    integers is 64 bits wide: pandas keeps the input's width only where every group's sum
    fits it, which no schema can know beforehand.

    Only the columns read matter, and the answer depends on nothing but their dtypes: it is
    remembered by them, since the optimizer rebuilds a plan's aggregates several times per
    query and pandas takes milliseconds for each."""
    used = dict.fromkeys([*keys, *(a.column for a in aggregations if a.column is not None)])
    known = dict(schema_key(meta))
    dtypes = tuple((name, known[name]) for name in used)
    return _schema_of(dtypes, tuple(keys), tuple(aggregations)).copy()


@functools.lru_cache(maxsize=1024)
def _schema_of(dtypes: tuple[tuple[str, Any], ...], keys: tuple[str, ...],
               aggregations: tuple[Aggregation, ...]) -> pd.DataFrame:
    meta = pd.DataFrame({name: pd.Series([], dtype=dtype) for name, dtype in dtypes})
    sample = sample_row(meta)
    by = list(keys)
    if not by:
        by = ["__gpuframe_all__"]
        sample = sample.assign(__gpuframe_all__=0)
    named = {a.name: (a.column if a.column is not None else by[0], a.function)
             for a in aggregations}
    result = sample.groupby(by, as_index=False, dropna=False, sort=False).agg(**named)
    if not keys:
        result = result.drop(columns=by[0])
    wide = {a.name: np.dtype("uint64" if meta[a.column].dtype.kind == "u" else "int64")
            for a in aggregations if a.function == "sum" and a.column is not None
            and isinstance(meta[a.column].dtype, np.dtype) and meta[a.column].dtype.kind in "iub"}
    return result.astype(wide).head(0)


def sample_row(meta: pd.DataFrame) -> pd.DataFrame:
    """One row of ``meta``'s dtypes: a zero cast to each, a text for objects (which, as keys,
    pandas then types as strings, as it does a column of strings), a categorical's first
    category; a column that can take none of these stays empty-valued."""
    columns = {}
    for name, dtype in meta.dtypes.items():
        value: object = "0" if pd.api.types.is_object_dtype(dtype) else 0
        if isinstance(dtype, pd.CategoricalDtype):
            value = dtype.categories[0] if len(dtype.categories) else None
        try:
            columns[name] = pd.Series([value]).astype(dtype)
        except (TypeError, ValueError):
            columns[name] = pd.Series([None], dtype=dtype)
    return pd.DataFrame(columns)
