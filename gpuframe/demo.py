"""The demo job: write an orders/customers dataset as Parquet, read it onto the workers, join it,
aggregate revenue by segment, check it.

It runs on whatever engine it is given (GPUs or CPU) and checks its answer against pandas on the
same files, so ``gpuframe demo`` doubles as an end-to-end smoke test of a fresh install.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .cluster.engine import Engine
from .frame import merge
from .readers import read_parquet


@dataclass
class DemoResult:
    rows_in: int
    rows_out: int
    revenue_by_segment: pd.Series
    matches_pandas: bool
    seconds: dict[str, float] = field(default_factory=dict)
    partitions_per_worker: dict[str, int] = field(default_factory=dict)


def write_dataset(directory: Path, rows: int, files: int = 4, seed: int = 0) -> tuple[Path, Path]:
    """Orders (``rows`` rows over ``files`` Parquet files) and customers (rows // 10)."""
    rng = np.random.default_rng(seed)
    customers = max(1, rows // 10)
    orders_dir, customers_dir = directory / "orders", directory / "customers"
    orders_dir.mkdir(parents=True, exist_ok=True)
    customers_dir.mkdir(parents=True, exist_ok=True)
    orders = pd.DataFrame({
        "order_id": np.arange(rows, dtype="int64"),
        "customer_id": rng.integers(0, customers, rows, dtype="int64"),
        "amount": rng.random(rows).round(2) * 100,
    })
    for i, part in enumerate(np.array_split(np.arange(rows), files)):
        orders.iloc[part].to_parquet(orders_dir / f"part-{i}.parquet", index=False)
    pd.DataFrame({
        "customer_id": np.arange(customers, dtype="int64"),
        "segment": rng.choice(["retail", "wholesale", "online", "partner"], customers),
    }).to_parquet(customers_dir / "part-0.parquet", index=False)
    return orders_dir, customers_dir


def revenue_by_segment(joined: pd.DataFrame) -> pd.Series:
    """pandas' answer to the demo's aggregate, to check the engine's against."""
    return joined.groupby("segment")["amount"].sum().round(2).sort_index()


def run_demo(engine: Engine, rows: int = 1_000_000, directory: Path | None = None) -> DemoResult:
    """Run the demo job on ``engine`` and compare its answer with pandas."""
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="gpuframe-demo-") as scratch:
        root = Path(directory or scratch)
        start = time.perf_counter()
        orders_path, customers_path = write_dataset(root, rows)
        seconds["write parquet"] = time.perf_counter() - start

        start = time.perf_counter()
        orders = read_parquet(str(orders_path), engine=engine).persist()
        customers = read_parquet(str(customers_path), engine=engine).persist()
        seconds["ingest"] = time.perf_counter() - start

        start = time.perf_counter()
        joined = merge(orders, customers, on="customer_id").persist()
        seconds["join"] = time.perf_counter() - start

        start = time.perf_counter()
        totals = joined.groupby("segment").agg(amount=("amount", "sum")).to_pandas()
        revenue = totals.set_index("segment")["amount"].sort_index().round(2)
        seconds["aggregate"] = time.perf_counter() - start

        start = time.perf_counter()
        result = joined.to_pandas()
        seconds["gather"] = time.perf_counter() - start

        expected = pd.read_parquet(orders_path).merge(pd.read_parquet(customers_path),
                                                      on="customer_id")
    expected_revenue = revenue_by_segment(expected)
    matches = (same_rows(result, expected)
               and [str(s) for s in revenue.index] == list(expected_revenue.index)
               and np.allclose(revenue.to_numpy(), expected_revenue.to_numpy()))
    return DemoResult(rows, len(result), revenue, matches, seconds, dict(Counter(joined.owners)))


def same_rows(result: pd.DataFrame, expected: pd.DataFrame) -> bool:
    """Whether two joins hold the same rows, whatever their order and column types' backend."""
    def canonical(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame[sorted(frame.columns)].sort_values("order_id").reset_index(drop=True)
        return frame.astype({"segment": str})

    try:
        pd.testing.assert_frame_equal(canonical(result), canonical(expected))
    except AssertionError:
        return False
    return True

