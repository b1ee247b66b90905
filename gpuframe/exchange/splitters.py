"""Splitters: how one partition's rows are cut into an exchange's buckets, on its worker.

A splitter is a small picklable object with ``n`` buckets and ``split(frame, index, sealed)``,
which returns ``n`` frames of the frame's own library (``index``: the partition's number, for
splitters that deal rows round robin); with ``sealed``, any of them may come as a
:class:`~gpuframe.exchange.pack.Parcel` instead, still packed, which the direct exchange sends
as it is and opens where it arrives (:func:`~gpuframe.exchange.bucket.arrived`). The exchange
(:mod:`~gpuframe.exchange.exchange`) runs it where each partition lies and sends bucket ``b`` to
its owner; what decides a row's bucket is the splitter's alone:

- :class:`HashSplitter`: the hash of key columns (gpuframe's native core: one hash on the CPU
  and the GPU), after casting them to their hash types so that equal values hash equally;
- :class:`RangeSplitter`: the position of the row's keys among sorted boundaries, so bucket ``b``
  holds smaller keys than bucket ``b + 1``;
- :class:`DestinationSplitter`: destinations computed by the caller, one per row, in a column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd

from ..backend import cast_columns
from .pack import hash_split, range_split, split_by_destinations


class Splitter(Protocol):
    """Cuts a partition's rows into ``n`` buckets."""

    @property
    def n(self) -> int: ...

    def split(self, frame: Any, index: int, sealed: bool = False) -> list[Any]: ...


def cast_keys(frame: Any, casts: dict[str, Any]) -> Any:
    """``frame`` with its key columns in their hash types (itself when none differ)."""
    return cast_columns(frame, casts)


@dataclass(frozen=True)
class HashSplitter:
    """Rows by the hash of ``keys``, cast first by ``casts`` ({column: dtype}); the buckets hold
    the cast columns."""

    keys: tuple[str, ...]
    n: int
    casts: dict[str, Any] = field(default_factory=dict)

    def split(self, frame: Any, index: int, sealed: bool = False) -> list[Any]:
        return hash_split(cast_keys(frame, self.casts), list(self.keys), self.n, sealed)


@dataclass(frozen=True)
class RangeSplitter:
    """Rows by their ``keys``' place among ``boundaries`` (a pandas frame of ``n - 1`` sorted
    rows over ``keys``): bucket ``b`` holds the rows after ``b`` boundaries, in the order that
    ``ascending`` (one flag per key) and ``nulls_last`` say."""

    keys: tuple[str, ...]
    boundaries: pd.DataFrame
    ascending: tuple[bool, ...]
    nulls_last: bool = True

    @property
    def n(self) -> int:
        return len(self.boundaries) + 1

    def split(self, frame: Any, index: int, sealed: bool = False) -> list[Any]:
        return range_split(frame, list(self.keys), self.boundaries, ascending=list(self.ascending),
                           nulls_last=self.nulls_last, sealed=sealed)


@dataclass(frozen=True)
class DestinationSplitter:
    """Rows by the bucket number in their ``column`` (dropped from the buckets)."""

    column: str
    n: int

    def split(self, frame: Any, index: int, sealed: bool = False) -> list[Any]:
        destinations = frame[self.column].values
        return split_by_destinations(frame.drop(columns=[self.column]), destinations, self.n,
                                     sealed)
