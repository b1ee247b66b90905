"""benchmarks/cold_start.py: every variant starts its cluster in a fresh process and the table
holds each one's figures, Dask's own cluster included (the variant that broke unseen when the
cluster's start-up took a scheduler protocol)."""

from __future__ import annotations

import json
import subprocess
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
    for variant in ("warm-up", "warmed", "none"):
        start, first, warm = (float(cell.rstrip(" |")) for cell in rows[variant][1:4])
        assert start > 0 and first > 0 and warm > 0, rows[variant]
    assert "2 workers, backend pandas" in out
    assert out.count("first query:") == 3 and out.count("warm query:") == 3
    # the variant that waits for the warm-up says what each of its parts took on each worker
    assert out.count("- warmed's warm-up on ") == 2 and "exchange" in out


def test_each_variant_gets_an_empty_kernel_cache_of_its_own(tmp_path, monkeypatch, capsys):
    """As on a machine's first run, whatever ran before; --shared-kernel-cache keeps the
    user's."""
    seen: list[str | None] = []

    def run(command, env, **_):
        cache = env.get("CUPY_CACHE_DIR")
        seen.append(cache)
        assert cache is None or not any(Path(cache).iterdir())
        if cache is not None:
            (Path(cache) / "kernel.cubin").write_bytes(b"")  # what a variant's compiles leave
        figures = {"start": 1.0} if "dask" in command else \
            {"start": 1.0, "first": 0.5, "warm": 0.25, "protocol": "tcp", "backend": "pandas",
             "workers": 1, "stages": {}, "hot": []}
        return subprocess.CompletedProcess(command, 0, json.dumps(figures) + "\n", "")

    monkeypatch.delenv("CUPY_CACHE_DIR", raising=False)
    monkeypatch.setattr(cold_start.subprocess, "run", run)
    arguments = ["--rows", "100", "--files", "1", "--dir", str(tmp_path)]
    assert cold_start.main(arguments) == 0
    assert len(seen) == 4 and len(set(seen)) == 4 and None not in seen
    seen.clear()
    assert cold_start.main(arguments + ["--shared-kernel-cache"]) == 0
    assert seen == [None, None, None, None]
    capsys.readouterr()
