"""Per-partition operators on a real two-worker cluster, against pandas on the same data."""

import io

import numpy as np
import pandas as pd
import pytest
from dask.utils import key_split
from distributed import get_task_stream

import gpuframe
from gpuframe import col
from gpuframe.diagnostics.metrics import _scheduler_stage_tasks
from gpuframe.errors import ExpressionError, OptionError, UnknownColumnError


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    n = 3000
    return pd.DataFrame({
        "k": rng.integers(0, 40, n),
        "x": rng.random(n),
        "s": pd.array(rng.choice(["red", "green", "blue", None], n), dtype="str"),
        "t": pd.to_datetime(rng.integers(0, 2 * 10**9, n), unit="s"),
        "m": pd.array(rng.choice([1, 2, None], n), dtype="Int64"),
    })


def same(result: pd.DataFrame, expected: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(result.reset_index(drop=True),
                                  expected.reset_index(drop=True))


def test_filters_select_and_assign_match_pandas(engine, data):
    frame = gpuframe.from_pandas(data, npartitions=4)
    result = frame[(frame.x > 0.3) & frame.s.str.startswith("r") | frame.k.isin([1, 2, 3])]
    result = result.assign(y=result.x * 10 - result.k, year=result.t.dt.year)
    result = result[["k", "y", "year", "s"]]
    expected = data[(data.x > 0.3) & data.s.str.startswith("r").fillna(False)
                    | data.k.isin([1, 2, 3])]
    expected = expected.assign(y=expected.x * 10 - expected.k, year=expected.t.dt.year)
    expected = expected[["k", "y", "year", "s"]]
    same(result.to_pandas(), expected)
    assert result.dtypes.to_dict() == expected.dtypes.to_dict()


def test_rename_astype_between_null_tests_and_setitem(engine, data):
    frame = gpuframe.from_pandas(data, npartitions=3).rename(columns={"x": "value"})
    frame = frame.astype({"k": "int32"})
    frame = frame.filter(col("value").between(0.25, 0.75) & col("m").notna())
    frame["half"] = frame["value"] / 2
    expected = data.rename(columns={"x": "value"}).astype({"k": "int32"})
    expected = expected[expected.value.between(0.25, 0.75) & expected.m.notna()]
    expected["half"] = expected["value"] / 2
    same(frame.to_pandas(), expected)
    assert len(frame) == len(expected)
    assert frame.dtypes.to_dict() == expected.dtypes.to_dict()


def test_map_partitions_runs_where_partitions_lie(engine, data):
    frame = gpuframe.from_pandas(data, npartitions=4)

    def top(partition, n):
        return partition.nlargest(n, "x")[["k", "x"]]

    result = frame.map_partitions(top, 3)
    assert list(result.columns) == ["k", "x"]
    assert len(result) == 12
    declared = frame.map_partitions(top, 2, meta=data[["k", "x"]].head(0))
    assert declared.npartitions == 4 and len(declared) == 8


def test_a_chain_runs_as_one_task_per_partition(engine, data):
    frame = gpuframe.from_pandas(data, npartitions=4)
    chain = frame[frame.x > 0.5].assign(z=col("x") + 1)[["k", "z"]]
    with get_task_stream(client=engine.client) as stream:
        chain.persist()
    names = [key_split(entry["key"]) for entry in stream.data]
    assert names.count("gpuframe-filter-assign-select") == 4
    assert not any(n in ("gpuframe-filter", "gpuframe-assign", "gpuframe-select")
                   for n in names)


def submitted(engine) -> int:
    """gpuframe tasks ever submitted to the engine's scheduler."""
    counts = engine.client.run_on_scheduler(_scheduler_stage_tasks)
    return sum(submitted for submitted, _ in counts.values())


def test_nothing_runs_before_an_action(engine, data):
    before = submitted(engine)
    frame = gpuframe.from_pandas(data, npartitions=2)
    frame = frame[frame.x > 0.1].assign(w=frame.x * 2)
    frame.explain(file=io.StringIO())
    assert submitted(engine) == before
    assert len(frame) == int((data.x > 0.1).sum())


def test_a_run_frame_keeps_its_partitions_for_later_actions(engine, data):
    frame = gpuframe.from_pandas(data, npartitions=2)
    filtered = frame[frame.x > 0.9]
    filtered.persist()
    futures = list(filtered.futures)
    assert len(filtered) == int((data.x > 0.9).sum())
    filtered.to_pandas()
    assert filtered.futures == futures  # not run again
    again = filtered.assign(y=filtered.x + 1)
    assert len(again) == len(filtered)


def test_bad_expressions_and_columns_fail_before_anything_runs(engine, data):
    frame = gpuframe.from_pandas(data)
    with pytest.raises(UnknownColumnError, match="'nope' is not among"):
        frame["nope"]
    with pytest.raises(UnknownColumnError, match=r"select: column\(s\) \['nope'\]"):
        frame[["k", "nope"]]
    with pytest.raises(ExpressionError, match="not booleans"):
        frame[frame.x + 1]
    with pytest.raises(UnknownColumnError, match=r"filter .*column\(s\) \['other'\]"):
        frame.filter(col("other") > 1)
    with pytest.raises(UnknownColumnError, match="rename"):
        frame.rename(columns={"zz": "a"}, errors="raise")
    with pytest.raises(OptionError, match="name two columns alike"):
        frame.rename(columns={"x": "k"})
    with pytest.raises(AttributeError, match="no attribute or column 'nope'"):
        frame.nope  # noqa: B018
    with pytest.raises(ExpressionError, match="pass meta="):
        frame.map_partitions(lambda p: p["missing"])
