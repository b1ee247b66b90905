import numpy as np
import pandas as pd
import pytest
from dask.utils import key_split
from distributed import Client, LocalCluster, get_task_stream

import gpuframe
from gpuframe.backend import get_backend
from gpuframe.cluster.engine import Engine, set_current
from gpuframe.exchange.row_hashes import hash_rows
from gpuframe.exchange.splitters import HashSplitter
from gpuframe.operators.skew import (
    KeyCounts,
    SideProfile,
    SideSkew,
    SkewSplitter,
    count_keys,
    find_heavy,
    plan_skew,
    sample_hashes,
    summed_by_hash,
)


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


def test_sampling_shows_on_the_task_stream(engine, skewed):
    left, right = (gpuframe.from_pandas(side) for side in skewed)
    with get_task_stream(client=engine.client) as stream:
        left.merge(right, on="k", **SHUFFLE).persist()
    assert {"gpuframe-sample-left", "gpuframe-sample-right"} <= \
        {key_split(entry["key"]) for entry in stream.data}


def test_outer_join_splits_a_heavy_key(engine, skewed):
    left, right = (gpuframe.from_pandas(side) for side in skewed)
    hashed = left.merge(right, on="k", how="outer", **NO_SKEW)
    split = left.merge(right, on="k", how="outer", **SHUFFLE)
    assert imbalance(hashed) > 1.5  # the heavy key's worker holds most of the output
    assert imbalance(split) < 1.3
    assert_same_rows(split.to_pandas(), skewed[0].merge(skewed[1], on="k", how="outer"))


def counts(rows, in_one_partition=None, sampled=None):
    sure = rows if in_one_partition is None else in_one_partition
    return KeyCounts(rows, sure, sure if sampled is None else sampled)


def test_find_heavy_picks_the_side_to_spread():
    keys = pd.Index(range(10), name="k")
    left = counts(pd.Series([600.0, 10, 10, 200] + [30] * 6, index=keys))
    rows = pd.Series([5.0, 2000, 5, 5] + [5] * 6, index=keys)
    right = counts(rows, rows.where(rows < 1000, 2.0))  # key 1's right rows lie spread thin
    heavy = find_heavy(left, right, "inner", 4, 0.25)
    assert list(heavy.spread_left) == [0, 3] and list(heavy.spread_right) == [1]
    assert heavy.reach is None
    # a left join copies its left rows only where one right partition surely has 4 of them
    heavy = find_heavy(left, right, "left", 4, 0.25)
    assert list(heavy.spread_left) == [0, 1, 3] and list(heavy.spread_right) == []
    heavy = find_heavy(left, counts(rows), "left", 4, 0.25)
    assert list(heavy.spread_left) == [0, 3] and list(heavy.spread_right) == [1]
    assert heavy.reach == 2000
    heavy = find_heavy(left, counts(rows), "outer", 4, 0.25)
    assert list(heavy.spread_left) == [0, 3] and list(heavy.spread_right) == [1]
    assert heavy.reach == 200
    heavy = find_heavy(left, counts(rows), "leftanti", 4, 0.25)
    assert list(heavy.spread_left) == [0, 1, 3] and list(heavy.spread_right) == []
    assert find_heavy(left, right, "left", 1000, 0.25) is None  # too few rows to spread
    uniform = counts(pd.Series(100.0, index=keys))
    assert find_heavy(uniform, uniform, "inner", 2, 0.25) is None


def test_plan_skew_skips_counting_only_where_no_key_can_be_heavy():
    """plan_skew finds no heavy key without counting keys by value only where counting would
    find none either: samples from unique keys to one key in a few, of one and two key columns,
    with nulls, uneven partition lengths and thresholds near the keys' shares."""
    rng = np.random.default_rng(7)
    skipped = planned = 0
    for trial in range(300):
        n_parts, workers = int(rng.integers(1, 5)), int(rng.integers(2, 9))
        distinct = int(rng.choice([3, 30, 3000, 10**9]))
        keys = ["k"] if trial % 2 else ["k", "j"]

        def side(keys=keys, n_parts=n_parts, distinct=distinct):
            samples, lengths = [], []
            for _ in range(n_parts):
                rows = int(rng.integers(0, 400))
                values = rng.integers(0, distinct, rows).astype("float64")
                values[rng.random(rows) < 0.05] = np.nan
                sample = pd.DataFrame({"k": values, "j": rng.integers(0, 2, rows)})[keys]
                samples.append(sample)
                lengths.append(rows * int(rng.integers(1, 50)))
            return SideProfile.of_samples(samples, lengths, 0, {}, keys)

        left, right = side(), side()
        threshold = float(rng.choice([0.05, 0.25, 0.9, 2.0]))
        full = find_heavy(count_keys(left.samples, left.lengths, keys),
                          count_keys(right.samples, right.lengths, keys), "inner", workers,
                          threshold)
        plan = plan_skew(left, right, "inner", keys, keys, workers, threshold)
        assert (plan is None) == (full is None), trial
        skipped += plan is None
        planned += plan is not None
    assert skipped and planned  # both outcomes were tried


