"""Column expressions: what filters and new columns are made of.

An expression names columns, never frames, so the optimizer can move it across operators (rename
its columns, push it below a join or into a reader's ``filters=``) and every partition evaluates
it alone. Evaluation uses the pandas API that cuDF mirrors (``frame[name]``, operators,
``isin``, ``between``, ``.str``, ``.dt``), so one code path serves both backends; where their
result types differ, the operator casts the result to the plan's schema. Division is the
backend's (:func:`~gpuframe.backend.true_divide`): cuDF's ``/`` compiles kernels at a worker's
first division.

``==`` on an expression builds an expression; compare expressions' structure with
:meth:`Expr.key`. How the optimizer cuts filters and hands them to readers is
:mod:`~gpuframe.plan.predicates`.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd

from ..backend import true_divide
from ..errors import ExpressionError, UnknownColumnError

BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge, "&": operator.and_, "|": operator.or_,
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": true_divide,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
}
STRING_METHODS = ("startswith", "endswith", "contains", "lower", "upper", "strip", "len", "slice")
DATE_PARTS = ("year", "quarter", "month", "day", "hour", "minute", "second", "microsecond",
              "nanosecond", "day_of_week", "weekday", "day_of_year")


class Columns(Protocol):
    """What an expression is evaluated on: a pandas or cuDF DataFrame."""

    columns: Any

    def __getitem__(self, name: Any) -> Any: ...


class Expr:
    """A column expression; build one with :func:`col` or a frame's ``frame["name"]``."""

    def columns(self) -> frozenset[str]:
        """The input columns the expression reads."""
        return frozenset().union(*(child.columns() for child in self.children()))

    def children(self) -> tuple[Expr, ...]:
        return ()

    def evaluate(self, frame: Columns) -> Any:
        raise NotImplementedError

    def rename(self, mapping: Mapping[str, str]) -> Expr:
        """The same expression over columns renamed by ``mapping`` (others unchanged)."""
        raise NotImplementedError

    def key(self) -> tuple:
        """A hashable description of the expression's structure."""
        raise NotImplementedError

    # --- building ---------------------------------------------------------------------------

    def _binary(self, op: str, other: Any, reflected: bool = False) -> Binary:
        other = as_expr(other)
        return Binary(op, other, self) if reflected else Binary(op, self, other)

    def __eq__(self, other: Any) -> Binary:  # type: ignore[override]
        return self._binary("==", other)

    def __ne__(self, other: Any) -> Binary:  # type: ignore[override]
        return self._binary("!=", other)

    def __lt__(self, other: Any) -> Binary:
        return self._binary("<", other)

    def __le__(self, other: Any) -> Binary:
        return self._binary("<=", other)

    def __gt__(self, other: Any) -> Binary:
        return self._binary(">", other)

    def __ge__(self, other: Any) -> Binary:
        return self._binary(">=", other)

    def __and__(self, other: Any) -> Binary:
        return self._binary("&", other)

    def __rand__(self, other: Any) -> Binary:
        return self._binary("&", other, reflected=True)

    def __or__(self, other: Any) -> Binary:
        return self._binary("|", other)

    def __ror__(self, other: Any) -> Binary:
        return self._binary("|", other, reflected=True)

    def __add__(self, other: Any) -> Binary:
        return self._binary("+", other)

    def __radd__(self, other: Any) -> Binary:
        return self._binary("+", other, reflected=True)

    def __sub__(self, other: Any) -> Binary:
        return self._binary("-", other)

    def __rsub__(self, other: Any) -> Binary:
        return self._binary("-", other, reflected=True)

    def __mul__(self, other: Any) -> Binary:
        return self._binary("*", other)

    def __rmul__(self, other: Any) -> Binary:
        return self._binary("*", other, reflected=True)

    def __truediv__(self, other: Any) -> Binary:
        return self._binary("/", other)

    def __rtruediv__(self, other: Any) -> Binary:
        return self._binary("/", other, reflected=True)

    def __floordiv__(self, other: Any) -> Binary:
        return self._binary("//", other)

    def __rfloordiv__(self, other: Any) -> Binary:
        return self._binary("//", other, reflected=True)

    def __mod__(self, other: Any) -> Binary:
        return self._binary("%", other)

    def __pow__(self, other: Any) -> Binary:
        return self._binary("**", other)

    def __invert__(self) -> Unary:
        return Unary("~", self)

    def __neg__(self) -> Unary:
        return Unary("neg", self)

    def __abs__(self) -> Unary:
        return Unary("abs", self)

    def __bool__(self) -> bool:
        raise ExpressionError(
            f"the truth value of the expression {self!r} is evaluated per row: combine "
            f"conditions with & and | (not 'and', 'or'), and wrap each in parentheses")

    __hash__ = object.__hash__

    def isin(self, values: Iterable[Any]) -> IsIn:
        if isinstance(values, (str, bytes)):
            raise ExpressionError(f"isin takes a collection of values, not the string {values!r}")
        return IsIn(self, tuple(values))

    def between(self, left: Any, right: Any, inclusive: str = "both") -> Between:
        if inclusive not in ("both", "neither", "left", "right"):
            raise ExpressionError(f"inclusive={inclusive!r}: choose 'both', 'neither', 'left' "
                                  f"or 'right'")
        return Between(self, left, right, inclusive)

    def isna(self) -> Unary:
        return Unary("isna", self)

    def notna(self) -> Unary:
        return Unary("notna", self)

    isnull = isna
    notnull = notna

    def abs(self) -> Unary:
        return Unary("abs", self)

    def astype(self, dtype: Any) -> Cast:
        return Cast(self, pd.api.types.pandas_dtype(dtype))

    def fillna(self, value: Any) -> FillNull:
        return FillNull(self, value)

    def where(self, cond: Any, other: Any) -> Where:
        """This value where ``cond`` holds, else ``other``: SQL's ``CASE WHEN``, as in pandas'
        ``Series.where`` (a missing condition takes ``other``)."""
        return Where(self, as_expr(cond), as_expr(other))

    @property
    def str(self) -> StringAccessor:
        return StringAccessor(self)

    @property
    def dt(self) -> DateAccessor:
        return DateAccessor(self)

    def __repr__(self) -> builtins.str:
        return self.text()

    def text(self) -> builtins.str:
        """How the expression reads in ``explain()``."""
        raise NotImplementedError


