"""Filter predicates as the optimizer moves them: cut at their top-level ``&``s and joined again
(:func:`conjuncts`, :func:`conjunction`), and turned into a reader's ``filters=`` where the reader
keeps exactly the rows that pandas keeps (:func:`as_reader_filters`), and back again
(:func:`from_reader_filters`). Apart from :mod:`~gpuframe.plan.expr`, which builds and
evaluates expressions per partition, as only the optimizer needs this.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import pandas as pd

from .expr import Between, Binary, Col, Expr, IsIn, Lit

COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def conjuncts(predicate: Expr) -> list[Expr]:
    """``predicate`` cut at its top-level ``&``s, so each part can move on its own."""
    if isinstance(predicate, Binary) and predicate.op == "&":
        return conjuncts(predicate.left) + conjuncts(predicate.right)
    return [predicate]


def conjunction(parts: list[Expr]) -> Expr:
    """The ``&`` of ``parts`` (at least one)."""
    result = parts[0]
    for part in parts[1:]:
        result = Binary("&", result, part)
    return result


def as_reader_filters(part: Expr, columns: Mapping[str, Any]) -> list[list[tuple]] | None:
    """``part`` as a reader's ``filters=`` in DNF (a list of alternatives, each a list of
    ``(column, op, value)`` terms that must all hold), where the reader keeps exactly the rows
    that ``part`` keeps; else None. ``columns``: the reader's columns and dtypes.

    Only terms whose missing values behave as in a pandas mask are taken: comparisons other than
    ``!=``, ``isin`` and ``between`` drop rows with missing values both ways, while ``!=`` keeps
    NaN rows in pandas and drops null rows in Arrow."""
    if isinstance(part, Binary) and part.op == "|":
        left = as_reader_filters(part.left, columns)
        right = as_reader_filters(part.right, columns)
        return None if left is None or right is None else left + right
    if isinstance(part, Binary) and part.op == "&":
        left = as_reader_filters(part.left, columns)
        right = as_reader_filters(part.right, columns)
        if left is None or right is None:
            return None
        return [a + b for a in left for b in right]
    term = _reader_term(part, columns)
    return None if term is None else [term]


def from_reader_filters(filters: list[list[tuple]], meta: pd.DataFrame) -> Expr | None:
    """``filters`` (DNF, as a reader takes them) as an expression that keeps the same rows of a
    frame of ``meta``'s columns; None where some term is not one that
    :func:`as_reader_filters` makes (a ``!=``, a ``not in``, a missing value, a value the
    reader compares otherwise than pandas): their rows would differ."""
    columns = dict(meta.dtypes)
    alternatives = []
    for terms in filters:
        parts: list[Expr] = []
        for column, op, value in terms:
            if column not in columns:
                return None
            if op == "in" and isinstance(value, (list, tuple)) and value \
                    and all(_comparable(v, columns[column]) for v in value):
                parts.append(IsIn(Col(column), tuple(value)))
            elif op in COMPARISONS and op != "!=" and _comparable(value, columns[column]):
                parts.append(Binary(op, Col(column), Lit(value)))
            else:
                return None
        if not parts:
            return None
        alternatives.append(conjunction(parts))
    if not alternatives:
        return None
    either = alternatives[0]
    for alternative in alternatives[1:]:
        either = Binary("|", either, alternative)
    return either


def _reader_term(part: Expr, columns: Mapping[str, Any]) -> list[tuple] | None:
    if isinstance(part, Between):
        low, high = part.bounds()
        first, second = _reader_term(low, columns), _reader_term(high, columns)
        return None if first is None or second is None else first + second
    if isinstance(part, IsIn) and isinstance(part.operand, Col):
        name = part.operand.name
        if name in columns and part.values and all(_comparable(v, columns[name])
                                                   for v in part.values):
            return [(name, "in", list(part.values))]
        return None
    if not (isinstance(part, Binary) and part.op in COMPARISONS and part.op != "!="):
        return None
    column, value, op = part.left, part.right, part.op
    if isinstance(value, Col) and isinstance(column, Lit):
        column, value, op = value, column, FLIPPED[op]
    if not (isinstance(column, Col) and isinstance(value, Lit)):
        return None
    if column.name not in columns or not _comparable(value.value, columns[column.name]):
        return None
    return [(column.name, op, value.value)]


def _comparable(value: Any, dtype: Any) -> bool:
    """Whether a reader compares ``value`` with a column of ``dtype`` as pandas does."""
    if value is None or (isinstance(value, float) and value != value):
        return False
    kind = getattr(dtype, "kind", "O")
    if pd.api.types.is_bool_dtype(dtype):
        return isinstance(value, bool)
    if pd.api.types.is_numeric_dtype(dtype):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if pd.api.types.is_string_dtype(dtype) and kind in ("O", "U", "T"):
        return isinstance(value, str)
    if pd.api.types.is_datetime64_any_dtype(dtype):
        # pandas compares a naive datetime as the Timestamp it converts it to (a date it
        # refuses), and a reader as the timestamp of the column's type
        zone = getattr(dtype, "tz", None) or getattr(getattr(dtype, "pyarrow_dtype", None),
                                                     "tz", None)
        return isinstance(value, datetime.datetime) and value.tzinfo is None and zone is None
    return False