def test_find_heavy_splits_null_keys_but_copies_no_preserved_side_of_them():
    keys = pd.Index([np.nan, *range(1, 21)], dtype="float64", name="k")
    left = counts(pd.Series([600.0] + [10] * 20, index=keys))
    right = counts(pd.Series([0.0] + [10] * 20, index=keys))
    for how in ("inner", "left", "leftanti"):
        heavy = find_heavy(left, right, how, 4, 0.25)
        assert heavy.spread_left.isna().all() and len(heavy.spread_left) == 1, how
    for how in ("right", "outer"):  # would copy the right side's null-keyed rows
        assert find_heavy(left, right, how, 4, 0.25) is None


def test_each_heavy_key_reaches_every_bucket_on_its_own_round():
    part = pd.DataFrame({"k": [1, 2] * 8 + [3, 4], "v": range(18)})
    skew = SideSkew(pd.DataFrame({"k": [1, 2]}), pd.DataFrame({"k": [4]}))
    buckets = SkewSplitter(HashSplitter(("k",), 4), skew, "pandas").split(part, 1)
    for bucket in buckets:
        assert {1, 2, 4} <= set(bucket["k"])  # interleaved keys each reach every bucket
    limited = SideSkew(skew.spread, skew.copied, reach=2)
    buckets = SkewSplitter(HashSplitter(("k",), 4), limited, "pandas").split(part, 1)
    assert [sorted(set(b["k"]) - {3}) for b in buckets] == [[1, 2, 4], [], [1, 2, 4], []]
    assert_same_rows(pd.concat(buckets).query("k != 4"), part.query("k != 4"))


@pytest.fixture(scope="module")
def four_workers():
    cluster = LocalCluster(n_workers=4, threads_per_worker=1, processes=False,
                           dashboard_address=":0")
    engine = set_current(Engine(Client(cluster), get_backend("pandas"), cluster))
    yield engine
    engine.close()


def assert_at_most_twice_their_share(left, right, how, partitions=(4, 4)):
    """The join matches pandas, and splitting brings the largest worker's output from over
    2x an even share (a hash shuffle's) to under it."""
    frames = (gpuframe.from_pandas(left, npartitions=partitions[0]),
              gpuframe.from_pandas(right, npartitions=partitions[1]))
    hashed = frames[0].merge(frames[1], on="k", how=how, **NO_SKEW)
    split = frames[0].merge(frames[1], on="k", how=how, **SHUFFLE)
    assert imbalance(hashed) > 2.2, how
    assert imbalance(split) < 2, how
    assert_same_rows(split.to_pandas(), expected_for(left, right, how, ["k"]))


def test_four_workers_each_get_at_most_twice_their_share(four_workers, skewed):
    left, right = skewed
    for how in ("inner", "left", "outer"):
        assert_at_most_twice_their_share(left, right, how)


@pytest.fixture(scope="module")
def null_heavy():
    """60% of the left side's keys are null; the right side has none."""
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 1000, 40_000).astype("float64")
    keys[:24_000] = np.nan
    left = pd.DataFrame({"k": rng.permutation(keys), "v": np.arange(40_000)})
    right = pd.DataFrame({"k": np.arange(1000.0), "w": np.arange(1000)})
    return left, right


@pytest.mark.parametrize("how", ["left", "leftanti"])
def test_null_keys_are_split_on_four_workers(four_workers, null_heavy, how):
    assert_at_most_twice_their_share(*null_heavy, how)


def test_null_keys_are_split_where_both_sides_have_them(four_workers, null_heavy):
    """pandas joins null keys to null keys: the right side's copied to every worker."""
    left, right = null_heavy
    right = pd.concat([right, pd.DataFrame({"k": [np.nan, np.nan], "w": [-1, -2]})])
    assert_at_most_twice_their_share(left, right, "left")
    assert_at_most_twice_their_share(right, left, "right")


def test_null_keys_match_pandas_on_four_workers(four_workers, null_heavy):
    left, right = null_heavy
    for how in ("inner", "outer", "leftsemi"):
        result = gpuframe.from_pandas(left).merge(gpuframe.from_pandas(right), on="k", how=how,
                                                  **SHUFFLE)
        assert_same_rows(result.to_pandas(), expected_for(left, right, how, ["k"]))


def test_outer_join_splits_either_side_on_four_workers(four_workers):
    rng = np.random.default_rng(2)
    keys = rng.integers(1, 1000, 40_000)
    keys[:20_000] = 0
    heavy = pd.DataFrame({"k": rng.permutation(keys), "v": np.arange(40_000)})
    light = pd.DataFrame({"k": np.r_[np.arange(0, 2000, 2), [0, 0, 0]], "w": 1})
    assert_at_most_twice_their_share(heavy, light, "outer")
    assert_at_most_twice_their_share(light, heavy, "outer")


