import decimal
import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from dask.utils import key_split
from distributed import get_task_stream

import gpuframe
from gpuframe.errors import ColumnTypeError, OptionError, UnknownColumnError
from gpuframe.operators import sort as sort_operator
from gpuframe.ordering import sort_values


def expected_order(data: pd.DataFrame, by, ascending=True, na_position="last") -> pd.DataFrame:
    return data.sort_values(by, ascending=ascending, na_position=na_position,
                            kind="stable").reset_index(drop=True)


@pytest.fixture(autouse=True)
def through_the_exchange(monkeypatch):
    """The tests below take the range exchange whatever their size; test_small_sort_* the
    one-task path of small sorts."""
    monkeypatch.setattr(sort_operator, "SMALL_BYTES", -1)


def assert_sorted_like_pandas(data, by, ascending=True, na_position="last", npartitions=3,
                              **options):
    frame = sort_values(gpuframe.from_pandas(data, npartitions=npartitions), by, ascending,
                        na_position, **options)
    result = frame.to_pandas().reset_index(drop=True)
    pd.testing.assert_frame_equal(result, expected_order(data, by, ascending, na_position))
    assert frame.meta.dtypes.to_dict() == data.dtypes.to_dict()
    return frame


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    n = 3000
    x = rng.normal(size=n)
    x[rng.choice(n, 200, replace=False)] = np.nan
    return pd.DataFrame({
        "k": rng.integers(0, 20, n),
        "x": x,
        "s": pd.array(rng.choice(["pear", "apple", "fig", None, "kiwi"], n), dtype="str"),
        "row": np.arange(n),
    })


@pytest.mark.parametrize("na_position", ["last", "first"])
@pytest.mark.parametrize("ascending", [True, False])
def test_one_key_with_nulls(engine, data, ascending, na_position):
    assert_sorted_like_pandas(data, "x", ascending, na_position, npartitions=4)


@pytest.mark.parametrize("na_position", ["last", "first"])
def test_several_keys_mixed_directions_keep_ties_in_input_order(engine, data, na_position):
    assert_sorted_like_pandas(data, ["s", "k"], [False, True], na_position, npartitions=5)


def test_strings_and_many_output_partitions(engine, data):
    frame = sort_values(gpuframe.from_pandas(data, npartitions=3), ["s", "x"], npartitions=7)
    pd.testing.assert_frame_equal(frame.to_pandas().reset_index(drop=True),
                                  expected_order(data, ["s", "x"]))
    assert 2 <= frame.npartitions <= 7


def test_partition_i_orders_before_partition_i_plus_1(engine, data):
    frame = sort_values(gpuframe.from_pandas(data, npartitions=4), "k", npartitions=4)
    pieces = [p for p in (f.result() for f in frame.futures) if len(p)]
    assert len(pieces) >= 3
    for before, after in zip(pieces, pieces[1:]):
        assert before["k"].max() <= after["k"].min()


def test_a_key_that_holds_most_rows_spreads_over_partitions(engine):
    n = 4000
    data = pd.DataFrame({"k": np.where(np.arange(n) % 10 == 0, np.arange(n), 5),
                         "row": np.arange(n)})
    frame = assert_sorted_like_pandas(data, "k", npartitions=4)
    lengths = frame.partition_lengths()
    assert max(lengths) < 0.6 * n, lengths


def test_duplicate_keys_across_boundaries(engine):
    data = pd.DataFrame({"k": np.repeat([3, 1, 2], 500), "row": np.arange(1500)})
    assert_sorted_like_pandas(data, "k", npartitions=6)


def test_empty_partitions_and_a_frame_smaller_than_the_workers(engine):
    data = pd.DataFrame({"k": [2.0, np.nan, 1.0], "v": ["a", "b", "c"]})
    assert_sorted_like_pandas(data, "k", npartitions=3)
    assert_sorted_like_pandas(data.iloc[:1], "k", npartitions=2)
    empty = gpuframe.from_pandas(data.iloc[:0], npartitions=2)
    result = sort_values(empty, "k").to_pandas()
    assert len(result) == 0 and result.dtypes.to_dict() == data.dtypes.to_dict()


def test_datetimes_and_nullable_integers(engine):
    rng = np.random.default_rng(1)
    data = pd.DataFrame({
        "t": pd.to_datetime(rng.integers(0, 10**6, 500), unit="s"),
        "i": pd.array(rng.integers(0, 5, 500), dtype="Int64"),
    })
    data.loc[::7, "i"] = pd.NA
    assert_sorted_like_pandas(data, ["i", "t"], [True, False], "first")


