"""The timeline tool's own logic: a stage's submits counted as one event, and a real query's
timeline on a CPU cluster, its tasks named by their stages."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from tpch import timeline  # noqa: E402
from tpch.datagen import generate  # noqa: E402
from tpch.run import read_gpuframe, run_query  # noqa: E402


def test_a_stage_s_submits_are_one_event():
    events = [(0.0, 1.0, "client", "submit read"), (1.0, 2.0, "client", "submit read"),
              (1.5, 3.0, "w0", "compute read"), (2.0, 2.5, "client", "submit join"),
              (3.0, 4.0, "client", "submit read")]
    assert timeline.merged(events) == [
        (0.0, 2.0, "client", "submit read x2"), (1.5, 3.0, "w0", "compute read"),
        (2.0, 2.5, "client", "submit join"), (3.0, 4.0, "client", "submit read")]


def test_a_query_s_timeline_shows_the_client_and_the_workers(engine, tmp_path, monkeypatch):
    root = generate(tmp_path, 0.01)
    query = partial(run_query, 6, partial(read_gpuframe, root))
    query()
    stage = timeline.runner.Stage
    monkeypatch.setattr(stage, "submit", stage.submit)  # put back after the test
    timeline.record(stage, "submit", lambda stage, a: f"submit {stage.name}")
    wall, events, busy = timeline.timeline(engine.client, query)
    kinds = {(where == "client", what) for _, _, where, what in events}
    assert (True, "submit read-parquet x2") in kinds and (False, "compute read-parquet") in kinds
    assert 0 < sum(busy.values()) and all(0 <= start <= stop <= wall + 1
                                          for start, stop, _, _ in events)
