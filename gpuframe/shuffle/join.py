"""Distributed joins with pandas semantics: a broadcast join when one side is small, else a hash
shuffle that co-locates equal keys on one worker, then a local join there. Keys too heavy for one
worker are found from a sample and split across workers where the join type allows it
(:mod:`~gpuframe.shuffle.skew`).

Key columns are cast to one common type on both sides before hashing, so equal values hash
equally whatever their width; pairs of types that pandas would not join raise :class:`JoinError`.

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
from .exchange import cast_keys, exchange
from .skew import SideProfile, can_split, plan_skew, profile_sides

HOWS = ("inner", "left", "right", "outer", "leftsemi", "leftanti")
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
    casts = common_key_types(left.meta, right.meta, left_keys, right_keys)
    suffixes = tuple(suffixes)
    meta = get_backend("pandas").join(cast_keys(left.meta, casts[0]),
                                      cast_keys(right.meta, casts[1]),
                                      how, left_keys, right_keys, suffixes)
    token = new_token()
    args = (how, left_keys, right_keys, suffixes, left.engine.backend.name)

    engine, workers = left.engine, left.engine.workers
    frames = {"left": left, "right": right}
    split = can_split(how, opts.skew_threshold, len(workers))
    profiles = profile_sides(frames, {"left": left_keys, "right": right_keys},
                             {"left": casts[0], "right": casts[1]},
                             opts.skew_sample_rows if split else 0, token)

    sizes = {side: profile.nbytes for side, profile in profiles.items()}
    if how in BROADCAST_RIGHT and broadcasts(sizes["right"], sizes["left"], len(workers), opts):
        return _broadcast(left, right, "right", casts, args, token, meta)
    if how in BROADCAST_LEFT and broadcasts(sizes["left"], sizes["right"], len(workers), opts):
        return _broadcast(right, left, "left", casts[::-1], args, token, meta)

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
        engine.client.submit(join_buckets, left_buckets[b], right_buckets[b], *args,
                             key=f"gpuframe-join-{token}-{b}", workers=[worker])
        for b, worker in enumerate(owners)
    ]
    return DistributedFrame(engine, futures, meta, owners).persist()


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


def join_keys(left: pd.DataFrame, right: pd.DataFrame, on: Any, left_on: Any,
              right_on: Any) -> tuple[list[str], list[str]]:
    """The key columns of each side, checked to exist; the error names the side and column."""
    if on is not None and (left_on is not None or right_on is not None):
        raise JoinError("give on=, or left_on= and right_on=, not both")
    if on is None and (left_on is None) != (right_on is None):
        raise JoinError("left_on= and right_on= go together")
    if on is None and left_on is None:
        shared = [c for c in left.columns if c in right.columns]
        if not shared:
            raise JoinError("no on= given and the two frames share no column to join on")
        on = shared
    left_keys = _as_list(on if on is not None else left_on)
    right_keys = _as_list(on if on is not None else right_on)
    if len(left_keys) != len(right_keys):
        raise JoinError(f"left_on={left_keys} and right_on={right_keys} differ in length")
    for side, keys, frame in (("left", left_keys, left), ("right", right_keys, right)):
        missing = [k for k in keys if k not in frame.columns]
        if missing:
            raise JoinError(f"key column(s) {missing} not in the {side} frame, whose columns are "
                            f"{list(frame.columns)}")
    return left_keys, right_keys


def common_key_types(left: pd.DataFrame, right: pd.DataFrame, left_keys: list[str],
                     right_keys: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Per side, {column: dtype} casts that give each key pair one type."""
    left_casts: dict[str, str] = {}
    right_casts: dict[str, str] = {}
    for lk, rk in zip(left_keys, right_keys):
        common = _common_type(left[lk].dtype, right[rk].dtype)
        if common is None:
            raise JoinError(f"cannot join left column {lk!r} ({left[lk].dtype}) with right "
                            f"column {rk!r} ({right[rk].dtype}): incompatible key types")
        if left[lk].dtype != common:
            left_casts[lk] = common
        if right[rk].dtype != common:
            right_casts[rk] = common
    return left_casts, right_casts


def _common_type(a: Any, b: Any) -> Any:
    if a == b:
        return a
    kinds = {_kind(a), _kind(b)}
    if len(kinds) == 1:
        kind = kinds.pop()
        if kind == "int":
            return "Int64" if pd.api.types.is_extension_array_dtype(a) or \
                pd.api.types.is_extension_array_dtype(b) else "int64"
        return {"float": "float64", "string": "str", "datetime": "datetime64[ns]",
                "bool": "bool"}.get(kind)
    if kinds == {"int", "float"}:
        return "float64"
    return None


def _kind(dtype: Any) -> str:
    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_integer_dtype(dtype):
        return "int"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if pd.api.types.is_datetime64_dtype(dtype):
        return "datetime"
    if pd.api.types.is_string_dtype(dtype):
        return "string"
    return str(dtype)


def _as_list(keys: Any) -> list[str]:
    return [keys] if isinstance(keys, str) else list(keys)


def join_buckets(left: list[Any], right: list[Any], how: str, left_on: list[str],
                 right_on: list[str], suffixes: tuple[str, str], backend: str) -> Any:
    """On the destination worker: the local join of every bucket it received."""
    frames = get_backend(backend)
    return frames.join(frames.concat(left), frames.concat(right), how, left_on, right_on, suffixes)


def _broadcast(big: DistributedFrame, small: DistributedFrame, small_side: str,
               casts: tuple[dict[str, Any], dict[str, Any]], args: tuple, token: str,
               meta: pd.DataFrame) -> DistributedFrame:
    """Join each partition of ``big`` where it lies with all of ``small``, copied to each worker.
    ``casts`` are (big's, small's) key casts, applied as in the shuffle so both paths agree."""
    engine, backend = big.engine, big.engine.backend.name
    whole = engine.client.submit(_concat, small.futures, casts[1], backend,
                                 key=f"gpuframe-broadcast-{token}")
    futures = [
        engine.client.submit(_join_with_whole, part, casts[0], whole, small_side, *args,
                             key=f"gpuframe-join-{token}-{i}", workers=[owner])
        for i, (part, owner) in enumerate(zip(big.futures, big.owners))
    ]
    return DistributedFrame(engine, futures, meta, list(big.owners)).persist()


def _concat(frames: list[Any], casts: dict[str, Any], backend: str) -> Any:
    return cast_keys(get_backend(backend).concat(frames), casts)


def _join_with_whole(part: Any, casts: dict[str, Any], whole: Any, small_side: str, how: str,
                     left_on: list[str], right_on: list[str], suffixes: tuple[str, str],
                     backend: str) -> Any:
    part = cast_keys(part, casts)
    left, right = (part, whole) if small_side == "right" else (whole, part)
    return get_backend(backend).join(left, right, how, left_on, right_on, suffixes)
