"""gpuframe._core's range destinations and given-destination partitions called directly: the
contract gpuframe.exchange.pack relies on (argument errors, error classes, the CPU layout by
given destinations equal to the hash one), without the Python layer's conversions. Their results
against pandas and the CUDA ones against the CPU are tested in tests/exchange/test_pack.py."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from core_args import column, columns, packed

from gpuframe import _core

ASCENDING = (False, True, True)  # (is_signed, ascending, nulls_last)
SIGNED = (True, True, True)


def hash_destinations(hashes: np.ndarray, n: int) -> np.ndarray:
    """destination(h, n) of hash.hpp, in Python integers: the high 64 bits of h * n."""
    return np.array([(int(h) * n) >> 64 for h in hashes], np.int64)


@pytest.mark.parametrize("n", [1, 3, 64, 1000])
def test_given_destinations_pack_as_the_hash_does(n):
    cols = columns(5000, seed=n)
    hashed = _core.HostPartition(cols, [0, 2], 5000, n, threads=2)
    dest = hash_destinations(_core.hash_rows([cols[0], cols[2]], 5000), n)
    given = _core.HostPartition.by_destinations(cols, dest, 5000, n, threads=2)
    for name in ("rows", "byte_offsets", "pieces", "chars"):
        np.testing.assert_array_equal(getattr(given, name), getattr(hashed, name), err_msg=name)
    assert np.array_equal(packed(given, 0x00), packed(hashed, 0xFF))


def test_given_destinations_are_checked():
    cols = columns(50)
    dest = np.arange(50) % 4
    with pytest.raises(ValueError, match="integers of 8, 16, 32 or 64 bits"):
        _core.HostPartition.by_destinations(cols, dest.astype(np.float64), 50, 4)
    with pytest.raises(ValueError, match="integers of 8, 16, 32 or 64 bits"):
        _core.HostPartition.by_destinations(cols, dest.astype(np.bool_), 50, 4)
    with pytest.raises(ValueError, match="49 destinations for 50 rows"):
        _core.HostPartition.by_destinations(cols, dest[:49], 50, 4)
    with pytest.raises(ValueError, match="n_destinations must be at least 1"):
        _core.HostPartition.by_destinations(cols, dest, 50, 0)
    bad = dest.astype(np.int16)
    bad[[30, 40]] = [-7, 4]
    with pytest.raises(_core.DestinationError, match=r"^row 30 has destination -7, outside"):
        _core.HostPartition.by_destinations(cols, bad, 50, 4)
    assert issubclass(_core.DestinationError, ValueError)
    empty = _core.HostPartition.by_destinations([(_core.FIXED, 8, 0, None, None, None)],
                                                np.empty(0, np.uint8), 0, 3)
    assert empty.rows.tolist() == [0, 0, 0]


def range_out(keys, rows, bounds, n_bounds, orders, threads=0):
    out = np.full(rows, 0xFFFFFFFF, np.uint32)
    _core.range_destinations(keys, rows, bounds, n_bounds, orders, out, threads)
    return out


def test_range_destinations_bisect_right():
    keys = [column(pa.array([5, 1, 3, None, 3, 9, -2], pa.int64()))]
    bounds = [column(pa.array([1, 3, 3, 8], pa.int64()))]
    assert range_out(keys, 7, bounds, 4, [SIGNED]).tolist() == [3, 1, 3, 4, 3, 4, 0]
    nulls_first = (True, True, False)
    assert range_out(keys, 7, bounds, 4, [nulls_first]).tolist() == [3, 1, 3, 0, 3, 4, 0]
    assert range_out(keys, 7, bounds, 0, [SIGNED]).tolist() == [0] * 7


def test_range_arguments_are_checked():
    ints = [column(pa.array([1, 2, 3], pa.int64()))]
    words = [column(pa.array(["a", "b"]))]
    with pytest.raises(ValueError, match="1 key columns need as many boundary columns and "
                                         "orders, not 2 and 1"):
        range_out(ints, 3, ints + ints, 3, [SIGNED])
    with pytest.raises(ValueError, match="not 1 and 2"):
        range_out(ints, 3, ints, 3, [SIGNED, SIGNED])
    with pytest.raises(ValueError, match="key column 0: the boundaries are of kind 2 and width "
                                         "4, the keys of kind 0 and width 8: cast the boundaries"):
        range_out(ints, 3, words, 2, [SIGNED])
    narrow = [column(pa.array([1, 2], pa.int32()))]
    with pytest.raises(ValueError, match="cast the boundaries first"):
        range_out(ints, 3, narrow, 2, [SIGNED])
    with pytest.raises(ValueError, match="at least one key column"):
        range_out([], 3, [], 0, [])
    with pytest.raises(ValueError, match="one uint32 per row"):
        _core.range_destinations(ints, 3, ints, 3, [SIGNED], np.empty(2, np.uint32))
    # string offsets of either width compare alike
    large = [column(pa.array(["a", "c"], pa.large_string()))]
    assert range_out(words, 2, large, 2, [ASCENDING]).tolist() == [1, 1]


def test_unsorted_boundaries_are_refused():
    descending = [column(pa.array([3, 2, 2, 1], pa.int64()))]
    with pytest.raises(_core.BoundaryOrderError, match="boundary rows 0 and 1 are out of order"):
        range_out(descending, 4, descending, 4, [SIGNED])
    _core.check_boundaries(descending, 4, [(True, False, True)])
    with pytest.raises(_core.BoundaryOrderError, match="boundary rows 0 and 1"):
        _core.check_boundaries(descending, 4, [SIGNED])
    nulls = [column(pa.array([None, 1], pa.int64()))]
    _core.check_boundaries(nulls, 2, [(True, True, False)])
    with pytest.raises(_core.BoundaryOrderError):
        _core.check_boundaries(nulls, 2, [SIGNED])
    with pytest.raises(ValueError, match="1 boundary columns need as many orders, not 0"):
        _core.check_boundaries(nulls, 2, [])
    assert issubclass(_core.BoundaryOrderError, ValueError)


@pytest.mark.gpu
def test_cuda_range_destinations_of_no_rows_and_no_boundaries():
    cupy = pytest.importorskip("cupy")
    if not _core.built_with_cuda or _core.cuda_device_count() == 0:
        pytest.skip("no CUDA device")
    values = cupy.asarray(np.array([5, 1, 3], np.int64)).view(cupy.uint8)
    keys = [(_core.FIXED, 8, 0, values, None, None)]
    out = cupy.full(3, 7, cupy.uint32)
    _core.range_destinations_cuda(keys, 3, keys, 0, [SIGNED], out, 0)
    assert out.get().tolist() == [0, 0, 0]
    _core.range_destinations_cuda(keys, 0, keys, 3, [SIGNED], out, 0)  # writes nothing
    assert out.get().tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="at most 16 key columns"):
        _core.range_destinations_cuda(keys * 17, 3, keys * 17, 3, [SIGNED] * 17, out, 0)
