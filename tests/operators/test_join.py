import io
import logging
import time
from dataclasses import replace
from functools import partial

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from dask.utils import key_split
from distributed import get_task_stream

import gpuframe
from gpuframe.backend import get_backend
from gpuframe.cluster.memory import WorkerMemory
from gpuframe.config import JoinOptions, resolve
from gpuframe.errors import JoinError, MemoryLimitError
from gpuframe.frame import DistributedFrame
from gpuframe.operators.join_decision import (
    JoinShape,
    broadcast_stands,
    decide,
    speculation_stands,
)
from gpuframe.operators.join_schema import HOWS as ALL_HOWS
from gpuframe.operators.join_schema import hash_type
from gpuframe.operators.join_tasks import most_repeats
from gpuframe.operators.skew import profile_partition, profiles_of
from gpuframe.plan.nodes import Persisted
from gpuframe.runtime.runner import Job, Partitions

HOWS = tuple(how for how in ALL_HOWS if how != "cross")  # the join types with keys

SHUFFLE = {"broadcast_bytes": 0}
BROADCAST = {"broadcast_bytes": 2**40, "broadcast_ratio": None, "broadcast_rows": 0}
UNSAMPLED = {}  # the frames here are small: a side of few rows is copied without sampling


def test_a_join_copies_sides_up_to_its_backends_cap_unless_told_otherwise(engine, monkeypatch):
    """The cap on a copied side is the backend's (a GPU's is larger than a host's), which the
    environment and the call's options override."""
    left = gpuframe.from_pandas(pd.DataFrame({"k": [1, 2]}))
    right = gpuframe.from_pandas(pd.DataFrame({"k": [1, 3]}))
    monkeypatch.delenv("GPUFRAME_BROADCAST_BYTES", raising=False)
    monkeypatch.setattr(type(engine.backend), "broadcast_bytes", 12345)
    assert left.merge(right, on="k").plan.options.broadcast_bytes == 12345
    assert left.merge(right, on="k", broadcast_bytes=9).plan.options.broadcast_bytes == 9
    monkeypatch.setenv("GPUFRAME_BROADCAST_BYTES", "777")
    assert left.merge(right, on="k").plan.options.broadcast_bytes == 777
    assert get_backend("cudf").broadcast_bytes > get_backend("pandas").broadcast_bytes


@pytest.mark.gpu
def test_on_gpus_a_side_past_the_hosts_cap_is_copied_not_shuffled(gpu_engine):
    """96 MB of the smaller side: past the pandas backend's cap, within cuDF's."""
    n = 6_000_000
    rng = np.random.default_rng(3)
    right = pd.DataFrame({"k": np.arange(n), "w": rng.integers(0, 100, n)})
    left = pd.DataFrame({"k": rng.integers(0, 2 * n, 3 * n), "v": np.ones(3 * n)})
    result = gpuframe.from_pandas(left, npartitions=4, engine=gpu_engine).merge(
        gpuframe.from_pandas(right, npartitions=4, engine=gpu_engine), on="k")
    out = io.StringIO()
    result.explain(file=out)
    assert "broadcast right side" in out.getvalue(), out.getvalue()
    got = result.to_pandas()
    expected = left.merge(right, on="k")
    assert len(got) == len(expected) and got["w"].sum() == expected["w"].sum()


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame[sorted(frame.columns)]
    return frame.sort_values(list(frame.columns), na_position="first").reset_index(drop=True)