def as_expr(value: Any) -> Expr:
    """``value`` as an expression: expressions stay, anything else is a literal."""
    return value if isinstance(value, Expr) else Lit(value)


def col(name: str) -> Col:
    """The column called ``name``, as an expression."""
    return Col(name)


@dataclass(frozen=True, eq=False, repr=False)
class Col(Expr):
    name: str

    def columns(self) -> frozenset[str]:
        return frozenset((self.name,))

    def evaluate(self, frame: Columns) -> Any:
        if self.name not in frame.columns:
            raise UnknownColumnError(f"column {self.name!r} is not among the frame's columns "
                                      f"{list(frame.columns)}")
        return frame[self.name]

    def rename(self, mapping: Mapping[str, str]) -> Expr:
        return Col(mapping.get(self.name, self.name))

    def key(self) -> tuple:
        return ("col", self.name)

    def text(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False, repr=False)
class Lit(Expr):
    value: Any

    def evaluate(self, frame: Columns) -> Any:
        return self.value

    def rename(self, mapping: Mapping[str, str]) -> Expr:
        return self

    def key(self) -> tuple:
        return ("lit", type(self.value).__name__, repr(self.value))

    def text(self) -> str:
        return repr(self.value)


@dataclass(frozen=True, eq=False, repr=False)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def evaluate(self, frame: Columns) -> Any:
        return BINARY[self.op](self.left.evaluate(frame), self.right.evaluate(frame))

    def rename(self, mapping: Mapping[str, str]) -> Expr:
        return Binary(self.op, self.left.rename(mapping), self.right.rename(mapping))

    def key(self) -> tuple:
        return ("binary", self.op, self.left.key(), self.right.key())

    def text(self) -> str:
        return f"({self.left.text()} {self.op} {self.right.text()})"


