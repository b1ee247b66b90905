"""Where partitions live and how rows were placed in them.

An :class:`OwnerPolicy` maps an exchange's buckets to workers: :class:`RoundRobin` spreads
consecutive buckets over the workers (hash buckets: each worker gets every n-th), and
:class:`Contiguous` gives each worker a run of consecutive buckets (ranges: each worker holds one
stretch of the order, and several buckets per worker keep each task's share of memory small).

A :class:`HashPartitioning` records that partition ``b`` of a frame holds exactly the rows whose
keys, cast to their hash types, hash to bucket ``b`` of ``n``: a later join or groupby on the same
keys, hash types and buckets finds equal keys already together and moves nothing. A
:class:`RangeOrdering` records that a frame's partitions in order are sorted (a sort's output): a
later sort that it already serves moves nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


class OwnerPolicy(Protocol):
    """Maps ``n`` buckets onto ``workers``."""

    def owners(self, workers: Sequence[str], n: int) -> list[str]: ...


@dataclass(frozen=True)
class RoundRobin:
    """Bucket ``b`` to worker ``b % len(workers)``."""

    def owners(self, workers: Sequence[str], n: int) -> list[str]:
        return [workers[b % len(workers)] for b in range(n)]


@dataclass(frozen=True)
class Contiguous:
    """Buckets in runs, one run per worker, in worker order: ``b * len(workers) // n``."""

    def owners(self, workers: Sequence[str], n: int) -> list[str]:
        return [workers[b * len(workers) // n] for b in range(n)]


@dataclass(frozen=True)
class HashPartitioning:
    """Rows placed by the hash of ``keys`` (in the dtypes ``hash_types`` names, as strings)
    into ``n`` buckets, bucket ``b`` being partition ``b``, owned by ``owners[b]``."""

    keys: tuple[str, ...]
    hash_types: tuple[str, ...]
    n: int
    owners: tuple[str, ...]

    def renamed(self, mapping: Mapping[str, str]) -> HashPartitioning:
        return HashPartitioning(tuple(mapping.get(k, k) for k in self.keys), self.hash_types,
                                self.n, self.owners)

    def serves(self, keys: Sequence[str], hash_types: Sequence[str]) -> bool:
        """Whether rows with equal ``keys`` (hashed as ``hash_types``) already share a
        partition."""
        return tuple(keys) == self.keys and tuple(hash_types) == self.hash_types

    def describe(self) -> str:
        return f"hash({', '.join(self.keys)}) into {self.n}"


@dataclass(frozen=True)
class RangeOrdering:
    """Rows ordered by ``keys`` (one direction each; missing values last or first) across a
    frame's partitions: each partition in order, and partition ``b``'s rows ordering at or
    before partition ``b + 1``'s, so the partitions in order are the sorted frame."""

    keys: tuple[str, ...]
    ascending: tuple[bool, ...]
    nulls_last: bool

    def serves(self, keys: Sequence[str], ascending: Sequence[bool], nulls_last: bool) -> bool:
        """Whether a stable sort by ``keys`` would leave these rows as they are: the keys and
        directions asked lead this order, with missing values on the same side."""
        n = len(keys)
        return (tuple(keys) == self.keys[:n] and tuple(ascending) == self.ascending[:n]
                and nulls_last == self.nulls_last)

    def describe(self) -> str:
        keys = ", ".join(f"{k} {'asc' if a else 'desc'}" for k, a in zip(self.keys,
                                                                          self.ascending))
        return f"ordered by [{keys}] nulls {'last' if self.nulls_last else 'first'}"


Partitioning = HashPartitioning
"""The placements the engine records (range placement joins it with sorting)."""
