"""The distinct-rows operator: drop duplicates where each partition lies, hash exchange on the
subset columns, drop again per bucket.

Each partition first drops its own duplicates (a frame with few distinct rows then sends little),
with every row's position (:mod:`~gpuframe.operators.positions`) added, then is hashed on the
subset into buckets (both in one task per partition). Each bucket, all the candidates for its
keys, is put back in input order by position, so ``keep="first"`` and ``"last"`` keep the row
pandas keeps. For ``keep=False`` a partition keeps one row of each of its keys, marked when it
stood for several, and a bucket keeps a key only when one unmarked row of it arrived.

The output is hash-partitioned on the subset columns
(:class:`~gpuframe.exchange.placement.HashPartitioning`), which a later join on them reuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..backend import get_backend
from ..exchange.exchange import exchange
from ..exchange.mailbox import arrivals
from ..exchange.placement import Contiguous, HashPartitioning
from ..exchange.splitters import HashSplitter
from ..plan.distinct import Distinct
from ..runtime.runner import Partitions
from ..sent_schemas import SendsSchemas
from .lowering import Lowering, lower
from .positions import position_column, with_positions


@dataclass(frozen=True)
class LocalDistinct(SendsSchemas):
    """Drops duplicates of ``subset`` as ``keep`` says, on either side of the exchange; the
    positions travel in ``position``, and (for ``keep=False``) the mark of a row that stood for
    several in ``repeated``."""

    subset: tuple[str, ...]
    keep: str | bool
    position: str
    repeated: str
    meta: pd.DataFrame
    backend: str

    def reduce(self, part: Any) -> Any:
        """One partition's candidates (its rows carry their positions already)."""
        subset = list(self.subset)
        if self.keep is False:
            marked = part.assign(**{self.repeated: part.duplicated(subset, keep=False)})
            return marked.drop_duplicates(subset, keep="first")
        return part.drop_duplicates(subset, keep=self.keep)

    def finish(self, pieces: list[Any]) -> Any:
        """One bucket's rows that survive, in input order, without positions and marks."""
        frames = get_backend(self.backend)
        frame = frames.concat(arrivals(pieces))
        frame = frame.sort_values(self.position, ignore_index=True)
        subset = list(self.subset)
        if self.keep is False:
            alone = ~frame.duplicated(subset, keep=False) & ~frame[self.repeated]
            frame = frame[alone].drop(columns=[self.repeated])
        else:
            frame = frame.drop_duplicates(subset, keep=self.keep, ignore_index=True)
        frame = frame.drop(columns=[self.position]).reset_index(drop=True)
        return frames.astype(frame, list(self.meta.dtypes))


@dataclass(frozen=True)
class DistinctSplitter:
    """A partition's own duplicates dropped, positions added, then hashed on the subset."""

    local: LocalDistinct
    inner: HashSplitter

    @property
    def n(self) -> int:
        return self.inner.n

    def split(self, frame: Any, index: int, sealed: bool = False) -> list[Any]:
        positioned = with_positions(frame, index, self.local.position)
        return self.inner.split(self.local.reduce(positioned), index, sealed)


def distinct_bucket(local: LocalDistinct, pieces: list[Any]) -> Any:
    """The distinct task: ``local`` over the pieces of one bucket."""
    return local.finish(pieces)


@lower.register
def _(node: Distinct, lowering: Lowering) -> Partitions:
    job = lowering.job
    inputs = lowering.input(node.child)
    if not inputs.futures:
        return Partitions([], [], node.meta)
    position = position_column(node.meta.columns)
    local = LocalDistinct(node.subset, node.keep, position, position_column([position]),
                          node.meta, job.backend)
    n = node.npartitions or len(job.workers)
    splitter = DistinctSplitter(local, HashSplitter(node.subset, n))
    buckets = exchange(job, inputs, splitter, Contiguous(), "distinct")
    stage = job.stage("distinct")
    futures = [stage.submit(distinct_bucket, local, buckets.parts[b], index=(b,), owner=owner,
                            node=lowering.number(node))
               for b, owner in enumerate(buckets.owners)]
    hash_types = tuple(str(node.meta[name].dtype) for name in node.subset)
    lowering.note(node, f"dropped per partition, then hashed on the subset into {n}")
    return Partitions(futures, buckets.owners, node.meta,
                      HashPartitioning(node.subset, hash_types, n, tuple(buckets.owners)))
