"""Empty pandas frames in what tasks carry, sent as their columns and dtypes.

Operators hand their tasks the schemas they work to as empty pandas frames (a join's sides and
output, an aggregate's source and result, a sort's). pandas pickles a frame of text columns
through Arrow, a third of a millisecond a frame, and a task's arguments are pickled by the
client, unpickled and pickled again by the scheduler and unpickled by the worker, at every task
of every query. Sent as (name, dtype) pairs instead, an empty frame is rebuilt once per process
and schema (:func:`~gpuframe.remembered.remembered`) and shared, as the plan shares its schemas:
nothing changes one in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from .remembered import remembered, remembered_of, schema_key


class SendsSchemas:
    """For a task's state (a frozen dataclass): its fields that hold empty frames, alone or in a
    tuple, pickle as :class:`SentSchema`."""

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return _received, (type(self), {name: _sent(value) for name, value in vars(self).items()})


@dataclass(frozen=True)
class SentSchema:
    """An empty frame's columns (name, dtype) in order, and its column index's dtype."""

    columns: tuple[tuple[Any, Any], ...]
    names_dtype: Any


def _sent(value: Any) -> Any:
    if type(value) is tuple:  # a named tuple goes as itself
        return tuple(_sent(item) for item in value)
    if type(value) is not pd.DataFrame:
        return value
    # the plan's frames are sent over and over, and reading one's dtypes costs about what
    # pickling it does
    schema = remembered_of("sent schema", value, _schema_of)
    return value if schema is None else schema


def _schema_of(frame: pd.DataFrame) -> SentSchema | None:
    """``frame``'s :class:`SentSchema`; None where the frame must go as itself (rows, an
    index of its own, a dtype that is no key)."""
    if not _rebuildable(frame):
        return None
    schema = SentSchema(schema_key(frame), frame.columns.dtype)
    try:
        hash(schema)
    except TypeError:
        return None
    return schema


def _rebuildable(frame: pd.DataFrame) -> bool:
    """Whether ``frame`` is all its schema says: no rows, a plain unnamed row index, unique
    columns under an unnamed flat index, no attrs."""
    return (len(frame) == 0 and type(frame.index) is pd.RangeIndex and frame.index.name is None
            and not isinstance(frame.columns, pd.MultiIndex) and frame.columns.name is None
            and frame.columns.is_unique and not frame.attrs)


def _received(cls: type, state: dict[str, Any]) -> Any:
    received: Any = object.__new__(cls)
    received.__dict__.update({name: _frame(value) for name, value in state.items()})
    return received


def _frame(value: Any) -> Any:
    if type(value) is tuple:  # a named tuple goes as itself
        return tuple(_frame(item) for item in value)
    if isinstance(value, SentSchema):
        return remembered(("sent schema", value), lambda: empty_frame(value))
    return value


def empty_frame(schema: SentSchema) -> pd.DataFrame:
    """The empty frame ``schema`` describes."""
    frame = pd.DataFrame({name: pd.Series([], dtype=dtype) for name, dtype in schema.columns})
    frame.columns = pd.Index([name for name, _ in schema.columns], dtype=schema.names_dtype)
    return frame
