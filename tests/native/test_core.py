"""gpuframe._core called directly: the contract gpuframe.exchange.pack relies on (every
output byte written, the layout, argument errors), without the Python layer's conversions."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from core_args import column, columns, packed

from gpuframe import _core


@pytest.mark.parametrize("n", [1, 3, 64])
def test_every_output_byte_is_written(n):
    partition = _core.HostPartition(columns(), [0, 2], 5000, n)
    assert np.array_equal(packed(partition, 0x00), packed(partition, 0xFF))


def test_layout_is_consistent():
    n = 5
    partition = _core.HostPartition(columns(), [1], 5000, n, threads=2)
    rows, offsets, pieces, chars = (partition.rows, partition.byte_offsets, partition.pieces,
                                    partition.chars)
    assert rows.shape == (n,) and rows.sum() == 5000
    assert offsets.shape == (n + 1,) and offsets[-1] == partition.total_bytes
    assert pieces.shape == (n, 4, 3) and chars.shape == (n, 4)
    assert (pieces[:, 0, 0] >= 0).all() and (pieces[:, 1, 0] == -1).all()  # validity only if given
    assert (pieces[:, 2, 2] >= 0).all() and (pieces[:, 0, 2] == -1).all()  # chars for strings
    assert (pieces[pieces >= 0] % _core.ALIGNMENT == 0).all()
    for d in range(n):
        inside = pieces[d][pieces[d] >= 0]
        assert (inside >= offsets[d]).all() and (inside < offsets[d + 1]).all()
    out = packed(partition, 0)
    for d in range(n):  # string offsets are rebased to start at 0 and end at the chars' size
        start = pieces[d, 2, 1]
        offs = out[start:start + (rows[d] + 1) * 4].view(np.int32)
        assert offs[0] == 0 and offs[-1] == chars[d, 2] and (np.diff(offs) >= 0).all()


@pytest.mark.parametrize("rows", [0, 1, 9, 5000])
@pytest.mark.parametrize("n", [1, 3, 64, 1000])
@pytest.mark.parametrize("keys", ["random", "one value"])
def test_output_bound_holds_the_packing_however_rows_fall(rows, n, keys):
    """The bound that a GPU output is allocated by before its count: never short, by at most a
    piece's padding (and a bitmap byte) per destination."""
    rng = np.random.default_rng(rows + n)
    key = rng.integers(0, 99, rows) if keys == "random" else np.zeros(rows, np.int64)
    cols = [column(pa.array(key)), column(pa.array(rng.random(rows))),
            column(pa.array([None if v % 3 == 0 else int(v) for v in rng.integers(0, 9, rows)],
                            pa.int8()))]
    partition = _core.HostPartition(cols, [0], rows, n)
    pieces = 4  # the three columns' values, and the bitmap of the one with nulls
    assert partition.total_bytes <= partition.output_bound
    assert partition.output_bound < partition.total_bytes + pieces * n * _core.ALIGNMENT
    words = column(pa.array(["w" * (r % 5) for r in range(rows)], pa.string()))
    with_strings = _core.HostPartition([*cols, words], [0], rows, n)
    assert with_strings.output_bound == -1


def test_hash_rows_agrees_with_the_partition():
    cols = columns(3000, seed=4)
    hashes = _core.hash_rows([cols[2], cols[0]], 3000)
    assert hashes.dtype == np.uint64 and hashes.shape == (3000,)
    partition = _core.HostPartition(cols, [2, 0], 3000, 1)
    assert partition.rows.tolist() == [3000]
    # Same keys, other column order: other hashes.
    assert not np.array_equal(hashes, _core.hash_rows([cols[0], cols[2]], 3000))


def test_argument_errors():
    cols = columns(100)
    with pytest.raises(ValueError, match="n_destinations"):
        _core.HostPartition(cols, [0], 100, 0)
    with pytest.raises(ValueError, match="key column index 9"):
        _core.HostPartition(cols, [9], 100, 2)
    with pytest.raises(ValueError, match="at least one key"):
        _core.HostPartition(cols, [], 100, 2)
    with pytest.raises(ValueError, match="width 3"):
        _core.HostPartition([(_core.FIXED, 3, 0, np.zeros(300, np.uint8), None, None)], [0],
                            100, 2)
    with pytest.raises(ValueError, match="column 0: no offsets"):
        _core.HostPartition([(_core.STRING, 4, 0, np.zeros(8, np.uint8), None, None)], [0],
                            1, 2)
    partition = _core.HostPartition(cols, [0], 100, 2)
    with pytest.raises(ValueError, match="bytes"):
        partition.scatter(np.empty(partition.total_bytes - 1, np.uint8))


