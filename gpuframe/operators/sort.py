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

A sort of few bytes (:data:`SMALL_BYTES`) skips 2 and 3: one task sorts all of it.

Decimal keys, which the packer cannot compare, are cut on a float64 proxy that ends the cut
(:func:`split_keys`); the local sort still orders by the decimals themselves.

The position makes every row's sort key distinct: a key that holds most rows is cut over as many
buckets as its rows fill, like any other stretch of the order, and equal keys come out in their
input order (pandas' ``kind="stable"``), on either backend. The output's index is a fresh
RangeIndex per partition, and it records its
:class:`~gpuframe.exchange.placement.RangeOrdering`: a later sort that the order already serves
(the same leading keys and directions) passes the partitions through.
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from distributed import Future
from pandas.api.types import is_object_dtype

from ..backend import get_backend
from ..exchange.exchange import exchange
from ..exchange.mailbox import arrivals
from ..exchange.placement import Contiguous
from ..exchange.splitters import RangeSplitter
from ..plan.sort import Sort, SortKeys
from ..runtime.runner import Job, Partitions
from ..sent_schemas import SendsSchemas
from .groupby import lower_into_one_task
from .lowering import Lowering, lower
from .positions import position_column, positions, with_positions

SAMPLE_ROWS = 1024
"""Key tuples sampled from each partition to choose the boundaries."""
Proxies = tuple[tuple[str, str], ...]
"""(proxy column, key column) pairs: float64 stand-ins the exchange cuts on."""
SMALL_BYTES = 32 * 2**20
"""A sort of at most these bytes, whose caller asks for no number of partitions, runs as one
task on the worker that holds most of them: the range exchange's three stages cost more than
moving so little (a query's final sort of its aggregates)."""
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
class LocalSort(SendsSchemas):
    """What each sort task does with its bucket's pieces (in input partition order): sort them
    by the keys, then by position, and drop the positions."""

    keys: SortKeys
    position: str
    meta: pd.DataFrame
    backend: str

    def __call__(self, pieces: list[Any]) -> Any:
        frames = get_backend(self.backend)
        frame = frames.concat(arrivals(pieces))
        ordered = sort_with_positions(frame, self.keys, self.position)
        return frames.astype(ordered.drop(columns=[self.position]), list(self.meta.dtypes))

    def apply(self, frame: Any) -> Any:
        """One whole partition sorted, as the last step of the task that makes it."""
        return sort_whole(self, [frame])


def sort_with_positions(frame: Any, keys: SortKeys, position: str, first: bool = True) -> Any:
    """``frame`` (pandas or cuDF) ordered by ``keys`` and then by ``position``, ascending
    (equal keys in input order) where ``first``."""
    return frame.sort_values([*keys.by, position], ascending=[*keys.ascending, first],
                             na_position=keys.na_position, ignore_index=True)


def sort_bucket(local: LocalSort, pieces: list[Any]) -> Any:
    """The sort task: ``local`` over the pieces of one bucket."""
    return local(pieces)


def sort_whole(local: LocalSort, parts: list[Any]) -> Any:
    """The sort task of a small sort: ``local`` over every input partition, positioned."""
    return local([with_positions(part, i, local.position) for i, part in enumerate(parts)])


def sample_partition(part: Any, keys: list[str], rows: int, partition: int, position: str,
                     backend: str) -> Sample:
    """On the partition's owner: up to ``rows`` of its key tuples drawn at random, as pandas,
    with their positions."""
    frames = get_backend(backend)
    length = len(part)
    picked, chosen = np.arange(length), part[keys]
    if length > rows:
        picked = np.sort(np.random.default_rng(partition).choice(length, rows, replace=False))
        chosen = frames.take_rows(chosen, picked)
    sample = frames.to_pandas(chosen).reset_index(drop=True)
    sample[position] = positions(partition, picked)
    return Sample(sample, length, frames.nbytes(part))


def split_keys(keys: SortKeys, position: str, proxied: set[str]) -> tuple[SortKeys, Proxies]:
    """The keys the exchange cuts on, with the proxies it computes first: the sort's keys, then
    the position. A key the packer cannot compare (``proxied``: decimals) is cut on as float64,
    whose order agrees with the key's but may tie distinct values, so it ends the cut: no later
    key, nor the position, may separate rows of one float."""
    by: list[str] = []
    ascending: list[bool] = []
    proxies: list[tuple[str, str]] = []
    for name, up in zip(keys.by, keys.ascending):
        ascending.append(up)
        if name in proxied:
            proxy = f"{position}{len(proxies)}"
            proxies.append((proxy, name))
            by.append(proxy)
            return SortKeys(tuple(by), tuple(ascending), keys.na_position), tuple(proxies)
        by.append(name)
    return (SortKeys((*by, position), (*ascending, True), keys.na_position), ())


def needs_proxy(column: pd.Series) -> bool:
    """Whether a sampled key column holds decimals (Arrow-backed, or as Python objects where
    the partitions' library gave them so), which the range packer cannot compare."""
    dtype = column.dtype
    if isinstance(dtype, pd.ArrowDtype):
        return pa.types.is_decimal(dtype.pyarrow_dtype)
    if not is_object_dtype(dtype):
        return False
    present = column.dropna()
    return bool(len(present)) and isinstance(present.iloc[0], decimal.Decimal)


def with_proxies(frame: Any, proxies: Proxies) -> Any:
    """``frame`` (pandas or cuDF) with each proxy column computed from its key."""
    if not proxies:
        return frame
    return frame.assign(**{proxy: frame[key].astype("float64") for proxy, key in proxies})


def choose_boundaries(samples: list[Sample], split: SortKeys, proxies: Proxies, n: int
                      ) -> pd.DataFrame:
    """At most ``n - 1`` distinct rows over the ``split`` keys, in their order, that cut the
    rows the samples stand for into ``n`` stretches of about equal rows."""
    taken = [s for s in samples if len(s.keys)]
    columns = list(split.by)
    if not taken or n < 2:
        return pd.DataFrame({c: [] for c in columns})
    sample = with_proxies(pd.concat([s.keys for s in taken], ignore_index=True), proxies)
    weight = f"{columns[-1]}weight"
    weights = np.concatenate([np.full(len(s.keys), s.length / len(s.keys)) for s in taken])
    ordered = sample.assign(**{weight: weights}).sort_values(
        columns, ascending=list(split.ascending), na_position=split.na_position, kind="stable",
        ignore_index=True)
    reached = np.cumsum(ordered[weight].to_numpy())
    targets = reached[-1] * np.arange(1, n) / n
    cuts = np.unique(np.minimum(np.searchsorted(reached, targets), len(ordered) - 1))
    return ordered.iloc[cuts][columns].drop_duplicates(ignore_index=True)


@dataclass(frozen=True)
class SortSplitter:
    """A partition cut where it lies: positions and proxies added, cut by ``inner``, proxies
    dropped again."""

    inner: RangeSplitter
    position: str
    proxies: Proxies

    @property
    def n(self) -> int:
        return self.inner.n

    def split(self, frame: Any, index: int, sealed: bool = False) -> list[Any]:
        positioned = with_proxies(with_positions(frame, index, self.position), self.proxies)
        # The proxies are dropped from each piece here, which a sealed one cannot be.
        pieces = self.inner.split(positioned, index, sealed and not self.proxies)
        if not self.proxies:
            return pieces
        return [piece.drop(columns=[proxy for proxy, _ in self.proxies]) for piece in pieces]


def output_count(nbytes: int, n_workers: int) -> int:
    """Output partitions for ``nbytes`` of data: one per :data:`PARTITION_BYTES`, at least one
    per worker, a multiple of the workers so that each holds as many."""
    per_worker = max(1, math.ceil(nbytes / PARTITION_BYTES / n_workers))
    return per_worker * n_workers


@lower.register
def _(node: Sort, lowering: Lowering) -> Partitions:
    job, keys = lowering.job, node.keys
    local = LocalSort(keys, position_column(node.meta.columns), node.meta, job.backend)
    if node.npartitions in (None, 1):
        inputs, sorted_there = lower_into_one_task(node.child, lowering, local,
                                                   lowering.number(node))
    else:
        inputs, sorted_there = lowering.input(node.child), False
    if sorted_there:
        lowering.note(node, "where the aggregate finishes (its last task, or the client): one "
                            f"partition, ordered {keys.describe()}")
        return Partitions(inputs.futures, inputs.owners, node.meta, ordering=keys.ordering)
    if not inputs.futures:
        return Partitions([], [], node.meta)
    placed = inputs.ordering
    if placed is not None and placed.serves(keys.by, keys.ascending, keys.nulls_last):
        lowering.note(node, f"none: the input is already {placed.describe()}")
        return Partitions(inputs.futures, inputs.owners, node.meta, inputs.partitioning,
                          ordering=placed)
    position = local.position
    sort = job.stage("sort")
    fetched = lowering.to_client and lowering.root is node and node.npartitions in (None, 1)
    if fetched and len(inputs.futures) == 1:
        return _on_client(lowering, node, local, inputs)
    if node.npartitions in (None, 1) and len(inputs.futures) == 1:
        # Nothing to cut: sampling would only cost a round trip through the client.
        lowering.note(node, f"one task on {inputs.owners[0]}: one input partition, ordered "
                            f"{keys.describe()}")
        whole = sort.submit(sort_whole, local, inputs.futures, index=(0,),
                            owner=inputs.owners[0], node=lowering.number(node))
        return Partitions([whole], list(inputs.owners), node.meta, ordering=keys.ordering)
    stage = job.stage("sample-sort")
    samples: list[Sample] = job.gather([
        stage.submit(sample_partition, part, list(keys.by), SAMPLE_ROWS, i, position,
                     job.backend, index=(i,), owner=owner, strict=False)
        for i, (part, owner) in enumerate(zip(inputs.futures, inputs.owners))])
    nbytes = [s.nbytes for s in samples]
    if fetched and sum(nbytes) <= SMALL_BYTES:
        return _on_client(lowering, node, local, inputs)
    if node.npartitions is None and sum(nbytes) <= SMALL_BYTES:
        owner = inputs.owners[int(np.argmax(nbytes))]
        lowering.note(node, f"one task on {owner}: {sum(nbytes)} bytes, ordered "
                            f"{keys.describe()}")
        whole = sort.submit(sort_whole, local, inputs.futures, index=(0,), owner=owner,
                            node=lowering.number(node))
        return Partitions([whole], [owner], node.meta, ordering=keys.ordering)
    wanted = node.npartitions or output_count(sum(nbytes), len(job.workers))
    proxied = {name for name in keys.by
               if any(len(s.keys) and needs_proxy(s.keys[name]) for s in samples)}
    split, proxies = split_keys(keys, position, proxied)
    boundaries = choose_boundaries(samples, split, proxies, wanted)
    splitter = SortSplitter(RangeSplitter(split.by, boundaries, split.ascending,
                                          split.nulls_last), position, proxies)
    buckets = exchange(job, inputs, splitter, Contiguous(), "sort")
    lowering.note(node, f"range exchange into {splitter.n} partitions (asked {wanted}), "
                        f"ordered {keys.describe()}")
    futures = [sort.submit(sort_bucket, local, buckets.parts[b], index=(b,), owner=owner,
                           node=lowering.number(node))
               for b, owner in enumerate(buckets.owners)]
    return Partitions(futures, buckets.owners, node.meta, ordering=keys.ordering)


def host_positioned(part: Any, partition: int, position: str, backend: str) -> pd.DataFrame:
    """On the partition's owner: its rows with their positions, as pandas."""
    return get_backend(backend).to_pandas(with_positions(part, partition, position))


@dataclass(frozen=True)
class ClientSort:
    """On the client, the answer of a small sort that an action fetches: every partition,
    fetched as pandas with its positions, sorted there (``local`` for the pandas backend).
    Where one worker would sort them in a task of their own, the others' rows travel there, and
    the answer then to the client, after a task that converts it."""

    local: LocalSort

    def __call__(self, job: Job, parts: list[Future]) -> pd.DataFrame:
        return self.local(job.gather(parts)).reset_index(drop=True)


def _on_client(lowering: Lowering, node: Sort, local: LocalSort, inputs: Partitions
               ) -> Partitions:
    """The sort of the plan's root into one partition, for an action that fetches it, where
    its input is small (one partition, or :data:`SMALL_BYTES` by the samples): each partition
    made pandas where it lies, sorted by the client (:class:`ClientSort`)."""
    stage = lowering.job.stage("host-sort")
    parts = [stage.submit(host_positioned, part, i, local.position, lowering.job.backend,
                          index=(i,), owner=owner)
             for i, (part, owner) in enumerate(zip(inputs.futures, inputs.owners))]
    lowering.note(node, f"on the client: {len(parts)} partition{'s' if len(parts) > 1 else ''} "
                        f"fetched as pandas, ordered {node.keys.describe()}")
    lowering.finish = ClientSort(replace(local, backend="pandas"))
    return Partitions(parts, list(inputs.owners), node.meta)
