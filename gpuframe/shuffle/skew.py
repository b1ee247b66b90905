"""Skew: find the keys too heavy for one worker from a sample of each side, and split them.

A hash shuffle sends every row of one key to one worker, so a key that holds a large share of
the rows (or of the output) overloads that worker. :func:`profile_sides` samples each partition
where it lies (``gpuframe-sample-*`` tasks); :func:`plan_skew` estimates each sampled key's rows on
both sides from that, and marks a key *heavy* when its rows on a side exceed ``threshold`` of one worker's share of that side. Of a
heavy key, the rows of one side (the *spread* side) go round robin to every worker and the other
side's rows are copied to every worker, so each worker joins a slice of the spread rows with all
of the matching rows: the union is the join, and its output is spread evenly.

That is only right when the copied side's rows can never be emitted unmatched, nor twice:

- ``inner``: either side may be spread; each heavy key spreads the side with more of its rows.
- ``left``, ``leftsemi``, ``leftanti``: the left side is spread, the right copied.
- ``right``: the right side is spread, the left copied.
- ``outer``: nothing is split (both sides' unmatched rows are emitted), so a heavy key still
  lands on one worker.

A key is split only where the side to spread holds at least one row of it per worker; a key
heavy only on the side that must be copied (say, a left join whose right side is skewed) still
spreads the output, by the other side's rows, but at the price of copying its many rows to every
worker. Null keys are never split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..backend import get_backend
from ..frame import DistributedFrame
from .partition import hash_rows

#: The side whose rows of a heavy key are spread, per join type (None: either, per key).
SPREAD_SIDE = {"inner": None, "left": "left", "leftsemi": "left", "leftanti": "left",
               "right": "right"}


@dataclass(frozen=True)
class SideSkew:
    """One side's heavy keys, as pandas frames of its key columns (in their join types):
    ``spread`` keys' rows go round robin to every worker, ``copied`` keys' rows to all."""

    spread: pd.DataFrame
    copied: pd.DataFrame

    def __bool__(self) -> bool:
        return bool(len(self.spread) or len(self.copied))


@dataclass(frozen=True)
class SkewPlan:
    """The heavy keys of a join, per side; falsy when there is nothing to split."""

    left: SideSkew
    right: SideSkew

    def __bool__(self) -> bool:
        return bool(self.left or self.right)


@dataclass(frozen=True)
class SideProfile:
    """What one round of ``gpuframe-sample-*`` tasks learns of a side: a key sample and the
    length of each partition, and the bytes the side holds (for the broadcast decision)."""

    samples: list[pd.DataFrame]
    lengths: list[int]
    nbytes: int
    memory_limit: int | None  # the smallest of the owners' (device memory's, on GPUs)


def can_split(how: str, threshold: float | None, n_workers: int) -> bool:
    """Whether a join of type ``how`` may split heavy keys at all."""
    return bool(threshold) and how in SPREAD_SIDE and n_workers > 1


def profile_sides(frames: dict[str, DistributedFrame], keys: dict[str, list[str]],
                  casts: dict[str, dict[str, Any]], sample_rows: int, token: str
                  ) -> dict[str, SideProfile]:
    """Sample every partition of each side where it lies, all in one round trip."""
    futures = {}
    for side, frame in frames.items():
        client, backend = frame.engine.client, frame.engine.backend.name
        futures[side] = [
            client.submit(profile_partition, part, keys[side], casts[side], sample_rows, i,
                          backend, key=f"gpuframe-sample-{side}-{token}-{i}", workers=[owner],
                          allow_other_workers=True)
            for i, (part, owner) in enumerate(zip(frame.futures, frame.owners))
        ]
    if not futures:
        return {}
    gathered = next(iter(frames.values())).engine.client.gather(futures)
    return {side: SideProfile([p[0] for p in parts], [p[1] for p in parts],
                              sum(p[2] for p in parts),
                              min((p[3] for p in parts if p[3]), default=None))
            for side, parts in gathered.items()}


def profile_partition(part: Any, keys: list[str], casts: dict[str, Any], rows: int, seed: int,
                      backend: str) -> tuple[pd.DataFrame, int, int, int | None]:
    """On the partition's owner: up to ``rows`` of its key tuples drawn at random (with
    replacement: drawing positions costs nothing, unlike a permutation), as pandas; its length;
    its bytes; the worker's memory limit (None: none, or not on a worker)."""
    frames = get_backend(backend)
    length = len(part)
    picked = part[keys]
    if length > rows:
        positions = np.sort(np.random.default_rng(seed).integers(0, length, rows))
        picked = picked.iloc[positions]
    if casts:
        picked = picked.astype(casts)
    return frames.to_pandas(picked), length, frames.nbytes(part), _memory_limit()


