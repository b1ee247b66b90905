"""``filters=`` in pandas/pyarrow's DNF form: checked against a schema, and tested against what
is known of a file or unit without reading rows (hive values, min/max statistics).

Every format uses the same terms: Parquet prunes row groups and ORC stripes by statistics,
every format drops files by hive values, and the read step applies the filters to rows with
``pyarrow.parquet.filters_to_expression``.
"""

from __future__ import annotations

import numbers
from typing import Any, Iterable, Mapping, Sequence

import pyarrow as pa

from .errors import FilterError

OPERATORS = ("==", "!=", "<", "<=", ">", ">=", "in", "not in")

Term = tuple[str, str, Any]
Statistics = tuple[Any, Any, "int | None"]
"""(min, max, nulls) of a column in one unit; min and max None where unknown."""


def normalize_filters(filters: Sequence[Any] | None, schema: pa.Schema,
                      path: str) -> list[list[Term]] | None:
    """Filters as a list of conjunctions of ``(column, op, value)`` with ``=`` spelled ``==``
    and values of the column's type; :class:`FilterError` names the bad term."""
    if filters is None:
        return None
    if not isinstance(filters, (list, tuple)) or not filters:
        raise FilterError(f"filters= must be a non-empty list of (column, op, value) tuples "
                          f"or a list of such lists, not {filters!r}")
    nested = isinstance(filters[0], list)
    conjunctions = filters if nested else [filters]
    result = []
    for conjunction in conjunctions:
        if not isinstance(conjunction, (list, tuple)) or not conjunction:
            raise FilterError(f"filters= term {conjunction!r} is not a non-empty list of "
                              "(column, op, value) tuples")
        result.append([_normalize_term(term, schema, path) for term in conjunction])
    return result


def _normalize_term(term: Any, schema: pa.Schema, path: str) -> Term:
    if not isinstance(term, (tuple, list)) or len(term) != 3 or not isinstance(term[0], str):
        raise FilterError(f"filter term {term!r} is not a (column, op, value) tuple")
    column, op, value = term
    op = "==" if op == "=" else str(op).lower()
    if op not in OPERATORS:
        raise FilterError(f"filter term {term!r}: unknown operator {term[1]!r}; use one of "
                          "==, =, !=, <, <=, >, >=, in, not in")
    if column not in schema.names:
        raise FilterError(f"filter term {term!r} names column {column!r}, which is not in "
                          f"{path}; its columns are " + ", ".join(schema.names))
    kind = schema.field(column).type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if op in ("in", "not in"):
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise FilterError(f"filter term {term!r}: {op!r} needs a list, set or tuple of "
                              "values")
        return column, op, tuple(_typed(v, kind, term, column) for v in value)
    return column, op, _typed(value, kind, term, column)


def _typed(value: Any, kind: pa.DataType, term: Any, column: str) -> Any:
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind)
    if numeric and isinstance(value, numbers.Real) and not isinstance(value, bool):
        return value
    try:
        if numeric:
            raise TypeError("not a number")
        return pa.scalar(value, type=kind).as_py()
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise FilterError(f"filter term {term!r}: value {value!r} does not fit column "
                          f"{column!r} of type {kind} ({exc})") from exc



def partition_may_match(values: Mapping[str, Any], dnf: list[list[Term]] | None) -> bool:
    """False only when a file's hive values alone prove no row can satisfy ``dnf``."""
    if dnf is None or not values:
        return True
    return any(all(column not in values
                   or range_may_match(op, value, values[column], values[column],
                                       1 if values[column] is None else 0, 1)
                   for column, op, value in conj)
               for conj in dnf)



def range_may_match(op: str, value: Any, low: Any, high: Any, nulls: int | None,
                     rows: int) -> bool:
    """Can a value in [low, high] satisfy ``op value``? Nulls satisfy no comparison."""
    if nulls is not None and nulls >= rows:
        return False
    try:
        if low != low or high != high:  # NaN statistics order nothing
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
