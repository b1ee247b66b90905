"""Schemas the plan works out on empty pandas frames, remembered by what they depend on.

The optimizer rebuilds a plan's nodes at each rewrite of their inputs, and each node works its
schema out on empty pandas frames: a selection, an expression's evaluation, a merge of two
empty frames (up to milliseconds a node). What one found depends on nothing but its input
schemas (:func:`schema_key`) and the node's own arguments, so it is found once per such key.
The frames found are shared, as nodes share their schemas: nothing changes one in place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

KEPT = 1024
"""Keys remembered, the oldest forgotten first."""

_found: dict[tuple[Any, ...], Any] = {}


def remembered(key: tuple[Any, ...], find: Callable[[], Any]) -> Any:
    """``find()``, remembered by ``key``; a failure is not."""
    if key not in _found:
        _found[key] = find()
        while len(_found) > KEPT:
            del _found[next(iter(_found))]
    return _found[key]


_keys: dict[int, tuple[pd.DataFrame, tuple[tuple[Any, Any], ...]]] = {}


def schema_key(meta: pd.DataFrame) -> tuple[tuple[Any, Any], ...]:
    """``meta``'s columns and dtypes, in order, hashable (a dtype compares its zone, unit and
    categories). Kept by the frame's identity, the frame with it (so that the identity stays
    its own), as many as :data:`KEPT`: a plan's frames are asked again at each rewrite of the
    nodes above them, and reading a frame's dtypes builds a Series each time."""
    kept = _keys.get(id(meta))
    if kept is not None and kept[0] is meta:
        return kept[1]
    key = tuple(zip(meta.columns, meta.dtypes))
    _keys[id(meta)] = (meta, key)
    while len(_keys) > KEPT:
        _keys.pop(next(iter(_keys)), None)
    return key
