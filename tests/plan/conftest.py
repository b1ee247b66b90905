"""Fixtures of the plan tests: a frame that expressions are evaluated on, shared by the tests of
expressions and of the predicates pushed into readers."""

import numpy as np
import pandas as pd
import pytest


@pytest.fixture
def data():
    rng = np.random.default_rng(5)
    n = 200
    return pd.DataFrame({
        "a": rng.integers(-5, 20, n),
        "b": rng.random(n),
        "f": np.where(rng.random(n) < 0.2, np.nan, rng.random(n)),
        "s": pd.array(rng.choice(["apple", "banana", "cherry", None], n), dtype="str"),
        "t": pd.to_datetime(rng.integers(0, 10**9, n), unit="s"),
        "m": pd.array(rng.choice([1, 2, None], n), dtype="Int64"),
    })
