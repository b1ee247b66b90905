"""A process's one-time work, made by the first caller while any other waits.

``functools.cache`` lets two first callers of a function both run it, each keeping its own
answer: harmless for a pure function, not for one that registers something (it would register
twice) or allocates much (it would allocate twice). Threads ask at once in gpuframe's processes:
a worker's event loop, its task threads, the client's.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Once(Generic[T]):
    """``make()``'s answer, made on the first call, under a lock, and given to every call
    after; a failure is not kept. Used as a decorator; ``__wrapped__`` is ``make``."""

    def __init__(self, make: Callable[[], T]) -> None:
        functools.update_wrapper(self, make)
        self._make = make
        self._lock = threading.Lock()
        self._made: list[T] = []

    def __call__(self) -> T:
        with self._lock:
            if not self._made:
                self._made.append(self._make())
            return self._made[0]

    @property
    def made(self) -> bool:
        """Whether the answer was made in this process."""
        return bool(self._made)
