"""The distinct-rows node: ``drop_duplicates(subset, keep=)``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from ..errors import OptionError
from .nodes import Node, check_columns


@dataclass(eq=False)
class Distinct(Node):
    """The rows of ``child`` but one of each set that agrees on ``subset``: the first of each
    in input order (``keep="first"``), the last (``"last"``), or none of a set of several
    (``False``), as ``pandas.DataFrame.drop_duplicates`` keeps them. Rows with equal ``subset``
    values share a partition of the output (``npartitions`` of them; None: one per worker), in
    input order within it."""

    child: Node
    subset: tuple[str, ...]
    keep: str | bool = "first"
    npartitions: int | None = None
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.subset:
            raise OptionError("drop_duplicates: subset names no column")
        check_columns(self.subset, self.child.meta, "drop_duplicates")
        if self.keep is not False and self.keep not in ("first", "last"):
            raise OptionError(f"drop_duplicates: keep={self.keep!r}: choose 'first', 'last' "
                              f"or False")
        if self.npartitions is not None and self.npartitions < 1:
            raise OptionError(f"drop_duplicates: npartitions={self.npartitions} must be at "
                              f"least 1")
        self.meta = self.child.meta

    @classmethod
    def of(cls, child: Node, subset: str | Sequence[str] | None, keep: str | bool,
           npartitions: int | None) -> Distinct:
        """As pandas takes ``subset``: a column, several, or None for all of them."""
        names = (tuple(child.meta.columns) if subset is None
                 else (subset,) if isinstance(subset, str) else tuple(subset))
        return cls(child, names, keep, npartitions)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    def with_children(self, children: Sequence[Node]) -> Node:
        return Distinct(children[0], self.subset, self.keep, self.npartitions)

    def describe(self) -> str:
        return f"Distinct on [{', '.join(self.subset)}] keep={self.keep!r}"
