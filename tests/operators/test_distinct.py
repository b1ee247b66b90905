import numpy as np
import pandas as pd
import pytest

import gpuframe
from gpuframe.errors import OptionError, UnknownColumnError
from gpuframe.exchange.placement import HashPartitioning
from gpuframe.ordering import drop_duplicates


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    n = 3000
    k = rng.integers(0, 40, n).astype(float)
    k[rng.choice(n, 50, replace=False)] = np.nan
    return pd.DataFrame({
        "k": k,
        "s": pd.array(rng.choice(["a", "b", None], n), dtype="str"),
        "row": np.arange(n),
    })


def in_input_order(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows ordered by ``row``: the output's order across partitions is the hash's."""
    return frame.sort_values("row", ignore_index=True)


@pytest.mark.parametrize("keep", ["first", "last", False])
@pytest.mark.parametrize("subset", [["k"], ["k", "s"], "s"])
def test_keeps_the_rows_pandas_keeps(engine, data, subset, keep):
    frame = drop_duplicates(gpuframe.from_pandas(data, npartitions=4), subset, keep)
    result = frame.to_pandas()
    expected = data.drop_duplicates(subset, keep=keep)
    pd.testing.assert_frame_equal(in_input_order(result), in_input_order(expected))
    assert frame.meta.dtypes.to_dict() == data.dtypes.to_dict()


def test_each_partition_is_in_input_order_and_hashed_on_the_subset(engine, data):
    frame = drop_duplicates(gpuframe.from_pandas(data, npartitions=3), ["k", "s"], "last",
                            npartitions=4)
    pieces = [f.result() for f in frame.futures]
    assert len(pieces) == 4
    for piece in pieces:
        assert piece["row"].is_monotonic_increasing
    placed = frame.partitioning
    assert isinstance(placed, HashPartitioning) and placed.keys == ("k", "s") and placed.n == 4


def test_whole_rows_with_duplicates_across_partitions(engine):
    data = pd.DataFrame({"a": [1, 2, 1, 3, 2, 1, 4, 4], "b": list("xyxzyxww")})
    frame = drop_duplicates(gpuframe.from_pandas(data, npartitions=4))
    expected = data.drop_duplicates()
    pd.testing.assert_frame_equal(frame.to_pandas().sort_values(["a", "b"], ignore_index=True),
                                  expected.sort_values(["a", "b"], ignore_index=True))
    only_once = drop_duplicates(gpuframe.from_pandas(data, npartitions=4), keep=False)
    assert only_once.to_pandas()["a"].tolist() == [3]


def test_empty_partitions_and_a_tiny_frame(engine):
    data = pd.DataFrame({"a": [1, 1]})
    assert drop_duplicates(gpuframe.from_pandas(data, npartitions=2)).to_pandas()["a"] \
        .tolist() == [1]
    empty = drop_duplicates(gpuframe.from_pandas(data.iloc[:0], npartitions=2)).to_pandas()
    assert len(empty) == 0 and empty.dtypes.to_dict() == data.dtypes.to_dict()


def test_refuses_bad_options(engine, data):
    frame = gpuframe.from_pandas(data)
    with pytest.raises(UnknownColumnError, match="nope"):
        drop_duplicates(frame, "nope")
    with pytest.raises(OptionError, match="keep"):
        drop_duplicates(frame, keep="middle")


@pytest.mark.gpu
def test_drop_duplicates_on_gpus(data):
    with gpuframe.start_cluster(backend="cudf") as engine:
        frame = gpuframe.from_pandas(data, npartitions=4, engine=engine)
        result = drop_duplicates(frame, ["k", "s"], "last").to_pandas()
        expected = data.drop_duplicates(["k", "s"], keep="last")
        pd.testing.assert_frame_equal(in_input_order(result), in_input_order(expected),
                                      check_dtype=False)


def test_a_join_on_the_subset_reuses_the_placement(engine):
    left = pd.DataFrame({"k": [1, 2, 2, 3, 5], "x": np.arange(5)})
    right = pd.DataFrame({"k": [2, 3, 3, 4], "y": np.arange(4)})
    a = drop_duplicates(gpuframe.from_pandas(left, npartitions=2), "k").persist()
    b = drop_duplicates(gpuframe.from_pandas(right, npartitions=3), "k").persist()
    joined = a.merge(b, on="k").persist()
    assert any(note.startswith("none") for note in joined._execution.notes.values())
    expected = left.drop_duplicates("k").merge(right.drop_duplicates("k"), on="k")
    pd.testing.assert_frame_equal(joined.to_pandas().sort_values("k", ignore_index=True),
                                  expected)
