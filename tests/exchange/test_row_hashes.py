"""gpuframe.exchange.row_hashes' repeat count against NumPy's, on the host and (marker gpu) by
the native core on the device. The row hashes themselves are checked against a reference of the
hash in test_pack.py, beside the packing that uses them."""

from __future__ import annotations

import numpy as np
import pytest

from gpuframe.exchange.row_hashes import longest_repeat


def repeat_cases():
    """Hashes whose longest repeat is known: all distinct, all one value, a long run among
    short ones (at either end and inside), and random values with many repeats."""
    rng = np.random.default_rng(11)
    distinct = rng.permutation(np.arange(100_003, dtype=np.uint64) * np.uint64(2**40 + 7))
    mixed = np.concatenate([np.repeat(rng.integers(0, 2**63, 500, dtype=np.uint64),
                                      rng.integers(1, 40, 500)),
                            np.full(4_097, 2**64 - 1, np.uint64), np.zeros(3, np.uint64)])
    return {"one": np.array([5], np.uint64), "distinct": distinct,
            "same": np.full(1_000_001, 42, np.uint64), "mixed": rng.permutation(mixed),
            "max last": np.sort(mixed), "random": rng.integers(0, 1_000, 300_000,
                                                               dtype=np.uint64)}


@pytest.mark.parametrize("case", list(repeat_cases()))
def test_longest_repeat_counts_the_most_frequent_value(case):
    hashes = repeat_cases()[case]
    assert longest_repeat(hashes) == np.unique(hashes, return_counts=True)[1].max()


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(repeat_cases()))
def test_cuda_longest_repeat_matches_the_host(case):
    """The native core's sort and run count, with no kernel compiled at run time."""
    import cupy

    hashes = repeat_cases()[case]
    device = cupy.asarray(hashes)
    assert longest_repeat(device) == np.unique(hashes, return_counts=True)[1].max()
    np.testing.assert_array_equal(device.get(), hashes)  # the caller's hashes are left as given


@pytest.mark.gpu
def test_cuda_longest_repeat_refuses_short_scratch():
    import cupy

    from gpuframe import _core

    hashes = cupy.arange(1000, dtype=cupy.uint64)
    short = cupy.empty(_core.longest_repeat_scratch_bytes(1000) - 1, dtype=cupy.uint8)
    with pytest.raises(ValueError, match="scratch buffer holds"):
        _core.longest_repeat_cuda(hashes, cupy.empty_like(hashes), short)
