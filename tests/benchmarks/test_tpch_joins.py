"""benchmarks/tpch_joins.py at SF 0.01: every engine's row count equals pandas' merge of the same
Parquet tables, for each of the four joins."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import tpch_joins  # noqa: E402
from tpch.datagen import generate  # noqa: E402


def expected_rows(root: Path, name: str) -> int:
    tables = {t: pd.read_parquet(root / t) for t in ("lineitem", "orders", "customer",
                                                     "partsupp")}
    result = tables[tpch_joins.FIRST[name]]
    for table, left_on, right_on, how in tpch_joins.JOINS[name]:
        result = result.merge(tables[table], left_on=left_on, right_on=right_on, how=how)
    return len(result)


def test_every_engine_counts_the_rows_pandas_gives(tmp_path, capsys):
    assert tpch_joins.main(["--sf", "0.01", "--dir", str(tmp_path), "--workers", "2",
                            "--backend", "pandas", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    root = generate(tmp_path, 0.01)
    for name in tpch_joins.JOINS:
        rows = expected_rows(root, name)
        lines = [x for x in out.splitlines() if x.startswith(f"| {name} | ")]
        engines = [x for x in lines if x.count("|") == 5]
        assert len(engines) == 5, lines  # two exchanges, defaults, dask tasks and p2p
        assert all(x.endswith(f"| {rows:,} |") for x in engines), (rows, engines)
    assert "| geometric mean |" in out
