"""A read's filters applied to its cuDF frame as one libcudf expression.

Term by term (:func:`~gpuframe.io.filters.rows_kept`), each comparison is several cuDF calls
(the compare, its nulls filled, a validity mask, the ``&``), each with a device scalar of its own
and its Python costs: on a worker's half of TPC-H's lineitem the filter took as long as a third
of the read (benchmarks/results/2026-11-27-s30-gpus-h100x2.md). One AST evaluated by
``compute_column`` reads each column once in one kernel.

The null rules are :func:`~gpuframe.io.filters.rows_kept`'s (pyarrow's): terms combine with
Kleene's AND and OR (``NULL_LOGICAL_*``), so a null term drops its row unless the other terms
settle it, and ``not in`` keeps nulls by an explicit ``IS_NULL``. A term the expression cannot
evaluate exactly (a decimal or categorical column, a float value against an integer column, a
long ``in`` list) is computed term by term and enters the expression as a boolean column.
"""

from __future__ import annotations

import datetime
import numbers
from functools import reduce
from typing import Any

import numpy as np
import pyarrow as pa

from ..filters import Dnf, as_timestamp, term_kept

MAX_IN_VALUES = 16
"""The longest ``in`` list written as equalities in the expression; longer lists are cuDF's
``isin`` (a hash lookup), not a chain of comparisons per row."""

_COMPARISONS = {"==": "EQUAL", "!=": "NOT_EQUAL", "<": "LESS", "<=": "LESS_EQUAL",
                ">": "GREATER", ">=": "GREATER_EQUAL"}


def kept_rows(frame: Any, filters: Dnf) -> Any:
    """The rows of a cuDF frame that ``filters`` keep, in order, index kept."""
    import cudf
    import pylibcudf as plc

    columns = dict(frame._column_labels_and_values)
    inputs: list[Any] = []
    places: dict[str, int] = {}

    def reference(plc_column: Any, name: str | None = None) -> Any:
        """The expression's input column, a named column's once however many terms use it."""
        if name in places:
            return plc.expressions.ColumnReference(places[name])
        inputs.append(plc_column)
        if name is not None:
            places[name] = len(inputs) - 1
        return plc.expressions.ColumnReference(len(inputs) - 1)

    def term(column: str, op: str, value: Any) -> Any:
        kind = literal_type(columns[column])
        expression = None
        if kind is not None:
            expression = term_expression(reference(columns[column].plc_column, column), kind,
                                         op, value)
        if expression is None:
            kept = term_kept(frame[column], op, value)
            expression = reference(kept._column.plc_column)
        return expression

    expression = _any(plc.expressions.ASTOperator.NULL_LOGICAL_OR,
                      [_any(plc.expressions.ASTOperator.NULL_LOGICAL_AND,
                            [term(*t) for t in conjunction]) for conjunction in filters])
    mask = plc.transform.compute_column(plc.Table(inputs), expression)
    if mask.null_count():
        mask = plc.replace.replace_nulls(mask, plc.Scalar.from_py(False))
    return frame[cudf.Series.from_pylibcudf(mask)]


def literal_type(column: Any) -> pa.DataType | None:
    """The Arrow type of a literal compared with a cuDF ``column`` in an expression, the
    column's own; None where the expression cannot compare it (decimals, categoricals,
    float32, timezone-aware times, durations, nested types)."""
    dtype = column.dtype
    if not isinstance(dtype, np.dtype) or dtype.kind == "O":
        return pa.string() if _is_plain_strings(column) else None
    if dtype.kind in "iub" or (dtype.kind == "f" and dtype.itemsize == 8):
        return pa.from_numpy_dtype(dtype)
    if dtype.kind == "M":
        unit = np.datetime_data(dtype)[0]
        return pa.timestamp(unit) if unit in ("s", "ms", "us", "ns") else None
    return None


def _is_plain_strings(column: Any) -> bool:
    import pylibcudf as plc

    return column.plc_column.type().id() == plc.TypeId.STRING


def term_expression(column: Any, kind: pa.DataType, op: str, value: Any) -> Any:
    """One term as an expression over ``column`` (a reference), literals of type ``kind``;
    None where a value has no exact literal of that type or the list is too long."""
    from pylibcudf.expressions import ASTOperator, Operation

    if op in _COMPARISONS:
        literal = _literal(kind, value)
        return None if literal is None else Operation(
            getattr(ASTOperator, _COMPARISONS[op]), column, literal)
    if not value:  # an empty list: a constant, which the term by term path writes
        return None
    present = [v for v in value if v is not None]
    literals = [_literal(kind, v) for v in present]
    if len(present) > MAX_IN_VALUES or any(lit is None for lit in literals):
        return None
    with_null = len(present) < len(value)
    is_null = Operation(ASTOperator.IS_NULL, column)
    if op == "in":
        equal = [Operation(ASTOperator.EQUAL, column, lit) for lit in literals]
        return _any(ASTOperator.NULL_LOGICAL_OR, equal + ([is_null] if with_null else []))
    if not present:  # "not in (None,)": every value but nulls
        return Operation(ASTOperator.NOT, is_null)
    differ = _any(ASTOperator.NULL_LOGICAL_AND,
                  [Operation(ASTOperator.NOT_EQUAL, column, lit) for lit in literals])
    if with_null:
        return Operation(ASTOperator.NULL_LOGICAL_AND, Operation(ASTOperator.NOT, is_null),
                         differ)
    return Operation(ASTOperator.NULL_LOGICAL_OR, is_null, differ)


def _literal(kind: pa.DataType, value: Any) -> Any:
    """``value`` as a literal of type ``kind`` that compares as the column would with it, or
    None: an integer column with a non-integer value, a float64 with an integer it cannot hold
    exactly, a time finer than the column's unit."""
    import pylibcudf as plc

    scalar = arrow_literal(kind, value)
    return None if scalar is None else plc.expressions.Literal(plc.Scalar.from_arrow(scalar))


def arrow_literal(kind: pa.DataType, value: Any) -> pa.Scalar | None:
    """:func:`_literal`'s value as an Arrow scalar of type ``kind``, or None."""
    if pa.types.is_boolean(kind):
        return pa.scalar(value, kind) if isinstance(value, (bool, np.bool_)) else None
    if isinstance(value, (bool, np.bool_)):
        return None
    if pa.types.is_integer(kind):
        return pa.scalar(int(value), kind) if isinstance(value, numbers.Integral) else None
    if pa.types.is_floating(kind):
        if not isinstance(value, numbers.Real) or (
                isinstance(value, numbers.Integral) and float(value) != value):
            return None
        return pa.scalar(float(value), kind)
    if pa.types.is_timestamp(kind):
        value = as_timestamp(value)
        if not isinstance(value, datetime.datetime) or value.tzinfo is not None:
            return None
        scalar = pa.scalar(value, kind)
        # pyarrow truncates a time finer than the unit, which would move the bound
        return scalar if scalar.as_py() == value else None
    if pa.types.is_string(kind):
        return pa.scalar(value, kind) if isinstance(value, str) else None
    return None


def _any(op: Any, expressions: list[Any]) -> Any:
    """``expressions`` joined by a binary logical ``op`` (one stays as it is)."""
    from pylibcudf.expressions import Operation

    return reduce(lambda a, b: Operation(op, a, b), expressions)