def test_refuses_what_it_cannot_sort(engine, data):
    frame = gpuframe.from_pandas(data)
    with pytest.raises(UnknownColumnError, match="nope"):
        sort_values(frame, "nope")
    with pytest.raises(OptionError, match="ascending"):
        sort_values(frame, ["k", "x"], [True])
    with pytest.raises(OptionError, match="na_position"):
        sort_values(frame, "k", na_position="middle")
    with pytest.raises(ColumnTypeError, match="'c'"):
        sort_values(gpuframe.from_pandas(pd.DataFrame({"c": pd.Categorical(["a"])})), "c")


@pytest.mark.gpu
def test_sort_on_gpus(data):
    with gpuframe.start_cluster(backend="cudf") as engine:
        frame = sort_values(gpuframe.from_pandas(data, npartitions=4, engine=engine),
                            ["s", "x"], [True, False], "first")
        pd.testing.assert_frame_equal(frame.to_pandas().reset_index(drop=True),
                                      expected_order(data, ["s", "x"], [True, False], "first"),
                                      check_dtype=False)


def test_the_output_records_its_order_and_a_sort_it_serves_moves_nothing(engine, data):
    frame = sort_values(gpuframe.from_pandas(data, npartitions=3), ["k", "x"], [True, False])
    ordering = frame.partitions.ordering
    assert ordering is not None and ordering.keys == ("k", "x")
    again = sort_values(frame, "k")
    assert again.futures == frame.futures
    assert any(n.startswith("none") for n in again._execution.notes.values())
    first = expected_order(data, ["k", "x"], [True, False])
    pd.testing.assert_frame_equal(again.to_pandas().reset_index(drop=True),
                                  expected_order(first, "k"))
    other = sort_values(frame, "k", ascending=False)
    assert other.futures != frame.futures
    pd.testing.assert_frame_equal(other.to_pandas().reset_index(drop=True),
                                  expected_order(first, "k", ascending=False))


