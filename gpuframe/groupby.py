"""``groupby(frame, by).agg(...)`` and ``aggregate(frame, ...)``, in pandas' spelling.

Aggregations are named as pandas names them (``total=("x", "sum")``), or given as
``{"x": "sum", "y": ["min", "max"]}`` (the second naming its outputs ``y_min`` and ``y_max``);
the shortcuts (``sum()``, ``mean()``, ...) aggregate every column that is not a key. The result
is a lazy :class:`~gpuframe.frame.DistributedFrame` with the keys as columns (pandas'
``as_index=False``): gpuframe frames have no index. Options of
:class:`~gpuframe.config.GroupByOptions` (``strategy=``, ``tree_max_rows=``, ...) choose how
partial aggregates are combined.

This module builds on the frame without importing it (:class:`~gpuframe.lazy.LazyFrame`
says what it needs), so that the frame's own ``groupby`` and ``agg`` methods may delegate
here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic

from .config import GroupByOptions, resolve
from .errors import OptionError
from .lazy import F
from .plan.aggregate import FUNCTIONS, Aggregation
from .plan.aggregate import GroupBy as GroupByNode
from .plan.nodes import check_columns


class GroupBy(Generic[F]):
    """A frame grouped on ``keys``: nothing is computed until an aggregation is asked for."""

    def __init__(self, frame: F, keys: Sequence[str], dropna: bool,
                 options: GroupByOptions) -> None:
        self.frame = frame
        self.keys = tuple(keys)
        self.dropna = dropna
        self.options = options

    def agg(self, spec: dict[str, Any] | None = None, /,
            **named: tuple[str, str]) -> F:
        """Named aggregations (``total=("x", "sum")``), or a dict of column to function(s)."""
        if spec is not None and named:
            raise OptionError("agg: give a dict or named aggregations, not both")
        aggregations = _from_dict(spec) if spec is not None else _from_named(named)
        return self._aggregate(aggregations)

    aggregate = agg

    def _aggregate(self, aggregations: list[Aggregation]) -> F:
        return self.frame._derive(GroupByNode(self.frame.plan, self.keys, tuple(aggregations),
                                              self.dropna, self.options))

    def _every(self, function: str) -> F:
        values = [c for c in self.frame.meta.columns if c not in self.keys]
        if not values:
            raise OptionError(f"{function}(): the frame has no column besides the keys "
                              f"{list(self.keys)}")
        return self._aggregate([Aggregation(c, c, function) for c in values])

    def sum(self) -> F:
        return self._every("sum")

    def count(self) -> F:
        return self._every("count")

    def mean(self) -> F:
        return self._every("mean")

    def min(self) -> F:
        return self._every("min")

    def max(self) -> F:
        return self._every("max")

    def var(self) -> F:
        return self._every("var")

    def std(self) -> F:
        return self._every("std")

    def nunique(self) -> F:
        return self._every("nunique")

    def first(self) -> F:
        return self._every("first")

    def last(self) -> F:
        return self._every("last")

    def size(self) -> F:
        """Rows per group, in a column named ``size`` (as pandas' ``as_index=False``)."""
        return self._aggregate([Aggregation("size", None, "size")])


def groupby(frame: F, by: str | Sequence[str], dropna: bool = True,
            as_index: bool = False, sort: bool = False, **options: Any) -> GroupBy[F]:
    """``frame`` grouped on the columns ``by``. Missing keys form a group of their own unless
    ``dropna``. The result's rows come in no set order: ``sort_values`` after it for one."""
    keys = [by] if isinstance(by, str) else list(by)
    if not keys:
        raise OptionError("groupby: by= names no column")
    check_columns(keys, frame.meta, "groupby")
    if as_index:
        raise OptionError("groupby(as_index=True): gpuframe frames have no index; the keys "
                          "are columns of the result (as_index=False)")
    if sort:
        raise OptionError("groupby(sort=True) is not supported: call sort_values(by) on the "
                          "result")
    return GroupBy(frame, keys, dropna, resolve(GroupByOptions, options))


def aggregate(frame: F, spec: dict[str, Any] | None = None, /,
              **named: tuple[str, str]) -> F:
    """The whole frame aggregated into one row: named aggregations (``total=("x", "sum")``),
    or a dict of column to function(s)."""
    if spec is not None and named:
        raise OptionError("aggregate: give a dict or named aggregations, not both")
    aggregations = _from_dict(spec) if spec is not None else _from_named(named)
    return frame._derive(GroupByNode(frame.plan, (), tuple(aggregations)))


def _from_named(named: dict[str, tuple[str, str]]) -> list[Aggregation]:
    if not named:
        raise OptionError("agg: no aggregation given; name one as total=('x', 'sum')")
    aggregations = []
    for name, pair in named.items():
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise OptionError(f"agg {name}={pair!r}: give a (column, function) pair")
        column, function = pair
        aggregations.append(Aggregation(name, column, _function(function, name)))
    return aggregations


def _from_dict(spec: dict[str, Any]) -> list[Aggregation]:
    """``{"x": "sum"}`` names its output ``x``; ``{"y": ["min", "max"]}`` ``y_min``,
    ``y_max``."""
    aggregations = []
    for column, functions in spec.items():
        if isinstance(functions, str):
            aggregations.append(Aggregation(column, column, _function(functions, column)))
        else:
            aggregations += [Aggregation(f"{column}_{f}", column, _function(f, column))
                             for f in functions]
    return aggregations


def _function(function: Any, name: str) -> str:
    if not isinstance(function, str) or function not in FUNCTIONS:
        raise OptionError(f"aggregation {name}: unknown function {function!r}; choose one of "
                          f"{', '.join(FUNCTIONS)}")
    return function
