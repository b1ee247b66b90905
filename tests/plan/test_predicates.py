"""Filter predicates: cut at their top-level ``&``s and joined again, and turned into a reader's
filters only where the reader keeps exactly the same rows as pandas, and back again."""

import datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpuframe.plan.expr import col, evaluate_mask
from gpuframe.plan.predicates import (
    as_reader_filters,
    conjunction,
    conjuncts,
    from_reader_filters,
)


def test_conjuncts_cut_at_top_level_ands_and_join_again():
    parts = conjuncts((col("a") > 1) & (col("b") < 2) & (col("c") == 3))
    assert [p.text() for p in parts] == ["(a > 1)", "(b < 2)", "(c == 3)"]
    assert conjunction(parts).key() == ((col("a") > 1) & (col("b") < 2) & (col("c") == 3)).key()


DTYPES = {"a": np.dtype("int64"), "b": np.dtype("float64"), "s": pd.StringDtype("pyarrow"),
          "t": np.dtype("datetime64[ns]"), "z": pd.ArrowDtype(pa.timestamp("us", tz="UTC"))}


@pytest.mark.parametrize("expr, filters", [
    (col("a") > 5, [[("a", ">", 5)]]),
    (5 <= col("a"), [[("a", ">=", 5)]]),
    ((col("a") > 1) & (col("b") < 0.5), [[("a", ">", 1), ("b", "<", 0.5)]]),
    ((col("a") == 1) | (col("a") == 3), [[("a", "==", 1)], [("a", "==", 3)]]),
    (col("s").isin(["x", "y"]), [[("s", "in", ["x", "y"])]]),
    (col("b").between(0.1, 0.2), [[("b", ">=", 0.1), ("b", "<=", 0.2)]]),
    (col("b").between(0.1, 0.2, inclusive="left"), [[("b", ">=", 0.1), ("b", "<", 0.2)]]),
    (((col("a") == 1) | (col("a") == 2)) & (col("b") > 0),
     [[("a", "==", 1), ("b", ">", 0)], [("a", "==", 2), ("b", ">", 0)]]),
    (col("t") >= pd.Timestamp("2001-01-01"), [[("t", ">=", pd.Timestamp("2001-01-01"))]]),
    (col("t") < datetime.datetime(1995, 3, 15), [[("t", "<", datetime.datetime(1995, 3, 15))]]),
])
def test_conditions_readers_apply_exactly_become_filters(expr, filters):
    assert as_reader_filters(expr, DTYPES) == filters


@pytest.mark.parametrize("expr", [
    col("a") != 5,  # pandas keeps NaN rows, a reader drops null ones
    ~(col("a") > 5),
    col("a") > col("b"),
    col("a") + 1 > 5,
    col("s").str.startswith("x"),
    col("f").isna(),
    col("a") > "five",
    col("s") == 3,
    col("a").isin([1, None]),
    col("nope") == 1,
    col("z") > pd.Timestamp("2001-01-01"),
    col("z") > datetime.datetime(2001, 1, 1),
    col("t") > datetime.date(2001, 1, 1),  # pandas refuses to compare a date
    col("t") > datetime.datetime(2001, 1, 1, tzinfo=datetime.timezone.utc),
    (col("a") > 1) | (col("s").str.startswith("x")),
])
def test_other_conditions_stay_above_the_reader(expr):
    assert as_reader_filters(expr, DTYPES) is None


def test_pushed_filters_keep_exactly_the_rows_pandas_keeps(tmp_path, data):
    """The claim the pushdown rests on, checked against pyarrow's own filtered read."""
    data = data.assign(f=data.f, s=data.s.astype(object))
    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pandas(data, preserve_index=False), path)
    dtypes = dict(pd.read_parquet(path).dtypes)
    data = data.assign(t=data.t.astype("datetime64[us]"))
    for expr in [col("f") > 0.5, col("a").between(2, 8), col("s").isin(["apple", "cherry"]),
                 (col("f") <= 0.3) | (col("a") == 7), col("s") >= "b",
                 col("t") < datetime.datetime(1985, 6, 1, 12, 30, 0, 5),
                 col("t").between(datetime.datetime(1975, 1, 1), pd.Timestamp("1990-01-01"))]:
        filters = as_reader_filters(expr, dtypes)
        assert filters is not None, expr
        read = pq.read_table(path, filters=filters).to_pandas()
        frame = pd.read_parquet(path)
        expected = frame[evaluate_mask(expr, frame)].reset_index(drop=True)
        pd.testing.assert_frame_equal(read, expected)


def test_filters_a_reader_takes_become_again_a_condition_that_keeps_the_same_rows(data):
    dtypes = dict(data.dtypes)
    for expr in [col("b") > 0.5, col("a").between(2, 8), col("s").isin(["apple", "cherry"]),
                 (col("f") <= 0.3) | (col("a") == 7), (col("a") >= 3) & (col("f") < 0.5),
                 col("t") < pd.Timestamp("1990-01-01")]:
        filters = as_reader_filters(expr, dtypes)
        assert filters is not None, expr
        again = from_reader_filters(filters, data.head(0))
        assert again is not None, filters
        pd.testing.assert_series_equal(evaluate_mask(again, data), evaluate_mask(expr, data),
                                       check_names=False)


@pytest.mark.parametrize("filters", [
    [[("a", "!=", 5)]],  # a reader drops null rows that pandas' != keeps
    [[("a", "not in", [1, 2])]],
    [[("s", "in", ["x", None])]],
    [[("a", ">", None)]],
    [[("a", ">", "five")]],
    [[("nope", "==", 1)]],
    [[("a", "like", 1)]],
    [[("a", ">", 1)], []],
])
def test_filters_no_condition_keeps_the_same_rows_of_are_not_turned_back(filters, data):
    assert from_reader_filters(filters, data.head(0)) is None
