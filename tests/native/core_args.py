"""The native core's arguments made from Arrow arrays, shared by the tests of tests/native."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from gpuframe import _core


def column(array: pa.Array) -> tuple:
    """The core's column tuple for a fixed-width or string Arrow array (buffers as NumPy views)."""
    buffers = [None if b is None else np.frombuffer(b, np.uint8) for b in array.buffers()]
    validity = buffers[0] if array.null_count else None
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        width = 8 if pa.types.is_large_string(array.type) else 4
        return (_core.STRING, width, array.offset, buffers[2], validity, buffers[1])
    kind = _core.FLOATING if pa.types.is_floating(array.type) else _core.FIXED
    return (kind, array.type.bit_width // 8, array.offset, buffers[1], validity, None)


def columns(rows: int = 5000, seed: int = 0) -> list[tuple]:
    rng = np.random.default_rng(seed)
    ints = pa.array([None if v % 7 == 0 else int(v) for v in rng.integers(0, 99, rows + 3)])
    words = pa.array([None if v % 5 == 0 else "w" * int(v % 11) for v in rng.integers(0, 99, rows)])
    return [column(ints.slice(3)), column(pa.array(rng.random(rows))), column(words),
            column(pa.array(rng.integers(0, 9, rows).astype(np.int16)))]


def packed(partition, fill: int) -> np.ndarray:
    out = np.full(partition.total_bytes, fill, np.uint8)
    partition.scatter(out)
    return out