def test_heavy_key_of_the_copied_side_is_split_on_four_workers(four_workers):
    """The heavy key has 20k right rows and one left row: a left join spreads the right rows
    and copies the left row; a right join of the mirror image likewise."""
    right = pd.DataFrame({"k": np.r_[np.zeros(20_000, int), np.arange(1, 1000)], "w": 1})
    left = pd.DataFrame({"k": np.arange(0, 1500), "v": 1})
    assert_at_most_twice_their_share(left, right, "left")
    assert_at_most_twice_their_share(right, left, "right")
    for how in ("leftsemi", "leftanti", "outer", "inner"):
        result = gpuframe.from_pandas(left, npartitions=4).merge(
            gpuframe.from_pandas(right, npartitions=4), on="k", how=how, **SHUFFLE)
        assert_same_rows(result.to_pandas(), expected_for(left, right, how, ["k"]))


@pytest.mark.gpu
def test_cudf_partitions_split_heavy_keys_like_pandas(skewed):
    import cudf

    from gpuframe.operators.skew import profile_partition

    left = skewed[0].assign(s=lambda f: (f["k"] % 3).astype(str))
    for keys, skew in ((["k"], SideSkew(pd.DataFrame({"k": [0]}), pd.DataFrame({"k": [5]}))),
                       (["k", "s"], SideSkew(pd.DataFrame({"k": [0], "s": ["0"]}),
                                             pd.DataFrame({"k": [5], "s": ["2"]})))):
        cpu = SkewSplitter(HashSplitter(tuple(keys), 3), skew, "pandas").split(left, 1)
        gpu = SkewSplitter(HashSplitter(tuple(keys), 3), skew, "cudf").split(
            cudf.from_pandas(left), 1)
        for on_cpu, on_gpu in zip(cpu, gpu):
            assert_same_rows(on_gpu.to_pandas(), on_cpu)
    sample, length, _, _, hashes = profile_partition(cudf.from_pandas(left), ["k", "s"], {}, 500,
                                                     0, "cudf")
    assert isinstance(sample, pd.DataFrame) and len(sample) == 500 and length == len(left)
    for got, expected in zip(hashes, sample_hashes(sample, ["k", "s"])):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.gpu
def test_skewed_join_on_gpus_matches_pandas(skewed):
    left, right = skewed
    with gpuframe.start_cluster(protocol="tcp") as gpu_engine:
        result = gpuframe.from_pandas(left, engine=gpu_engine).merge(
            gpuframe.from_pandas(right, engine=gpu_engine), on="k", **SHUFFLE)
        assert_same_rows(result.to_pandas(), left.merge(right, on="k"))
        if len(gpu_engine.workers) > 1:
            assert imbalance(result) < 1.3


def test_values_are_summed_per_distinct_hash_across_arrays():
    hashes = [np.array([5, 9], dtype=np.uint64), np.array([1, 5, 7], dtype=np.uint64)]
    rows = [np.array([1.0, 2.0]), np.array([10.0, 20.0, 30.0])]
    unique, summed = summed_by_hash(hashes, rows)
    assert unique.tolist() == [1, 5, 7, 9]
    assert summed.tolist() == [10.0, 21.0, 30.0, 2.0]
    unique, summed = summed_by_hash([], [])
    assert len(unique) == 0 and len(summed) == 0


def test_the_sampling_tasks_hash_what_the_client_would():
    sample = pd.DataFrame({"k": ["a", "b", "a", None], "j": [1, 2, 1, 3]})
    unique, counts = sample_hashes(sample, ["k", "j"])
    expected = pd.Series(hash_rows(sample, ["k", "j"])).value_counts().sort_index()
    assert unique.tolist() == expected.index.tolist()
    assert counts.tolist() == expected.tolist()


def test_a_key_sampled_once_on_each_side_is_not_taken_for_a_fan_out():
    """Distinct keys sampled at one row in 10,000 on each side, one of them drawn by both
    samples: its estimated output is 10**8 rows, more than a task holds, but a single sampled
    row on each side is no evidence of a fan-out, so nothing is split. Drawn twice on one side,
    it is split."""
    lengths = [10**8]
    left = count_keys([pd.DataFrame({"k": np.arange(10_000)})], lengths, ["k"])
    once = count_keys([pd.DataFrame({"k": np.arange(9_999, 19_999)})], lengths, ["k"])
    assert find_heavy(left, once, "inner", 2, 0.25, most_output=10**7) is None
    twice = count_keys([pd.DataFrame({"k": [*range(9_999, 19_998), 9_999]})], lengths, ["k"])
    heavy = find_heavy(left, twice, "inner", 2, 0.25, most_output=10**7)
    assert heavy is not None
    assert list(heavy.spread_left) + list(heavy.spread_right) == [9_999]
