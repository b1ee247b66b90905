"""``explain()``: the optimized plan with estimates before a run, and what each operator really
did after it."""

import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpuframe
from gpuframe.plan.explain import placeable_names, selectivity
from gpuframe.plan.expr import col


def explained(frame) -> str:
    out = io.StringIO()
    frame.explain(file=out)
    return out.getvalue()


@pytest.fixture
def orders_path(tmp_path):
    rng = np.random.default_rng(4)
    table = pa.table({"k": rng.integers(0, 100, 20_000), "amount": rng.random(20_000) * 50,
                      "note": rng.choice(["a", "b"], 20_000)})
    path = tmp_path / "orders.parquet"
    pq.write_table(table, path, row_group_size=2_000)
    return path, table.to_pandas()


def test_explain_shows_pushdown_estimates_and_the_predicted_strategy(engine, orders_path):
    path, orders = orders_path
    customers = pd.DataFrame({"k": np.arange(100), "segment": np.arange(100) % 4})
    joined = gpuframe.read_parquet(str(path)).merge(gpuframe.from_pandas(customers), on="k")
    query = joined[joined.amount > 40][["k", "segment"]]
    text = explained(query)
    lines = text.splitlines()
    assert lines[0].startswith("#0 Join how=inner on [k]")
    assert "strategy: broadcast right side (unsampled) (predicted)" in lines[0]
    scan = next(line for line in lines if "Scan parquet" in line)
    assert "columns=[k]" in scan and "filters=[[('amount', '>', 40" in scan
    # 20,000 rows, amounts spread over [0, 50) as the row groups' statistics say: a fifth kept
    assert "est. 4,000 rows" in scan
    assert "actual" not in text


def test_a_side_beyond_broadcast_rows_is_predicted_from_estimates(engine, orders_path):
    path, _ = orders_path
    customers = pd.DataFrame({"k": np.arange(100), "segment": np.arange(100) % 4})
    joined = gpuframe.read_parquet(str(path)).merge(gpuframe.from_pandas(customers), on="k",
                                                     broadcast_rows=99)
    top = explained(joined).splitlines()[0]
    assert "strategy: broadcast right side (predicted)" in top
    ran = joined.persist()
    decided = explained(ran).splitlines()[0]
    # Past broadcast_rows, the plan's bound copies nothing; its estimate, well under
    # broadcast_bytes, copies the side without a sample.
    assert "broadcast right side (estimated at" in decided and "unsampled" in decided
    assert "at most" not in decided


def test_explain_after_a_run_gives_actual_rows_bytes_and_the_strategy(engine, orders_path):
    path, orders = orders_path
    customers = pd.DataFrame({"k": np.arange(100), "segment": np.arange(100) % 4})
    joined = gpuframe.read_parquet(str(path)).merge(gpuframe.from_pandas(customers), on="k",
                                                     broadcast_bytes=0)
    query = joined[joined.amount > 40]
    rows = len(query)
    assert rows == int((orders.amount > 40).sum())
    text = explained(query)
    top = text.splitlines()[0]
    assert f"actual {rows:,} rows" in top
    assert "shuffle: 2 workers x 1 join tasks" in top
    scan = next(line for line in text.splitlines() if "Scan parquet" in line)
    assert f"actual {rows:,} rows" in scan
    assert "fragments in" in scan


@pytest.fixture
def dated(tmp_path):
    days = pd.date_range("1992-01-01", "1998-12-31", freq="D")
    table = pa.table({"day": np.repeat(days.values.astype("datetime64[ms]"), 10),
                      "code": np.repeat([f"c{i % 50:02d}" for i in range(len(days))], 10),
                      "v": np.arange(len(days) * 10), "seven": np.full(len(days) * 10, 7)})
    path, bare = tmp_path / "dated.parquet", tmp_path / "bare.parquet"
    pq.write_table(table, path, row_group_size=5_000)
    pq.write_table(table, bare, row_group_size=5_000, write_statistics=False)
    return path, bare, table.to_pandas()


def estimated_rows(frame) -> int:
    scan = next(line for line in explained(frame).splitlines() if "Scan parquet" in line)
    return int(scan.split("est. ")[1].split(" rows")[0].replace(",", ""))


