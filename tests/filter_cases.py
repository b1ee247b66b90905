"""Filters on every operator over a table with nulls in every column, shared by the tests of
each place that applies filters to rows (pandas and cuDF frames, one libcudf expression)."""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from gpuframe.io.filters import Dnf, normalize_filters

FILTER_CASES: list[Any] = [
    [("i", "==", 1)], [("i", "!=", 1)], [("i", "<", 0)], [("i", ">=", 2)],
    [("f", "<=", 0.3)], [("f", ">", -0.2), ("i", "!=", 0)],
    [("s", "in", ("a", "c"))], [("s", "not in", ("a",))], [("s", "in", ("b", None))],
    [("i", "not in", (0, 1, 2))],
    [[("i", "<", -3)], [("s", "==", "b"), ("f", ">=", 0.0)]],
    [("d", ">=", "2024-01-20"), ("d", "<", "2024-02-10")],
    [("d", "==", "2024-01-05")],
    [("t", ">", "2024-01-20T12:00"), ("t", "!=", "2024-02-01T00:00")],
]


def table_with_nulls(n: int = 400, seed: int = 7) -> pa.Table:
    """Integers, floats, strings, dates and timestamps, each 15% null."""
    rng = np.random.default_rng(seed)
    gaps = rng.random((4, n)) < 0.15
    days = [datetime.date(2024, 1, 1) + datetime.timedelta(days=int(d))
            for d in rng.integers(0, 60, n)]
    return pa.table({
        "i": pa.array(rng.integers(-5, 5, n), mask=gaps[0]),
        "f": pa.array(rng.normal(size=n).round(1), mask=gaps[1]),
        "s": pa.array(rng.choice(["a", "b", "c"], n), mask=gaps[2]),
        "d": pa.array(days, pa.date32(), mask=gaps[3]),
        "t": pa.array(days, pa.date32(), mask=gaps[3]).cast(pa.timestamp("ms")),
    })


def parsed(filters: Any, schema: pa.Schema) -> Dnf:
    """A case's filters, dates and times written as ISO strings, normalized for ``schema``."""
    conjunctions = filters if isinstance(filters[0], list) else [filters]
    result = normalize_filters([[(c, op, _when(c, v)) for c, op, v in conj]
                                for conj in conjunctions], schema, "t.parquet")
    assert result is not None
    return result


def _when(column: str, value: Any) -> Any:
    if column == "d":
        return datetime.date.fromisoformat(value)
    return datetime.datetime.fromisoformat(value) if column == "t" else value