@dataclass(frozen=True, eq=False, repr=False)
class Unary(Expr):
    op: str  # "~", "neg", "abs", "isna", "notna"
    operand: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def evaluate(self, frame: Columns) -> Any:
        value = self.operand.evaluate(frame)
        if self.op == "~":
            return ~value
        if self.op == "neg":
            return -value
        if self.op == "abs":
            return abs(value)
        return value.isna() if self.op == "isna" else value.notna()

    def rename(self, mapping: Mapping[str, str]) -> Expr:
        return Unary(self.op, self.operand.rename(mapping))

    def key(self) -> tuple:
        return ("unary", self.op, self.operand.key())

    def text(self) -> str:
        if self.op in ("~", "neg"):
            return f"{'~' if self.op == '~' else '-'}{self.operand.text()}"
        return f"{self.operand.text()}.{self.op}()"


@dataclass(frozen=True, eq=False, repr=False)
class IsIn(Expr):
    operand: Expr
    values: tuple

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def evaluate(self, frame: Columns) -> Any:
        return self.operand.evaluate(frame).isin(list(self.values))

    def rename(self, mapping: Mapping[str, str]) -> Expr:
        return IsIn(self.operand.rename(mapping), self.values)

    def key(self) -> tuple:
        return ("isin", self.operand.key(), repr(self.values))

    def text(self) -> str:
        return f"{self.operand.text()}.isin({list(self.values)!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Between(Expr):
    operand: Expr
    low: Any
    high: Any
    inclusive: str = "both"

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def evaluate(self, frame: Columns) -> Any:
        return self.operand.evaluate(frame).between(self.low, self.high,
                                                    inclusive=self.inclusive)

    def rename(self, mapping: Mapping[str, str]) -> Expr:
        return Between(self.operand.rename(mapping), self.low, self.high, self.inclusive)

    def key(self) -> tuple:
        return ("between", self.operand.key(), repr(self.low), repr(self.high), self.inclusive)

    def text(self) -> str:
        return (f"{self.operand.text()}.between({self.low!r}, {self.high!r}, "
                f"{self.inclusive!r})")

    def bounds(self) -> tuple[Binary, Binary]:
        """The two comparisons the range means."""
        low_op = ">=" if self.inclusive in ("both", "left") else ">"
        high_op = "<=" if self.inclusive in ("both", "right") else "<"
        return (Binary(low_op, self.operand, Lit(self.low)),
                Binary(high_op, self.operand, Lit(self.high)))


@dataclass(frozen=True, eq=False, repr=False)
class Cast(Expr):
    operand: Expr
    dtype: Any

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def evaluate(self, frame: Columns) -> Any:
        return self.operand.evaluate(frame).astype(self.dtype)

    def rename(self, mapping: Mapping[str, str]) -> Expr:
        return Cast(self.operand.rename(mapping), self.dtype)

    def key(self) -> tuple:
        return ("cast", self.operand.key(), str(self.dtype))

    def text(self) -> str:
        return f"{self.operand.text()}.astype({str(self.dtype)!r})"


@dataclass(frozen=True, eq=False, repr=False)
class FillNull(Expr):
    operand: Expr
    value: Any

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def evaluate(self, frame: Columns) -> Any:
        return self.operand.evaluate(frame).fillna(self.value)

    def rename(self, mapping: Mapping[str, str]) -> Expr:
        return FillNull(self.operand.rename(mapping), self.value)

    def key(self) -> tuple:
        return ("fillna", self.operand.key(), repr(self.value))

    def text(self) -> str:
        return f"{self.operand.text()}.fillna({self.value!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Where(Expr):
    operand: Expr
    cond: Expr
    other: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.operand, self.cond, self.other)

    def evaluate(self, frame: Columns) -> Any:
        value = self.operand.evaluate(frame)
        if not hasattr(value, "where"):
            raise ExpressionError(f"{self!r}: where() needs a column to choose from, not the "
                                  f"scalar {value!r}")
        return value.where(evaluate_mask(self.cond, frame), self.other.evaluate(frame))

    def rename(self, mapping: Mapping[str, str]) -> Expr:
        return Where(self.operand.rename(mapping), self.cond.rename(mapping),
                     self.other.rename(mapping))

    def key(self) -> tuple:
        return ("where", self.operand.key(), self.cond.key(), self.other.key())

    def text(self) -> str:
        return f"{self.operand.text()}.where({self.cond.text()}, {self.other.text()})"


