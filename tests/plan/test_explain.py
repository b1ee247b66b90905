"""``explain()``: the optimized plan with estimates before a run, and what each operator really
did after it."""

import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpuframe
from gpuframe.plan.explain import selectivity
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
    assert "est. 6,667 rows" in scan  # 20,000 rows, a third kept by a range condition
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
    # Decided from the sample on the client, or, once an earlier sample told the engine the
    # workers' memory, weighed on a worker as the side is copied.
    assert "broadcast right side (" in decided and "sample" in decided
    assert "unsampled" not in decided


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


def test_selectivity_of_conditions():
    assert selectivity(col("a") == 1) == pytest.approx(0.1)
    assert selectivity((col("a") > 1) & (col("b") < 2)) == pytest.approx(1 / 9)
    assert selectivity(~(col("a") == 1)) == pytest.approx(0.9)
    assert selectivity((col("a") == 1) | (col("b") == 2)) == pytest.approx(0.19)
