"""cuDF frames' row gathers, groupbys and joins made by pylibcudf directly.

cuDF's own ``iloc``, ``groupby().agg`` and ``merge`` check their arguments, rename through
pandas objects and wait for the device in Python: milliseconds a call, more than the GPU's work
on a partition of a few thousand or million rows, in tasks that run them for every partition of
every query (benchmarks/results/2026-11-29-s39-gpu-h200.md, 2026-11-29-s40-gpu-h200.md). Here
each takes the plain cases, whose results are the same as cuDF's, and answers None for the
rest, which the caller hands to cuDF. cuDF and pylibcudf are imported inside the functions, so
importing this module needs neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

AGGREGATIONS = ("sum", "count", "mean", "min", "max")
"""The groupby functions :func:`grouped` hands pylibcudf, each its aggregation's name there."""
JOINS = {"inner": "inner_join", "left": "left_join", "leftsemi": "left_semi_join",
         "leftanti": "left_anti_join"}
"""The joins :func:`joined` hands pylibcudf, by pylibcudf's function."""


def cudf_frame(columns: dict[Any, tuple[Any, Any]]) -> Any:
    """A cuDF DataFrame of pylibcudf columns, each in the cuDF dtype given beside it, with a
    RangeIndex: pylibcudf's default dtype for a column's type would lose pandas' nullable and
    zoned dtypes, which cuDF keeps on its columns."""
    import cudf
    from cudf.core.column import ColumnBase
    from cudf.core.column_accessor import ColumnAccessor

    return cudf.DataFrame._from_data(ColumnAccessor(
        {label: ColumnBase.create(column, dtype) for label, (column, dtype) in columns.items()},
        verify=False, rangeindex=not columns))


def gathered(frame: Any, rows: Any, nullify: bool = False) -> dict[Any, tuple[Any, Any]]:
    """``frame``'s columns at the positions of pylibcudf column ``rows``, each with its
    dtype, for :func:`cudf_frame`; positions out of bounds give missing values where
    ``nullify``, and are not checked otherwise."""
    import pylibcudf as plc

    policy = plc.copying.OutOfBoundsPolicy
    labelled = list(frame._column_labels_and_values)
    table = plc.copying.gather(plc.Table([column.plc_column for _, column in labelled]), rows,
                               policy.NULLIFY if nullify else policy.DONT_CHECK)
    return {label: (taken, column.dtype)
            for (label, column), taken in zip(labelled, table.columns())}


def distinct_functions(columns: Sequence[tuple[str, str, str]]
                       ) -> tuple[dict[tuple[str, str], str], dict[str, list[str]]]:
    """Of a groupby's (name, column, function) triples: the first name of each distinct
    (column, function), and the functions of each column, in order."""
    first: dict[tuple[str, str], str] = {}
    for name, column, function in columns:
        first.setdefault((column, function), name)
    spec: dict[str, list[str]] = {}
    for column, function in first:
        spec.setdefault(column, []).append(function)
    return first, spec


