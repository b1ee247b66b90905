"""The concatenation node: several frames' rows, one after another, under one schema."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pandas.api.types import is_object_dtype

from ..backend import Backend, get_backend
from ..errors import ColumnTypeError, OptionError
from .nodes import Node


class ConcatSchemaError(ColumnTypeError):
    """The inputs of a concatenation hold a column in types that share no type but Python
    objects (numbers and strings, say), which a cuDF column cannot hold."""


@dataclass(eq=False)
class Concat(Node):
    """The rows of ``inputs`` in order, as ``pandas.concat`` gives them: the columns of all
    inputs in order of appearance, each in the type pandas gives the union (a column an input
    lacks is missing in its rows: integers become float64, as in pandas). The output's
    partitions are the inputs' partitions, in order."""

    inputs: tuple[Node, ...]
    backend: str
    """The engine's backend, whose partitions' dtypes the schema gives."""
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.inputs:
            raise OptionError("concat: give at least one frame")
        self.meta = concat_schema([child.meta for child in self.inputs],
                                  get_backend(self.backend))

    @property
    def children(self) -> tuple[Node, ...]:
        return self.inputs

    def with_children(self, children: Sequence[Node]) -> Node:
        return Concat(tuple(children), self.backend)

    def describe(self) -> str:
        return f"Concat {len(self.inputs)} frames"


def concat_schema(metas: list[pd.DataFrame], backend: Backend) -> pd.DataFrame:
    """The schema of the concatenation of frames of schemas ``metas`` (see :class:`Concat`);
    raises :class:`ConcatSchemaError` naming a column whose types pandas could only join as
    objects."""
    names = list(dict.fromkeys(name for meta in metas for name in meta.columns))
    columns = {}
    for name in names:
        dtypes = [meta[name].dtype for meta in metas if name in meta.columns]
        if len(dtypes) < len(metas):
            dtypes = [backend.missing_dtype(dtype) for dtype in dtypes]
        columns[name] = pd.Series([], dtype=common_dtype(name, dtypes))
    return pd.DataFrame(columns)


def common_dtype(name: str, dtypes: list[Any]) -> Any:
    """The dtype pandas.concat gives column ``name`` from parts of ``dtypes``."""
    common = pd.concat([pd.Series([], dtype=dtype) for dtype in dtypes]).dtype
    if is_object_dtype(common) and not any(is_object_dtype(dtype) for dtype in dtypes):
        raise ConcatSchemaError(
            f"concat: column {name!r} is {', '.join(sorted({str(d) for d in dtypes}))} in "
            f"different inputs, which only Python objects hold together: cast it to one type "
            f"first")
    return common
