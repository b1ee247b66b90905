"""benchmarks/cold_start.py: every variant starts its cluster in a fresh process and the table
holds each one's figures, Dask's own cluster included (the variant that broke unseen when the
cluster's start-up took a scheduler protocol)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import cold_start  # noqa: E402


def test_a_small_run_times_every_variant(tmp_path, capsys):
    code = cold_start.main(["--rows", "20000", "--files", "2", "--repeat", "1", "--workers", "2",
                            "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")
            for line in out.splitlines() if line.startswith("| ")}
    assert float(rows["dask (cluster alone)"][1]) > 0
    for variant in ("warm-up", "none"):
        start, first, warm = (float(cell.rstrip(" |")) for cell in rows[variant][1:4])
        assert start > 0 and first > 0 and warm > 0, rows[variant]
    assert "2 workers, backend pandas" in out
    assert out.count("first query:") == 2 and out.count("warm query:") == 2
