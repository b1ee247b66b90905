"""Fixtures of the diagnostics tests: a real headless Chromium (Debian's ``chromium``), where
screenshots go, and a shuffle join of known data run once on the session's CPU cluster."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from chromium import Chromium, find_chromium

ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"


@pytest.fixture(scope="session")
def chromium():
    binary = find_chromium()
    if binary is None:
        pytest.skip("no chromium binary on PATH (Debian: apt-get install chromium; "
                    ".ci/run installs it)")
    browser = Chromium(binary)
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def orders_and_customers(rows: int = 200_000, customers: int = 5_000):
    rng = np.random.default_rng(6)
    orders = pd.DataFrame({"customer_id": rng.integers(0, customers, rows),
                           "amount": rng.random(rows)})
    people = pd.DataFrame({"customer_id": np.arange(customers),
                           "segment": rng.integers(0, 5, customers)})
    return orders, people


@pytest.fixture(scope="session")
def shuffle_join(cpu_engine):
    """A hash-shuffle join (broadcast off) inside gpuframe.report, with its metrics."""
    import gpuframe
    from gpuframe.cluster.engine import set_current

    set_current(cpu_engine)
    orders, people = orders_and_customers()
    path = ARTIFACTS / "join-report.html"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with gpuframe.report(path, mode="inline") as block:
        left = gpuframe.from_pandas(orders)
        right = gpuframe.from_pandas(people)
        result = left.merge(right, on="customer_id", broadcast_bytes=0).to_pandas()
    return {"report": block, "path": path, "result": result, "orders": orders,
            "people": people}
