"""Schemas the plan works out on empty pandas frames, remembered by what they depend on.

The optimizer rebuilds a plan's nodes at each rewrite of their inputs, and each node works its
schema out on empty pandas frames: a selection, an expression's evaluation, a merge of two
empty frames (up to milliseconds a node). What one found depends on nothing but its input
schemas (:func:`schema_key`) and the node's own arguments, so it is found once per such key.
The frames found are shared, as nodes share their schemas: nothing changes one in place.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pandas as pd

KEPT = 1024
"""Keys remembered, the oldest forgotten first."""

_found: dict[tuple[Any, ...], Any] = {}
_found_lock = threading.Lock()


def remembered(key: tuple[Any, ...], find: Callable[[], Any]) -> Any:
    """``find()``, remembered by ``key``; a failure is not. Threads plan and unpickle schemas
    at once (the client's, a worker's loop and task threads): the lookup and the eviction hold
    a lock, ``find`` does not (it may ask for other keys); of two threads finding one key, the
    first one's answer is kept and both get it."""
    with _found_lock:
        if key in _found:
            return _found[key]
    found = find()
    with _found_lock:
        found = _found.setdefault(key, found)
        while len(_found) > KEPT:
            del _found[next(iter(_found))]
    return found


_of: dict[tuple[str, int], tuple[Any, Any]] = {}
_of_lock = threading.Lock()


def remembered_of(kind: str, thing: Any, find: Callable[[Any], Any]) -> Any:
    """``find(thing)``, remembered by ``thing``'s identity for this ``kind`` of answer, the thing
    kept with it (so that its identity stays its own), as many as :data:`KEPT`, the oldest
    forgotten first: for what is asked of the plan's shared frames over and over."""
    key = (kind, id(thing))
    with _of_lock:
        kept = _of.get(key)
    if kept is not None and kept[0] is thing:
        return kept[1]
    found = find(thing)
    with _of_lock:
        _of[key] = (thing, found)
        while len(_of) > KEPT:
            _of.pop(next(iter(_of)), None)
    return found


def schema_key(meta: pd.DataFrame) -> tuple[tuple[Any, Any], ...]:
    """``meta``'s columns and dtypes, in order, hashable (a dtype compares its zone, unit and
    categories). Read once per frame while remembered: a plan's frames are asked again at each
    rewrite of the nodes above them, and reading a frame's dtypes builds a Series each time."""
    return remembered_of("schema key", meta,
                         lambda frame: tuple(zip(frame.columns, frame.dtypes)))


def column_names(meta: pd.DataFrame) -> tuple[Any, ...]:
    """``meta``'s column labels, in order. Read once per frame while remembered: the optimizer
    asks each node's columns at every rewrite, and iterating pandas' Index of Arrow-backed
    strings (pandas 3's default) takes Python time per label."""
    return remembered_of("column names", meta, lambda frame: tuple(frame.columns))
