"""The distributed frame: partitions held on the workers, each with a known owner.

A :class:`DistributedFrame` is a list of Dask futures, one per partition, plus the frame's schema
(an empty pandas DataFrame) and the worker that owns each partition. Partitions are frames of the
engine's backend (cuDF or pandas); the engine places them, so later stages (shuffle, join) know
where every byte is without asking the scheduler.
"""

from __future__ import annotations

import math
import uuid
from typing import Any, Sequence

import pandas as pd
from distributed import Future, wait

from .backend import get_backend
from .cluster.engine import Engine, current_engine
from .errors import OptionError, PartitionError


def new_token() -> str:
    """A fresh key token for one submission. Keys are never reused: Dask can mistake a new task
    for an old one of the same key that is still being released, and wait on it forever."""
    return uuid.uuid4().hex


class DistributedFrame:
    """A dataframe whose partitions live on the workers of one engine."""

    def __init__(self, engine: Engine, futures: Sequence[Future], meta: pd.DataFrame,
                 owners: Sequence[str]):
        if len(futures) != len(owners):
            raise ValueError(f"{len(futures)} partitions but {len(owners)} owners")
        self.engine = engine
        self.futures = list(futures)
        self.meta = meta
        self.owners = list(owners)
        self._lengths: list[int] | None = None

    @property
    def npartitions(self) -> int:
        return len(self.futures)

    @property
    def columns(self) -> pd.Index:
        return self.meta.columns

    @property
    def dtypes(self) -> pd.Series:
        return self.meta.dtypes

    def partition_lengths(self) -> list[int]:
        """Rows in each partition, counted on the workers once and remembered."""
        if self._lengths is None:
            self._lengths = self.engine.client.gather(self._map(len, "gpuframe-len"))
        return self._lengths

    def nbytes(self) -> int:
        """Bytes the partitions hold in worker memory (device memory on the cudf backend)."""
        name = self.engine.backend.name
        return sum(self.engine.client.gather(self._map(_nbytes, "gpuframe-nbytes", name)))

    def merge(self, other: DistributedFrame, on: Any = None, **kwargs: Any) -> DistributedFrame:
        """Join with ``other`` like ``pandas.merge``; see :func:`gpuframe.merge`."""
        from .operators.join import merge

        return merge(self, other, on, **kwargs)

    def __len__(self) -> int:
        return sum(self.partition_lengths())

    def head(self, n: int = 5) -> pd.DataFrame:
        """The first ``n`` rows as pandas, fetched from as few partitions as hold them."""
        parts, need = [], n
        for future, length in zip(self.futures, self.partition_lengths()):
            if need <= 0:
                break
            if length:
                parts.append(self.engine.client.submit(
                    _head_as_pandas, future, need, self.engine.backend.name,
                    key=f"gpuframe-head-{new_token()}",
                ))
                need -= length
        if not parts:
            return self.meta.head(0)
        return pd.concat(self.engine.client.gather(parts))

    def to_pandas(self) -> pd.DataFrame:
        """Every partition, converted to pandas on its worker and concatenated in order."""
        if not self.futures:
            return self.meta.copy()
        name = self.engine.backend.name
        pieces = self.engine.client.gather(
            self._map(_as_pandas, "gpuframe-gather", name)
        )
        return pd.concat(pieces)

    def persist(self, pinned: bool = False) -> DistributedFrame:
        """Wait until every partition is in worker memory; raise naming the first that failed.

        The owners are then asked of the scheduler, unless ``pinned``: every task was
        restricted to its owner, so that is where its partition lies (a round trip saved)."""
        wait(self.futures)
        for index, future in enumerate(self.futures):
            if future.status != "finished":
                error = future.exception() if future.status == "error" else None
                raise PartitionError(
                    f"partition {index} (owner {self.owners[index]}) is {future.status}"
                    + (f": {error!r}" if error is not None else "")
                ) from error
        if pinned:
            return self
        where = self.engine.client.who_has(self.futures)
        self.owners = [sorted(where[f.key])[0] if where.get(f.key) else owner
                       for f, owner in zip(self.futures, self.owners)]
        return self

    def to_dask(self) -> Any:
        """A dask.dataframe over the same partitions (dask_cudf-backed on the cudf backend)."""
        import dask
        import dask.dataframe as dd

        meta = self.engine.backend.from_pandas(self.meta)
        return dd.from_delayed([dask.delayed(f) for f in self.futures], meta=meta,
                               verify_meta=False)

    def _map(self, func: Any, prefix: str, *args: Any) -> list[Future]:
        """``func(partition, *args)`` on each partition's owner, under a task-stream name."""
        token = new_token()
        return [
            self.engine.client.submit(func, future, *args, key=f"{prefix}-{token}-{i}",
                                      workers=[owner], allow_other_workers=True)
            for i, (future, owner) in enumerate(zip(self.futures, self.owners))
        ]

    def __repr__(self) -> str:
        columns = ", ".join(f"{c}: {t}" for c, t in self.meta.dtypes.items())
        return (f"<gpuframe DistributedFrame npartitions={self.npartitions} "
                f"backend={self.engine.backend.name} [{columns}]>")


def _as_pandas(partition: Any, backend: str) -> pd.DataFrame:
    return get_backend(backend).to_pandas(partition)


def _nbytes(partition: Any, backend: str) -> int:
    return get_backend(backend).nbytes(partition)


def _head_as_pandas(partition: Any, n: int, backend: str) -> pd.DataFrame:
    return get_backend(backend).to_pandas(partition.head(n))


def _to_backend(partition: Any, backend: str) -> Any:
    """A partition of either library as a frame of ``backend``."""
    target = get_backend(backend)
    if isinstance(partition, pd.DataFrame):
        return target.from_pandas(partition)
    return target.from_pandas(partition.to_pandas()) if target.name == "pandas" else partition


def from_pandas(frame: pd.DataFrame, npartitions: int | None = None,
                engine: Engine | None = None) -> DistributedFrame:
    """Split ``frame`` into contiguous row ranges and place one per worker, round robin."""
    engine = current_engine(engine)
    workers = engine.workers
    npartitions = len(workers) if npartitions is None else npartitions
    if npartitions < 1:
        raise OptionError(f"npartitions={npartitions} must be at least 1")
    client, backend = engine.client, engine.backend.name
    step = max(1, math.ceil(len(frame) / npartitions))
    starts = range(0, max(len(frame), 1), step)
    owners = [workers[i % len(workers)] for i in range(len(starts))]
    token = new_token()
    futures = []
    for i, (start, owner) in enumerate(zip(starts, owners)):
        piece = client.scatter(frame.iloc[start:start + step], workers=[owner], hash=False)
        futures.append(client.submit(_to_backend, piece, backend,
                                     key=f"gpuframe-from-pandas-{token}-{i}", workers=[owner]))
    return DistributedFrame(engine, futures, frame.head(0), owners).persist(pinned=True)


def from_dask(collection: Any, engine: Engine | None = None) -> DistributedFrame:
    """Compute a dask.dataframe on the engine's cluster and hold its partitions as a frame."""
    import dask

    engine = current_engine(engine)
    meta = collection._meta
    meta = meta if isinstance(meta, pd.DataFrame) else meta.to_pandas()
    backend = engine.backend.name
    token = new_token()
    converted = [
        dask.delayed(_to_backend)(part, backend, dask_key_name=f"gpuframe-from-dask-{token}-{i}")
        for i, part in enumerate(collection.to_delayed())
    ]
    futures = engine.client.compute(converted)
    return DistributedFrame(engine, futures, meta.head(0), [""] * len(futures)).persist()