def test_range_filters_keep_their_share_of_the_column_s_range(engine, dated):
    path, bare, rows = dated
    frame = gpuframe.read_parquet(str(path))
    month = frame[(frame.day >= pd.Timestamp("1995-09-01"))
                  & (frame.day < pd.Timestamp("1995-10-01"))]
    kept = int(((rows.day >= "1995-09-01") & (rows.day < "1995-10-01")).sum())
    assert abs(estimated_rows(month) - kept) <= 0.02 * kept  # one month of seven years
    assert abs(estimated_rows(frame[frame.v < 2_557]) - 2_557) <= 2  # a tenth of [0, 25,570)
    either = frame[(frame.v < 2_557) | (frame.v >= 23_013)]
    assert abs(estimated_rows(either) - 2 * 2_557) <= 4
    assert estimated_rows(frame[frame.v > 10**9]) == 0
    assert estimated_rows(frame[frame.seven < 7]) == 0  # one value: all of it or none
    assert estimated_rows(frame[(frame.seven <= 7) & (frame.seven > 6)]) == len(rows)
    # what has no distance between values, or no statistics, keeps the fixed third
    assert estimated_rows(frame[frame.code > "c24"]) == len(rows) // 3
    unknown = gpuframe.read_parquet(str(bare))
    assert estimated_rows(unknown[unknown.v < 2_557]) == len(rows) // 3
    month = unknown[(unknown.day >= pd.Timestamp("1995-09-01"))
                    & (unknown.day < pd.Timestamp("1995-10-01"))]
    assert estimated_rows(month) == round(len(rows) / 9)


def test_selectivity_of_conditions():
    assert selectivity(col("a") == 1) == pytest.approx(0.1)
    assert selectivity((col("a") > 1) & (col("b") < 2)) == pytest.approx(1 / 9)
    assert selectivity(~(col("a") == 1)) == pytest.approx(0.9)
    assert selectivity((col("a") == 1) | (col("b") == 2)) == pytest.approx(0.19)


def test_a_join_under_a_filtered_dimension_is_estimated_at_its_share(engine, orders_path,
                                                                     tmp_path):
    """An inner join keeps of the larger table's rows the share the other side (its
    dimension) kept of its own: orders joined with a tenth of the customers are estimated at a
    tenth of the orders, and a join of that result with a third table at that share again, so
    that a chain under filtered dimensions is not estimated as large as its fact table."""
    path, _ = orders_path
    customers = pa.table({"k": np.arange(100), "segment": np.arange(100) % 10})
    pq.write_table(customers, tmp_path / "customers.parquet")
    notes = pa.table({"k": np.arange(20_000) % 100, "n": np.arange(20_000)})
    pq.write_table(notes, tmp_path / "notes.parquet")
    read = {name: gpuframe.read_parquet(str(tmp_path / f"{name}.parquet"))
            for name in ("customers", "notes")}
    some = read["customers"][read["customers"].segment == 3]  # estimated at a tenth: 10 rows
    chain = gpuframe.read_parquet(str(path)).merge(some, on="k")
    lines = explained(chain).splitlines()
    assert lines[0].startswith("#0 Join how=inner") and "est. 2,000 rows" in lines[0]
    # a third table of 20,000 rows: the chain kept 2,000 of the orders' 20,000
    again = explained(read["notes"].merge(chain, on="k")).splitlines()[0]
    assert "est. 2,000 rows" in again
    unfiltered = explained(gpuframe.read_parquet(str(path)).merge(read["customers"], on="k"))
    assert "est. 20,000 rows" in unfiltered.splitlines()[0]
    # a semi join keeps its left rows alone: half the customers, of the customers' whole, so
    # the orders joined with them are estimated at half the orders
    half = read["customers"].merge(read["notes"], on="k", how="leftsemi")
    assert "est. 10,000 rows" in explained(
        gpuframe.read_parquet(str(path)).merge(half, on="k")).splitlines()[0]


def test_placeable_names_are_the_keys_carried_up(engine):
    """A join's keys, a groupby's, and those carried up through renames and selections and
    the sides of joins; none for a read; not known past a function."""
    facts = gpuframe.from_pandas(pd.DataFrame({"k": [1, 2], "n": [1, 1], "x": [0.5, 1.5]}))
    dims = gpuframe.from_pandas(pd.DataFrame({"k": [1, 2], "m": [3, 4]}))
    joined = facts.merge(dims, on="k")
    assert placeable_names(facts.plan) == frozenset()
    assert placeable_names(joined.plan) == {"k"}
    assert placeable_names(joined.rename(columns={"k": "key"}).plan) == {"key"}
    assert placeable_names(joined[["n", "x"]].plan) == frozenset()
    sums = facts.groupby("n").agg(total=("x", "sum"))
    assert placeable_names(sums.plan) == {"n"}
    assert placeable_names(joined.merge(sums, on="n").plan) == {"k", "n"}
    assert placeable_names(joined.merge(dims, left_on="x", right_on="m").plan) == \
        {"k_x", "x", "m_y"}
    assert placeable_names(joined.map_partitions(lambda part: part).plan) is None