@dataclass(frozen=True, eq=False, repr=False)
class StringOp(Expr):
    operand: Expr
    method: str
    args: tuple = ()

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def evaluate(self, frame: Columns) -> Any:
        strings = self.operand.evaluate(frame).str
        if self.method == "contains":
            pattern, regex = self.args
            return strings.contains(pattern, regex=regex)
        return getattr(strings, self.method)(*self.args)

    def rename(self, mapping: Mapping[str, str]) -> Expr:
        return StringOp(self.operand.rename(mapping), self.method, self.args)

    def key(self) -> tuple:
        return ("str", self.method, self.operand.key(), repr(self.args))

    def text(self) -> str:
        return f"{self.operand.text()}.str.{self.method}({', '.join(map(repr, self.args))})"


@dataclass(frozen=True, eq=False, repr=False)
class DatePart(Expr):
    operand: Expr
    part: str

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def evaluate(self, frame: Columns) -> Any:
        return getattr(self.operand.evaluate(frame).dt, self.part)

    def rename(self, mapping: Mapping[str, str]) -> Expr:
        return DatePart(self.operand.rename(mapping), self.part)

    def key(self) -> tuple:
        return ("dt", self.part, self.operand.key())

    def text(self) -> str:
        return f"{self.operand.text()}.dt.{self.part}"


class StringAccessor:
    """``expr.str``: the string methods that both pandas and cuDF evaluate."""

    def __init__(self, operand: Expr) -> None:
        self._operand = operand

    def startswith(self, prefix: str) -> StringOp:
        return StringOp(self._operand, "startswith", (_text_arg(prefix, "startswith"),))

    def endswith(self, suffix: str) -> StringOp:
        return StringOp(self._operand, "endswith", (_text_arg(suffix, "endswith"),))

    def contains(self, pattern: str, regex: bool = True) -> StringOp:
        return StringOp(self._operand, "contains", (_text_arg(pattern, "contains"), bool(regex)))

    def lower(self) -> StringOp:
        return StringOp(self._operand, "lower")

    def upper(self) -> StringOp:
        return StringOp(self._operand, "upper")

    def strip(self) -> StringOp:
        return StringOp(self._operand, "strip")

    def len(self) -> StringOp:
        return StringOp(self._operand, "len")

    def slice(self, start: int | None = None, stop: int | None = None) -> StringOp:
        """Characters ``start`` to ``stop`` (SQL's ``SUBSTRING(s, start + 1, stop - start)``)."""
        for bound in (start, stop):
            if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool)):
                raise ExpressionError(f".str.slice takes integer bounds, not {bound!r}")
        return StringOp(self._operand, "slice", (start, stop))


class DateAccessor:
    """``expr.dt``: date and time parts (``expr.dt.year``, ...)."""

    def __init__(self, operand: Expr) -> None:
        self._operand = operand

    def __getattr__(self, part: str) -> DatePart:
        if part not in DATE_PARTS:
            raise AttributeError(f"no date part {part!r}; choose one of {', '.join(DATE_PARTS)}")
        return DatePart(self._operand, part)


def _text_arg(value: Any, method: str) -> str:
    if not isinstance(value, str):
        raise ExpressionError(f".str.{method} takes a string, not {value!r}")
    return value


def evaluate_mask(predicate: Expr, frame: Columns) -> Any:
    """The boolean row mask of ``predicate`` on ``frame``: a missing result keeps no row (as
    pandas treats NA in a boolean mask, and SQL a null condition)."""
    mask = predicate.evaluate(frame)
    if not hasattr(mask, "dtype") or not pd.api.types.is_bool_dtype(mask.dtype):
        raise ExpressionError(f"the filter {predicate!r} gives {getattr(mask, 'dtype', mask)!r} "
                              f"values, not booleans")
    if mask.hasnans:
        mask = mask.fillna(False)
    return mask.astype(bool)