def test_short_or_misplaced_buffers_are_refused():
    ints = np.arange(10, dtype=np.int64).view(np.uint8)
    cases = {
        "data": (_core.FIXED, 8, 0, ints[:79], None, None),
        "offset": (_core.FIXED, 8, 1, ints, None, None),  # rows 1..10 need 88 bytes
        "validity": (_core.FIXED, 8, 0, ints, np.zeros(1, np.uint8), None),
        "offsets": (_core.STRING, 4, 0, np.zeros(10, np.uint8), None,
                    np.zeros(10, np.int32).view(np.uint8)),
        "chars": (_core.STRING, 4, 0, np.zeros(5, np.uint8), None,
                  np.arange(11, dtype=np.int32).view(np.uint8)),
        "negative offset": (_core.FIXED, 8, -1, ints, None, None),
    }
    for col in cases.values():
        for call in (lambda col=col: _core.HostPartition([col], [0], 10, 2),
                     lambda col=col: _core.hash_rows([col], 10)):
            with pytest.raises(ValueError, match="column 0"):
                call()
    descending = np.array([0, 5, 3] + [3] * 8, np.int32).view(np.uint8)
    with pytest.raises(ValueError, match="column 0"):
        _core.hash_rows([(_core.STRING, 4, 1, np.zeros(8, np.uint8), None, descending)], 1)
    with pytest.raises(ValueError):
        _core.HostPartition(columns(10), [0], -1, 2)
    # (address, bytes) pairs are for device memory only.
    pair = (_core.FIXED, 8, 0, (ints.ctypes.data, ints.nbytes), None, None)
    with pytest.raises(ValueError, match="column 0: the data buffer is an address"):
        _core.HostPartition([pair], [0], 10, 2)
    # Empty input needs no buffers at all.
    empty = _core.HostPartition([(_core.FIXED, 8, 0, None, None, None)], [0], 0, 3)
    assert empty.rows.tolist() == [0, 0, 0]


@pytest.mark.gpu
def test_device_buffers_given_by_address_pack_as_arrays_do():
    """gpuframe passes cuDF's buffers as (address, bytes) pairs: the same bytes come out as from
    CuPy arrays, and a pair too short for the rows is refused like a short array."""
    cupy = pytest.importorskip("cupy")
    if not _core.built_with_cuda or _core.cuda_device_count() == 0:
        pytest.skip("no CUDA device")
    values = cupy.asarray(np.random.default_rng(1).integers(-99, 99, 1000))
    validity = cupy.asarray(np.packbits(np.arange(1000) % 3 > 0, bitorder="little"))
    packed = []
    for buffers in ((values.view(cupy.uint8), validity),
                    ((values.data.ptr, values.nbytes), (validity.data.ptr, validity.nbytes))):
        core = _core.CudaPartition([(_core.FIXED, 8, 0, *buffers, None)], [0], 1000, 7)
        scratch = cupy.empty(core.scratch_bytes, cupy.uint8)
        core.count(scratch, 0)
        out = cupy.empty(core.total_bytes, cupy.uint8)
        core.scatter(out, 0)
        packed.append(out.get())
    np.testing.assert_array_equal(packed[0], packed[1])
    with pytest.raises(ValueError, match="column 0: the data buffer holds 7992 bytes"):
        _core.CudaPartition([(_core.FIXED, 8, 0, (values.data.ptr, 7992), None, None)], [0],
                            1000, 7)


@pytest.mark.gpu
@pytest.mark.parametrize("totals", ["page-locked", "pageable", "the core's own"])
def test_cuda_count_brings_its_totals_back_wherever_they_are_given(totals):
    """The count's totals come back into page-locked memory (the copy queued, the layout waiting
    for it), pageable memory or the core's own: the same layout and bytes as the CPU's, in an
    output allocated by the bound before the count has finished."""
    cupy = pytest.importorskip("cupy")
    cupyx = pytest.importorskip("cupyx")
    if not _core.built_with_cuda or _core.cuda_device_count() == 0:
        pytest.skip("no CUDA device")
    rows, n = 1_000_000, 9
    host = [columns(rows, seed=5)[i] for i in (0, 1, 3)]  # no strings: the bound is known
    device = [(kind, width, offset, *(None if b is None else cupy.asarray(b) for b in buffers))
              for kind, width, offset, *buffers in host]
    core = _core.CudaPartition(device, [0, 2], rows, n)
    given = {"page-locked": cupyx.empty_pinned(core.totals_size + 3, np.int64),
             "pageable": np.empty(core.totals_size, np.int64), "the core's own": None}[totals]
    scratch = cupy.empty(core.scratch_bytes, cupy.uint8)
    core.count(scratch, 0, given)
    out = cupy.full(core.output_bound, 0xAB, cupy.uint8)  # garbage past the end stays
    core.scatter(out, 0)
    cpu = _core.HostPartition(host, [0, 2], rows, n)
    np.testing.assert_array_equal(core.rows, cpu.rows)
    np.testing.assert_array_equal(core.pieces, cpu.pieces)
    expected = np.empty(cpu.total_bytes, np.uint8)
    cpu.scatter(expected)
    np.testing.assert_array_equal(out[:core.total_bytes].get(), expected)
    assert (out[core.total_bytes:] == 0xAB).all()
    with pytest.raises(ValueError, match="the totals hold 8 int64s"):
        core.count(scratch, 0, np.empty(8, np.int64))


def test_cuda_entry_points_fail_cleanly_without_a_device():
    if _core.built_with_cuda and _core.cuda_device_count() > 0:
        pytest.skip("a CUDA device is present")
    assert _core.cuda_device_count() == 0
    with pytest.raises(_core.CudaError):
        _core.CudaPartition([(_core.FIXED, 8, 0, None, None, None)], [0], 0, 2)
    assert issubclass(_core.CudaError, RuntimeError)
