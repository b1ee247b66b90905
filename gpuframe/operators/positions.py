"""Row positions: where each row stood in its frame, carried through an exchange so that the
rows of equal keys can be put back in their input order (a stable sort, drop_duplicates'
``keep="first"``) wherever they land.

A position is one int64, the partition's number in the high bits and the row's number within
its partition in the low :data:`ROW_BITS` bits, so positions order rows as the partitions in
order do, with no count of earlier partitions' rows needed first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

ROW_BITS = 40
"""Bits of a position that number rows within a partition (2**40 rows at most)."""


def position_column(names: Sequence[Any]) -> str:
    """A column name that is none of ``names``: where the positions travel."""
    name = "__gpuframe_position__"
    while name in set(names):
        name += "_"
    return name


def positions(partition: int, rows: np.ndarray) -> np.ndarray:
    """The positions of partition ``partition``'s rows numbered ``rows``."""
    return (np.int64(partition) << np.int64(ROW_BITS)) + rows.astype(np.int64)


def with_positions(frame: Any, partition: int, column: str) -> Any:
    """``frame`` (pandas or cuDF) with each row's position in ``column``."""
    return frame.assign(**{column: positions(partition, np.arange(len(frame)))})

