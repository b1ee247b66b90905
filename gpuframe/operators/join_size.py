"""A join's output, estimated from the key sample before it runs, held against the workers' memory.

Each sampled key tuple (by the shuffle's row hash) stands for its rows on the whole side: its
count in a partition's sample times the partition's rows over the sample's
(:attr:`~.skew.SideProfile.key_rows`). A key's output is the product of its rows on both sides,
or its rows on a side the join keeps unmatched where the other has none, so a many-to-many key's
fan-out is counted (:func:`estimate_output`). Both sides are sampled independently, so the
product of two scaled counts is an unbiased estimate of a key's output, and the sum of them of
the join's.

The estimate sizes the join tasks, where erring high only costs more tasks. Refusing a join
(:func:`check_fits`) must not err high, so it takes a lower bound of each key's rows instead:
the sampled count less two standard deviations of that count (a draw without replacement from
the partition's rows), which a key's true rows fall below in about one sample in forty, and
never where a partition is sampled whole. A join is refused where

- the output of one key that no task splits is surely larger than the smallest worker's memory
  limit: one join task makes all of it at once, in memory, however many tasks there are; or
- the whole output is surely larger than the workers can hold together, their memory limits
  plus the free disk they spill to: the output is kept until the frame is dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..cluster.memory import WorkerMemory
from ..errors import MemoryLimitError
from ..exchange.row_hashes import hash_rows
from ..units import byte_text
from .skew import SideProfile, SideSkew, summed_by_hash

AT_MOST_ONE_SIDE = {"leftsemi": "left", "leftanti": "left", "left_anti": "left",
                    "right_anti": "right"}
"""Joins whose output is some of one side's rows, at most all of them: no lower bound of it
is known from the sample, and an input already held is never refused."""

LEFT_COLUMNS_ONLY = ("leftsemi", "leftanti")

KEEPS_UNMATCHED = {"left": ("left",), "right": ("right",), "outer": ("left", "right")}
"""The sides whose rows a join keeps where the other side has none of their key."""


@dataclass(frozen=True)
class OutputEstimate:
    """A join's output per sampled key (by hash): estimated rows, a lower bound of them, the
    bytes an output row takes, and whether the samples hold more than one row of the key on a
    side (:func:`~.skew.find_heavy`: only then is a large estimate taken for a fan-out)."""

    hashes: np.ndarray
    rows: np.ndarray
    at_least: np.ndarray
    row_bytes: float
    repeated: np.ndarray

    @property
    def nbytes(self) -> float:
        return float(self.rows.sum()) * self.row_bytes

    @property
    def at_least_nbytes(self) -> float:
        return float(self.at_least.sum()) * self.row_bytes

    def most_rows_of_a_key(self, key_bytes: float | None) -> float:
        """The output rows of one key that ``key_bytes`` hold, where some key sampled more than
        once on a side has a larger estimated output (its rows must then be split over tasks);
        else infinity."""
        most = float(self.rows[self.repeated].max(initial=0.0))
        if key_bytes is None or most * self.row_bytes <= key_bytes:
            return math.inf
        return key_bytes / self.row_bytes

    def largest_unsplit(self, split: np.ndarray) -> float:
        """The surely largest output, in bytes, of one key whose hash ``split`` lacks."""
        kept = self.at_least[~np.isin(self.hashes, split)]
        return float(kept.max(initial=0.0)) * self.row_bytes


def estimate_output(left: SideProfile, right: SideProfile, how: str) -> OutputEstimate:
    """The output of a join of type ``how`` of the sides ``left`` and ``right`` profile."""
    widths = [p.nbytes / p.rows if p.rows else 0.0 for p in (left, right)]
    row_bytes = widths[0] if how in LEFT_COLUMNS_ONLY else widths[0] + widths[1]
    sides = left.key_rows, right.key_rows
    one_side = AT_MOST_ONE_SIDE.get(how)
    if one_side is not None:
        counted = sides[0] if one_side == "left" else sides[1]
        return OutputEstimate(counted.hashes, counted.rows, np.zeros(len(counted.rows)),
                              row_bytes, counted.sampled > 1)
    # Each side's estimates at every key of either side, 0 where that side has none of it.
    nothing = [np.zeros(len(side.hashes)) for side in sides]
    hashes, left_rows, right_rows, left_least, right_least, left_sampled, right_sampled = \
        summed_by_hash([side.hashes for side in sides], [sides[0].rows, nothing[1]],
                       [nothing[0], sides[1].rows], [sides[0].at_least, nothing[1]],
                       [nothing[0], sides[1].at_least], [sides[0].sampled, nothing[1]],
                       [nothing[0], sides[1].sampled])
    kept = KEEPS_UNMATCHED.get(how, ())
    outputs = []
    for on_left, on_right in ((left_rows, right_rows), (left_least, right_least)):
        # A row kept unmatched is one output row where the other side has none of its key.
        outputs.append((np.maximum(on_left, 1) if "right" in kept else on_left)
                       * (np.maximum(on_right, 1) if "left" in kept else on_right))
    return OutputEstimate(hashes, outputs[0], outputs[1], row_bytes,
                          (left_sampled > 1) | (right_sampled > 1))


def split_hashes(skew: SideSkew | None, samples: Sequence[pd.DataFrame]) -> np.ndarray:
    """The hashes of the keys whose rows a join deals over several tasks: the left side's
    heavy keys (spread or copied: every heavy key is one or the other), typed as its key
    ``samples``."""
    heavy = [keys for keys in (skew.spread, skew.copied) if len(keys)] if skew else []
    if not heavy or not samples:
        return np.empty(0, dtype=np.uint64)
    keys = pd.concat(heavy, ignore_index=True).astype(dict(samples[0].dtypes))
    return np.asarray(hash_rows(keys, list(keys.columns)))


def check_fits(output: OutputEstimate, memory: Sequence[WorkerMemory], split: np.ndarray,
               what: str) -> None:
    """Raise :class:`MemoryLimitError` where the join ``what`` surely cannot complete in
    ``memory``, the workers' (see the module's docstring); ``split``: the hashes of the keys
    whose rows the join deals over several tasks."""
    limits = [m.limit for m in memory]
    if not limits or any(limit is None for limit in limits):
        return
    smallest = min(limit for limit in limits if limit is not None)
    largest = output.largest_unsplit(split)
    if largest > smallest:
        raise MemoryLimitError(
            f"{what}: one key's output is estimated at {byte_text(largest)} or more, larger "
            f"than the smallest worker memory limit, {byte_text(smallest)}: one join task "
            "makes all of a key's rows at once, however many tasks there are. Heavy keys are "
            "split over several tasks by inner, left, right and outer joins on 2 workers or "
            "more, with skew_threshold set, without validate= or sort=True; else give the "
            "workers more memory")
    rooms = [m.room for m in memory]
    if any(room is None for room in rooms):
        return
    room = sum(r for r in rooms if r is not None)
    if output.at_least_nbytes > room:
        raise MemoryLimitError(
            f"{what}: its output is estimated at {byte_text(output.nbytes)} "
            f"({output.rows.sum():.3g} rows; at least {byte_text(output.at_least_nbytes)}), "
            f"more than the workers can hold, {byte_text(room)} in all: {len(memory)} workers "
            f"with memory limits of "
            f"{', '.join(byte_text(limit) for limit in limits if limit is not None)}, and the "
            "free disk they spill to")
