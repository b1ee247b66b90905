"""benchmarks/exchange_latency.py: a small run times every piece against its raw copy, and its
sealed piece is what the exchange sends."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import exchange_latency  # noqa: E402

from gpuframe.exchange.pack import Parcel  # noqa: E402


def test_the_sealed_piece_is_one_parcel_of_every_row():
    piece = exchange_latency.make(1000, 8, on_device=False, sealed=True)
    assert isinstance(piece, Parcel) and len(piece) == 1000
    assert list(piece.open().columns) == [f"c{i}" for i in range(8)]


def test_a_small_run_times_the_floor_and_each_piece_against_the_raw_copy(capsys):
    exchange_latency.main(["--rows", "1000,20000", "--repeat", "2", "--loads", "idle"])
    out = capsys.readouterr().out.splitlines()
    floors = {line.split(" | ")[0].strip("| "): float(line.split(" | ")[1].strip("| "))
              for line in out if line.startswith(("| hand-off", "| Dask's", "| a delivery"))}
    assert len(floors) == 3 and all(ms > 0 for ms in floors.values())
    rows = [line.split(" | ") for line in out if line.startswith("| idle")]
    assert [(row[1], row[2]) for row in rows] == [
        (rows_, piece) for rows_ in ("1,000", "20,000")
        for piece in ("2 columns", "8 columns", "8 columns, sealed")]
    for row in rows:
        assert float(row[3]) > 0 and float(row[4]) > 0 and float(row[6].strip("| ")) > 0


def test_an_unknown_load_is_refused_naming_it():
    with pytest.raises(SystemExit):
        exchange_latency.main(["--loads", "idle,busy"])
