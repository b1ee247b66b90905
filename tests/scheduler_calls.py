"""Counting the calls a scheduler answers: what tests of the engine's fixed costs assert on."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def calls_answered(scheduler: Any, op: str) -> Iterator[list[dict[str, Any]]]:
    """The calls of ``op`` that ``scheduler`` (one in this process) answers within the block,
    each by its arguments."""
    calls: list[dict[str, Any]] = []
    handler = scheduler.handlers[op]

    @functools.wraps(handler)  # the scheduler passes ``comm`` where the handler takes it
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return handler(*args, **kwargs)

    scheduler.handlers[op] = counted
    try:
        yield calls
    finally:
        scheduler.handlers[op] = handler
