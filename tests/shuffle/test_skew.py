import numpy as np
import pandas as pd
import pytest
from dask.utils import key_split
from distributed import Client, LocalCluster, get_task_stream

import gpuframe
from gpuframe.backend import get_backend
from gpuframe.cluster.engine import Engine, set_current
from gpuframe.shuffle.skew import find_heavy


def assert_same_rows(result, expected):
    def canonical(frame):
        frame = frame[sorted(frame.columns)]
        return frame.sort_values(list(frame.columns)).reset_index(drop=True)

    pd.testing.assert_frame_equal(canonical(result), canonical(expected), check_dtype=False)


def semi_expected(left, right, keys, anti):
    hit = left[keys].merge(right[keys].drop_duplicates(), how="left", indicator=True)["_merge"]
    return left[(hit == "both").to_numpy() != anti]

SHUFFLE = {"broadcast_bytes": 0}
NO_SKEW = {"broadcast_bytes": 0, "skew_threshold": None}


def zipf_keys(rng, rows, keys, heavy_share):
    """``heavy_share`` of the rows hold key 0, the rest Zipf-like over 1..keys-1."""
    heavy = int(rows * heavy_share)
    weights = 1.0 / np.arange(1, keys) ** 1.1
    rest = rng.choice(np.arange(1, keys), rows - heavy, p=weights / weights.sum())
    return rng.permutation(np.concatenate([np.zeros(heavy, dtype="int64"), rest]))


@pytest.fixture(scope="module")
def skewed():
    rng = np.random.default_rng(11)
    left = pd.DataFrame({"k": zipf_keys(rng, 20_000, 200, 0.6), "lv": rng.random(20_000)})
    right = pd.DataFrame({"k": rng.integers(0, 200, 2_000), "rv": rng.integers(0, 99, 2_000)})
    return left, right


def imbalance(result):
    """The largest worker's output rows over an even share."""
    lengths = result.partition_lengths()
    return max(lengths) / (sum(lengths) / len(lengths))


def expected_for(left, right, how, on):
    if how in ("leftsemi", "leftanti"):
        return semi_expected(left, right, on, anti=how == "leftanti")
    return left.merge(right, on=on, how=how)


@pytest.mark.parametrize("how", ["inner", "left", "leftsemi", "leftanti", "outer"])
def test_heavy_left_key_matches_pandas(engine, skewed, how):
    left, right = skewed
    result = gpuframe.from_pandas(left, npartitions=3).merge(
        gpuframe.from_pandas(right, npartitions=2), on="k", how=how, **SHUFFLE)
    assert_same_rows(result.to_pandas(), expected_for(left, right, how, ["k"]))


def test_heavy_right_key_is_spread_for_right_and_inner_joins(engine, skewed):
    left, right = skewed
    for how in ("right", "inner"):
        result = gpuframe.from_pandas(right, npartitions=2).merge(
            gpuframe.from_pandas(left, npartitions=3), on="k", how=how, **SHUFFLE)
        assert_same_rows(result.to_pandas(), right.merge(left, on="k", how=how))
        assert imbalance(result) < 1.3


@pytest.mark.parametrize("how", ["inner", "left"])
def test_splitting_balances_the_output(engine, skewed, how):
    left, right = skewed
    frames = gpuframe.from_pandas(left, npartitions=3), gpuframe.from_pandas(right)
    hashed = frames[0].merge(frames[1], on="k", how=how, **NO_SKEW)
    split = frames[0].merge(frames[1], on="k", how=how, **SHUFFLE)
    assert imbalance(hashed) > 1.5  # the heavy key's worker holds most of the output
    assert imbalance(split) < 1.3
    assert_same_rows(split.to_pandas(), hashed.to_pandas())


def test_key_heavy_on_both_sides_and_several_key_columns(engine):
    rng = np.random.default_rng(5)
    left = pd.DataFrame({"a": zipf_keys(rng, 2_000, 50, 0.3), "b": "x", "lv": np.arange(2_000)})
    right = pd.DataFrame({"a": zipf_keys(rng, 1_000, 50, 0.3), "b": "x", "rv": np.arange(1_000)})
    left.loc[::7, "b"] = "y"
    right.loc[::5, "b"] = "y"
    for how in ("inner", "left", "leftanti", "right"):
        result = gpuframe.from_pandas(left, npartitions=3).merge(
            gpuframe.from_pandas(right, npartitions=3), on=["a", "b"], how=how, **SHUFFLE)
        assert_same_rows(result.to_pandas(), expected_for(left, right, how, ["a", "b"]))
        if how == "inner":
            assert imbalance(result) < 1.3