def grouped(frame: Any, keys: Sequence[str], columns: Sequence[tuple[str, str, str]],
            dropna: bool) -> Any:
    """What ``Backend.grouped`` gives, for sums, counts, means, least and greatest values of
    plain numbers (counts of any column), in the dtypes cuDF's ``agg`` gives them (counts
    int64, where libcudf counts in 32 bits); None for other functions and types, and where
    there are no keys (a whole frame's aggregate groups on a key of its own)."""
    first, spec = distinct_functions(columns)
    values = frame._data
    if not keys or not all(function in AGGREGATIONS
               and (function == "count" or _plain_number(values[column].dtype))
               for column, function in first):
        return None
    import pylibcudf as plc
    from cudf.utils.dtypes import dtype_from_pylibcudf_column

    policy = plc.types.NullPolicy
    grouping = plc.groupby.GroupBy(plc.Table([values[key].plc_column for key in keys]),
                                   policy.EXCLUDE if dropna else policy.INCLUDE)
    made_keys, made = grouping.aggregate([
        plc.groupby.GroupByRequest(values[column].plc_column, [
            plc.aggregation.count(policy.EXCLUDE) if function == "count"
            else getattr(plc.aggregation, function)() for function in functions])
        for column, functions in spec.items()])
    int64 = plc.DataType(plc.TypeId.INT64)
    made_columns: dict[tuple[str, str], tuple[Any, Any]] = {}
    for (column, functions), table in zip(spec.items(), made):
        for function, result in zip(functions, table.columns()):
            if function == "count":
                made_columns[(column, function)] = (plc.unary.cast(result, int64),
                                                    np.dtype("int64"))
            else:
                made_columns[(column, function)] = (result, dtype_from_pylibcudf_column(result))
    out = {key: (column, values[key].dtype) for key, column in zip(keys, made_keys.columns())}
    out |= {name: made_columns[(column, function)] for name, column, function in columns}
    return cudf_frame(out)


def joined(left: Any, right: Any, how: str, left_on: list[str], right_on: list[str],
           suffixes: tuple[Any, Any]) -> Any:
    """What ``Backend.join`` gives without an indicator, for inner, left, semi and anti joins
    on keys of one type on both sides (not categorical: equal codes may be unequal values),
    whose output names pandas gives without a clash; None for the rest. Rows in no particular
    order, as cuDF's merge gives them."""
    if how not in JOINS:
        return None
    names = _output_names(list(left.columns), list(right.columns), how, left_on, right_on,
                          suffixes)
    pairs = [(left._data[lk], right._data[rk]) for lk, rk in zip(left_on, right_on)]
    if names is None or any(
            lcol.dtype != rcol.dtype or str(lcol.dtype) == "category" for lcol, rcol in pairs):
        return None
    import pylibcudf as plc

    maps = getattr(plc.join, JOINS[how])(plc.Table([lcol.plc_column for lcol, _ in pairs]),
                                          plc.Table([rcol.plc_column for _, rcol in pairs]),
                                          plc.types.NullEquality.EQUAL)
    if how in ("leftsemi", "leftanti"):
        return cudf_frame(gathered(left, maps))
    left_rows, right_rows = maps
    dropped = _same_named_keys(left_on, right_on)
    taken = list(gathered(left, left_rows).values()) + [
        column for label, column in gathered(right, right_rows, nullify=how == "left").items()
        if label not in dropped]
    return cudf_frame(dict(zip(names, taken)))


def _output_names(left: list[Any], right: list[Any], how: str, left_on: list[str],
                  right_on: list[str], suffixes: tuple[Any, Any]) -> list[Any] | None:
    """A join's output names as pandas gives them: the left side's columns, then the right
    side's less each key of the same name as its left key; names on both sides (but those
    keys) suffixed. None where a suffix is not a string or two outputs would share a name."""
    if how in ("leftsemi", "leftanti"):
        return left
    dropped = _same_named_keys(left_on, right_on)
    kept = [name for name in right if name not in dropped]
    both = set(left) & set(kept)
    if both and not all(isinstance(suffix, str) for suffix in suffixes):
        return None
    names = [f"{name}{suffixes[0]}" if name in both else name for name in left] + \
        [f"{name}{suffixes[1]}" if name in both else name for name in kept]
    return names if len(set(names)) == len(names) else None


def _same_named_keys(left_on: list[str], right_on: list[str]) -> set[str]:
    """The right keys named as the left keys they join: pandas keeps the left side's column
    alone."""
    return {rk for lk, rk in zip(left_on, right_on) if lk == rk}


def _plain_number(dtype: Any) -> bool:
    """Whether ``dtype`` is numpy's, of integers or floats (not pandas' nullable ones, nor
    decimals, whose results cuDF types otherwise)."""
    return isinstance(dtype, np.dtype) and dtype.kind in "iuf"
