"""What the operator APIs (:mod:`gpuframe.groupby`, :mod:`gpuframe.ordering`) need of a lazy
frame: they build on the frame without importing it, so that the frame's methods of the same
names may delegate to them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Self, TypeVar

import pandas as pd

from .plan.nodes import Node

if TYPE_CHECKING:
    from .cluster.engine import Engine


class LazyFrame(Protocol):
    """A lazy frame: its engine, plan and schema, and a frame of its kind over another plan."""

    engine: Engine

    @property
    def plan(self) -> Node: ...

    @property
    def meta(self) -> pd.DataFrame: ...

    def _derive(self, plan: Node) -> Self: ...


F = TypeVar("F", bound=LazyFrame)
"""A lazy frame's own type, which an operator's result keeps."""