@pytest.mark.parametrize("na_position", ["last", "first"])
def test_boundaries_among_missing_keys(engine, na_position):
    """Most keys missing: some boundaries fall among them (ordered by position there)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=2000)
    x[rng.random(2000) < 0.8] = np.nan
    data = pd.DataFrame({"x": x, "s": pd.array(np.where(rng.random(2000) < 0.7, None, "v"),
                                               dtype="str"), "row": np.arange(2000)})
    assert_sorted_like_pandas(data, ["s", "x"], [False, True], na_position, npartitions=4)
    frame = sort_values(gpuframe.from_pandas(data, npartitions=3), "x",
                        na_position=na_position, npartitions=6)
    assert sum(1 for length in frame.partition_lengths() if length) >= 5
    pd.testing.assert_frame_equal(frame.to_pandas().reset_index(drop=True),
                                  expected_order(data, "x", na_position=na_position))


def test_bools_signed_zeros_infinities_and_zoned_times(engine):
    rng = np.random.default_rng(4)
    n = 600
    data = pd.DataFrame({
        "b": rng.random(n) < 0.5,
        "f": rng.choice([-0.0, 0.0, np.inf, -np.inf, 1.5, np.nan], n),
        "t": pd.to_datetime(rng.integers(0, 50, n), unit="D").tz_localize("Europe/Paris"),
        "row": np.arange(n),
    })
    assert_sorted_like_pandas(data, ["b", "f"], [False, True])
    assert_sorted_like_pandas(data, ["t", "f"], [False, False], "first")


def test_decimal_keys(engine):
    """Decimals are cut on a float proxy (distinct values a float ties stay together) and
    sorted exactly."""
    rng = np.random.default_rng(9)
    n = 800
    cents = rng.integers(-500, 500, n)
    cents[:200] = 10**17 + rng.integers(0, 3, 200)  # floats tie these, decimals do not
    values = [None if i % 13 == 0 else decimal.Decimal(int(c)) / 100 for i, c in
              enumerate(cents)]
    data = pd.DataFrame({
        "d": pd.array(values, dtype=pd.ArrowDtype(pa.decimal128(38, 2))),
        "s": pd.array(rng.choice(["b", "a"], n), dtype="str"),
        "row": np.arange(n),
    })
    assert_sorted_like_pandas(data, ["d", "s"], [False, True], npartitions=4)
    assert_sorted_like_pandas(data, ["s", "d"], [True, True], "first", npartitions=4)


@pytest.mark.parametrize("by, ascending, na_position", [
    ("x", True, "last"), (["s", "k"], [False, True], "first"), (["k", "x"], [True, False], "last"),
])
def test_small_sort_is_one_task_in_pandas_order(engine, monkeypatch, data, by, ascending,
                                                na_position):
    monkeypatch.setattr(sort_operator, "SMALL_BYTES", 32 * 2**20)
    frame = assert_sorted_like_pandas(data, by, ascending, na_position, npartitions=4).persist()
    assert frame.partition_lengths() == [len(data)]
    text = io.StringIO()
    frame.explain(file=text)
    assert "one task on" in text.getvalue()


def test_a_sort_above_the_small_bytes_takes_the_exchange(engine, monkeypatch, data):
    monkeypatch.setattr(sort_operator, "SMALL_BYTES", 1000)
    frame = assert_sorted_like_pandas(data, "x", npartitions=4)
    assert len(frame.partition_lengths()) >= 2


def test_one_input_partition_is_sorted_in_one_task_without_sampling(engine, data):
    """Kept on the workers (a persist), one task sorts it; fetched (to_pandas), it comes to the
    client as pandas, sorted there. Neither samples."""
    # SMALL_BYTES is -1 here (the fixture): only the one partition keeps it one task.
    expected = expected_order(data, ["s", "k"], [False, True], "first")
    for fetch in (False, True):
        frame = sort_values(gpuframe.from_pandas(data, npartitions=1), ["s", "k"],
                            [False, True], "first")
        with get_task_stream() as stream:
            result = frame.to_pandas() if fetch else frame.persist().to_pandas()
        pd.testing.assert_frame_equal(result.reset_index(drop=True), expected)
        stages = {key_split(task["key"]) for task in stream.data}
        assert "gpuframe-sample-sort" not in stages, stages
        assert ("gpuframe-sort" in stages) == (not fetch), stages
        assert ("gpuframe-host-sort" in stages) == fetch, stages
        text = io.StringIO()
        frame.explain(file=text)
        assert ("on the client: 1 partition fetched as pandas" in text.getvalue()) == fetch
        assert ("one input partition" in text.getvalue()) == (not fetch)


def test_a_small_sort_that_an_action_fetches_is_sorted_on_the_client(engine, monkeypatch,
                                                                      data):
    """Four partitions, under SMALL_BYTES by their samples: each comes to the client as pandas
    with its positions, and the client sorts them, ties in input order; no sort task."""
    monkeypatch.setattr(sort_operator, "SMALL_BYTES", 32 * 2**20)
    frame = sort_values(gpuframe.from_pandas(data, npartitions=4), ["k", "s"], [False, True],
                        "first")
    with get_task_stream() as stream:
        result = frame.to_pandas().reset_index(drop=True)
    pd.testing.assert_frame_equal(result, expected_order(data, ["k", "s"], [False, True],
                                                         "first"))
    stages = {key_split(task["key"]) for task in stream.data}
    assert "gpuframe-host-sort" in stages and "gpuframe-sort" not in stages, stages
    text = io.StringIO()
    frame.explain(file=text)
    assert "on the client: 4 partitions fetched as pandas, ordered" in text.getvalue()


@pytest.mark.parametrize("strategy", ["tree", "shuffle"])
def test_a_sort_of_an_aggregate_runs_in_its_last_task_where_it_makes_one_partition(
        engine, data, strategy):
    """A tree's one partition is sorted by the task that finishes it (no sort task); a
    shuffle's partitions are sorted as any others."""
    grouped = gpuframe.from_pandas(data, npartitions=3).groupby("k", strategy=strategy).agg(
        total=("x", "sum"), rows=("row", "size"))
    frame = sort_values(grouped[grouped["rows"] > 0], ["total", "k"], [False, True])
    with get_task_stream() as stream:
        result = frame.to_pandas()
    expected = data.groupby("k", as_index=False).agg(total=("x", "sum"), rows=("row", "size"))
    expected = expected.sort_values(["total", "k"], ascending=[False, True]).reset_index(
        drop=True)
    pd.testing.assert_frame_equal(result, expected, check_dtype=False)
    stages = {key_split(task["key"]) for task in stream.data}
    assert ("gpuframe-sort" in stages) == (strategy == "shuffle"), stages
    text = io.StringIO()
    frame.explain(file=text)
    assert ("where the aggregate finishes" in text.getvalue()) == (strategy == "tree")
