"""Pruning: what is known of a file or unit without reading its rows, tested against filters.

A file's hive values and a unit's min, max and null count per column can prove that no row
satisfies a filter; then planning drops the file (:func:`hive_values_may_match`) or the unit
(:func:`statistics_may_match`: Parquet row groups by their column chunks' statistics,
:func:`chunk_statistics`; ORC stripes by those :mod:`~gpuframe.io.formats.orc_tail` decodes).
Pruning is conservative: what is not known may match, and the read step applies the filters to
rows all the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .filters import Dnf

if TYPE_CHECKING:
    import pyarrow.parquet as pq

HiveValue = int | str | None
"""A file's value of one hive key (``key=value`` folders): int32 or string, None for null."""
Statistics = tuple[Any, Any, "int | None"]
"""(min, max, nulls) of a column in one unit; min and max None where unknown."""


def hive_values_may_match(values: Mapping[str, HiveValue], dnf: Dnf | None) -> bool:
    """False only when a file's hive values alone prove no row can satisfy ``dnf``."""
    if dnf is None or not values:
        return True
    return any(all(column not in values or _hive_value_may_match(op, value, values[column])
                   for column, op, value in conj)
               for conj in dnf)


def statistics_may_match(dnf: Dnf | None, hive_values: Mapping[str, HiveValue], rows: int,
                         statistics: Callable[[str], Statistics | None]) -> bool:
    """False only when a unit's hive values or column statistics prove none of its ``rows``
    can satisfy ``dnf``; ``statistics(column)``: what the unit's metadata knows of a column,
    None where nothing."""
    if rows == 0:
        return False
    if dnf is None:
        return True

    def term_may_match(column: str, op: str, value: Any) -> bool:
        if column in hive_values:
            return _hive_value_may_match(op, value, hive_values[column])
        stats = statistics(column)
        if stats is None:
            return True
        low, high, nulls = stats
        if low is None or high is None:
            return not (nulls is not None and nulls == rows)
        return range_may_match(op, value, low, high, nulls, rows)

    return any(all(term_may_match(*term) for term in conj) for conj in dnf)


def value_range(units: Iterable[Statistics | None]) -> tuple[Any, Any] | None:
    """The least and greatest value of a column over units of a file, from each unit's
    statistics; None where a unit's are missing or do not order (the plan's estimates then
    take their default shares)."""
    low = high = None
    for stats in units:
        if stats is None or stats[0] is None or stats[1] is None:
            return None
        try:
            low = stats[0] if low is None or stats[0] < low else low
            high = stats[1] if high is None or stats[1] > high else high
        except TypeError:
            return None
    return None if low is None else (low, high)


def chunk_statistics(chunk: pq.ColumnChunkMetaData) -> Statistics | None:
    """What a Parquet column chunk's statistics say, None where it has none."""
    stats = chunk.statistics
    if stats is None:
        return None
    nulls = stats.null_count if stats.has_null_count else None
    if not stats.has_min_max:
        return None, None, nulls
    return stats.min, stats.max, nulls


def _hive_value_may_match(op: str, value: Any, known: HiveValue) -> bool:
    """Whether a file whose every row holds ``known`` may satisfy ``op value``."""
    return range_may_match(op, value, known, known, 1 if known is None else 0, 1)


def range_may_match(op: str, value: Any, low: Any, high: Any, nulls: int | None,
                    rows: int) -> bool:
    """Can a value in [low, high] satisfy ``op value``? Nulls satisfy no comparison."""
    if nulls is not None and nulls >= rows:
        return False
    try:
        if low != low or high != high:  # noqa: PLR0124 (NaN statistics order nothing)
            return True
        if op == "==":
            return low <= value <= high
        if op == "!=":
            return not (low == high == value)
        if op == "<":
            return low < value
        if op == "<=":
            return low <= value
        if op == ">":
            return high > value
        if op == ">=":
            return high >= value
        if op == "in":
            return any(low <= v <= high for v in value if v is not None)
        return not (low == high and low in value)
    except TypeError:
        return True
