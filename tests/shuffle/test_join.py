import numpy as np
import pandas as pd
import pytest

import gpuframe
from dask.utils import key_split
from distributed import get_task_stream
from gpuframe.errors import JoinError
from gpuframe.shuffle.join import HOWS

SHUFFLE = {"broadcast_bytes": 0}
BROADCAST = {"broadcast_bytes": 2**40, "broadcast_ratio": None}


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame[sorted(frame.columns)]
    return frame.sort_values(list(frame.columns), na_position="first").reset_index(drop=True)


def assert_same_rows(result: pd.DataFrame, expected: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(canonical(result), canonical(expected), check_dtype=False)


@pytest.fixture(scope="module")
def sides():
    rng = np.random.default_rng(3)
    left = pd.DataFrame({
        "k": rng.integers(0, 300, 4000),
        "s": pd.array(rng.choice(["red", "green", "blue", "cyan"], 4000), dtype="str"),
        "lv": rng.random(4000),
    })
    right = pd.DataFrame({
        "k": rng.integers(100, 500, 1500),
        "s": pd.array(rng.choice(["red", "blue", "mauve"], 1500), dtype="str"),
        "rv": rng.integers(0, 10**6, 1500),
    })
    return left, right


def semi_expected(left, right, keys, anti):
    right_keys = set(right[keys].itertuples(index=False, name=None))
    hit = np.array([row in right_keys for row in left[keys].itertuples(index=False, name=None)])
    return left[~hit if anti else hit]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("options", [SHUFFLE, BROADCAST], ids=["shuffle", "broadcast"])
def test_every_how_matches_pandas(engine, sides, how, options):
    left, right = sides
    result = gpuframe.from_pandas(left, npartitions=3).merge(
        gpuframe.from_pandas(right, npartitions=2), on=["k", "s"], how=how, **options)
    if how in ("leftsemi", "leftanti"):
        expected = semi_expected(left, right, ["k", "s"], anti=how == "leftanti")
    else:
        expected = left.merge(right, on=["k", "s"], how=how)
    assert len(result) == len(expected)
    assert_same_rows(result.to_pandas(), expected)
    assert list(result.columns) == list(expected.columns)


def test_shuffle_places_one_output_partition_per_worker(engine, sides):
    left, right = sides
    result = gpuframe.merge(gpuframe.from_pandas(left), gpuframe.from_pandas(right), on="k",
                            **SHUFFLE)
    assert result.owners == engine.workers
    where = engine.client.who_has(result.futures)
    assert [sorted(where[f.key]) for f in result.futures] == [[w] for w in engine.workers]


def test_null_keys_match_each_other_like_pandas(engine):
    left = pd.DataFrame({"k": [1.0, None, 2.0, None], "a": [1, 2, 3, 4]})
    right = pd.DataFrame({"k": [None, 2.0, 5.0], "b": [10, 20, 30]})
    for how in ("inner", "left", "right", "outer"):
        for options in (SHUFFLE, BROADCAST):
            result = gpuframe.from_pandas(left).merge(gpuframe.from_pandas(right), on="k",
                                                      how=how, **options)
            assert_same_rows(result.to_pandas(), left.merge(right, on="k", how=how))
    semi = gpuframe.from_pandas(left).merge(gpuframe.from_pandas(right), on="k",
                                            how="leftsemi", **SHUFFLE)
    assert sorted(semi.to_pandas()["a"]) == [2, 3, 4]


def test_left_on_right_on_with_suffixes_and_differing_int_widths(engine):
    left = pd.DataFrame({"id": np.arange(50, dtype="int32"), "v": np.arange(50)})
    right = pd.DataFrame({"key": np.arange(0, 100, 2, dtype="int64"), "v": np.arange(50) * 10})
    result = gpuframe.from_pandas(left).merge(gpuframe.from_pandas(right), left_on="id",
                                              right_on="key", suffixes=("_l", "_r"), **SHUFFLE)
    expected = left.merge(right, left_on="id", right_on="key", suffixes=("_l", "_r"))
    assert_same_rows(result.to_pandas(), expected)
    assert {"v_l", "v_r"} <= set(result.columns)


@pytest.mark.parametrize("options", [SHUFFLE, BROADCAST], ids=["shuffle", "broadcast"])
def test_schema_matches_the_partitions_whichever_path(engine, options):
    left = pd.DataFrame({"k": np.arange(30, dtype="int32"), "a": 1.5})
    right = pd.DataFrame({"k": np.arange(0, 60, 2, dtype="int64"), "b": "x"})
    for how in ("inner", "right"):
        result = gpuframe.from_pandas(left).merge(gpuframe.from_pandas(right), on="k", how=how,
                                                  **options)
        assert result.dtypes.to_dict() == result.to_pandas().dtypes.to_dict()
        assert result.dtypes["k"] == "int64"


def test_int_and_float_keys_are_joined_as_floats(engine):
    left = pd.DataFrame({"k": np.arange(20), "a": 1})
    right = pd.DataFrame({"k": np.arange(0, 20, 0.5), "b": 2})
    result = gpuframe.from_pandas(left).merge(gpuframe.from_pandas(right), on="k", **SHUFFLE)
    assert sorted(result.to_pandas()["k"]) == list(range(20))


def test_empty_and_uneven_partitions(engine):
    left = pd.DataFrame({"k": [1, 1, 1, 2], "a": [1, 2, 3, 4]})
    right = pd.DataFrame({"k": pd.Series([], dtype="int64"), "b": pd.Series([], dtype="int64")})
    for how in ("inner", "left", "outer", "leftanti"):
        result = gpuframe.from_pandas(left, npartitions=4).merge(
            gpuframe.from_pandas(right), on="k", how=how, **SHUFFLE)
        expected = semi_expected(left, right, ["k"], True) if how == "leftanti" else \
            left.merge(right, on="k", how=how)
        assert_same_rows(result.to_pandas(), expected)


def test_one_worker_engine():
    with pytest.warns(gpuframe.CpuFallbackWarning):
        engine = gpuframe.start_cluster(n_workers=1, protocol="tcp", dashboard_address=":0")
    try:
        left = pd.DataFrame({"k": [1, 2, 3], "a": [1, 2, 3]})
        right = pd.DataFrame({"k": [3, 2, 2], "b": [1, 2, 3]})
        result = gpuframe.merge(gpuframe.from_pandas(left), gpuframe.from_pandas(right), on="k",
                                **SHUFFLE)
        assert_same_rows(result.to_pandas(), left.merge(right, on="k"))
    finally:
        engine.close()


@pytest.mark.parametrize("kwargs, message", [
    ({"on": "nope"}, r"\['nope'\] not in the left frame"),
    ({"left_on": "k", "right_on": "missing"}, r"\['missing'\] not in the right frame"),
    ({"on": "k", "how": "cross"}, "how='cross' is not a join type"),
    ({"on": "k", "left_on": "k"}, "not both"),
    ({"left_on": "k"}, "go together"),
    ({"left_on": ["k", "a"], "right_on": ["k"]}, "differ in length"),
    ({"left_on": "a", "right_on": "t"}, r"left column 'a' \(str\) with right column 't'"),
    ({"on": "k", "bogus_option": 1}, "unknown option 'bogus_option'"),
])
def test_bad_joins_name_what_is_wrong(engine, kwargs, message):
    left = gpuframe.from_pandas(pd.DataFrame({"k": [1], "a": ["x"]}))
    right = gpuframe.from_pandas(pd.DataFrame({"k": [1], "t": pd.to_datetime(["2024-01-01"])}))
    with pytest.raises(gpuframe.GpuframeError, match=message):
        left.merge(right, **kwargs)


def test_join_stages_are_named_on_the_task_stream(engine, sides):
    left, right = sides
    with get_task_stream(client=engine.client) as stream:
        gpuframe.from_pandas(left).merge(gpuframe.from_pandas(right), on="k", **SHUFFLE)
    names = {key_split(entry["key"]) for entry in stream.data}
    assert {"gpuframe-partition-left", "gpuframe-partition-right", "gpuframe-send-left",
            "gpuframe-send-right", "gpuframe-join"} <= names


@pytest.mark.parametrize("how", ["inner", "outer", "leftanti"])
def test_several_join_tasks_per_worker(engine, sides, how):
    left, right = sides
    result = gpuframe.from_pandas(left, npartitions=3).merge(
        gpuframe.from_pandas(right), on="k", how=how, partitions_per_worker=3, **SHUFFLE)
    assert result.owners == [w for w in engine.workers for _ in range(3)]
    expected = semi_expected(left, right, ["k"], True) if how == "leftanti" else \
        left.merge(right, on="k", how=how)
    assert_same_rows(result.to_pandas(), expected)


def test_default_broadcast_needs_a_side_small_against_the_other(engine):
    big = gpuframe.from_pandas(pd.DataFrame({"k": np.arange(20_000), "a": 1.0}))
    for rows, expected in ((2_000, "gpuframe-broadcast"), (20_000, "gpuframe-partition-right")):
        small = gpuframe.from_pandas(pd.DataFrame({"k": np.arange(rows), "b": 2.0}))
        with get_task_stream(client=engine.client) as stream:
            result = big.merge(small, on="k")
        assert expected in {key_split(entry["key"]) for entry in stream.data}
        assert len(result) == rows
