"""``filters=`` in pandas/pyarrow's DNF form, checked against a schema and normalized.

Every format uses the same terms: planning prunes files and units by them
(:mod:`~gpuframe.io.statistics`), and the read step applies them to rows: to Arrow tables with
``pyarrow.parquet.filters_to_expression``, to a read cuDF frame in one libcudf expression
(:mod:`~gpuframe.io.readers.device_filters`), and to any frame with :func:`rows_kept`.
"""

from __future__ import annotations

import datetime
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from .errors import FilterError

OPERATORS = ("==", "!=", "<", "<=", ">", ">=", "in", "not in")

Term = tuple[str, str, Any]
"""(column, operator, value), the value of the column's type."""
Dnf = list[list[Term]]
"""Conjunctions of terms, any of which may hold."""


def normalize_filters(filters: Sequence[Any] | None, schema: pa.Schema,
                      path: str) -> Dnf | None:
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
        values = tuple(_typed(v, kind, term, column) for v in value)
        if pa.types.is_integer(kind):
            lo, hi = _bounds(kind)
            values = tuple(v for v in values if not _is_int(v) or lo <= v <= hi)
            if not values:  # only values the column cannot hold
                return _constant(column, kind, op == "not in")
        return column, op, values
    if pa.types.is_integer(kind) and _is_int(value):
        lo, hi = _bounds(kind)
        # A value beyond the column's type (2**70 for int64) compares the same with every
        # row, and Arrow cannot make it a scalar of that type: the term becomes that constant.
        if value > hi:
            return _constant(column, kind, op in ("<", "<=", "!="))
        if value < lo:
            return _constant(column, kind, op in (">", ">=", "!="))
    return column, op, _typed(value, kind, term, column)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _bounds(kind: pa.DataType) -> tuple[int, int]:
    """The least and greatest values of an Arrow integer type."""
    bits = kind.bit_width
    if pa.types.is_signed_integer(kind):
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


def _constant(column: str, kind: pa.DataType, holds: bool) -> Term:
    """A term on an integer ``column`` that holds for every row with a value (``holds``), or
    for none."""
    lo, _ = _bounds(kind)
    return (column, ">=", lo) if holds else (column, "<", lo)


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


def rows_kept(frame: Any, filters: Dnf) -> Any:
    """The boolean mask of the rows ``filters`` keep, computed where the frame lives (a cuDF
    frame's on its GPU: moving it through Arrow on the host costs more than the read), with
    pyarrow's null rules: a comparison or ``in`` never keeps a null (``in`` does where its
    values hold None), ``not in`` always does."""
    kept = None
    for conjunction in filters:
        every = None
        for column, op, value in conjunction:
            term = term_kept(frame[column], op, value)
            every = term if every is None else every & term
        kept = every if kept is None else kept | every
    return kept


def term_kept(series: Any, op: str, value: Any) -> Any:
    """The boolean mask, without nulls, of the rows one term keeps, by :func:`rows_kept`'s
    rules."""
    if op in ("in", "not in"):
        values = [_comparable(series, v) for v in value if v is not None]
        hit = series.isin(values).fillna(False)
        if len(values) < len(value):
            hit = hit | series.isna()
        return hit if op == "in" else ~hit
    value = _comparable(series, value)
    compared = {"==": series.__eq__, "!=": series.__ne__, "<": series.__lt__,
                "<=": series.__le__, ">": series.__gt__, ">=": series.__ge__}[op](value)
    return compared.fillna(False) & series.notna()


def _comparable(series: Any, value: Any) -> Any:
    """A date compared with a datetime64 column (cuDF reads Parquet dates so) as the
    timestamp of its midnight."""
    if isinstance(series.dtype, np.dtype) and series.dtype.kind == "M":
        return as_timestamp(value)
    return value


def as_timestamp(value: Any) -> Any:
    """A date (not a datetime) as the timestamp of its midnight; anything else as it is."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return datetime.datetime.combine(value, datetime.time())
    return value
