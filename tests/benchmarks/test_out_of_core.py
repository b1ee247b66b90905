"""benchmarks/out_of_core.py: its data has the join's answer it claims, and a small run checks
both clusters' answers against it."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import out_of_core  # noqa: E402


def test_each_left_key_is_on_the_right_twice_and_the_sum_is_the_lefts(tmp_path):
    where, total = out_of_core.generate(tmp_path, 5000, 3)
    left, right = pd.read_parquet(where / "left"), pd.read_parquet(where / "right")
    assert left.k.is_unique and len(left) == 5000
    assert (right.k.value_counts() == 2).all() and set(right.k) == set(left.k)
    joined = left.merge(right, on="k")
    assert len(joined) == 10_000
    assert abs(joined.a.sum() - 2 * total) < 1e-6
    assert out_of_core.generate(tmp_path, 5000, 3) == (where, total)  # made once


def test_a_small_run_gives_the_expected_rows_on_both_clusters(tmp_path, capsys):
    code = out_of_core.main(["--rows", "20000", "--files", "2", "--limit", "1GiB",
                             "--backend", "pandas", "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    for cluster in ("limited", "unlimited"):
        assert any(line.startswith(f"| {cluster} |") and "| 40,000 | yes |" in line
                   for line in out.splitlines()), out
    assert "limited against unlimited:" in out
