"""``filters=`` checked against a dataset's schema: each bad term named."""

from __future__ import annotations

import pytest

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
