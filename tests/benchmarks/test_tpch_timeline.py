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


def test_a_task_is_marked_with_the_plan_node_it_makes_and_the_plan_names_it(engine, tmp_path,
                                                                           monkeypatch):
    """q3 ends in head(10): the frame explained is the one whose action ran, and each read
    task's node number is a node of that plan over a read."""
    import io
    import re

    root = generate(tmp_path, 0.01)
    query = partial(run_query, 3, partial(read_gpuframe, root))
    query()
    stage, frame = timeline.runner.Stage, timeline.DistributedFrame
    for cls, name in ((stage, "submit"), (frame, "to_pandas"), (frame, "head")):
        monkeypatch.setattr(cls, name, getattr(cls, name))  # put back after the test
    timeline.record_nodes(stage, "submit")
    timeline.record_actions(frame, "to_pandas", "head")
    timeline.ACTED.clear()
    _, events, _ = timeline.timeline(engine.client, query)
    marked = {int(m.group(1)) for _, _, where, what in events
              if (m := re.fullmatch(r"compute read-parquet #(\d+)", what))}
    assert marked
    out = io.StringIO()
    timeline.ACTED[-1].explain(file=out)
    lines = {int(m.group(1)): m.group(2) for m in re.finditer(r"#(\d+) (\w+)", out.getvalue())}
    assert lines[0] == "TopK" and all(lines[n] in ("Scan", "Filter", "Select") for n in marked)
