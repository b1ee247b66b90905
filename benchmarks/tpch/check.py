"""Answers checked against DuckDB's, run on the same Parquet files.

DuckDB runs the official query texts (its tpch extension's ``tpch_queries()``) over views of the
Parquet folders. An answer matches when it has as many columns (ours take DuckDB's names, in
order), the same rows, and, where the query has an ORDER BY, the same sequence of sort keys:
rows that tie on the keys may come in any order, so the rows themselves are compared as sorted
multisets. Floats match within 1e-6 relative, or 1e-2 absolute in columns of money (values of 1
or more), since sums differ in their order of addition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd

from .datagen import TABLES, connect_tpch

# The positions of the columns each query's ORDER BY sorts on, in its order.
ORDER_BY: dict[int, list[int]] = {
    1: [0, 1], 2: [0, 2, 1, 3], 3: [1, 2], 4: [0], 5: [1], 7: [0, 1, 2], 8: [0], 9: [0, 1],
    10: [2], 11: [1], 12: [0], 13: [1, 0], 15: [0], 16: [3, 0, 1, 2], 18: [4, 3], 20: [0],
    21: [1, 0], 22: [0],
}


class DuckDB:
    """The tpch extension's connection, with a view over each table's Parquet folder."""

    def __init__(self, root: Path) -> None:
        self.connection = connect_tpch()
        for table in TABLES:
            files = str(Path(root) / table / "*.parquet")
            self.connection.execute(
                f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{files}')")
        self.texts = dict(self.connection.execute(
            "SELECT query_nr, query FROM tpch_queries()").fetchall())

    def answer(self, number: int) -> pd.DataFrame:
        return self.connection.execute(self.texts[number]).fetchdf()

    def close(self) -> None:
        self.connection.close()


@dataclass
class Verdict:
    ok: bool
    reason: str = ""

    def __str__(self) -> str:
        return "OK" if self.ok else f"FAIL: {self.reason}"


def compare(number: int, ours: pd.DataFrame, theirs: pd.DataFrame) -> Verdict:
    """Whether ``ours`` is DuckDB's answer ``theirs`` to query ``number``."""
    if len(ours.columns) != len(theirs.columns):
        return Verdict(False, f"columns {list(ours.columns)}, DuckDB's {list(theirs.columns)}")
    if len(ours) != len(theirs):
        return Verdict(False, f"{len(ours)} rows, DuckDB's {len(theirs)}")
    ours = ours.set_axis(theirs.columns, axis=1).reset_index(drop=True)
    theirs = theirs.reset_index(drop=True)
    columns = [_comparable(ours[c], theirs[c]) for c in theirs.columns]
    for position in ORDER_BY.get(number, []):
        (mine, duck), name = columns[position], theirs.columns[position]
        if not _same(mine, duck).all():
            return Verdict(False, f"ORDER BY column {name!r} differs: {mine.tolist()[:5]} "
                                  f"against {duck.tolist()[:5]}")
    names = list(theirs.columns)
    mine = pd.DataFrame({n: m for n, (m, _) in zip(names, columns)}).sort_values(names)
    duck = pd.DataFrame({n: d for n, (_, d) in zip(names, columns)}).sort_values(names)
    for name in names:
        same = _same(mine[name].reset_index(drop=True), duck[name].reset_index(drop=True))
        if not same.all():
            row = int(np.argmin(same.to_numpy()))
            return Verdict(False, f"column {name!r} differs at sorted row {row}: "
                                  f"{mine[name].iloc[row]!r} against {duck[name].iloc[row]!r}")
    return Verdict(True)


def _comparable(mine: pd.Series, duck: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Both columns in one kind: floats (decimals and ints of either side), times, or text."""
    if _numeric(duck) or _numeric(mine):
        return _floats(mine), _floats(duck)
    if pd.api.types.is_datetime64_any_dtype(duck) or pd.api.types.is_datetime64_any_dtype(mine):
        return pd.to_datetime(mine).astype("datetime64[us]"), \
            pd.to_datetime(duck).astype("datetime64[us]")
    return mine.astype(str), duck.astype(str)


def _numeric(column: pd.Series) -> bool:
    if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
        return True
    return column.dtype == object and len(column) > 0 and isinstance(column.iloc[0], Decimal)


def _floats(column: pd.Series) -> pd.Series:
    return pd.Series([math.nan if v is None or v is pd.NA else float(v) for v in column],
                     dtype="float64")


def _same(mine: pd.Series, duck: pd.Series) -> pd.Series:
    if mine.dtype == "float64":
        money = duck.abs() >= 1
        close = np.isclose(mine, duck, rtol=1e-6, atol=0.0, equal_nan=True)
        close |= money.to_numpy() & np.isclose(mine, duck, rtol=0.0, atol=1e-2)
        return pd.Series(close)
    return (mine == duck) | (mine.isna() & duck.isna())