def assert_same_rows(result: pd.DataFrame, expected: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(canonical(result), canonical(expected), check_dtype=False)


def assert_same_typed_rows(result: pd.DataFrame, expected: pd.DataFrame, how: str) -> None:
    """Same rows and dtypes; in object columns None and NaN both stand for a missing value."""
    assert result.dtypes.to_dict() == expected.dtypes.to_dict(), how
    result, expected = (frame.apply(lambda c: c.where(c.notna(), None) if c.dtype == object
                                    else c) for frame in (result, expected))
    pd.testing.assert_frame_equal(canonical(result), canonical(expected), obj=how)


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
@pytest.mark.parametrize("options", [SHUFFLE, BROADCAST, UNSAMPLED],
                         ids=["shuffle", "broadcast", "unsampled"])
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


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("options", [BROADCAST, UNSAMPLED], ids=["broadcast", "unsampled"])
@pytest.mark.parametrize("parts", [(2, 1), (1, 2)], ids=["right-whole", "left-whole"])
def test_every_how_matches_pandas_where_a_join_task_gathers_its_copy(engine, sides, how,
                                                                     options, parts):
    """A side in one partition beside the first worker's only join task: where the join copies
    it, that task gathers it itself; the rows are pandas' all the same."""
    left, right = sides
    result = gpuframe.from_pandas(left, npartitions=parts[0]).merge(
        gpuframe.from_pandas(right, npartitions=parts[1]), on=["k", "s"], how=how, **options)
    if how in ("leftsemi", "leftanti"):
        expected = semi_expected(left, right, ["k", "s"], anti=how == "leftanti")
    else:
        expected = left.merge(right, on=["k", "s"], how=how)
    with get_task_stream(client=engine.client) as stream:
        got = result.to_pandas()
    assert_same_rows(got, expected)
    if "broadcast" in notes_of(result):
        assert stage_names(stream).count("gpuframe-broadcast") <= 1


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


@pytest.mark.parametrize("options", [SHUFFLE, BROADCAST, UNSAMPLED],
                         ids=["shuffle", "broadcast", "unsampled"])
def test_schema_matches_the_partitions_whichever_path(engine, options):
    left = pd.DataFrame({"k": np.arange(30, dtype="int32"), "a": 1.5})
    right = pd.DataFrame({"k": np.arange(0, 60, 2, dtype="int64"), "b": "x"})
    for how in ("inner", "right"):
        result = gpuframe.from_pandas(left).merge(gpuframe.from_pandas(right), on="k", how=how,
                                                  **options)
        assert result.dtypes.to_dict() == result.to_pandas().dtypes.to_dict()
        assert result.dtypes["k"] == left.merge(right, on="k", how=how).dtypes["k"]


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


@pytest.mark.parametrize("how", [how for how in HOWS if how != "outer"])
def test_on_one_worker_a_join_takes_its_smaller_side_whole_without_sampling(one_worker, sides,
                                                                            how, speculating):
    """One worker: the side the estimates put the smaller (of those the join may copy: an
    outer join copies neither) is taken whole by the join's task, beside the other, however
    near the sizes (on several workers a copy must be well under a shuffle's share): no
    sample, verdict or send task, as a shuffle into the worker's one bucket would need; the
    rows are pandas'."""
    left, right = sides
    right = pd.concat([right] * 3, ignore_index=True)  # as large as the left side
    # by the estimates alone: no copy of a side the plan bounds in rows
    result = gpuframe.from_pandas(left, npartitions=3, engine=one_worker).merge(
        gpuframe.from_pandas(right, npartitions=2, engine=one_worker), on=["k", "s"], how=how,
        broadcast_rows=0)
    expected = semi_expected(left, right, ["k", "s"], anti=how == "leftanti") \
        if how in ("leftsemi", "leftanti") else left.merge(right, on=["k", "s"], how=how)
    with get_task_stream(client=one_worker.client) as stream:
        got = result.to_pandas()
    assert_same_rows(got, expected)
    names = set(stage_names(stream))
    assert not {name for name in names if "sample" in name or "send" in name
                or "verdict" in name}, names
    assert "broadcast" in notes_of(result) and speculating == [True]


@pytest.mark.parametrize("how, options", [("inner", {"broadcast_bytes": 1}), ("outer", {})])
def test_on_one_worker_a_side_past_the_copy_cap_or_not_to_copy_is_sampled(one_worker, sides,
                                                                          how, options):
    """Where the estimates put both sides past half the copy cap, or the join may copy
    neither (outer), it samples as before."""
    left, right = sides
    result = gpuframe.from_pandas(left, engine=one_worker).merge(
        gpuframe.from_pandas(right, engine=one_worker), on="k", how=how, **options)
    with get_task_stream(client=one_worker.client) as stream:
        got = result.to_pandas()
    assert_same_rows(got, left.merge(right, on="k", how=how))
    assert any("sample" in name for name in stage_names(stream))


@pytest.mark.parametrize("kwargs, message", [
    ({"on": "nope"}, r"\['nope'\] not in the left frame"),
    ({"left_on": "k", "right_on": "missing"}, r"\['missing'\] not in the right frame"),
    ({"on": "k", "how": "bogus"}, "how='bogus' is not a join type"),
    ({"on": "k", "how": "cross"}, "how='cross' joins every row with every row: give no on="),
    ({"how": "cross", "validate": "1:1"}, "validate= does not apply to how='cross'"),
    ({"on": "k", "validate": "one_to_two"}, "validate='one_to_two' is not a valid argument"),
    ({"on": "k", "left_index": True}, r"left_index=True: gpuframe frames have no index"),
    ({"on": "k", "right_index": True}, r"right_index=True: gpuframe frames have no index"),
    ({"on": "k", "indicator": "a"}, "indicator='a': a column of that name is in an input"),
    ({"on": "k", "how": "leftanti", "indicator": True}, "indicator= does not apply"),
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
        gpuframe.from_pandas(left).merge(gpuframe.from_pandas(right), on="k",
                                         **SHUFFLE).persist()
    names = {key_split(entry["key"]) for entry in stream.data}
    assert {"gpuframe-send-left", "gpuframe-send-right", "gpuframe-join"} <= names


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
    """Sampled sides (broadcast_rows=0): the ratio rule decides."""
    big = gpuframe.from_pandas(pd.DataFrame({"k": np.arange(20_000), "a": 1.0}))
    for rows, expected in ((2_000, "gpuframe-broadcast"), (20_000, "gpuframe-send-right")):
        small = gpuframe.from_pandas(pd.DataFrame({"k": np.arange(rows), "b": 2.0}))
        with get_task_stream(client=engine.client) as stream:
            result = big.merge(small, on="k", broadcast_rows=0).persist()
        assert expected in {key_split(entry["key"]) for entry in stream.data}
        assert len(result) == rows


def test_a_side_the_plan_bounds_to_few_rows_is_broadcast_unsampled(engine, tmp_path):
    """The side of fewer rows by the plan (a read's row count, a filter over it) is copied
    without a sample task, whatever the other side's rows."""
    rng = np.random.default_rng(3)
    data = pd.DataFrame({"k": rng.integers(0, 500, 20_000), "a": rng.random(20_000)})
    data.to_parquet(tmp_path / "big.parquet")
    dims = pd.DataFrame({"k": np.arange(600), "b": np.arange(600) % 7})
    small = gpuframe.from_pandas(dims)
    big = gpuframe.read_parquet(str(tmp_path / "big.parquet"))
    for left, right, how in ((big, small[small.b > 2], "inner"), (small, big, "right")):
        with get_task_stream(client=engine.client) as stream:
            result = left.merge(right, on="k", how=how).to_pandas()
        stages = {key_split(entry["key"]) for entry in stream.data}
        assert "gpuframe-broadcast" in stages
        assert not any("sample" in stage for stage in stages), stages
        expected = (data.merge(dims[dims.b > 2], on="k") if how == "inner"
                    else dims.merge(data, on="k", how="right"))
        pd.testing.assert_frame_equal(
            result.sort_values(list(result.columns)).reset_index(drop=True),
            expected.sort_values(list(expected.columns)).reset_index(drop=True),
            check_dtype=False)


def test_a_side_counted_small_as_it_ran_is_broadcast_unsampled(engine, tmp_path):
    """An aggregate whose partials were counted few (a tree) is copied without sampling
    either side, though the plan bounds its rows only by its input's; a filter above it keeps
    the bound, and a bound above broadcast_rows samples as before."""
    rng = np.random.default_rng(4)
    data = pd.DataFrame({"k": rng.integers(0, 300, 30_000), "a": rng.random(30_000)})
    for i in range(3):
        data.iloc[i::3].to_parquet(tmp_path / f"part-{i}.parquet")
    data = pd.concat([data.iloc[i::3] for i in range(3)], ignore_index=True)
    big = gpuframe.read_parquet(str(tmp_path), partition_bytes=1)
    assert big.npartitions == 3
    # tree_max_rows past the plan's bound (30,000 rows), so the partials are counted
    means = big.groupby("k", tree_max_rows=40_000).agg(mean_a=("a", "mean"))
    means = means[means.mean_a > 0.3]
    expected = data.merge(data.groupby("k", as_index=False).agg(mean_a=("a", "mean"))
                          .query("mean_a > 0.3"), on="k")
    for rows, sampled in ((1_000, False), (100, True)):
        with get_task_stream(client=engine.client) as stream:
            joined = big.merge(means, on="k", broadcast_rows=rows)
            result = joined.to_pandas()
        stages = {key_split(entry["key"]) for entry in stream.data}
        assert any("sample" in stage for stage in stages) == sampled, stages
        pd.testing.assert_frame_equal(
            result.sort_values(list(result.columns)).reset_index(drop=True),
            expected.sort_values(list(expected.columns)).reset_index(drop=True))
    text = io.StringIO()
    big.merge(means, on="k").persist().explain(file=text)
    assert "counted as it ran" in text.getvalue()


def test_the_most_repeated_key_counts_null_keys_too():
    """Null keys join each other, as in pandas: they repeat like any key."""
    frame = pd.DataFrame({"k": [None, None, None, 1.0, 1.0], "j": [1, 1, 1, 2, 3]})
    def most(part, keys):
        return most_repeats(part, keys, "right", "pandas")

    assert most(frame, ["k"]) == most(frame, ["k", "j"]) == 3
    assert most(frame.iloc[3:], ["k", "j"]) == 1
    assert most(frame.head(0), ["k"]) == most(None, ["k"]) == 0
    # decimal keys, which cuDF cannot group into an index, are counted by their hashes too
    decimals = frame.astype({"k": pd.ArrowDtype(pa.decimal128(10, 2))})
    assert most(decimals, ["k"]) == 3 and most(decimals, ["k", "j"]) == 3


@pytest.mark.gpu
def test_the_most_repeated_key_of_a_cudf_frame_is_counted_on_its_device():
    rng = np.random.default_rng(11)
    frame = pd.DataFrame({"k": rng.integers(0, 500, 20_000), "j": rng.integers(0, 3, 20_000)})
    device = get_backend("cudf").from_pandas(frame)
    for keys in (["k"], ["k", "j"]):
        expected = int(frame.value_counts(subset=keys).max())
        assert most_repeats(device, keys, "right", "cudf") == expected
    assert most_repeats(device.head(1), ["k"], "right", "cudf") == 1


def test_a_copied_side_is_gathered_by_each_worker_that_joins_with_it(engine):
    """Each worker holding partitions of the large side gathers the small side itself, from
    its parts where they lie, and joins its partitions with that copy: no copy made on one
    worker is fetched by the other."""
    big = pd.DataFrame({"k": np.arange(4000) % 100, "a": np.arange(4000)})
    small = pd.DataFrame({"k": np.arange(100), "b": np.arange(100.0)})
    left, right = gpuframe.from_pandas(big, npartitions=4), gpuframe.from_pandas(small,
                                                                                npartitions=2)
    with get_task_stream(client=engine.client) as stream:
        result = left.merge(right, on="k").to_pandas()
    assert_same_rows(result, big.merge(small, on="k"))
    ran: dict[str, list[str]] = {}
    for entry in stream.data:
        ran.setdefault(key_split(entry["key"]), []).append(entry["worker"])
    assert sorted(ran["gpuframe-broadcast"]) == sorted(set(ran["gpuframe-join"]))
    assert len(set(ran["gpuframe-join"])) == 2
    fetching = [entry["key"] for entry in stream.data
                if key_split(entry["key"]) == "gpuframe-join"
                and any(step["action"] == "transfer" for step in entry["startstops"])]
    assert not fetching


@pytest.mark.parametrize("small_parts", [2, 1])
def test_a_side_copied_unsampled_whose_keys_repeat_is_checked_on_the_workers(
        engine, monkeypatch, speculating, small_parts):
    """A small side the plan bounds but cannot show unique on the keys is copied with the
    count of its most repeated key, taken by the task that gathers it (no task of its own):
    each join task checks on its worker
    that its output, at most that many rows a row of its partition, fits its share of memory,
    and the client waits for no check. Where that bound does not fit, the task counts its own
    partition's repeats: a copied row meets at most that many of its rows. Where neither
    fits, the job fails and the action runs again in a job that samples both sides. Either way
    the rows are pandas', whether a broadcast task gathers the side or (in one partition
    beside a worker's only join task) that task does."""
    gathered: list[str] = []
    gather = Job.gather

    def gathering(self: Job, futures):
        gathered.extend(self._info[f.key].stage for f in futures)
        return gather(self, futures)

    monkeypatch.setattr(Job, "gather", gathering)
    limit = min(engine.client.run(lambda dask_worker: dask_worker.memory_manager.memory_limit)
                .values())
    repeating = pd.DataFrame({"k": np.arange(3000) % 50, "a": np.arange(3000)})
    unique = pd.DataFrame({"k": np.arange(3000), "a": np.arange(3000)})
    # a task's output here is at most 1,000 rows x 2 x about 40 bytes x 4 copies: 320 kB
    tight = {"join_memory_fraction": 100_000 / limit}
    # 1,000 rows x 30 repeats x 160 bytes: 4.8 MB by the copied side's repeats; its 300 rows
    # meet one row of a partition each, which keeps its 1,000 rows: 208 kB
    repeated = pd.DataFrame({"k": np.arange(300) % 10, "b": np.arange(300)})
    for big, small, options, again in (
            (repeating, pd.DataFrame({"k": [1, 1, 2], "b": [1, 2, 3]}), {}, False),
            (repeating, pd.DataFrame({"k": [1, 1, 2], "b": [1, 2, 3]}), tight, True),
            (repeating, pd.DataFrame({"k": [1, 2, 3], "b": [1, 2, 3]}), tight, False),
            (unique, repeated, {"join_memory_fraction": 1_000_000 / limit}, False)):
        left = gpuframe.from_pandas(big, npartitions=2 if small_parts == 1 else 3)
        right = gpuframe.from_pandas(small, npartitions=small_parts)
        speculating.clear()
        gathered.clear()
        with get_task_stream(client=engine.client) as stream:
            result = left.merge(right, on="k", **options).to_pandas()
        stages = {key_split(entry["key"]) for entry in stream.data}
        assert "gpuframe-broadcast" in stages and "gpuframe-fanout" not in stages, stages
        assert "broadcast" not in gathered
        assert speculating == ([True, False] if again else [True])
        assert any("sample" in stage for stage in stages) == again, stages
        expected = big.merge(small, on="k")
        pd.testing.assert_frame_equal(
            result.sort_values(list(result.columns)).reset_index(drop=True),
            expected.sort_values(list(expected.columns)).reset_index(drop=True))
        speculating.clear()
        assert len(left.merge(right, on="k", **options)) == len(expected)  # any action
        assert speculating == ([True, False] if again else [True])


@pytest.mark.parametrize("how", ["leftsemi", "leftanti", "left_anti", "inner"])
def test_only_joins_whose_rows_may_multiply_check_the_repeats_of_a_copied_side(engine,
                                                                              monkeypatch, how):
    """A semi or anti join keeps each row of its other side at most once, however often the
    copied side repeats a key: its tasks join without counting those repeats first; an inner
    join's check them (:func:`~gpuframe.operators.join_tasks.join_copied`). The rows are
    pandas' either way."""
    from gpuframe.runtime.runner import Stage

    joins: list[str] = []
    submit = Stage.submit

    def recording(self, fn, *args, **kwargs):
        if self.name == "join":
            joins.append(args[0].__name__ if fn.__name__ == "join_gathering" else fn.__name__)
        return submit(self, fn, *args, **kwargs)

    monkeypatch.setattr(Stage, "submit", recording)
    left = pd.DataFrame({"k": np.arange(2000), "a": np.arange(2000.0)})
    right = pd.DataFrame({"k": np.arange(300) % 20, "b": np.arange(300)})  # each key 15 times
    result = gpuframe.from_pandas(left, npartitions=2).merge(gpuframe.from_pandas(right),
                                                             on="k", how=how)
    expected = semi_expected(left, right, ["k"], anti=how == "leftanti") \
        if how in ("leftsemi", "leftanti") else left.merge(right, on="k", how=how)
    assert_same_rows(result.to_pandas(), expected)
    assert "broadcast right side" in notes_of(result)
    assert joins and set(joins) == ({"join_copied"} if how == "inner" else {"join_parts"})


def chained_joins(fuse: bool, small_parts: int = 2, **options
                  ) -> tuple[DistributedFrame, pd.DataFrame]:
    """A shuffle join of two large sides, then joins with two small ones that the plan bounds
    (a nation-like side with unique keys, one whose keys repeat), each in ``small_parts``
    partitions, not yet run, and pandas' rows of the same."""
    rng = np.random.default_rng(21)
    facts = pd.DataFrame({"k": np.arange(4000), "n": rng.integers(0, 25, 4000),
                          "g": rng.integers(0, 8, 4000)})
    other = pd.DataFrame({"k": np.arange(0, 8000, 2), "a": np.arange(4000.0)})
    nations = pd.DataFrame({"n": np.arange(25), "name": [f"n{i}" for i in range(25)]})
    groups = pd.DataFrame({"g": np.arange(24) % 8, "b": np.arange(24)})
    joined = (gpuframe.from_pandas(facts, npartitions=4)
              .merge(gpuframe.from_pandas(other, npartitions=3), on="k", **SHUFFLE)
              [["k", "n", "g", "a"]]
              .merge(gpuframe.from_pandas(nations, npartitions=small_parts), on="n",
                     fuse_copies=fuse, **options)
              .merge(gpuframe.from_pandas(groups, npartitions=small_parts), on="g",
                     fuse_copies=fuse, **options))
    expected = facts.merge(other, on="k")[["k", "n", "g", "a"]].merge(nations, on="n") \
        .merge(groups, on="g")
    return joined, expected


def test_a_side_copied_unsampled_is_joined_in_the_tasks_of_the_join_below(engine):
    """Joins that copy a side without sampling it, over a join's output that nothing else
    reads, run as steps of that join's tasks, each with its worker's copy: no join task of
    their own, the rows pandas', and each worker gathers both copies in one task. Told not
    to, each has its own tasks, and each copy its own, the rows the same."""
    tasks = {}
    for fuse in (True, False):
        joined, expected = chained_joins(fuse)
        with get_task_stream(client=engine.client) as stream:
            result = joined.to_pandas()
        assert_same_rows(result, expected)
        names = [key_split(entry["key"]) for entry in stream.data]
        tasks[fuse] = names.count("gpuframe-join"), names.count("gpuframe-broadcast")
        assert notes_of(joined).count("joined in the tasks of #") == (2 if fuse else 0)
    # the shuffle's 2, then 2 per copied join; one copy of each side per worker, or of both
    assert tasks == {True: (2, 2), False: (6, 4)}


def test_a_copy_that_lies_beside_a_workers_only_join_task_is_gathered_in_that_task(engine):
    """Small sides copied to every worker, each in one partition on the first worker: there,
    the only join task of each join gathers the copy itself (a broadcast task would move
    nothing and cost a round trip through the scheduler), while the other worker gathers it
    in a broadcast task; so for joins of their own and for joins run in the tasks of the join
    below. The rows are pandas'."""
    tasks = {}
    for fuse in (True, False):
        joined, expected = chained_joins(fuse, small_parts=1)
        with get_task_stream(client=engine.client) as stream:
            result = joined.to_pandas()
        assert_same_rows(result, expected)
        names = stage_names(stream)
        tasks[fuse] = names.count("gpuframe-join"), names.count("gpuframe-broadcast")
    # one broadcast task a copied join (fused: one for both), on the second worker only
    assert tasks == {True: (2, 1), False: (6, 2)}


def test_a_join_run_in_the_tasks_below_checks_its_output_and_may_run_the_action_again(
        engine, speculating):
    """A copied side whose keys repeat is checked where it is joined, in the tasks of the
    join below: past its share of memory, the job fails and the action runs again, sampling
    (each copied join then in tasks of its own); the rows are pandas' either way."""
    limit = min(engine.client.run(lambda dask_worker: dask_worker.memory_manager.memory_limit)
                .values())
    for fraction, again in ((0.25, False), (100_000 / limit, True)):
        joined, expected = chained_joins(True, join_memory_fraction=fraction)
        speculating.clear()
        assert_same_rows(joined.to_pandas(), expected)
        assert speculating == ([True, False] if again else [True])
        assert ("joined in the tasks of #" in notes_of(joined)) == (not again)


def test_a_side_found_hashed_on_the_keys_is_not_copied_into_the_tasks_below(engine):
    """A side the plan would copy unsampled that turns out hashed on the keys (a groupby that
    shuffled) takes its placement's way: the join below's output, hashed alike, is joined
    with it where both lie."""
    facts = pd.DataFrame({"k": np.arange(3000) % 500, "a": np.arange(3000.0)})
    other = pd.DataFrame({"k": np.arange(500), "b": np.arange(500)})
    sums = gpuframe.from_pandas(facts, npartitions=3).groupby("k", strategy="shuffle").agg(
        total=("a", "sum"))
    joined = gpuframe.from_pandas(facts, npartitions=3).merge(
        gpuframe.from_pandas(other, npartitions=2), on="k", **SHUFFLE).merge(sums, on="k")
    expected = facts.merge(other, on="k").merge(
        facts.groupby("k", as_index=False).agg(total=("a", "sum")), on="k")
    assert_same_rows(joined.to_pandas(), expected)
    notes = notes_of(joined)
    assert "none: both sides already hash(k)" in notes
    assert "joined in the tasks of #" not in notes


INTEGERS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64"]


@pytest.mark.parametrize("right", INTEGERS)
@pytest.mark.parametrize("left", INTEGERS)
def test_integer_keys_hash_in_a_type_that_holds_both_sides(left, right):
    """Every value of both sides fits the hash type; only uint64 with a signed type has none
    (int64 wrapped 2**63 + 5 onto -(2**63) + 5 and joined them)."""
    common = hash_type(pd.api.types.pandas_dtype(left), pd.api.types.pandas_dtype(right),
                       get_backend("pandas"))
    bounds = [np.iinfo(np.dtype(name.lower())) for name in (left, right)]
    if common is None:
        assert {b.kind for b in bounds} == {"i", "u"} and max(b.max for b in bounds) == 2**64 - 1
        return
    holds = np.iinfo(np.dtype(getattr(common, "numpy_dtype", common)))
    assert all(holds.min <= b.min and b.max <= holds.max for b in bounds)
    nullable = any(name[0].isupper() for name in (left, right))
    assert isinstance(common, pd.api.extensions.ExtensionDtype) == nullable


def key_values(dtype: str, side: str) -> pd.Series:
    """Keys of ``dtype`` that match the other side's in part (2 and 3; nulls match nulls where
    the type has them); integers add the type's largest value, which wraps if cast too narrow,
    floats a value no integer equals."""
    ends = {"left": [1, 2, 3, 3], "right": [2, 2, 3, 5]}[side]
    if dtype.startswith("category"):
        categories = list("abcdef") if dtype == "category" else list("fedcbx")
        return pd.Series(pd.Categorical([" abcdef"[v] for v in ends] + [None],
                                        categories=categories))
    kind = pd.api.types.pandas_dtype(dtype)
    if pd.api.types.is_bool_dtype(kind):
        values = {"left": [True, True, False], "right": [True, None, None]}[side]
        return pd.Series(values if dtype == "boolean" else values[:1], dtype=dtype)
    if pd.api.types.is_integer_dtype(kind):
        values = ends + [int(np.iinfo(np.dtype(dtype.lower())).max)]
        return pd.Series(values + ([None] if dtype[0].isupper() else []), dtype=dtype)
    if pd.api.types.is_float_dtype(kind):
        return pd.Series(ends + [0.5, None], dtype=dtype)
    if kind.kind == "M":
        stamps = pd.Timestamp("2024-01-01", tz="UTC") + pd.to_timedelta(ends, "h")
        tz = getattr(kind, "tz", None)
        return pd.Series(stamps.tz_convert(tz) if tz else stamps.tz_localize(None)).astype(kind)
    if kind.kind == "m":
        return pd.Series(pd.to_timedelta(ends, "s")).astype(kind)
    return pd.Series([" abcdef"[v] for v in ends] + [None], dtype=dtype)


def expected_join(left: pd.DataFrame, right: pd.DataFrame, how: str, **keys) -> pd.DataFrame:
    """pandas.merge; for 'leftsemi'/'leftanti', the left rows that pandas.merge matches (null
    keys with null keys), or does not."""
    if how not in ("leftsemi", "leftanti"):
        return left.merge(right, how=how, **keys)
    right_on = keys.get("right_on", keys.get("on"))
    found = left.merge(right[[right_on]].drop_duplicates(), how="left", indicator="found",
                       **keys)["found"] == "both"
    return left[found.to_numpy() == (how == "leftsemi")]


KEY_PAIRS = [
    ("int8", "int64"), ("int64", "int8"), ("uint8", "int8"), ("int16", "uint32"),
    ("uint32", "uint64"), ("Int32", "int64"), ("int64", "UInt8"), ("UInt16", "UInt64"),
    ("float32", "float64"), ("float64", "float32"), ("int32", "float32"), ("Float64", "int64"),
    ("bool", "boolean"), ("boolean", "bool"),
    ("object", "str"), ("str", "object"), ("object", "object"), ("string[pyarrow]", "object"),
    ("str", "string[python]"), ("category", "category"), ("category", "category-other"),
    ("category", "str"), ("str", "category"), ("category", "object"),
    ("datetime64[us]", "datetime64[ns]"), ("datetime64[s]", "datetime64[us]"),
    ("datetime64[ns, UTC]", "datetime64[us, Europe/Berlin]"),
    ("datetime64[us, Europe/Berlin]", "datetime64[ns, UTC]"),
    ("timedelta64[ns]", "timedelta64[us]"),
]
"""Bool with int keys join too, with a key dtype that pandas decides by whether any key
matches: test_merge_pandas.py's option cases have them."""
REFUSED_PAIRS = [
    ("uint64", "int64"), ("int8", "uint64"), ("UInt64", "Int64"), ("int64", "str"),
    ("datetime64[ns]", "datetime64[ns, UTC]"), ("category", "int64"), ("bool", "float64"),
]


def frame_of(dtype: str, side: str) -> pd.DataFrame:
    """Keys of ``dtype`` beside a float column: pandas gives an int one float64 only where some
    row is unmatched, which the join cannot know ahead (join_schema.result_meta)."""
    keys = key_values(dtype, side)
    return pd.DataFrame({"k": keys, side: np.arange(len(keys), dtype=float)})


@pytest.mark.filterwarnings("ignore:You are merging on int and float")
@pytest.mark.parametrize("options", [SHUFFLE, BROADCAST, UNSAMPLED],
                         ids=["shuffle", "broadcast", "unsampled"])
@pytest.mark.parametrize("left_type, right_type", KEY_PAIRS + REFUSED_PAIRS,
                         ids=[f"{a}-{b}" for a, b in KEY_PAIRS + REFUSED_PAIRS])
def test_key_type_pairs_join_like_pandas_or_are_refused(engine, left_type, right_type,
                                                        options):
    left, right = frame_of(left_type, "left"), frame_of(right_type, "right")
    ours = gpuframe.from_pandas(left), gpuframe.from_pandas(right)
    if (left_type, right_type) in REFUSED_PAIRS:
        with pytest.raises(JoinError, match=r"left column 'k' \(.*\) with right column 'k'"):
            ours[0].merge(ours[1], on="k", **options)
        return
    for how in HOWS:
        if how == "right_anti" and (left_type, right_type) == ("Float64", "int64"):
            continue  # int64's largest value, hashed as a float, does not come back exactly
        result = ours[0].merge(ours[1], on="k", how=how, **options)
        expected = expected_join(left, right, how, on="k")
        assert result.dtypes["k"] == expected.dtypes["k"], how
        assert_same_typed_rows(result.to_pandas(), expected, how)


@pytest.mark.parametrize("options", [SHUFFLE, BROADCAST, UNSAMPLED],
                         ids=["shuffle", "broadcast", "unsampled"])
def test_keys_of_other_names_keep_their_own_types(engine, options):
    left = pd.DataFrame({"a": np.array([1, 2, 3, 127], dtype="int8"), "b": [5, 6, 7, 8]})
    right = pd.DataFrame({"b": np.array([2, 3, 4], dtype="int64"), "c": ["x", "y", "z"]})
    for how in ("inner", "left", "right", "outer", "leftsemi"):
        result = gpuframe.from_pandas(left).merge(gpuframe.from_pandas(right), left_on="a",
                                                  right_on="b", how=how, **options)
        expected = expected_join(left, right, how, left_on="a", right_on="b")
        assert_same_typed_rows(result.to_pandas(), expected, how)


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("options", [SHUFFLE, BROADCAST, UNSAMPLED],
                         ids=["shuffle", "broadcast", "unsampled"])
@pytest.mark.parametrize("empty_side", ["left", "right"])
def test_a_side_of_no_partitions_joins_as_an_empty_frame(engine, how, options, empty_side):
    frames = {"left": pd.DataFrame({"k": np.arange(10), "a": np.arange(10) * 1.5}),
              "right": pd.DataFrame({"k": np.arange(5, 15, dtype="int32"), "b": "x"})}
    ours = {side: gpuframe.from_pandas(frame) for side, frame in frames.items()}
    frames[empty_side] = frames[empty_side].head(0)
    ours[empty_side] = DistributedFrame(engine, Persisted(Partitions([], [],
                                                                     frames[empty_side])))
    result = ours["left"].merge(ours["right"], on="k", how=how, **options)
    expected = expected_join(frames["left"], frames["right"], how, on="k")
    got = result.to_pandas()
    assert list(got.columns) == list(expected.columns)
    assert_same_typed_rows(got, expected, how)


@pytest.mark.parametrize("how", ["inner", "left", "outer"])
@pytest.mark.parametrize("options", [SHUFFLE, BROADCAST, UNSAMPLED],
                         ids=["shuffle", "broadcast", "unsampled"])
def test_columns_the_packer_cannot_pack_join_like_pandas(engine, how, options):
    """Decimal, list and categorical columns beside the keys travel through either path."""
    from decimal import Decimal

    rng = np.random.default_rng(21)
    left = pd.DataFrame({
        "k": rng.integers(0, 60, 600),
        "price": [Decimal(int(v)) / 100 for v in rng.integers(0, 10**5, 600)],
        "tags": [[int(v), int(v) + 1] for v in rng.integers(0, 9, 600)],
        "size": pd.Categorical(rng.choice(["s", "m", "l"], 600), categories=["s", "m", "l", "xl"]),
    })
    right = pd.DataFrame({"k": rng.integers(30, 90, 200), "w": rng.random(200)})
    result = gpuframe.from_pandas(left, npartitions=3).merge(
        gpuframe.from_pandas(right, npartitions=2), on="k", how=how, **options).to_pandas()
    expected = left.merge(right, on="k", how=how)
    assert result["size"].dtype == expected["size"].dtype
    def comparable(frame):  # sortable, None where missing; lists as tuples, Decimals by value
        return frame.assign(  # (Arrow gives every Decimal its column's scale: 397 is 397.00)
            tags=[tuple(v) if isinstance(v, (list, np.ndarray)) else None for v in frame["tags"]],
            price=[str(v.normalize()) if isinstance(v, Decimal) else None
                   for v in frame["price"]])

    assert_same_rows(comparable(result), comparable(expected))


def stage_names(stream) -> list[str]:
    return [key_split(entry["key"]) for entry in stream.data]


def test_a_join_on_hashed_keys_moves_only_the_other_side(engine, sides):
    left, right = sides
    third = pd.DataFrame({"k": np.arange(0, 500, 3), "w": np.arange(0, 500, 3) * 0.5})
    first = gpuframe.from_pandas(left, npartitions=3).merge(
        gpuframe.from_pandas(right, npartitions=2), on=["k", "s"], **SHUFFLE).persist()
    assert first.partitioning is None or first.partitioning.keys == ("k", "s")
    hashed = gpuframe.from_pandas(left, npartitions=3).merge(
        gpuframe.from_pandas(right, npartitions=2), on="k", **SHUFFLE).persist()
    assert hashed.partitioning.keys == ("k",)
    with get_task_stream(client=engine.client) as stream:
        result = hashed.merge(gpuframe.from_pandas(third), on="k", **SHUFFLE).persist()
    names = stage_names(stream)
    assert "gpuframe-send-right" in names and "gpuframe-send-left" not in names
    assert "gpuframe-sample-left" not in names  # no sampling: the placement decided
    expected = left.merge(right, on="k").merge(third, on="k")
    assert_same_rows(result.to_pandas(), expected)
    assert result.partitioning.keys == ("k",)


def test_a_join_of_two_frames_hashed_alike_moves_nothing(engine, sides):
    left, right = sides
    a = gpuframe.from_pandas(left, npartitions=3).merge(
        gpuframe.from_pandas(right), on="k", how="left", **SHUFFLE).persist()
    b = gpuframe.from_pandas(right, npartitions=2).merge(
        gpuframe.from_pandas(left[["k"]].drop_duplicates()), on="k", **SHUFFLE).persist()
    assert a.partitioning.owners == b.partitioning.owners
    with get_task_stream(client=engine.client) as stream:
        result = a[["k", "lv"]].merge(b[["k", "rv"]], on="k", **SHUFFLE).persist()
    names = set(stage_names(stream))
    assert names <= {"gpuframe-join", "gpuframe-select"}, names
    expected = left.merge(right, on="k", how="left")[["k", "lv"]].merge(
        right.merge(left[["k"]].drop_duplicates(), on="k")[["k", "rv"]], on="k")
    assert_same_rows(result.to_pandas(), expected)


def test_placement_is_forgotten_where_keys_change(engine, sides):
    left, right = sides
    hashed = gpuframe.from_pandas(left).merge(gpuframe.from_pandas(right), on="k",
                                              **SHUFFLE).persist()
    assert hashed.assign(k=hashed.k + 1).persist().partitioning is None
    assert hashed.astype({"k": "float64"}).persist().partitioning is None
    assert hashed[["lv"]].persist().partitioning is None
    assert hashed.rename(columns={"k": "key"}).persist().partitioning.keys == ("key",)
    assert hashed[hashed.lv > 0.5].persist().partitioning.keys == ("k",)
    with get_task_stream(client=engine.client) as stream:
        moved = hashed.astype({"k": "int32"}).merge(gpuframe.from_pandas(right[["k"]]),
                                                    on="k", **SHUFFLE).persist()
    assert "gpuframe-send-left" in stage_names(stream)
    assert len(moved) == len(left.astype({"k": "int32"}).merge(right, on="k")
                             .merge(right[["k"]], on="k"))


def test_a_skewed_shuffle_records_no_placement(engine):
    left = pd.DataFrame({"k": np.r_[np.zeros(3000, int), np.arange(1000)], "a": 1.0})
    right = pd.DataFrame({"k": np.arange(100), "b": 2})
    joined = gpuframe.from_pandas(left, npartitions=4).merge(
        gpuframe.from_pandas(right), on="k", broadcast_bytes=0, skew_threshold=0.1).persist()
    assert joined.partitioning is None
    assert len(joined) == len(left.merge(right, on="k"))


def test_filters_after_a_join_run_below_it_with_the_same_rows(engine, sides):
    left, right = sides
    joined = gpuframe.from_pandas(left, npartitions=3).merge(
        gpuframe.from_pandas(right), on="k", how="left", **SHUFFLE)
    result = joined[(joined.lv > 0.5) & (joined.s_x != "red") & (joined.rv > 10**5)]
    expected = left.merge(right, on="k", how="left")
    expected = expected[(expected.lv > 0.5) & (expected.s_x != "red")
                        & (expected.rv > 10**5)]
    assert_same_typed_rows(result.to_pandas(), expected, "left")


def test_a_self_join_runs_its_shared_input_once(engine, sides):
    left, _ = sides
    frame = gpuframe.from_pandas(left, npartitions=3)
    picked = frame[frame.lv > 0.5]
    with get_task_stream(client=engine.client) as stream:
        result = picked.merge(picked, on=["k", "s"], **SHUFFLE).persist()
    names = stage_names(stream)
    assert names.count("gpuframe-load-pandas") == 3 and names.count("gpuframe-filter") == 3
    kept = left[left.lv > 0.5]
    assert_same_rows(result.to_pandas(), kept.merge(kept, on=["k", "s"]))


def skewed_sides() -> tuple[pd.DataFrame, pd.DataFrame]:
    """A left side of which one key holds most rows, and a right side that lacks some keys."""
    left = pd.DataFrame({"k": np.r_[np.zeros(3000, int), np.arange(1000)],
                         "a": np.arange(4000, dtype=float)})
    right = pd.DataFrame({"k": np.arange(0, 1200, 2), "b": 2})
    return left, right


@pytest.mark.parametrize("how", ["inner", "left", "outer", "left_anti", "right_anti"])
def test_indicator_is_pandas_on_the_skew_split_path(engine, how):
    left, right = skewed_sides()
    joined = gpuframe.from_pandas(left, npartitions=4).merge(
        gpuframe.from_pandas(right), on="k", how=how, indicator=True, broadcast_bytes=0,
        skew_threshold=0.1)
    result = joined.to_pandas()
    if how in ("inner", "left", "outer"):
        notes = io.StringIO()
        joined.explain(notes)
        assert "heavy keys split" in notes.getvalue()
    expected = left.merge(right, on="k", how=how, indicator=True)
    assert result.dtypes["_merge"] == expected.dtypes["_merge"]
    assert_same_rows(result.astype({"_merge": str}), expected.astype({"_merge": str}))


def test_indicator_and_validate_on_frames_hashed_alike(engine, sides):
    """The colocated path: each partition pair holds every row of its keys, so the indicator
    and validate= are decided there."""
    left, right = sides
    unique_right = right.drop_duplicates("k")
    a = gpuframe.from_pandas(left).merge(gpuframe.from_pandas(unique_right[["k"]]), on="k",
                                         how="left", **SHUFFLE).persist()
    b = gpuframe.from_pandas(unique_right).merge(gpuframe.from_pandas(left[["k"]]
                                                                      .drop_duplicates()),
                                                 on="k", **SHUFFLE).persist()
    assert a.partitioning.owners == b.partitioning.owners
    with get_task_stream(client=engine.client) as stream:
        result = a[["k", "lv"]].merge(b[["k", "rv"]], on="k", how="outer", indicator="side",
                                      validate="m:1", **SHUFFLE).to_pandas()
    assert set(stage_names(stream)) <= {"gpuframe-join", "gpuframe-select", "gpuframe-gather"}
    expected = left[["k", "lv"]].merge(
        unique_right[unique_right.k.isin(left.k)][["k", "rv"]], on="k", how="outer",
        indicator="side")
    assert_same_rows(result.astype({"side": str}), expected.astype({"side": str}))
    with pytest.raises(pd.errors.MergeError, match="not unique in left dataset"):
        a[["k", "lv"]].merge(b[["k", "rv"]], on="k", validate="1:1", **SHUFFLE).to_pandas()


def test_validate_never_copies_a_side_that_must_be_unique(engine):
    """A broadcast leaves the big side's keys spread over its partitions, where no task sees
    all the rows of one key: validate= of that side makes it a shuffle."""
    big = pd.DataFrame({"k": np.r_[np.arange(2000), [7]], "a": 1.0})
    small = pd.DataFrame({"k": np.arange(10), "b": 2.0})
    with pytest.raises(pd.errors.MergeError, match="not unique in left dataset"):
        gpuframe.from_pandas(big).merge(gpuframe.from_pandas(small), on="k",
                                        validate="1:m", **BROADCAST).to_pandas()
    result = gpuframe.from_pandas(big).merge(gpuframe.from_pandas(small), on="k",
                                             validate="m:1", **BROADCAST)
    assert len(result) == len(big.merge(small, on="k"))


@pytest.mark.parametrize("how", ["inner", "left", "outer"])
def test_sort_gives_pandas_order_even_where_keys_are_heavy(engine, how):
    left, right = skewed_sides()
    right = pd.concat([right, right.assign(b=3)], ignore_index=True)  # many to many
    result = gpuframe.from_pandas(left, npartitions=4).merge(
        gpuframe.from_pandas(right, npartitions=3), on="k", how=how, sort=True,
        broadcast_bytes=0, skew_threshold=0.1)
    expected = left.merge(right, on="k", how=how, sort=True)
    pd.testing.assert_frame_equal(result.to_pandas(), expected)
    pd.testing.assert_frame_equal(result.head(7), expected.head(7))


def test_cross_copies_the_smaller_side(engine, sides):
    left, right = sides
    small = right.head(7)
    with get_task_stream(client=engine.client) as stream:
        result = gpuframe.from_pandas(left, npartitions=3).merge(
            gpuframe.from_pandas(small), how="cross").to_pandas()
    names = set(stage_names(stream))
    assert "gpuframe-broadcast" in names and "gpuframe-send-left" not in names
    expected = left.merge(small, how="cross")
    assert list(result.columns) == list(expected.columns)
    assert list(result.dtypes) == list(expected.dtypes)
    assert_same_rows(result, expected)


@pytest.mark.parametrize("options", [SHUFFLE, BROADCAST], ids=["shuffle", "broadcast"])
def test_an_object_key_of_other_values_than_integers_joins_like_pandas(engine, options):
    """pandas compares such a key with an integer one value by value, as Python objects: so does
    gpuframe, where the backend holds objects."""
    left = pd.DataFrame({"k": pd.Series(["a", 2, 3, 2.0], dtype=object), "a": [1, 2, 3, 4]})
    right = pd.DataFrame({"k": [2, 3, 4], "b": [1, 2, 3]})
    joined = gpuframe.from_pandas(left, npartitions=2).merge(
        gpuframe.from_pandas(right, npartitions=2), on="k", **options)
    assert_same_typed_rows(joined.to_pandas(), left.merge(right, on="k"), "inner")


def notes_of(frame: DistributedFrame) -> str:
    text = io.StringIO()
    frame.explain(text)
    return text.getvalue()


def mailboxes_emptied(engine, frame: DistributedFrame, seconds: float = 10.0) -> bool:
    """Whether no worker's mailbox holds pieces of an exchange of the job that ran ``frame``,
    within ``seconds``."""
    from gpuframe.exchange.mailbox import PLUGIN_NAME

    job = frame._execution.job
    deadline = time.monotonic() + seconds
    while True:
        held = [name for names in engine.client.run(
                    lambda dask_worker: dask_worker.plugins[PLUGIN_NAME].mailbox.exchanges()
                ).values() for name, pieces in names.items() if job in name and pieces]
        if not held or time.monotonic() > deadline:
            return not held
        time.sleep(0.1)


def speculating_shuffle(left: pd.DataFrame, right: pd.DataFrame) -> DistributedFrame:
    """The shuffle join of ``left`` (4 partitions) and ``right`` (2) on k, not yet run, once
    the same join has run: its sample told the engine the workers' memory, so this one's
    estimates may send its rows before its own sample returns."""
    def joined() -> DistributedFrame:
        return gpuframe.from_pandas(left, npartitions=4).merge(
            gpuframe.from_pandas(right, npartitions=2), on="k", **SHUFFLE)

    joined().persist()
    return joined()


def test_a_shuffle_sends_and_joins_its_rows_while_the_sample_runs_once_the_workers_memory_is_known(
        engine):
    """Its estimates saying it shuffles, a join submits its exchange and its join tasks with
    its sample (the engine knows the workers' memory from an earlier sample), the joins gated
    by a verdict task on a worker: the sample agrees, the sends and joins serve, one send stage
    a side and one join stage."""
    left = pd.DataFrame({"k": np.arange(6000) % 1500, "a": np.arange(6000.0)})
    right = pd.DataFrame({"k": np.arange(3000), "b": np.arange(3000) * 2})
    frame = speculating_shuffle(left, right)
    with get_task_stream(client=engine.client) as stream:
        result = frame.to_pandas()
    assert_same_rows(result, left.merge(right, on="k"))
    assert "rows sent and joined while sampling" in notes_of(frame)
    names = [key_split(e["key"]) for e in stream.data]
    sends = {name for name in names if name.startswith("gpuframe-send")}
    assert len([name for name in names if name in sends]) == 4  # 2 workers x 2 sides
    assert names.count("gpuframe-verdict") == 1
    assert names.count("gpuframe-join") == 2  # one task a worker, run once
    assert mailboxes_emptied(engine, frame)


def test_a_speculation_whose_sample_finds_heavy_keys_runs_the_action_again(engine,
                                                                           speculating):
    """The estimates cannot see a heavy key; the sample does, and splits it: the verdict task
    fails the speculative joins and their job, and the action runs again in a job that
    decides from the sample on the client, its rows pandas'."""
    left = pd.DataFrame({"k": np.where(np.arange(8000) % 2 == 0, 7, np.arange(8000)),
                         "a": np.arange(8000.0)})
    right = pd.DataFrame({"k": np.arange(4000), "b": np.arange(4000) * 2})
    frame = speculating_shuffle(left, right)
    speculating.clear()
    result = frame.to_pandas()
    assert speculating == [True, False]
    assert_same_rows(result, left.merge(right, on="k"))
    notes = notes_of(frame)
    assert "heavy keys split" in notes and "while sampling" not in notes
    assert mailboxes_emptied(engine, frame)


@pytest.mark.parametrize("error, logged", [("SpeculationError('the inner join...')", False),
                                           ("ValueError('a real failure')", True)])
def test_a_failed_speculation_stays_out_of_the_worker_log(error, logged):
    """A worker logs every task that fails as an error; a speculation's, which its action
    recovers from, is left out (the record as distributed's worker makes it)."""
    record = logging.LogRecord("distributed.worker", logging.ERROR, __file__, 1,
                               "Compute Failed\nKey:       %s\nState:     %s\nTask:  %s\n"
                               "Exception: %r\nTraceback: %r\n",
                               ("gpuframe-verdict-0", "executing", "<Task>", error, "..."), None)
    kept = all(f.filter(record) for f in logging.getLogger("distributed.worker").filters)
    assert kept is logged


def sampled_parts(frame: pd.DataFrame, parts: int, memory: WorkerMemory | None = None
                  ) -> list[tuple]:
    """What the sampling tasks of ``frame`` in ``parts`` partitions hand the verdict task,
    each made on a worker with ``memory``."""
    sampled = [profile_partition(frame.iloc[rows], ["k"], {}, 1000, i, "pandas")
               for i, rows in enumerate(np.array_split(np.arange(len(frame)), parts))]
    return [(*found[:3], memory, found[4]) for found in sampled]


def verdict_shape(workers: int = 2) -> JoinShape:
    return JoinShape("inner", {"left": ["k"], "right": ["k"]}, ("left", "right"), True,
                     resolve(JoinOptions, SHUFFLE), tuple(f"w{i}" for i in range(workers)),
                     {"left": 4, "right": 2}, "the inner join on k = k")


@pytest.mark.parametrize("case", ["even", "heavy", "refused"])
def test_the_verdict_task_weighs_the_sample_as_the_client_does(case):
    """The verdict a worker gives the speculative joins is the client's decision on the same
    sample: they stand for evenly spread keys, not where a key is heavy, nor where the join
    cannot complete (the client then raises; the verdict only stops the joins)."""
    rows = 8000
    keys = np.arange(rows) if case == "even" else np.zeros(rows, dtype="int64")
    left = pd.DataFrame({"k": keys, "a": np.arange(rows, dtype="f8")})
    right = pd.DataFrame({"k": keys[:4000], "b": np.arange(4000, dtype="f8")})
    memory = WorkerMemory("w0", 2**20, 2**26) if case == "refused" else None
    shape = verdict_shape()
    sampled = {"left": sampled_parts(left, 4, memory), "right": sampled_parts(right, 2, memory)}
    stands = speculation_stands(shape, 1, *sampled["left"], *sampled["right"])
    assert stands is (case == "even")
    if case == "refused":
        with pytest.raises(MemoryLimitError):
            decide(shape, profiles_of(sampled))
    else:
        assert decide(shape, profiles_of(sampled)).shuffles_as(1) is stands
        assert not speculation_stands(shape, 2, *sampled["left"], *sampled["right"])
    if case == "even":  # a side the client would copy: its rows are sent, the shuffle serves
        copying = replace(shape, options=resolve(JoinOptions, BROADCAST))
        assert decide(copying, profiles_of(sampled)).broadcast == "right"
        assert speculation_stands(copying, 1, *sampled["left"], *sampled["right"])


@pytest.mark.parametrize("limit, copied", [(None, "right"), (2**18, None)])
def test_a_side_is_copied_only_where_one_join_task_can_hold_it(limit, copied):
    """The cap on a copy is set for a GPU's memory: on a worker whose join tasks may hold
    less (join_memory_fraction of its limit), a side that fits the cap is shuffled."""
    rows = 8000
    left = pd.DataFrame({"k": np.arange(rows), "a": np.arange(rows, dtype="f8")})
    right = pd.DataFrame({"k": np.arange(rows, 2 * rows), "b": np.arange(rows, dtype="f8")})
    memory = WorkerMemory("w0", limit, None)
    shape = replace(verdict_shape(), options=resolve(JoinOptions, BROADCAST))
    sampled = {"left": sampled_parts(left, 4, memory), "right": sampled_parts(right, 2, memory)}
    profiles = profiles_of(sampled)
    assert profiles["right"].nbytes > 0.25 * 2**18  # a join task's share of the small limit
    assert decide(shape, profiles).broadcast == copied
    assert broadcast_stands(shape, "right", *sampled["left"], *sampled["right"]) \
        is (copied is not None)


@pytest.mark.parametrize("fraction, copies", [(1.0, True), (0.25, False)])
def test_a_side_copied_by_estimate_is_held_to_a_join_tasks_share_of_the_worker(
        monkeypatch, fraction, copies):
    """The estimate chose the copy before any worker weighed it: the broadcast task refuses a
    side past its worker's share (the action then runs again, sampling) as past the cap."""
    from gpuframe.errors import SpeculationError
    from gpuframe.operators import join_tasks

    parts = [pd.DataFrame({"k": np.arange(i, 20_000, 2), "b": np.ones(10_000)}) for i in (0, 1)]
    held = sum(get_backend("pandas").nbytes(part) for part in parts)
    monkeypatch.setattr(join_tasks, "this_worker_memory",
                        lambda: WorkerMemory("w0", int(held * 2), None))
    gather = partial(join_tasks.gather_unsampled, parts, {}, "pandas", "right", None, 2**40,
                     fraction)
    if copies:
        assert len(gather()) == 20_000
    else:
        with pytest.raises(SpeculationError, match="right side"):
            gather()


@pytest.mark.parametrize("how", ["inner", "left"])
def test_a_side_the_sample_would_copy_joins_by_the_shuffle_already_sent(engine, how,
                                                                       speculating):
    """The plan estimates a filtered side at a share of its rows; where none pass, the sample
    would copy that side to every worker: its rows, and the other side's, were sent while it
    ran, and the shuffle they make stands (its tasks fit, no key is heavy), with no second
    run; the rows are pandas', and no mailbox keeps their pieces."""
    left = pd.DataFrame({"k": np.arange(80_000) % 20_000, "a": np.arange(80_000.0)})
    right = pd.DataFrame({"k": np.arange(40_000), "b": np.arange(40_000.0)})
    options = {"broadcast_bytes": 100_000}

    def joined() -> DistributedFrame:
        kept = gpuframe.from_pandas(right, npartitions=2)
        return gpuframe.from_pandas(left, npartitions=4).merge(kept[kept.b < 0], on="k",
                                                               how=how, **options)

    joined().persist()  # a sample tells the engine the workers' memory
    frame = joined()
    speculating.clear()
    result = frame.to_pandas()
    assert speculating == [True]
    assert_same_rows(result, left.merge(right[right.b < 0], on="k", how=how))
    assert "rows sent and joined while sampling" in notes_of(frame)
    assert mailboxes_emptied(engine, frame)


def _estimated_copy(engine: gpuframe.Engine, monkeypatch: pytest.MonkeyPatch,
                    speculating: list[bool], rows: int, kept_rows: int
                    ) -> tuple[DistributedFrame, list[str], list[str]]:
    """A join whose right side the plan estimates at a ninth of ``rows`` rows of 16 bytes (two
    range filters), of which ``kept_rows`` pass, under ``broadcast_bytes`` of 200,000, run and
    checked against pandas: the frame, the stages whose results the client gathered, and the
    names of the tasks that ran; ``speculating`` holds that run's jobs only."""
    gathered: list[str] = []
    gather = Job.gather

    def gathering(self: Job, futures):
        gathered.extend(self._info[f.key].stage for f in futures)
        return gather(self, futures)

    left = pd.DataFrame({"k": np.arange(80_000) % 20_000, "a": np.arange(80_000.0)})
    right = pd.DataFrame({"k": np.arange(rows),
                          "b": np.where(np.arange(rows) < kept_rows, 1.0, -1.0)})
    options = {"broadcast_bytes": 200_000, "broadcast_ratio": None, "broadcast_rows": 0}

    def joined() -> DistributedFrame:
        side = gpuframe.from_pandas(right, npartitions=2)
        return gpuframe.from_pandas(left, npartitions=4).merge(
            side[(side.b >= 0) & (side.k >= 0)], on="k", **options)

    joined().persist()  # a sample tells the engine the workers' memory
    frame = joined()
    monkeypatch.setattr(Job, "gather", gathering)
    speculating.clear()
    with get_task_stream(client=engine.client) as stream:
        result = frame.to_pandas()
    assert_same_rows(result, left.merge(right[right.b >= 0], on="k"))
    return frame, gathered, [key_split(e["key"]) for e in stream.data]


@pytest.mark.parametrize("kept_rows, again", [(4_000, False), (15_000, False), (25_000, True)])
def test_a_side_the_estimates_copy_is_gathered_once_a_worker_has_weighed_its_sample(
        engine, monkeypatch, speculating, kept_rows, again):
    """The plan estimates a filtered side small enough to copy, but past half the cap
    (160,000 bytes of 200,000): it is gathered and copied once a verdict task has found from
    the sample that it may be, and the client waits for no sample, even where the side samples
    a little past ``broadcast_bytes`` (15,000 rows of 16 bytes: 1.2 times it). Where it
    outgrows that by more than half again (25,000 rows: twice), the verdict fails the job
    before anything is gathered, and the action runs again, deciding on the client. Either
    way the rows are pandas'."""
    frame, gathered, names = _estimated_copy(engine, monkeypatch, speculating, 90_000,
                                             kept_rows)
    assert speculating == ([True, False] if again else [True])
    assert "gpuframe-verdict" in names
    notes = notes_of(frame)
    if again:
        assert "shuffle" in notes and "copied once its sample" not in notes
    else:
        assert "broadcast right side (copied once its sample" in notes
        assert "sample-right" not in gathered
        assert names.count("gpuframe-broadcast") == 2  # one a worker


@pytest.mark.parametrize("kept_rows, again", [(4_000, False), (15_000, False), (25_000, True)])
def test_a_side_the_estimates_put_under_half_the_cap_is_copied_unsampled(
        engine, monkeypatch, speculating, kept_rows, again):
    """A side estimated under half of ``broadcast_bytes`` (53,000 bytes of 200,000) is copied
    with no sample of either side and no verdict: one job, the side checked as it is gathered,
    even a little past the cap (15,000 rows: 1.2 times it). Where it holds more than half
    again the cap (25,000 rows), its broadcast task fails the job before putting it together,
    and the action runs again, deciding from the sample on the client. Either way the rows are
    pandas'."""
    frame, gathered, names = _estimated_copy(engine, monkeypatch, speculating, 30_000,
                                             kept_rows)
    assert speculating == ([True, False] if again else [True])
    notes = notes_of(frame)
    if again:
        assert "shuffle" in notes and "unsampled" not in notes
        assert "sample-right" in gathered  # the second run decided on the client
    else:
        assert "broadcast right side (estimated at" in notes and "unsampled" in notes
        assert not {"gpuframe-verdict", "gpuframe-sample-left", "gpuframe-sample-right"} \
            & set(names)
        assert "sample-right" not in gathered
        assert names.count("gpuframe-broadcast") == 2  # one a worker
