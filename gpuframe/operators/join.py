"""Distributed joins with pandas semantics: a broadcast join when one side is small, else a hash
shuffle that co-locates equal keys on one worker, then a local join there. Keys too heavy for one
worker are found from a sample and split across workers where the join type allows it
(:mod:`~gpuframe.operators.skew`).

Key and result types: :mod:`~gpuframe.operators.join_schema`.

Memory: partitions, buckets and results are ordinary Dask keys, so the workers' spill buffers move
them out of memory like any other data (to disk past distributed's ``memory_limit`` targets on
the CPU; device to host past dask-cuda's ``device_memory_limit`` on GPUs): a join whose inputs and
buckets exceed the workers' memory completes by spilling, more slowly. One join task's buckets and
output must fit at once, and Dask refuses a task whose inputs exceed its worker's memory limit, so
each worker gets as many join tasks (output partitions) as keep one task's buckets within
``join_memory_fraction`` of the smallest worker limit (``partitions_per_worker`` overrides).

Overlap: a destination fetches each bucket as soon as its source's partition task finishes, so
transfers overlap the partitioning of later partitions, and both sides' partition tasks are ready
together (they run side by side where workers have threads for them). The local join starts once
all of its buckets are in. Joining per arriving bucket is not done: it would rebuild the other
side's hash table once per bucket, and a CPU worker with one thread has no idle time to hide it in.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import pandas as pd

from ..backend import get_backend
from ..config import JoinOptions, resolve
from ..errors import JoinError
from ..frame import DistributedFrame, new_token
from ..exchange.bucket import arrived
from ..exchange.exchange import cast_keys, exchange
from .join_schema import HOWS, conform, join_keys, key_types, result_meta
from .skew import SideProfile, can_split, plan_skew, profile_sides

BROADCAST_RIGHT = ("inner", "left", "leftsemi", "leftanti")
BROADCAST_LEFT = ("inner", "right")


def merge(left: DistributedFrame, right: DistributedFrame, on: str | Sequence[str] | None = None,
          *, left_on: str | Sequence[str] | None = None,
          right_on: str | Sequence[str] | None = None, how: str = "inner",
          suffixes: tuple[str, str] = ("_x", "_y"), **options: Any) -> DistributedFrame:
    """Join two frames of one engine like ``pandas.merge`` (plus 'leftsemi' and 'leftanti').

    ``options`` are the fields of :class:`~gpuframe.config.JoinOptions`.
    """
    opts = resolve(JoinOptions, options)
    if how not in HOWS:
        raise JoinError(f"how={how!r} is not a join type; choose one of {', '.join(HOWS)}")
    if left.engine is not right.engine:
        raise JoinError("both frames of a join must live on the same engine")
    left_keys, right_keys = join_keys(left.meta, right.meta, on, left_on, right_on)
    suffixes = tuple(suffixes)
    empty = frozenset(side for side, frame in (("left", left), ("right", right))
                      if not frame.npartitions)
    types = key_types(left.meta, right.meta, left_keys, right_keys, how, suffixes, empty)
    casts = (types.left, types.right)
    schemas = (cast_keys(left.meta, casts[0]), cast_keys(right.meta, casts[1]))
    meta = result_meta(left.meta, right.meta, how, left_keys, right_keys, suffixes, types,
                       left.engine.backend, empty)
    token = new_token()
    args = (how, left_keys, right_keys, suffixes, meta, left.engine.backend.name)

    engine, workers = left.engine, left.engine.workers
    frames = {"left": left, "right": right}
    split = can_split(how, opts.skew_threshold, len(workers))
    profiles = profile_sides(frames, {"left": left_keys, "right": right_keys},
                             {"left": casts[0], "right": casts[1]},
                             opts.skew_sample_rows if split else 0, token)

    sizes = {side: profile.nbytes for side, profile in profiles.items()}
    if how in BROADCAST_RIGHT and broadcasts(sizes["right"], sizes["left"], len(workers), opts):
        return _broadcast(left, right, "right", casts, schemas[1], args, token, meta)
    if how in BROADCAST_LEFT and broadcasts(sizes["left"], sizes["right"], len(workers), opts):
        return _broadcast(right, left, "left", casts[::-1], schemas[0], args, token, meta)

    skew = plan_skew(profiles["left"], profiles["right"], how, left_keys, right_keys,
                     len(workers), opts.skew_threshold) if split else None
    per_worker = opts.partitions_per_worker or tasks_per_worker(
        profiles["left"], profiles["right"], len(workers), opts.join_memory_fraction)
    left_buckets = exchange(left, left_keys, casts[0], workers, "left", token,
                            skew.left if skew else None, per_worker)
    right_buckets = exchange(right, right_keys, casts[1], workers, "right", token,
                             skew.right if skew else None, per_worker)
    owners = [worker for worker in workers for _ in range(per_worker)]
    futures = [
        engine.client.submit(join_buckets, left_buckets[b], right_buckets[b], *schemas, *args,
                             key=f"gpuframe-join-{token}-{b}", workers=[worker])
        for b, worker in enumerate(owners)
    ]
    return DistributedFrame(engine, futures, meta, owners).persist(pinned=True)


def broadcasts(small: int, large: int, n_workers: int, opts: JoinOptions) -> bool:
    """Whether copying the ``small`` side to every worker beats shuffling both: it must fit
    ``broadcast_bytes``, and each worker's hash table of all of it must not outgrow its share
    of the shuffle (``broadcast_ratio``)."""
    if small > opts.broadcast_bytes:
        return False
    return opts.broadcast_ratio is None or small * n_workers <= opts.broadcast_ratio * large


def tasks_per_worker(left: SideProfile, right: SideProfile, n_workers: int,
                     fraction: float) -> int:
    """Join tasks per worker such that one task's buckets (an even share of both sides) take at
    most ``fraction`` of the smallest worker memory limit. Dask refuses to run a task whose
    inputs exceed its worker's limit, spilling or not, so a join larger than the workers'
    memory must be cut into several tasks per worker to complete by spilling."""
    limits = [p.memory_limit for p in (left, right) if p.memory_limit]
    if not limits:
        return 1
    share = (left.nbytes + right.nbytes) / n_workers
    return max(1, math.ceil(share / (fraction * min(limits))))


def join_buckets(left: list[Any], right: list[Any], left_schema: pd.DataFrame,
                 right_schema: pd.DataFrame, how: str, left_on: list[str], right_on: list[str],
                 suffixes: tuple[str, str], meta: pd.DataFrame, backend: str) -> Any:
    """On the destination worker: the local join of every bucket it received. A side of no
    partitions sends no bucket; its schema (keys in their hash types) stands in for it."""
    frames = get_backend(backend)
    joined = frames.join(_concat_or_empty([arrived(p) for p in left], left_schema, frames),
                         _concat_or_empty([arrived(p) for p in right], right_schema, frames),
                         how, left_on, right_on, suffixes)
    return conform(joined, meta, frames)


def _concat_or_empty(parts: list[Any], schema: pd.DataFrame, frames: Any) -> Any:
    return frames.concat(parts) if parts else frames.from_pandas(schema)


def _broadcast(big: DistributedFrame, small: DistributedFrame, small_side: str,
               casts: tuple[dict[str, Any], dict[str, Any]], small_schema: pd.DataFrame,
               args: tuple, token: str, meta: pd.DataFrame) -> DistributedFrame:
    """Join each partition of ``big`` where it lies with all of ``small``, copied to each worker.
    ``casts`` are (big's, small's) key casts, applied as in the shuffle so both paths agree;
    ``small_schema`` stands in for a ``small`` of no partitions."""
    engine, backend = big.engine, big.engine.backend.name
    whole = engine.client.submit(_concat, small.futures, casts[1], small_schema, backend,
                                 key=f"gpuframe-broadcast-{token}")
    futures = [
        engine.client.submit(_join_with_whole, part, casts[0], whole, small_side, *args,
                             key=f"gpuframe-join-{token}-{i}", workers=[owner])
        for i, (part, owner) in enumerate(zip(big.futures, big.owners))
    ]
    return DistributedFrame(engine, futures, meta, list(big.owners)).persist(pinned=True)


def _concat(parts: list[Any], casts: dict[str, Any], schema: pd.DataFrame, backend: str) -> Any:
    frames = get_backend(backend)
    return cast_keys(_concat_or_empty(parts, schema, frames), casts)


def _join_with_whole(part: Any, casts: dict[str, Any], whole: Any, small_side: str, how: str,
                     left_on: list[str], right_on: list[str], suffixes: tuple[str, str],
                     meta: pd.DataFrame, backend: str) -> Any:
    part = cast_keys(part, casts)
    left, right = (part, whole) if small_side == "right" else (whole, part)
    joined = get_backend(backend).join(left, right, how, left_on, right_on, suffixes)
    return conform(joined, meta, get_backend(backend))