def test_sampling_shows_on_the_task_stream_and_outer_joins_do_not_split(engine, skewed):
    left, right = (gpuframe.from_pandas(side) for side in skewed)
    with get_task_stream(client=engine.client) as stream:
        left.merge(right, on="k", **SHUFFLE)
    assert {"gpuframe-sample-left", "gpuframe-sample-right"} <= \
        {key_split(entry["key"]) for entry in stream.data}
    outer = left.merge(right, on="k", how="outer", **SHUFFLE)
    assert imbalance(outer) > 1.5  # the heavy key stays on one worker
    assert_same_rows(outer.to_pandas(), skewed[0].merge(skewed[1], on="k", how="outer"))


def test_find_heavy_picks_the_side_to_spread():
    keys = pd.Index(range(10), name="k")
    left = pd.Series([600.0, 10, 10, 200] + [30] * 6, index=keys)
    right = pd.Series([5.0, 2000, 5, 5] + [5] * 6, index=keys)
    spread_left, spread_right = find_heavy(left, right, None, 4, 0.25)
    assert list(spread_left) == [0, 3] and list(spread_right) == [1]
    spread_left, spread_right = find_heavy(left, right, "left", 4, 0.25)
    assert list(spread_left) == [0, 1, 3] and list(spread_right) == []
    assert find_heavy(left, right, "left", 1000, 0.25) is None  # too few rows to spread
    uniform = pd.Series(100.0, index=keys)
    assert find_heavy(uniform, uniform, None, 2, 0.25) is None


def test_four_workers_each_get_at_most_twice_their_share(skewed):
    left, right = skewed
    cluster = LocalCluster(n_workers=4, threads_per_worker=1, processes=False,
                           dashboard_address=":0")
    engine = set_current(Engine(Client(cluster), get_backend("pandas"), cluster))
    try:
        frames = (gpuframe.from_pandas(left, npartitions=4), gpuframe.from_pandas(right))
        for how in ("inner", "left"):
            hashed = frames[0].merge(frames[1], on="k", how=how, **NO_SKEW)
            split = frames[0].merge(frames[1], on="k", how=how, **SHUFFLE)
            assert imbalance(hashed) > 2.5
            assert imbalance(split) < 1.5
            assert_same_rows(split.to_pandas(), expected_for(left, right, how, ["k"]))
    finally:
        engine.close()


@pytest.mark.gpu
def test_cudf_partitions_split_heavy_keys_like_pandas(skewed):
    import cudf

    from gpuframe.shuffle.exchange import partition_rows
    from gpuframe.shuffle.skew import SideSkew, profile_partition

    left = skewed[0].assign(s=lambda f: (f["k"] % 3).astype(str))
    for keys, skew in ((["k"], SideSkew(pd.DataFrame({"k": [0]}), pd.DataFrame({"k": [5]}))),
                       (["k", "s"], SideSkew(pd.DataFrame({"k": [0], "s": ["0"]}),
                                             pd.DataFrame({"k": [5], "s": ["2"]})))):
        cpu = partition_rows(left, keys, {}, 3, "pandas", skew, 1)
        gpu = partition_rows(cudf.from_pandas(left), keys, {}, 3, "cudf", skew, 1)
        for on_cpu, on_gpu in zip(cpu, gpu):
            assert_same_rows(on_gpu.to_pandas(), on_cpu)
    sample, length, _, _ = profile_partition(cudf.from_pandas(left), ["k"], {}, 500, 0, "cudf")
    assert isinstance(sample, pd.DataFrame) and len(sample) == 500 and length == len(left)


@pytest.mark.gpu
def test_skewed_join_on_gpus_matches_pandas(skewed):
    left, right = skewed
    with gpuframe.start_cluster(protocol="tcp") as gpu_engine:
        result = gpuframe.from_pandas(left, engine=gpu_engine).merge(
            gpuframe.from_pandas(right, engine=gpu_engine), on="k", **SHUFFLE)
        assert_same_rows(result.to_pandas(), left.merge(right, on="k"))
        if len(gpu_engine.workers) > 1:
            assert imbalance(result) < 1.3
