"""What a whole read fetched, against what its plan expected and its result holds
(:class:`ReadReport`): summed on the client from the stats its read tasks kept on their workers
(:func:`~gpuframe.io.readers.task.take_kept_stats`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .planning.plan import ReadPlan
    from .readers.base import KeptStats


@dataclass(frozen=True)
class ReadReport:
    """What a whole read fetched, against what the plan expected and the result holds."""

    format: str
    fragments: int
    bytes_read: int
    planned_bytes: int
    result_column_bytes: int
    requests: int
    rows: int
    units_kept: int
    units_total: int
    seconds: float

    @classmethod
    def from_stats(cls, plan: ReadPlan, stats: Iterable[KeptStats], seconds: float
                   ) -> ReadReport:
        """The report of ``plan``'s read from its tasks' stats, each task's once."""
        stats = list(stats)
        return cls(
            format=plan.format.name,
            fragments=len(plan.fragments),
            bytes_read=sum(s["bytes_read"] for s in stats),
            planned_bytes=plan.total_bytes,
            result_column_bytes=plan.result_bytes,
            requests=sum(s["requests"] for s in stats),
            rows=sum(s["rows"] for s in stats),
            units_kept=plan.units_kept,
            units_total=plan.units_total,
            seconds=seconds,
        )

    def __repr__(self) -> str:
        return (f"<ReadReport {self.format}: {self.fragments} fragments, {self.rows} rows: read "
                f"{self.bytes_read / 2**20:.2f} MiB in {self.requests} requests (planned "
                f"{self.planned_bytes / 2**20:.2f} MiB) for "
                f"{self.result_column_bytes / 2**20:.2f} MiB of result columns; units "
                f"{self.units_kept}/{self.units_total} after statistics; "
                f"{self.seconds:.2f} s>")
