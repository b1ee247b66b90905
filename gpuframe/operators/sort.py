"""The sort operator: a range exchange over sampled boundaries, then a local sort per bucket.

1. **Sample**: every partition, where it lies, sends up to :data:`SAMPLE_ROWS` of its key tuples
   with their rows' positions (:mod:`~gpuframe.operators.positions`), its length and its bytes
   (``gpuframe-sample-sort`` tasks, one round trip).
2. **Boundaries**: the client sorts the samples and cuts them at ``n - 1`` weighted quantiles
   (each sampled row stands for its partition's length over its sample's), ``n`` being the
   output's partitions.
3. **Exchange**: each partition is cut where it lies by a
   :class:`~gpuframe.exchange.splitters.RangeSplitter` over the keys *and the position*, and
   bucket ``b`` goes to a :class:`~gpuframe.exchange.placement.Contiguous` owner, so each worker
   holds one stretch of the order.
4. **Local sort** of each bucket by the keys and then the position.

The position makes every row's sort key distinct: a key that holds most rows is cut over as many
buckets as its rows fill, like any other stretch of the order, and equal keys come out in their
input order (pandas' ``kind="stable"``), on either backend. The output's index is a fresh
RangeIndex per partition, and it records its
:class:`~gpuframe.exchange.placement.RangeOrdering`: a later sort that the order already serves
(the same leading keys and directions) passes the partitions through.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..backend import get_backend
from ..exchange.bucket import HOST_PROTOCOLS, arrived
from ..exchange.exchange import exchange
from ..exchange.placement import Contiguous
from ..exchange.splitters import RangeSplitter
from ..plan.sort import Sort, SortKeys
from ..runtime.runner import Partitions
from .lowering import Lowering, lower
from .positions import PositionedSplitter, position_column, positions

SAMPLE_ROWS = 1024
"""Key tuples sampled from each partition to choose the boundaries."""
PARTITION_BYTES = 256 * 2**20
"""Bytes an output partition is sized for when the caller does not say how many to make: the
sort's buckets and their sorted copy must fit one task's memory at once."""


@dataclass(frozen=True)
class Sample:
    """What one partition tells the planner: sampled keys with positions, length, bytes."""

    keys: pd.DataFrame
    length: int
    nbytes: int


@dataclass(frozen=True)
class LocalSort:
    """What each sort task does with its bucket's pieces (in input partition order): sort them
    by the keys, then by position, and drop the positions."""

    keys: SortKeys
    position: str
    meta: pd.DataFrame
    backend: str

    def __call__(self, pieces: list[Any]) -> Any:
        frames = get_backend(self.backend)
        frame = frames.concat([arrived(piece) for piece in pieces])
        ordered = sort_with_positions(frame, self.keys, self.position)
        return frames.astype(ordered.drop(columns=[self.position]), list(self.meta.dtypes))


def sort_with_positions(frame: Any, keys: SortKeys, position: str, first: bool = True) -> Any:
    """``frame`` (pandas or cuDF) ordered by ``keys`` and then by ``position``, ascending
    (equal keys in input order) where ``first``."""
    return frame.sort_values([*keys.by, position], ascending=[*keys.ascending, first],
                             na_position=keys.na_position, ignore_index=True)


def sort_bucket(local: LocalSort, pieces: list[Any]) -> Any:
    """The sort task: ``local`` over the pieces of one bucket."""
    return local(pieces)


def sample_partition(part: Any, keys: list[str], rows: int, partition: int, position: str,
                     backend: str) -> Sample:
    """On the partition's owner: up to ``rows`` of its key tuples drawn at random, as pandas,
    with their positions."""
    frames = get_backend(backend)
    length = len(part)
    picked = np.arange(length)
    if length > rows:
        picked = np.sort(np.random.default_rng(partition).choice(length, rows, replace=False))
    sample = frames.to_pandas(part[keys].iloc[picked]).reset_index(drop=True)
    sample[position] = positions(partition, picked)
    return Sample(sample, length, frames.nbytes(part))


def choose_boundaries(samples: list[Sample], keys: SortKeys, position: str, n: int
                      ) -> pd.DataFrame:
    """At most ``n - 1`` distinct rows over the keys and the position, in sort order, that cut
    the rows the samples stand for into ``n`` stretches of about equal rows."""
    taken = [s for s in samples if len(s.keys)]
    columns = [*keys.by, position]
    if not taken or n < 2:
        return pd.DataFrame({c: [] for c in columns})
    sample = pd.concat([s.keys for s in taken], ignore_index=True)
    weight = f"{position}weight"
    weights = np.concatenate([np.full(len(s.keys), s.length / len(s.keys)) for s in taken])
    ordered = sort_with_positions(sample.assign(**{weight: weights}), keys, position)
    reached = np.cumsum(ordered[weight].to_numpy())
    targets = reached[-1] * np.arange(1, n) / n
    cuts = np.unique(np.minimum(np.searchsorted(reached, targets), len(ordered) - 1))
    return ordered.iloc[cuts][columns].reset_index(drop=True)


def output_count(nbytes: int, n_workers: int) -> int:
    """Output partitions for ``nbytes`` of data: one per :data:`PARTITION_BYTES`, at least one
    per worker, a multiple of the workers so that each holds as many."""
    per_worker = max(1, math.ceil(nbytes / PARTITION_BYTES / n_workers))
    return per_worker * n_workers


@lower.register
def _(node: Sort, lowering: Lowering) -> Partitions:
    job = lowering.job
    inputs = lowering.input(node.child)
    if not inputs.futures:
        return Partitions([], [], node.meta)
    keys = node.keys
    placed = inputs.ordering
    if placed is not None and placed.serves(keys.by, keys.ascending, keys.nulls_last):
        lowering.note(node, f"none: the input is already {placed.describe()}")
        return Partitions(inputs.futures, inputs.owners, node.meta, inputs.partitioning,
                          ordering=placed)
    position = position_column(node.meta.columns)
    stage = job.stage("sample-sort")
    samples: list[Sample] = job.gather([
        stage.submit(sample_partition, part, list(keys.by), SAMPLE_ROWS, i, position,
                     job.backend, index=(i,), owner=owner, strict=False)
        for i, (part, owner) in enumerate(zip(inputs.futures, inputs.owners))])
    wanted = node.npartitions or output_count(sum(s.nbytes for s in samples), len(job.workers))
    boundaries = choose_boundaries(samples, keys, position, wanted)
    splitter = PositionedSplitter(
        RangeSplitter((*keys.by, position), boundaries, (*keys.ascending, True),
                      keys.nulls_last), position)
    wrap = job.engine.backend.on_device and job.engine.protocol in HOST_PROTOCOLS
    buckets = exchange(job, inputs, splitter, Contiguous(), "sort", wrap)
    lowering.note(node, f"range exchange into {splitter.n} partitions (asked {wanted}), "
                        f"ordered {keys.describe()}")
    local = LocalSort(keys, position, node.meta, job.backend)
    sort = job.stage("sort")
    futures = [sort.submit(sort_bucket, local, buckets.parts[b], index=(b,), owner=owner,
                           node=lowering.number(node))
               for b, owner in enumerate(buckets.owners)]
    return Partitions(futures, buckets.owners, node.meta, ordering=keys.ordering)
