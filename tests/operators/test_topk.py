import io

import numpy as np
import pandas as pd
import pytest
from dask.utils import key_split
from distributed import get_task_stream

import gpuframe
from gpuframe.errors import ColumnTypeError, OptionError
from gpuframe.ordering import nlargest, nsmallest, sort_values, top_k
from gpuframe.plan.sort import Sort
from gpuframe.plan.topk import TopK, head_of


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    n = 2000
    a = rng.integers(0, 8, n).astype(float)
    a[rng.choice(n, 100, replace=False)] = np.nan
    return pd.DataFrame({"a": a, "b": rng.integers(0, 3, n),
                         "s": pd.array(rng.choice(["x", "y", None], n), dtype="str"),
                         "row": np.arange(n)})


def run(frame) -> pd.DataFrame:
    return frame.to_pandas().reset_index(drop=True)


@pytest.mark.parametrize("keep", ["first", "last"])
@pytest.mark.parametrize("columns", ["a", ["a", "b"], ["b", "a"]])
@pytest.mark.parametrize("n", [1, 7, 300])
def test_nlargest_and_nsmallest_match_pandas(engine, data, columns, n, keep):
    """The same rows in the same order; pandas' order of tied rows with keep="last" over
    several columns changes with ``n`` (reverse input order up to some n, input order past
    it), so there ties are compared as sets, keys in order."""
    frame = gpuframe.from_pandas(data, npartitions=5)
    for ours, theirs in ((nlargest(frame, n, columns, keep), data.nlargest(n, columns, keep)),
                         (nsmallest(frame, n, columns, keep), data.nsmallest(n, columns, keep))):
        result, expected = run(ours), theirs.reset_index(drop=True)
        if keep == "last" and not isinstance(columns, str):
            pd.testing.assert_frame_equal(result[columns], expected[columns])
            result, expected = (f.sort_values("row", ignore_index=True)
                                for f in (result, expected))
        pd.testing.assert_frame_equal(result, expected)


@pytest.mark.parametrize("na_position", ["first", "last"])
@pytest.mark.parametrize("n", [0, 5, 1999, 2000, 5000])
def test_top_k_is_the_head_of_the_sort(engine, data, n, na_position):
    frame = gpuframe.from_pandas(data, npartitions=4)
    result = run(top_k(frame, n, ["s", "a"], [False, True], na_position))
    expected = data.sort_values(["s", "a"], ascending=[False, True], na_position=na_position,
                                kind="stable").head(n).reset_index(drop=True)
    pd.testing.assert_frame_equal(result, expected)
    assert result.dtypes.to_dict() == data.dtypes.to_dict()


def test_many_partitions_merge_in_a_tree_and_nothing_is_exchanged(engine, data):
    """Kept on the workers (a persist), 20 lists merge 8 at a time; fetched (to_pandas), each
    partition's list comes to the client as pandas and merges there, no merge or conversion
    task of their own."""
    frame = top_k(gpuframe.from_pandas(data, npartitions=20), 10, "row", False)
    with get_task_stream() as stream:
        frame.persist()
    stages = [key_split(task["key"]) for task in stream.data]
    assert set(stages) == {"gpuframe-load-pandas", "gpuframe-top", "gpuframe-merge-top"}, stages
    assert stages.count("gpuframe-merge-top") == 3 + 1  # 20 lists by 8, then the 3 merged
    assert frame.npartitions == 1
    assert run(frame)["row"].tolist() == list(range(1999, 1989, -1))
    fetched = top_k(gpuframe.from_pandas(data, npartitions=20), 10, "row", False)
    with get_task_stream() as stream:
        result = run(fetched)
    stages = [key_split(task["key"]) for task in stream.data]
    assert set(stages) == {"gpuframe-load-pandas", "gpuframe-top"}, stages
    assert result["row"].tolist() == list(range(1999, 1989, -1))
    explained = io.StringIO()
    fetched.explain(file=explained)
    assert "top 10 of 20 partitions, merged on the client" in explained.getvalue()


def test_empty_partitions_and_a_tiny_frame(engine):
    data = pd.DataFrame({"a": [3.0, np.nan], "v": ["p", "q"]})
    frame = gpuframe.from_pandas(data, npartitions=2)
    pd.testing.assert_frame_equal(run(nsmallest(frame, 5, "a")),
                                  data.sort_values("a").reset_index(drop=True))
    empty = gpuframe.from_pandas(data.iloc[:0], npartitions=2)
    assert len(run(nlargest(empty, 3, "a"))) == 0


def test_head_of_a_sort_is_a_top_k(engine, data):
    sort = sort_values(gpuframe.from_pandas(data), "a").plan
    assert isinstance(sort, Sort)
    head = head_of(sort, 3)
    assert isinstance(head, TopK) and head.child is sort.child and head.keys == sort.keys
    assert head_of(sort.child, 3) is None


def test_refuses_what_pandas_refuses(engine, data):
    frame = gpuframe.from_pandas(data)
    with pytest.raises(ColumnTypeError, match="'s'"):
        nlargest(frame, 3, "s")
    with pytest.raises(OptionError, match="keep"):
        nsmallest(frame, 3, "a", keep="all")
    with pytest.raises(OptionError, match="n="):
        top_k(frame, -1, "a")


@pytest.mark.gpu
def test_top_k_on_gpus(data):
    with gpuframe.start_cluster(backend="cudf") as engine:
        frame = gpuframe.from_pandas(data, npartitions=4, engine=engine)
        pd.testing.assert_frame_equal(run(nlargest(frame, 50, ["a", "b"])),
                                      data.nlargest(50, ["a", "b"]).reset_index(drop=True),
                                      check_dtype=False)



@pytest.mark.parametrize("na_position", ["first", "last"])
def test_one_input_partition_is_one_task(engine, data, na_position):
    frame = top_k(gpuframe.from_pandas(data, npartitions=1), 7, ["a", "b"], [False, True],
                  na_position)
    with get_task_stream() as stream:
        result = run(frame)
    stages = [key_split(task["key"]) for task in stream.data]
    assert stages.count("gpuframe-top") == 1 and "gpuframe-merge-top" not in stages, stages
    expected = data.sort_values(["a", "b"], ascending=[False, True], na_position=na_position,
                                kind="stable").head(7).reset_index(drop=True)
    pd.testing.assert_frame_equal(result, expected)


@pytest.mark.parametrize("strategy", ["tree", "shuffle"])
def test_a_top_k_of_an_aggregate_runs_in_its_last_task_where_it_makes_one_partition(
        engine, data, strategy):
    grouped = gpuframe.from_pandas(data, npartitions=3).groupby("a", strategy=strategy).agg(
        total=("row", "sum"))
    frame = nlargest(grouped, 5, "total")
    with get_task_stream() as stream:
        result = frame.to_pandas()
    expected = data.groupby("a", as_index=False).agg(total=("row", "sum")).nlargest(5, "total")
    pd.testing.assert_frame_equal(result, expected.reset_index(drop=True), check_dtype=False)
    stages = {key_split(task["key"]) for task in stream.data}
    assert ("gpuframe-top" in stages) == (strategy == "shuffle"), stages
