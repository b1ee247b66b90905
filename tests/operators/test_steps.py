"""Per-partition chains run in the tasks of the operator below or above them, on a real
two-worker cluster, against pandas on the same data."""

import io

import numpy as np
import pandas as pd
import pytest
from dask.utils import key_split
from distributed import get_task_stream

import gpuframe
from gpuframe.groupby import groupby


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    n = 4000
    return pd.DataFrame({"k": rng.integers(0, 50, n), "x": rng.random(n),
                         "s": pd.array(rng.choice(["a", "b", "c"], n), dtype="str")})


def stages_and_result(frame) -> tuple[set[str], pd.DataFrame]:
    with get_task_stream() as stream:
        result = frame.to_pandas().reset_index(drop=True)
    return {key_split(task["key"]).removeprefix("gpuframe-") for task in stream.data}, result


def notes(frame) -> str:
    text = io.StringIO()
    frame.explain(file=text)
    return text.getvalue()


def test_a_chain_over_a_read_runs_in_the_read_tasks(engine, data, tmp_path):
    path = tmp_path / "table"
    path.mkdir()
    for i in range(3):
        data.iloc[i::3].to_parquet(path / f"part-{i}.parquet", index=False)
    table = gpuframe.read_parquet(str(path))
    frame = table[table.x > 0.25]
    frame = frame.assign(y=frame.x * 2 + frame.k)[["k", "y"]]
    stages, result = stages_and_result(frame)
    expected = pd.concat([data.iloc[i::3] for i in range(3)], ignore_index=True)
    expected = expected[expected.x > 0.25]
    expected = expected.assign(y=expected.x * 2 + expected.k)[["k", "y"]]
    pd.testing.assert_frame_equal(result, expected.reset_index(drop=True))
    assert stages == {"read-parquet", "gather"}, stages
    # the filter went into the read itself (a pushed filter); the rest into its tasks
    assert "assign-select fused into its tasks" in notes(frame)


def test_a_chain_over_a_join_runs_in_the_join_tasks(engine, data):
    left = gpuframe.from_pandas(data, npartitions=4)
    right = gpuframe.from_pandas(data.drop_duplicates("k").rename(columns={"x": "z"}),
                                 npartitions=2)
    joined = gpuframe.merge(left, right[["k", "z"]], on="k", broadcast_bytes=0)
    frame = joined.assign(w=joined.x - joined.z)
    frame = frame[frame.w > 0][["k", "w"]]
    stages, result = stages_and_result(frame)
    expected = data.merge(data.drop_duplicates("k").rename(columns={"x": "z"})[["k", "z"]],
                          on="k")
    expected = expected.assign(w=expected.x - expected.z)
    expected = expected[expected.w > 0][["k", "w"]]
    pd.testing.assert_frame_equal(result.sort_values(["k", "w"], ignore_index=True),
                                  expected.sort_values(["k", "w"], ignore_index=True))
    assert not stages & {"assign", "filter", "select", "assign-filter-select"}, stages
    assert "join" in stages
    assert "fused into the task of" in notes(frame)


def test_a_chain_under_an_aggregate_runs_in_its_partial_tasks(engine, data):
    frame = gpuframe.from_pandas(data, npartitions=4)
    kept = frame[frame.s != "b"]
    kept = kept.assign(y=kept.x * kept.k)
    result_frame = kept.groupby("s", as_index=False).agg(total=("y", "sum"), n=("k", "size"))
    stages, result = stages_and_result(result_frame)
    kept_data = data[data.s != "b"]
    expected = kept_data.assign(y=kept_data.x * kept_data.k).groupby(
        "s", as_index=False).agg(total=("y", "sum"), n=("k", "size"))
    pd.testing.assert_frame_equal(result.sort_values("s", ignore_index=True), expected,
                                  check_dtype=False)
    assert "filter-assign-partial" in stages and "filter-assign" not in stages, stages


def test_a_chain_two_nodes_read_runs_once_for_both(engine, data):
    frame = gpuframe.from_pandas(data, npartitions=4)
    kept = frame[frame.x > 0.5]
    counts = kept.groupby("k", as_index=False).agg(n=("x", "size"))
    both = gpuframe.merge(kept, counts, on="k")
    stages, result = stages_and_result(both)
    kept_data = data[data.x > 0.5]
    expected = kept_data.merge(kept_data.groupby("k", as_index=False).agg(n=("x", "size")),
                               on="k")
    pd.testing.assert_frame_equal(result.sort_values(["k", "x"], ignore_index=True),
                                  expected.sort_values(["k", "x"], ignore_index=True),
                                  check_dtype=False)
    assert "filter" in stages, stages  # its own tasks, read by the aggregate and the join


@pytest.mark.parametrize("strategy", ["tree", "shuffle", "local"])
def test_a_chain_over_an_aggregate_runs_in_its_last_tasks(engine, data, strategy):
    """A filter and an assign over a groupby's result run in the tasks that finish the
    aggregate (the tree's last, each shuffled bucket's, or each partition's where the input
    is hashed on the keys already), not in tasks of their own."""
    frame = gpuframe.from_pandas(data, npartitions=4)
    if strategy == "local":
        frame = gpuframe.merge(frame, gpuframe.from_pandas(data[["k"]].drop_duplicates()),
                               on="k", broadcast_bytes=0)
    options = {} if strategy == "local" else {"strategy": strategy}
    grouped = groupby(frame, ["k", "s"], **options).agg(total=("x", "sum"), n=("x", "size"))
    kept = grouped[grouped.n > 20]
    result_frame = kept.assign(mean=kept.total / kept.n)
    stages, result = stages_and_result(result_frame)
    expected = data.groupby(["k", "s"], as_index=False).agg(total=("x", "sum"), n=("x", "size"))
    expected = expected[expected.n > 20]
    expected = expected.assign(mean=expected.total / expected.n)
    pd.testing.assert_frame_equal(result.sort_values(["k", "s"], ignore_index=True),
                                  expected.sort_values(["k", "s"], ignore_index=True),
                                  check_dtype=False)
    assert "aggregate" in stages and not stages & {"filter", "assign", "filter-assign"}, stages
    assert "fused into the task of" in notes(result_frame)
    if strategy == "shuffle":  # the hash placement survives a chain that keeps the keys
        assert result_frame.persist().partitioning.keys == ("k", "s")


def test_a_chain_s_task_function_is_named_without_printing_its_steps():
    # Dask names a submitted callable without __name__ by its repr, at every submit
    from dask.utils import funcname

    from gpuframe.operators.steps import MapStep, SelectStep, StepsAfter, StepsFirst

    wide = pd.DataFrame({f"column_{i}": range(100) for i in range(200)})
    steps = (SelectStep(tuple(wide.columns)), MapStep(pd.DataFrame.merge, (wide,)))
    assert funcname(StepsFirst(steps, len)) == "StepsFirst(len; SelectStep, MapStep)"
    assert repr(StepsAfter(len, steps[:1])) == "StepsAfter(len; SelectStep)"
    assert StepsFirst(steps, len)(wide) == 100
