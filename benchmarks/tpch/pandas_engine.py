"""The subset of gpuframe's frame API that the TPC-H queries use, on one pandas DataFrame.

It lets ``queries.py`` run, unchanged, where gpuframe's operators are not available, and gives a
single-process answer to hold gpuframe's against. Expressions are gpuframe's own
(:mod:`gpuframe.plan.expr`), evaluated on the whole frame, so the queries' expressions are tested
as gpuframe evaluates them per partition. ``run.py`` also times it, as a single-process
baseline. ``dask_engine`` runs the same operators on a dask.dataframe collection: what differs is
``_evaluated`` (how an expression is evaluated), cross joins, aggregates and the final compute.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from gpuframe.errors import UnknownColumnError
from gpuframe.plan.expr import Col, Expr, as_expr, evaluate_mask

if TYPE_CHECKING:
    from typing_extensions import Self

Keys = str | Sequence[str]


class PandasGroupBy:
    def __init__(self, frame: PandasFrame, keys: list[str], dropna: bool) -> None:
        self._frame, self._keys, self._dropna = frame, keys, dropna

    def _grouped(self) -> Any:
        return self._frame._data.groupby(self._keys, dropna=self._dropna, sort=False)

    def agg(self, **named: tuple[str, str]) -> PandasFrame:
        return self._frame._new(self._grouped().agg(**named).reset_index())


class PandasFrame:
    """A pandas DataFrame behind gpuframe's frame API."""

    grouping = PandasGroupBy

    def __init__(self, data: Any) -> None:
        self._data = data

    def _new(self, data: Any) -> Self:
        return type(self)(data)

    def _evaluated(self, data: Any, expression: Expr, mask: bool = False) -> Any:
        """``expression`` on ``data`` (this frame's kind of data): a column, or with ``mask``
        a filter's mask."""
        return evaluated(data, expression, mask)

    @property
    def columns(self) -> pd.Index:
        return self._data.columns

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, Expr):
            return self._new(self._data[self._evaluated(self._data, key, mask=True)])
        if isinstance(key, (list, tuple, pd.Index)):
            return self._new(self._data[list(key)])
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

    def assign(self, **columns: Any) -> Self:
        data = self._data
        for name, value in columns.items():
            data = data.assign(**{name: self._evaluated(data, as_expr(value))})
        return self._new(data)

    def rename(self, columns: dict[str, str]) -> Self:
        return self._new(self._data.rename(columns=columns))

    def merge(self, other: PandasFrame, on: Keys | None = None, *, left_on: Keys | None = None,
              right_on: Keys | None = None, how: str = "inner",
              suffixes: Sequence[str] = ("_x", "_y")) -> Self:
        left, right = self._data, other._data
        if how == "cross":
            return self._new(self._cross(left, right, tuple(suffixes)))
        left_keys = _listed(on if on is not None else left_on)
        right_keys = _listed(on if on is not None else right_on)
        if how in ("leftsemi", "leftanti"):
            # The right side's distinct keys, marked, joined on: a row is kept by whether it
            # found its mark.
            keys = right[right_keys].rename(columns=dict(zip(right_keys, left_keys)))
            keys = keys.drop_duplicates().assign(_matched=True)
            marked = left.merge(keys, on=left_keys, how="left")
            hit = marked["_matched"].notnull()
            return self._new(marked[hit if how == "leftsemi" else ~hit].drop(
                columns="_matched"))
        return self._new(left.merge(right, left_on=left_keys, right_on=right_keys, how=how,
                                    suffixes=tuple(suffixes)))

    @staticmethod
    def _cross(left: Any, right: Any, suffixes: tuple[str, ...]) -> Any:
        return left.merge(right, how="cross", suffixes=suffixes)

    def groupby(self, by: Keys, as_index: bool = False, dropna: bool = True) -> PandasGroupBy:
        if as_index:
            raise ValueError("gpuframe's groupby gives its keys back as columns: as_index=False")
        return self.grouping(self, _listed(by), dropna)

    def agg(self, **named: tuple[str, str]) -> PandasFrame:
        """A one-row frame of whole-frame aggregates, as gpuframe's ``frame.agg(name=(col,
        how))``."""
        row = {name: _whole(self._data[column], how) for name, (column, how) in named.items()}
        return PandasFrame(pd.DataFrame({name: [value] for name, value in row.items()}))

    def sort_values(self, by: Keys, ascending: bool | Sequence[bool] = True) -> Self:
        return self._new(self._data.sort_values(_listed(by), ascending=ascending))

    def head(self, n: int = 5) -> pd.DataFrame:
        """The first ``n`` rows, as pandas (as gpuframe's ``head`` gives them)."""
        return self._data.head(n)

    def to_pandas(self) -> pd.DataFrame:
        return self._data.reset_index(drop=True)

    compute = to_pandas


def evaluated(data: Any, expression: Expr, mask: bool = False) -> Any:
    """``expression`` on a pandas or cuDF frame: a column, or with ``mask`` a filter's mask."""
    return evaluate_mask(expression, data) if mask else expression.evaluate(data)


def _whole(column: pd.Series, how: str) -> Any:
    return len(column) if how == "size" else getattr(column, how)()


def _listed(keys: Keys | None) -> list[str]:
    if keys is None:
        raise ValueError("a merge needs on= or left_on= and right_on=")
    return [keys] if isinstance(keys, str) else list(keys)


def read_parquet(path: str | Path, columns: Sequence[str] | None = None) -> PandasFrame:
    return PandasFrame(pd.read_parquet(path, columns=None if columns is None else list(columns)))
