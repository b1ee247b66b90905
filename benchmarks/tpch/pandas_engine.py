"""The subset of gpuframe's frame API that the TPC-H queries use, on one pandas DataFrame.

It lets ``queries.py`` run, unchanged, where gpuframe's operators are not available, and gives a
single-process answer to hold gpuframe's against. Expressions are gpuframe's own
(:mod:`gpuframe.plan.expr`), evaluated on the whole frame, so the queries' expressions are tested
as gpuframe evaluates them per partition. ``run.py`` also times it, as a single-process
baseline.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gpuframe.errors import UnknownColumnError
from gpuframe.plan.expr import Col, Expr, as_expr, evaluate_mask

Keys = str | Sequence[str]


class PandasFrame:
    """A pandas DataFrame behind gpuframe's frame API."""

    def __init__(self, data: pd.DataFrame) -> None:
        self._data = data

    @property
    def columns(self) -> pd.Index:
        return self._data.columns

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, Expr):
            return PandasFrame(self._data[evaluate_mask(key, self._data)])
        if isinstance(key, (list, tuple, pd.Index)):
            return PandasFrame(self._data[list(key)])
        if key not in self.columns:
            raise UnknownColumnError(f"column {key!r} is not among {list(self.columns)}")
        return Col(key)

    def __getattr__(self, name: str) -> Col:
        data = self.__dict__.get("_data")
        if name.startswith("_") or data is None or name not in data.columns:
            raise AttributeError(f"{type(self).__name__} has no attribute or column {name!r}")
        return Col(name)

    def __setitem__(self, name: str, value: Any) -> None:
        self._data = self.assign(**{name: value})._data

    def assign(self, **columns: Any) -> PandasFrame:
        data = self._data
        for name, value in columns.items():
            data = data.assign(**{name: as_expr(value).evaluate(data)})
        return PandasFrame(data)

    def rename(self, columns: dict[str, str]) -> PandasFrame:
        return PandasFrame(self._data.rename(columns=columns))

    def merge(self, other: PandasFrame, on: Keys | None = None, *, left_on: Keys | None = None,
              right_on: Keys | None = None, how: str = "inner",
              suffixes: Sequence[str] = ("_x", "_y")) -> PandasFrame:
        left, right = self._data, other._data
        if how == "cross":
            return PandasFrame(left.merge(right, how="cross", suffixes=tuple(suffixes)))
        left_keys = _listed(on if on is not None else left_on)
        right_keys = _listed(on if on is not None else right_on)
        if how in ("leftsemi", "leftanti"):
            keys = right[right_keys].drop_duplicates()
            keys = keys.rename(columns=dict(zip(right_keys, left_keys))).assign(_matched=True)
            marked = left.merge(keys, on=left_keys, how="left")
            hit = marked["_matched"].notna()
            return PandasFrame(marked[hit if how == "leftsemi" else ~hit].drop(
                columns="_matched"))
        return PandasFrame(left.merge(right, left_on=left_keys, right_on=right_keys, how=how,
                                     suffixes=tuple(suffixes)))

    def groupby(self, by: Keys, as_index: bool = False, dropna: bool = True) -> PandasGroupBy:
        if as_index:
            raise ValueError("gpuframe's groupby gives its keys back as columns: as_index=False")
        return PandasGroupBy(self._data, _listed(by), dropna)

    def agg(self, **named: tuple[str, str]) -> PandasFrame:
        """A one-row frame of whole-frame aggregates, as gpuframe's ``frame.agg(name=(col,
        how))``."""
        row = {name: _whole(self._data[column], how) for name, (column, how) in named.items()}
        return PandasFrame(pd.DataFrame({name: [value] for name, value in row.items()}))

    def sort_values(self, by: Keys, ascending: bool | Sequence[bool] = True) -> PandasFrame:
        return PandasFrame(self._data.sort_values(_listed(by), ascending=ascending))

    def head(self, n: int = 5) -> pd.DataFrame:
        """The first ``n`` rows, as pandas (as gpuframe's ``head`` gives them)."""
        return self._data.head(n)

    def to_pandas(self) -> pd.DataFrame:
        return self._data.reset_index(drop=True)

    compute = to_pandas


class PandasGroupBy:
    def __init__(self, data: pd.DataFrame, keys: list[str], dropna: bool) -> None:
        self._data, self._keys, self._dropna = data, keys, dropna

    def agg(self, **named: tuple[str, str]) -> PandasFrame:
        grouped = self._data.groupby(self._keys, dropna=self._dropna, sort=False)
        return PandasFrame(grouped.agg(**named).reset_index())


def _whole(column: pd.Series, how: str) -> Any:
    return len(column) if how == "size" else getattr(column, how)()


def _listed(keys: Keys | None) -> list[str]:
    if keys is None:
        raise ValueError("a merge needs on= or left_on= and right_on=")
    return [keys] if isinstance(keys, str) else list(keys)


def read_parquet(path: str | Path, columns: Sequence[str] | None = None) -> PandasFrame:
    return PandasFrame(pd.read_parquet(path, columns=None if columns is None else list(columns)))
