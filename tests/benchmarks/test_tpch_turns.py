"""benchmarks/tpch/turns.py: settings take turns on one cluster, each variable set for its own
turns only, every answer checked against the first setting's."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from tpch import turns  # noqa: E402


def test_settings_take_turns_and_are_compared_per_query(tmp_path, capsys, monkeypatch):
    seen: list[str | None] = []
    run_query = turns.run_query

    def recording(number, read):
        seen.append(os.environ.get("GPUFRAME_CLIENT_ROWS"))
        return run_query(number, read)

    monkeypatch.setattr(turns, "run_query", recording)
    monkeypatch.delenv("GPUFRAME_CLIENT_ROWS", raising=False)
    code = turns.main(["--sf", "0.01", "--dir", str(tmp_path), "--queries", "1,6",
                       "--rounds", "2", "--workers", "2", "--backend", "pandas",
                       "-", "GPUFRAME_CLIENT_ROWS=0"])
    out = capsys.readouterr().out
    assert code == 0, out
    # warm-up, then rounds in turns, the order reversed every other round
    assert seen == [None, None, "0", "0"] + ["0", "0", None, None] + [None, None, "0", "0"]
    assert "GPUFRAME_CLIENT_ROWS" not in os.environ
    rows = [line for line in out.splitlines() if line.startswith("| q") and "query" not in line]
    assert [row.split(" | ")[0] for row in rows] == ["| q1", "| q6"]
    assert all(row.endswith("x |") for row in rows)
    assert "WRONG" not in out


def test_settings_take_turns_on_a_cluster_already_up(tmp_path, capsys):
    """--scheduler connects to it (its workers as they are) and leaves it up."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None,
                      host="127.0.0.1") as cluster:
        code = turns.main(["--sf", "0.01", "--dir", str(tmp_path), "--queries", "6",
                           "--rounds", "1", "--scheduler", cluster.scheduler_address,
                           "-", "GPUFRAME_CLIENT_ROWS=0"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert "workers=2" in out and "WRONG" not in out
        with Client(cluster) as client:  # still up once the run is over
            assert len(client.scheduler_info()["workers"]) == 2


def test_a_setting_must_be_name_value_pairs():
    assert turns.parse_setting("A=1,B=x") == {"A": "1", "B": "x"}
    assert turns.parse_setting("-") == {}
    with pytest.raises(SystemExit, match="NAME=VALUE"):
        turns.parse_setting("A1")
