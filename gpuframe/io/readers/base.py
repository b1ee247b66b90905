"""What a reader of fragments offers (:class:`Reader`), and what it says it fetched
(:class:`ReadStats`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypedDict

from ..errors import without_passwords

if TYPE_CHECKING:
    import cudf
    import pyarrow as pa

    from ..tasks import FragmentTask


class KeptStats(TypedDict):
    """A :class:`ReadStats` as the read event and the report carry it: its fields by name."""

    key: str
    path: str
    bytes_read: int
    requests: int
    units_read: int
    rows: int
    seconds: float


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

    def as_dict(self) -> KeptStats:
        """Its fields by name, as the read event and the client's report carry them."""
        return KeptStats(key=self.key, path=without_passwords(self.path),
                         bytes_read=self.bytes_read, requests=self.requests,
                         units_read=self.units_read, rows=self.rows, seconds=self.seconds)


class Reader(Protocol):
    """Reads one read group's fragments on a worker, as one table of its backend."""

    def read(self, key: str, tasks: Sequence[FragmentTask]
             ) -> tuple[pa.Table | cudf.DataFrame, ReadStats]:
        """The fragments' rows in order, and :class:`ReadStats` under ``key`` (the task's)."""
        ...
