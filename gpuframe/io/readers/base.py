"""What a reader of fragments offers (:class:`Reader`), and what it says it fetched
(:class:`ReadStats`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import cudf
    import pyarrow as pa

    from ..tasks import FragmentTask


@dataclass(frozen=True)
class ReadStats:
    """What one read task fetched for its fragments: bytes over the wire (or from disk),
    requests, units, rows, seconds. ``path``: the first fragment's file."""

    key: str
    path: str
    bytes_read: int
    requests: int
    units_read: int
    rows: int
    seconds: float


class Reader(Protocol):
    """Reads one read group's fragments on a worker, as one table of its backend."""

    def read(self, key: str, tasks: Sequence[FragmentTask]
             ) -> tuple[pa.Table | cudf.DataFrame, ReadStats]:
        """The fragments' rows in order, and :class:`ReadStats` under ``key`` (the task's)."""
        ...
