"""Skew: find the keys too heavy for one worker from a sample of each side, and split them.

A hash shuffle sends every row of one key to one worker, so a key that holds a large share of
the rows (or of the output) overloads that worker. :func:`sample_sides` samples each partition
where it lies (``gpuframe-sample-*`` tasks); :func:`plan_skew` estimates each sampled key's rows on
both sides from that, and marks a key *heavy* when its rows on a side exceed ``threshold`` of one
worker's share of that side. Of a heavy key, the rows of one side (the *spread* side) are dealt
round robin over the buckets and the other side's rows are copied to each of those buckets, so
each bucket joins a slice of the spread rows with all of the matching rows: the union is the join,
and its output is spread evenly. Each heavy key spreads the side with more of its rows (fewer to
copy), where the join type allows it:

- A side the join does not preserve (``inner``'s two, ``left``'s right, ``right``'s left) can
  always be copied: its rows are emitted only with a match, and each match lies in one bucket.
- A preserved side (``left``'s left, ``right``'s right, either of ``outer``'s) can be copied only
  to buckets that all get at least one spread row of the key, else a bucket without one would
  emit the copied rows unmatched. The sample draws distinct rows, so its count of a key in one
  partition is a sure lower bound of that partition's rows of the key, and a partition deals
  each key's rows on its own round: a key whose sample shows ``r`` rows in one partition reaches
  ``r`` buckets for sure. Heavy keys are then dealt over the plan's ``reach`` buckets (spaced
  evenly over the workers), the least ``r`` of such keys, which must be at least one per worker.
  Keys with a null part are not copied this way: a float key on the GPU may hold NaN and null,
  which the pandas sample counts as one key, so its count there would not be a sure bound.
- ``leftsemi`` and ``leftanti`` emit a left row once per bucket where it lies, so their left side
  is never copied; their right side is, as for ``inner``.

So a left join whose heavy key has many right rows and few left ones spreads the right rows and
copies the left ones; an outer join splits heavy keys like the others; null keys, which pandas
joins to null keys, are split like any key (say a left join's left rows with null keys, copying
the right side's null-keyed rows where it has any).

Several key columns are matched by their row hash (the shuffle's own, 64 bits): a collision would
treat a light key as heavy on both sides and deal it on the heavy key's round, which, where the
copied side is preserved, could leave a bucket with its copied rows and none of its spread rows
(odds about heavy keys times distinct keys over 2**64).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from distributed import Future

from ..backend import get_backend
from ..cluster.memory import WorkerMemory, this_worker_memory
from ..errors import JoinError
from ..exchange.pack import hash_split
from ..exchange.row_hashes import hash_rows
from ..exchange.splitters import HashSplitter, cast_keys
from ..runtime.runner import Job, Partitions

#: Per join type, the sides whose rows of a heavy key may be spread, each mapped to whether the
#: other side, then copied, is one the join preserves (so each bucket it reaches needs a spread
#: row of the key).
SPREADS: dict[str, dict[str, bool]] = {
    "inner": {"left": False, "right": False},
    "left": {"left": False, "right": True},
    "right": {"left": True, "right": False},
    "outer": {"left": True, "right": True},
    "leftsemi": {"left": False},
    "leftanti": {"left": False},
}


@dataclass(frozen=True)
class SideSkew:
    """One side's heavy keys, as pandas frames of its key columns (in their join types):
    ``spread`` keys' rows are dealt round robin, each key on its own round, and ``copied`` keys'
    rows go whole to each of ``reach`` buckets spaced evenly over all (None: to every bucket)."""

    spread: pd.DataFrame
    copied: pd.DataFrame
    reach: int | None = None

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
    memory: dict[str, WorkerMemory]
    """The memory of each worker that sampled a partition."""
    hashes: list[tuple[np.ndarray, np.ndarray]]
    """Per partition, its sampled key tuples by row hash (the shuffle's), sorted and unique, and
    each one's count in the sample (:func:`sample_hashes`): hashed by the sampling tasks, side by
    side, rather than by the client between the sample and the exchange."""

    @classmethod
    def of_samples(cls, samples: list[pd.DataFrame], lengths: list[int], nbytes: int,
                   memory: dict[str, WorkerMemory], keys: list[str]) -> SideProfile:
        """The profile of ``samples`` of the side's ``keys``, hashed here."""
        return cls(samples, lengths, nbytes, memory, [sample_hashes(s, keys) for s in samples])

    @property
    def rows(self) -> int:
        return sum(self.lengths)

    @functools.cached_property
    def key_rows(self) -> KeyRows:
        """Each sampled key's rows on the side, estimated and at least, and in the samples:
        summed over the partitions once, for the output's estimate and the skew check both
        (a sort of every sampled hash, the most of a join's decision)."""
        hashes, rows, at_least, sampled = [], [], [], []
        for sample, length, (unique, counts) in zip(self.samples, self.lengths, self.hashes):
            if not len(sample):
                continue
            scale = length / len(sample)
            deviation = np.sqrt(counts * (1 - len(sample) / length))
            hashes.append(unique)
            rows.append(counts * scale)
            at_least.append(np.maximum(counts - 2 * deviation, 0) * scale)
            sampled.append(counts)
        return KeyRows(*summed_by_hash(hashes, rows, at_least, sampled))


@dataclass(frozen=True)
class KeyRows:
    """One side's sampled keys, by the hash of their tuple (sorted, unique): each one's
    estimated rows on the whole side, a lower bound of them, and its rows in the samples."""

    hashes: np.ndarray
    rows: np.ndarray
    at_least: np.ndarray
    sampled: np.ndarray


def sample_hashes(sample: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``sample``'s key tuples by row hash, sorted and unique, and the count of each (none for
    a cross join's, which has no keys)."""
    if not keys or not len(sample):
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
    return np.unique(np.asarray(hash_rows(sample, keys)), return_counts=True)


def summed_by_hash(hashes: Sequence[np.ndarray], *values: Sequence[np.ndarray]
                   ) -> tuple[np.ndarray, ...]:
    """The distinct values of the ``hashes`` arrays, sorted, and each of ``values`` (arrays
    alongside ``hashes``') summed per hash: one sort of all of them, which NumPy's ``unique``
    and ``union1d`` took several times longer over (they hash, then sort again)."""
    flat = np.concatenate(hashes) if hashes else np.empty(0, dtype=np.uint64)
    if not len(flat):
        return (flat, *(np.zeros(0) for _ in values))
    order = np.argsort(flat, kind="stable")
    flat = flat[order]
    starts = np.flatnonzero(np.concatenate(([True], flat[1:] != flat[:-1])))
    return (flat[starts], *(np.add.reduceat(np.concatenate(v)[order], starts) for v in values))


@dataclass(frozen=True)
class KeyCounts:
    """One side's sampled key tuples (null ones too): ``rows``, each one's estimated rows on the
    whole side; ``in_one_partition``, the most rows of it that one partition surely holds (its
    count in that partition's sample of distinct rows); ``sampled``, its rows in all the side's
    samples."""

    rows: pd.Series
    in_one_partition: pd.Series
    sampled: pd.Series


@dataclass(frozen=True)
class HeavyKeys:
    """The keys whose left rows, and those whose right rows, are spread, and the plan's reach
    (None: every bucket)."""

    spread_left: pd.Index
    spread_right: pd.Index
    reach: int | None


def can_split(how: str, threshold: float | None, n_workers: int) -> bool:
    """Whether a join of type ``how`` may split heavy keys at all."""
    return bool(threshold) and how in SPREADS and n_workers > 1


def sample_sides(job: Job, inputs: dict[str, Partitions], keys: dict[str, list[str]],
                 casts: dict[str, dict[str, Any]], sample_rows: int) -> dict[str, list[Future]]:
    """Sample every partition of each side where it lies: the sampling tasks, submitted at a
    higher priority than the rest, so that a worker samples before it sends (a join's sends may
    be submitted before its sample returns) where both are ready: the client waits for the
    samples."""
    futures = {}
    for side, parts in inputs.items():
        stage = job.stage(f"sample-{side}")
        futures[side] = [stage.submit(profile_partition, part, keys[side], casts[side],
                                      sample_rows, i, job.backend, index=(i,), owner=owner,
                                      strict=False, priority=1)
                         for i, (part, owner) in enumerate(zip(parts.futures, parts.owners))]
    return futures


def profile_sides(job: Job, futures: dict[str, list[Future]]) -> dict[str, SideProfile]:
    """Each side's profile from its sampling tasks (:func:`sample_sides`), all in one round
    trip."""
    flat = iter(job.gather([f for side in futures.values() for f in side]))
    return profiles_of({side: [next(flat) for _ in side_futures]
                        for side, side_futures in futures.items()})


def profiles_of(sampled: dict[str, list[Any]]) -> dict[str, SideProfile]:
    """Each side's profile from its sampling tasks' results (:func:`profile_partition`)."""
    return {side: SideProfile([p[0] for p in parts], [p[1] for p in parts],
                              sum(p[2] for p in parts),
                              {p[3].address: p[3] for p in parts if p[3] is not None},
                              [p[4] for p in parts])
            for side, parts in sampled.items()}


def profile_partition(part: Any, keys: list[str], casts: dict[str, Any], rows: int, seed: int,
                      backend: str) -> tuple[pd.DataFrame, int, int, WorkerMemory | None,
                                         tuple[np.ndarray, np.ndarray]]:
    """On the partition's owner: up to ``rows`` of its key tuples, distinct rows drawn at random
    (so a key's count in the sample is a sure lower bound of its rows in the partition), as
    pandas; its length; its bytes; the worker's memory (None: not on a worker); the sample's
    :func:`sample_hashes`."""
    frames = get_backend(backend)
    length = len(part)
    picked = part[keys]
    if length > rows:
        rng = np.random.default_rng(seed)
        picked = frames.take_rows(picked, np.sort(rng.choice(length, rows, replace=False)))
    if casts:
        try:
            picked = picked.astype(casts)
        except (ValueError, TypeError) as error:
            raise JoinError(f"key column(s) {list(casts)} cannot be joined as {casts}: "
                            f"{error} (an object key joined with an integer key must hold "
                            "integers)") from error
    sample = frames.to_pandas(picked)
    return (sample, length, frames.nbytes(part), this_worker_memory(),
            sample_hashes(sample, keys))


def plan_skew(left: SideProfile, right: SideProfile, how: str, left_keys: list[str],
              right_keys: list[str], n_workers: int, threshold: float,
              most_output: float = math.inf) -> SkewPlan | None:
    """The heavy keys to split, from both sides' samples; None where none are. ``most_output``:
    the rows one task can hold of one key's output (:func:`find_heavy`), where a key's may
    be more."""
    share = threshold / n_workers
    if most_output == math.inf and all(
            _most_rows(profile) <= share * max(_sampled_rows(profile), 1) * (1 - 1e-9)
            for profile in (left, right)):
        # No key can be heavy: skip counting keys by value, which took pandas longer than
        # the rest of planning a join where keys are nearly unique (the usual case).
        return None
    counts_left = count_keys(left.samples, left.lengths, left_keys)
    counts_right = count_keys(right.samples, right.lengths, right_keys)
    for counts in (counts_right.rows, counts_right.in_one_partition):
        counts.index.names = counts_left.rows.index.names
    heavy = find_heavy(counts_left, counts_right, how, n_workers, threshold, most_output)
    if heavy is None:
        return None
    spread_left, spread_right = heavy.spread_left, heavy.spread_right
    return SkewPlan(
        SideSkew(_key_frame(spread_left, left_keys), _key_frame(spread_right, left_keys),
                 heavy.reach),
        SideSkew(_key_frame(spread_right, right_keys), _key_frame(spread_left, right_keys),
                 heavy.reach),
    )


def _most_rows(profile: SideProfile) -> float:
    """At least the estimated rows of any one key on this side: its sampled rows over all
    partitions, counted by the key tuple's hash (the shuffle's own, which hashes Python objects
    by value; a collision only adds), times the most rows that one sampled row stands for."""
    if not any(len(s) for s in profile.samples):
        return 0.0
    most = int(profile.key_rows.sampled.max())
    weight = max(length / len(s) for s, length in zip(profile.samples, profile.lengths)
                 if len(s))
    return most * weight


def _sampled_rows(profile: SideProfile) -> int:
    """The rows of the partitions that gave a sample: what :func:`count_keys`' estimates of a
    side add up to."""
    return sum(length for s, length in zip(profile.samples, profile.lengths) if len(s))


def count_keys(samples: list[pd.DataFrame], lengths: list[int], keys: list[str]) -> KeyCounts:
    """Each sampled key tuple's estimated rows on the whole side, and the most one partition's
    sample holds of it."""
    estimated, sure = [], []
    for sample, length in zip(samples, lengths):
        if len(sample):
            counts = sample.value_counts(subset=keys, dropna=False, sort=False)
            sure.append(counts)
            estimated.append(counts * (length / len(sample)))
    if not sure:
        index = (pd.MultiIndex.from_tuples([], names=keys) if len(keys) > 1
                 else pd.Index([], name=keys[0]))
        empty = pd.Series([], index=index, dtype="float64")
        return KeyCounts(empty, empty, empty)
    levels = list(range(sure[0].index.nlevels))
    by_key = pd.concat(sure).groupby(level=levels, dropna=False)
    return KeyCounts(pd.concat(estimated).groupby(level=levels, dropna=False).sum(),
                     by_key.max(), by_key.sum())


def find_heavy(left: KeyCounts, right: KeyCounts, how: str, n_workers: int,
               threshold: float, most_output: float = math.inf) -> HeavyKeys | None:
    """The keys to spread of each side, from both sides' key counts; None when none are.

    A key is heavy when its rows on either side exceed ``threshold`` of one worker's share of
    that side's rows. It is spread on the side with more of its rows among those ``how`` lets
    spread (:data:`SPREADS`) that hold at least one row of it per worker (fewer cannot be
    spread), and, where the copied side is preserved, whose rows of it one partition surely
    holds at least one per worker. Input shares, not output estimates, decide: a sample of a few
    thousand rows per partition measures a share of ``threshold / n_workers`` well, while the
    product of two sparse samples' counts is mostly noise. The keys that dominate the output of
    a skewed join are heavy on at least one side. Where one task cannot hold ``most_output``
    rows, a key estimated to output more (a many-to-many fan-out of keys light on both sides)
    is heavy too, where the samples hold more than one row of it on a side: a key sampled once
    on each side is what any distinct key that both samples happen to draw shows, and the
    product of its scaled counts (the square of the sampling ratio) says nothing of a fan-out.
    Taken for one, such keys were split in joins of distinct keys on GPUs, whose partitions
    sample one row in thousands (benchmarks/results/2026-11-26-s20-gpus-h100x2.md).
    """
    if left.rows.empty or right.rows.empty:
        index = right.rows.index if left.rows.empty else left.rows.index
        zeros = KeyCounts(*(pd.Series(0.0, index=index) for _ in range(3)))
        left, right = (c if len(c.rows) else zeros for c in (left, right))
    rows = pd.concat([left.rows.rename("left"), right.rows.rename("right")], axis=1).fillna(0.0)
    sure, sampled = (pd.concat([getattr(left, field).rename("left"),
                                getattr(right, field).rename("right")], axis=1
                               ).reindex(rows.index).fillna(0.0)
                     for field in ("in_one_partition", "sampled"))
    share = threshold / n_workers
    fans_out = ((rows["left"] * rows["right"] > most_output)
                & ((sampled["left"] > 1) | (sampled["right"] > 1)))
    heavy = ((rows["left"] > share * max(rows["left"].sum(), 1))
             | (rows["right"] > share * max(rows["right"].sum(), 1))
             | fans_out).to_numpy()
    has_null = rows.index.to_frame().isna().any(axis=1).to_numpy()
    allowed, guarded = {}, {}
    for side in ("left", "right"):
        preserved = SPREADS[how].get(side)
        guarded[side] = np.full(len(rows), bool(preserved))
        allowed[side] = heavy & (rows[side].to_numpy() >= n_workers) & (preserved is not None)
        if preserved:
            allowed[side] &= (sure[side].to_numpy() >= n_workers) & ~has_null
    more_left = (rows["left"] >= rows["right"]).to_numpy()
    spread_left = allowed["left"] & (more_left | ~allowed["right"])
    spread_right = allowed["right"] & ~spread_left
    if not (spread_left.any() or spread_right.any()):
        return None
    reaches = np.concatenate([sure["left"].to_numpy()[spread_left & guarded["left"]],
                              sure["right"].to_numpy()[spread_right & guarded["right"]]])
    reach = int(reaches.min()) if len(reaches) else None
    return HeavyKeys(rows.index[spread_left], rows.index[spread_right], reach)


def _key_frame(index: pd.Index, names: list[str]) -> pd.DataFrame:
    frame = index.to_frame(index=False)
    frame.columns = names
    return frame


def split_heavy(part: Any, keys: list[str], skew: SideSkew, n: int, index: int,
                backend: str) -> tuple[Any, list[list[Any]]]:
    """On the source worker: (the rows to hash-partition, the extra pieces for each bucket).

    Heavy keys' rows go to ``skew.reach`` of the ``n`` buckets (all where None or more), spaced
    evenly so that a bucket per worker is among them. Each ``skew.spread`` key's rows are dealt
    round robin over those, on the key's own round, so a key with at least ``reach`` rows here
    reaches every one; the rounds start at the partition's number ``index`` (so partitions do
    not all favour the first). The rows of ``skew.copied`` keys go to each of them whole.
    """
    frames = get_backend(backend)
    reach = n if skew.reach is None else min(skew.reach, n)
    targets = [slot * n // reach for slot in range(reach)]
    extra: list[list[Any]] = [[] for _ in range(n)]
    spread_mask = _matches(part, keys, skew.spread, frames)
    copied_mask = _matches(part, keys, skew.copied, frames)
    rest = part
    if spread_mask is not None:
        spread = part[spread_mask]
        if len(spread):
            slots = (_ranks(spread, keys, frames) + index) % reach
            for slot, bucket in enumerate(targets):
                extra[bucket].append(spread[slots == slot])
    if copied_mask is not None:
        copied = part[copied_mask]
        for bucket in targets:
            extra[bucket].append(copied)
    masks = [m for m in (spread_mask, copied_mask) if m is not None]
    if masks:
        rest = part[~(masks[0] | masks[1])] if len(masks) == 2 else part[~masks[0]]
    return rest, extra


def _ranks(rows: Any, keys: list[str], frames: Any) -> Any:
    """Each row's number among the earlier rows of its key (by the row hash), as an array."""
    hashes = frames.module.Series(hash_rows(rows[keys], keys))
    return hashes.groupby(hashes).cumcount().values


def _matches(part: Any, keys: list[str], heavy: pd.DataFrame, frames: Any) -> Any:
    """A boolean mask of ``part``'s rows whose keys are among ``heavy``'s (a null matching a
    null, as in the join); None when it is empty.

    Several key columns are compared by their row hash (the shuffle's own, which hashes all
    nulls alike)."""
    if not len(heavy):
        return None
    picked = part[keys]
    heavy = frames.from_pandas(heavy).astype(dict(picked.dtypes))
    if len(keys) == 1:
        column, values = picked[keys[0]], heavy[keys[0]]
        mask = column.isin(values.dropna())
        if values.isna().any():
            mask = mask | column.isna()
        return mask.values
    series = frames.module.Series
    return series(hash_rows(picked, keys)).isin(series(hash_rows(heavy, keys))).values


@dataclass(frozen=True)
class SkewSplitter:
    """:class:`~gpuframe.exchange.splitters.HashSplitter`'s buckets, except that ``skew``'s heavy
    keys are dealt round robin or copied (:func:`split_heavy`) instead of hashed."""

    hashed: HashSplitter
    skew: SideSkew
    backend: str

    @property
    def n(self) -> int:
        return self.hashed.n

    def split(self, frame: Any, index: int, sealed: bool = False) -> list[Any]:
        """Frames, never sealed: the heavy keys' rows join each bucket's after the packing."""
        keys = list(self.hashed.keys)
        part = cast_keys(frame, self.hashed.casts)
        rest, extra = split_heavy(part, keys, self.skew, self.n, index, self.backend)
        frames = get_backend(self.backend)
        return [frames.concat([bucket, *pieces]) if pieces else bucket
                for bucket, pieces in zip(hash_split(rest, keys, self.n), extra)]
