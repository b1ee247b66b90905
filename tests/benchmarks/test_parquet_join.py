"""benchmarks/parquet_join.py: its keys are what it says, and a small run's engines (gpuframe
with both exchanges, dask.dataframe) all give the answer pandas gives on the same files."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import parquet_join  # noqa: E402


def test_string_keys_are_twelve_characters_and_stay_distinct():
    (keys,) = parquet_join.key_columns("string", np.array([0, 7, 12345678901])).values()
    assert keys.to_pylist() == ["k00000000000", "k00000000007", "k12345678901"]
    two = parquet_join.key_columns("two", np.arange(20))
    pairs = set(zip(two["k"].to_pylist(), two["j"].to_pylist()))
    assert len(pairs) == 20 and str(two["j"].type) == "int32"


def test_a_small_run_checks_every_engine_against_pandas(tmp_path, capsys):
    code = parquet_join.main(["--rows", "20000", "--files", "3", "--repeat", "0",
                              "--workers", "2", "--backend", "pandas", "--dir", str(tmp_path),
                              "--keys", "int64,string,two", "--baselines", "dask",
                              "--stages"])
    assert code == 0
    out = capsys.readouterr().out
    # each key type's stage profile places its stages in the query: read before join
    assert out.count("Stages of one more gpuframe query") == len(parquet_join.KEYS)
    for profile in out.split("Stages of one more gpuframe query")[1:]:
        rows = {line.split(" | ")[0].strip("| "): line.split(" | ")
                for line in profile.splitlines() if line.startswith("| ")}
        assert float(rows["read"][2]) <= float(rows["join"][2]) <= float(rows["join"][3])
    for kind, keys in parquet_join.KEYS.items():
        where = tmp_path / f"{kind}-20000-3"
        left = pd.read_parquet(where / "left")
        right = pd.read_parquet(where / "right")
        expected = left.merge(right, on=keys)
        assert 0.4 < len(expected) / 20_000 < 0.6  # about half the right's keys match
        for engine in ("gpuframe (direct exchange)", "gpuframe (tasks exchange)",
                       "dask.dataframe"):
            assert f"| {kind} | {engine} |" in out
            line = next(x for x in out.splitlines() if x.startswith(f"| {kind} | {engine} |"))
            assert line.endswith(f"| {len(expected):,} |")


def test_answers_differing_in_a_sum_are_not_the_same():
    answer = pd.DataFrame({"rows": [10], "a": [1.5], "b": [2.0]})
    assert parquet_join.same_answer(answer.copy(), answer)
    assert not parquet_join.same_answer(answer.assign(b=2.0001), answer)
    assert not parquet_join.same_answer(answer.assign(rows=11), answer)