def _memory_limit() -> int | None:
    """This worker's memory limit: device memory's where a GPU worker holds one (dask-cuda),
    else host memory's."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:
        return None
    limits = [getattr(worker.data, "device_memory_limit", None),
              getattr(worker.memory_manager, "memory_limit", None)]
    limits = [int(limit) for limit in limits if isinstance(limit, (int, float)) and limit > 0]
    return min(limits, default=None)


def plan_skew(left: SideProfile, right: SideProfile, how: str, left_keys: list[str],
              right_keys: list[str], n_workers: int, threshold: float) -> SkewPlan | None:
    """The heavy keys to split, from both sides' samples; None where none are."""
    counts_left = _estimate(left.samples, left.lengths, left_keys)
    counts_right = _estimate(right.samples, right.lengths, right_keys)
    counts_right.index.names = counts_left.index.names
    heavy = find_heavy(counts_left, counts_right, SPREAD_SIDE[how], n_workers, threshold)
    if heavy is None:
        return None
    spread_left, spread_right = heavy
    return SkewPlan(
        SideSkew(_key_frame(spread_left, left_keys), _key_frame(spread_right, left_keys)),
        SideSkew(_key_frame(spread_right, right_keys), _key_frame(spread_left, right_keys)),
    )


def _estimate(samples: list[pd.DataFrame], lengths: list[int], keys: list[str]) -> pd.Series:
    """Estimated rows of each sampled key tuple on the whole side (null keys left out)."""
    pieces = []
    for sample, length in zip(samples, lengths):
        if len(sample):
            counts = sample.value_counts(subset=keys, dropna=True, sort=False)
            pieces.append(counts * (length / len(sample)))
    if not pieces:
        return pd.Series([], dtype="float64")
    total = pd.concat(pieces)
    return total.groupby(level=list(range(total.index.nlevels))).sum()


def find_heavy(counts_left: pd.Series, counts_right: pd.Series, spread_side: str | None,
               n_workers: int, threshold: float) -> tuple[pd.Index, pd.Index] | None:
    """(keys whose left rows are spread, keys whose right rows are spread), from the estimated
    rows per key of each side; None when no key is heavy.

    A key is heavy when its rows on either side exceed ``threshold`` of one worker's share of
    that side's rows, and the side to spread holds at least one row per worker of it (fewer
    cannot be spread). Input shares, not output estimates, decide: a sample of a few thousand
    rows per partition measures a share of ``threshold / n_workers`` well, while the product of
    two sparse samples' counts is mostly noise. The keys that dominate the output of a skewed
    join are heavy on at least one side.
    """
    if counts_left.empty or counts_right.empty:
        index = counts_right.index if counts_left.empty else counts_left.index
        counts_left, counts_right = (c if len(c) else pd.Series(0.0, index=index)
                                     for c in (counts_left, counts_right))
    both = pd.concat([counts_left.rename("left"), counts_right.rename("right")], axis=1)
    both = both.fillna(0.0)
    share = threshold / n_workers
    heavy = ((both["left"] > share * max(counts_left.sum(), 1))
             | (both["right"] > share * max(counts_right.sum(), 1)))
    if spread_side is None:
        spread_left = heavy & (both["left"] >= both["right"])
        spread_right = heavy & ~spread_left
    else:
        spread_left = heavy & (spread_side == "left")
        spread_right = heavy & (spread_side == "right")
    spread_left &= both["left"] >= n_workers
    spread_right &= both["right"] >= n_workers
    if not (spread_left.any() or spread_right.any()):
        return None
    return both.index[spread_left.to_numpy()], both.index[spread_right.to_numpy()]


def _key_frame(index: pd.Index, names: list[str]) -> pd.DataFrame:
    frame = index.to_frame(index=False)
    frame.columns = names
    return frame


def split_heavy(part: Any, keys: list[str], skew: SideSkew, n: int, index: int,
                backend: str) -> tuple[Any, list[list[Any]]]:
    """On the source worker: (the rows to hash-partition, the extra pieces for each destination).

    The rows of ``skew.spread`` keys are dealt round robin, starting at destination ``index`` (the
    partition's number, so partitions do not all favour destination 0); the rows of
    ``skew.copied`` keys go to every destination.
    """
    frames = get_backend(backend)
    extra: list[list[Any]] = [[] for _ in range(n)]
    spread_mask = _matches(part, keys, skew.spread, frames)
    copied_mask = _matches(part, keys, skew.copied, frames)
    rest = part
    if spread_mask is not None:
        spread = part[spread_mask]
        for j in range(n):
            extra[(j + index) % n].append(spread.iloc[j::n])
    if copied_mask is not None:
        copied = part[copied_mask]
        for j in range(n):
            extra[j].append(copied)
    masks = [m for m in (spread_mask, copied_mask) if m is not None]
    if masks:
        rest = part[~(masks[0] | masks[1])] if len(masks) == 2 else part[~masks[0]]
    return rest, extra


def _matches(part: Any, keys: list[str], heavy: pd.DataFrame, frames: Any) -> Any:
    """A boolean mask of ``part``'s rows whose keys are among ``heavy``'s; None when it is empty.

    Several key columns are compared by their row hash (the shuffle's own): a rare collision
    treats a light key as heavy, which is harmless because both sides classify it alike."""
    if not len(heavy):
        return None
    picked = part[keys]
    heavy = frames.from_pandas(heavy).astype(dict(picked.dtypes))
    if len(keys) == 1:
        return picked[keys[0]].isin(heavy[keys[0]]).values
    series = frames.module.Series
    return series(hash_rows(picked, keys)).isin(series(hash_rows(heavy, keys))).values
