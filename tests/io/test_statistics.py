"""Row groups pruned by their statistics, against pyarrow filtering the rows they hold; the
value ranges the plan's estimates take from the same statistics."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpuframe.io.planning.plan import (
    plan_fragments,
)
from gpuframe.io.statistics import value_range

WORKERS = ["tcp://w0", "tcp://w1"]
FIXED = {"requests_in_flight": 4}


@pytest.mark.parametrize("filters, kept", [
    ([("id", "<", 1500)], 2),
    ([("id", "<=", 999)], 1),
    ([("id", ">", 6999)], 1),
    ([("id", ">=", 7000)], 1),
    ([("id", "=", 4500)], 1),
    ([("id", "==", -1)], 0),
    ([("id", "!=", 5)], 8),
    ([("id", "in", [10, 5000, 10**9])], 2),
    ([("id", "not in", [1, 2])], 8),
    ([[("id", "<", 500)], [("id", ">=", 7500)]], 2),
    ([("id", ">", 1500), ("id", "<", 2500)], 2),
    ([("x", ">", 1999.0)], 5),
    ([("name", "==", "name-3")], 8),
    ([("name", ">", "zzz")], 0),
])
def test_statistics_prune_row_groups(dataset_dir, filters, kept):
    plan = plan_fragments(str(dataset_dir / "flat"), filters=filters, partition_bytes=1,
                          storage=FIXED)
    assert (plan.units_total, plan.units_kept) == (8, kept)
    expression = pq.filters_to_expression(filters)
    kept_groups = {(f.path, g) for f in plan.fragments for g in f.units}
    for path in plan.files:
        parquet = pq.ParquetFile(path)
        for g in range(parquet.num_row_groups):
            if (path, g) not in kept_groups:
                rows = parquet.read_row_group(g).filter(expression).num_rows
                assert rows == 0, f"row group {g} of {path} was pruned but has {rows} matches"


def test_missing_statistics_keep_row_groups(tmp_path, sample_table):
    path = tmp_path / "nostats.parquet"
    pq.write_table(sample_table(0, 3000), path, row_group_size=1000, write_statistics=False)
    plan = plan_fragments(str(path), filters=[("id", "<", 10)], storage=FIXED)
    assert (plan.units_total, plan.units_kept) == (3, 3)
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"v": pa.array([None] * 10, pa.int64())}), nulls)
    plan = plan_fragments(str(nulls), filters=[("v", "!=", 1)], storage=FIXED)
    assert plan.units_kept == 0


def test_a_value_range_spans_its_units_and_knows_nothing_past_a_silent_one():
    assert value_range([(3, 9, 0), (-2, 4, None), (5, 5, 1)]) == (-2, 9)
    assert value_range([(3, 9, 0), None]) is None  # a unit without statistics
    assert value_range([(3, 9, 0), (None, None, 7)]) is None  # one without min and max
    assert value_range([(3, 9, 0), ("a", "b", 0)]) is None  # values that do not order
    assert value_range([]) is None
