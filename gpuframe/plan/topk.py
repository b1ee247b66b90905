"""The top-k node: the first ``n`` rows of an order, found without sorting the whole frame
(``nlargest``, ``nsmallest``, and ``head(n)`` of a sort)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd
from pandas.api.types import is_bool_dtype, is_complex_dtype, is_numeric_dtype

from ..errors import ColumnTypeError, OptionError
from .nodes import Node
from .sort import Sort, SortKeys

TIES = ("first", "last")


@dataclass(eq=False)
class TopK(Node):
    """The first ``n`` rows of ``child`` ordered by ``keys``: ``sort_values(...).head(n)``.
    Rows of equal keys come in input order (``ties="first"``) or in reverse input order
    (``"last"``, as pandas' ``nlargest(keep="last")``). One output partition."""

    child: Node
    n: int
    keys: SortKeys
    ties: str = "first"
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 0:
            raise OptionError(f"top-k: n={self.n!r} must be a whole number, 0 or more")
        if self.ties not in TIES:
            raise OptionError(f"top-k: keep={self.ties!r}: choose 'first' or 'last' ('all' "
                              f"gives a number of rows known only once the data is read)")
        self.meta = self.child.meta

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    def with_children(self, children: Sequence[Node]) -> Node:
        return TopK(children[0], self.n, self.keys, self.ties)

    def describe(self) -> str:
        return f"TopK {self.n} by {self.keys.describe()} ties {self.ties}"


def selection(meta: pd.DataFrame, n: int, columns: str | Sequence[str], largest: bool,
              keep: str, child: Node) -> TopK:
    """``nlargest``/``nsmallest``'s node, refusing columns pandas refuses (not numbers, times
    or durations). Rows with a missing key come last."""
    method = "nlargest" if largest else "nsmallest"
    keys = SortKeys.of(meta, columns, not largest, "last", method)
    for name in keys.by:
        dtype = meta[name].dtype
        if not (is_numeric_dtype(dtype) and not is_complex_dtype(dtype)
                or dtype.kind in "mM" or is_bool_dtype(dtype)):
            raise ColumnTypeError(f"{method}: column {name!r} has dtype {dtype}, which "
                                  f"{method} cannot order")
    return TopK(child, n, keys, keep)


def head_of(node: Node, n: int) -> Node | None:
    """``node``'s first ``n`` rows as a top-k, where ``node`` is a sort (else None): what
    ``head(n)`` of a sorted frame becomes."""
    if isinstance(node, Sort):
        return TopK(node.child, n, node.keys)
    return None
