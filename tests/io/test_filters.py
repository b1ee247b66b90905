"""``filters=`` checked against a dataset's schema: each bad term named."""

from __future__ import annotations

import pytest
from filter_cases import FILTER_CASES, parsed, table_with_nulls

from gpuframe.io.errors import (
    FilterError,
)
from gpuframe.io.planning.plan import (
    plan_fragments,
)

WORKERS = ["tcp://w0", "tcp://w1"]
FIXED = {"requests_in_flight": 4}


@pytest.mark.parametrize("filters, message", [
    ([("id", "~", 1)], r"\('id', '~', 1\): unknown operator '~'"),
    ([("nope", "==", 1)], r"names column 'nope', which is not in"),
    ([("id", ">", "abc")], r"value 'abc' does not fit column 'id' of type int64"),
    ([("name", "==", 3)], r"value 3 does not fit column 'name' of type string"),
    ([("id", "in", 5)], r"'in' needs a list"),
    ([("id", "==")], r"\('id', '=='\) is not a \(column, op, value\) tuple"),
    ("id > 5", r"must be a non-empty list"),
    ([], r"must be a non-empty list"),
    ([[("id", "==", 1)], []], r"is not a non-empty list"),
])
def test_bad_filters_name_the_term(dataset_dir, filters, message):
    with pytest.raises(FilterError, match=message):
        plan_fragments(str(dataset_dir / "flat"), filters=filters)


@pytest.mark.parametrize("op, value, kept", [
    ("<", 2**70, "all"), (">", 2**70, "none"), ("==", -2**70, "none"), (">", -2**70, "all"),
    ("in", (2**70, 1), "one"),
])
def test_integers_beyond_every_arrow_integer_compare_as_pandas(engine, tmp_path, op, value,
                                                                kept):
    """A filter value no Arrow integer holds (2**70) still compares with every int64 row."""
    import pandas as pd

    import gpuframe

    data = pd.DataFrame({"id": [1, 2, -(2**62), 2**62]})
    data.to_parquet(tmp_path / "ints.parquet")
    got = gpuframe.read_parquet(str(tmp_path / "ints.parquet"),
                                filters=[("id", op, value)]).to_pandas()
    expected = {"all": 4, "none": 0, "one": 1}[kept]
    assert len(got) == expected


def test_a_column_of_nulls_in_the_first_file_takes_the_others_type(engine, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    import gpuframe

    pq.write_table(pa.table({"id": [1, 2], "s": pa.array([None, None], pa.null())}),
                   tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": [3, 4], "s": ["x", "y"]}), tmp_path / "b.parquet")
    frame = gpuframe.read_parquet(str(tmp_path), filters=[("id", ">=", 2)])
    got = frame.to_pandas().sort_values("id").reset_index(drop=True)
    assert got["id"].tolist() == [2, 3, 4]
    assert got["s"].isna().tolist() == [True, False, False]
    assert got["s"][1:].tolist() == ["x", "y"]
    assert frame.dtypes["s"] == got["s"].dtype and got["s"].dtype != object


@pytest.mark.parametrize("filters", FILTER_CASES, ids=[str(f) for f in FILTER_CASES])
def test_rows_kept_on_a_frame_are_those_pyarrow_keeps(filters):
    """The cuDF reader filters its frame where it lives with rows_kept; pandas frames share the
    Series API, so the null rules are checked here against pyarrow's, on every operator."""
    import pandas as pd
    import pyarrow.parquet as pq

    from gpuframe.io.filters import rows_kept

    table = table_with_nulls()
    dnf = parsed(filters, table.schema)
    expected = table.filter(pq.filters_to_expression(dnf)).to_pandas(
        types_mapper=pd.ArrowDtype)
    frame = table.to_pandas(types_mapper=pd.ArrowDtype)
    got = frame[rows_kept(frame, dnf)].reset_index(drop=True)
    assert 0 < len(got) < len(frame)
    pd.testing.assert_frame_equal(got, expected)
    plain = table.to_pandas()  # numpy dtypes: nulls are NaN, NaT and None
    assert len(plain[rows_kept(plain, dnf)]) == len(expected)


@pytest.mark.gpu
@pytest.mark.parametrize("filters", FILTER_CASES, ids=[str(f) for f in FILTER_CASES])
def test_rows_kept_on_a_cudf_frame_are_those_pyarrow_keeps(filters):
    """cuDF reads a Parquet date as a timestamp: the date terms compare as midnight."""
    import cudf
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpuframe.io.filters import rows_kept

    table = table_with_nulls()
    dnf = parsed(filters, table.schema)
    expected = table.filter(pq.filters_to_expression(dnf))
    frame = cudf.DataFrame.from_arrow(table.set_column(3, "d", table["d"].cast(pa.timestamp("s"))))
    got = frame[rows_kept(frame, dnf)].reset_index(drop=True).to_arrow()
    assert got.drop_columns("d").to_pylist() == expected.drop_columns("d").to_pylist()
    assert got["d"].cast(pa.date32()).to_pylist() == expected["d"].to_pylist()
