"""The optimizer through sorts, top-k, distinct and concat: filters move below a sort, and below
a distinct where they read only its subset; projections reach the readers through all four.
Results are compared with pandas on the same Parquet file."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from distributed import get_task_stream

import gpuframe
from gpuframe.plan.distinct import Distinct
from gpuframe.plan.nodes import Filter, Scan
from gpuframe.plan.optimize import optimize


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    n = 3000
    return pd.DataFrame({"a": rng.integers(0, 50, n), "b": rng.random(n),
                         "c": rng.integers(0, 5, n), "d": rng.random(n)})


@pytest.fixture
def parquet(tmp_path, data) -> str:
    path = tmp_path / "data.parquet"
    pq.write_table(pa.Table.from_pandas(data, preserve_index=False), path, row_group_size=500)
    return str(path)


def _nodes(plan):
    found = [plan]
    for child in plan.children:
        found += _nodes(child)
    return found


def _scans(plan) -> list[Scan]:
    return [n for n in _nodes(optimize(plan)) if isinstance(n, Scan)]


def test_a_filter_after_a_sort_reaches_the_read_and_the_order_holds(engine, parquet, data):
    frame = gpuframe.read_parquet(parquet).sort_values(["a", "b"])
    result = frame[frame.a < 10][["a", "b"]]
    (scan,) = _scans(result.plan)
    assert scan.filters == [[("a", "<", 10)]] and scan.read_columns == ("a", "b")
    expected = data[data.a < 10].sort_values(["a", "b"], kind="stable")[["a", "b"]]
    pd.testing.assert_frame_equal(result.to_pandas(), expected.reset_index(drop=True))


def test_head_of_a_sort_is_a_top_k_reading_only_its_columns(engine, parquet, data):
    frame = gpuframe.read_parquet(parquet)[["a", "d"]].sort_values("d", ascending=False)
    with get_task_stream(engine.client) as stream:
        got = frame.head(7)
    pd.testing.assert_frame_equal(
        got, data[["a", "d"]].sort_values("d", ascending=False).head(7).reset_index(drop=True))
    stages = {t["key"].split("-")[1] for t in stream.data if t["key"].startswith("gpuframe-")}
    assert not stages & {"split", "send"}, stages  # nothing moved between workers
    (scan,) = _scans(gpuframe.read_parquet(parquet).nlargest(3, "b")[["b"]].plan)
    assert scan.read_columns == ("b",)


def test_distinct_takes_conditions_on_its_subset_only(engine, parquet, data):
    frame = gpuframe.read_parquet(parquet).drop_duplicates(["a", "c"])
    result = frame[(frame.a > 5) & (frame.b > 0.5)]
    optimized = optimize(result.plan)
    assert isinstance(optimized, Filter) and optimized.predicate.columns() == {"b"}
    distinct = next(n for n in _nodes(optimized) if isinstance(n, Distinct))
    (scan,) = [n for n in _nodes(distinct) if isinstance(n, Scan)]
    assert scan.filters == [[("a", ">", 5)]]
    kept = data.drop_duplicates(["a", "c"])
    expected = kept[(kept.a > 5) & (kept.b > 0.5)]
    got = result.to_pandas()
    assert sorted(map(tuple, got.to_numpy())) == sorted(map(tuple, expected.to_numpy()))


def test_concat_reads_each_inputs_wanted_columns(engine, parquet, data):
    one = gpuframe.read_parquet(parquet)
    two = gpuframe.read_parquet(parquet)[["a", "c"]]
    both = gpuframe.concat([one, two])[["a"]]
    assert [s.read_columns for s in _scans(both.plan)] == [("a",), ("a",)]
    assert sorted(both.to_pandas().a) == sorted(list(data.a) * 2)


def test_value_counts_as_pandas(engine, data):
    frame = gpuframe.from_pandas(data, npartitions=3)
    got = frame.value_counts(["c"]).to_pandas()
    expected = data.value_counts(["c"]).reset_index()
    assert got["count"].tolist() == expected["count"].tolist()
    assert dict(zip(got.c, got["count"])) == dict(zip(expected.c, expected["count"]))
