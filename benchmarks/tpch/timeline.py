"""One warm gpuframe query's timeline on one clock: the client's jobs, submits, waits and
gathers beside each worker's task stream (compute and transfers), in milliseconds from the
query's start. Where ``--stages`` (``run.py``) says how long each stage took, this shows where a
query waits: the client planning before its first submit, a submit's cost, the gap between a
task and the next, the fetch of the result. A task that makes a plan node's output is marked
with the node's number (``compute read-parquet #15``), and the plan follows, with its numbers,
so that each read names its table.

  python benchmarks/tpch/timeline.py --sf 10 --queries 3,6,9
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from distributed import get_task_stream

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gpuframe  # noqa: E402
from gpuframe.diagnostics.stages import stage_name_of  # noqa: E402
from gpuframe.frame import DistributedFrame  # noqa: E402
from gpuframe.runtime import runner  # noqa: E402
from tpch.datagen import generate  # noqa: E402
from tpch.run import parse_queries, query_arguments, read_gpuframe, run_query  # noqa: E402

Event = tuple[float, float, str, str]
"""(start, stop, where: 'client' or a worker, what)."""

EVENTS: list[Event] = []
ACTED: list[Any] = []
"""The frames the query shown ran an action on."""
NODES: dict[str, int] = {}
"""The plan node whose output each task's key makes (:meth:`~gpuframe.runtime.runner.Stage.submit`'s
``node``)."""


def record(cls: type, name: str, label: Callable[[Any, tuple], str]) -> None:
    """Time each call of ``cls.name`` on the client as an event named ``label(self, args)``."""
    original = getattr(cls, name)

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.time()
        try:
            return original(self, *args, **kwargs)
        finally:
            EVENTS.append((start, time.time(), "client", label(self, args)))

    setattr(cls, name, timed)


def record_actions(cls: type, *names: str) -> None:
    """Keep each frame on which ``cls``'s methods ``names`` (its actions) run, to explain it
    after: a query ending in ``head(n)`` hands back pandas, not its frame."""
    for name in names:
        original = getattr(cls, name)

        def acted(self: Any, *args: Any, original: Any = original, **kwargs: Any) -> Any:
            ACTED.append(self)
            return original(self, *args, **kwargs)

        setattr(cls, name, acted)


def record_nodes(cls: type, name: str) -> None:
    """Keep, for each task ``cls.name`` (a submit) makes for a plan node, the node's
    number."""
    original = getattr(cls, name)

    def submitted(self: Any, *args: Any, **kwargs: Any) -> Any:
        future = original(self, *args, **kwargs)
        if kwargs.get("node") is not None:
            NODES[future.key] = kwargs["node"]
        return future

    setattr(cls, name, submitted)


def merged(events: list[Event]) -> list[Event]:
    """Consecutive submits of one stage as one event, counted."""
    out: list[Event] = []
    counts: list[int] = []
    for start, stop, where, what in sorted(events):
        if (out and where == "client" and what.startswith("submit")
                and out[-1][2] == "client" and out[-1][3] == what):
            out[-1] = (out[-1][0], stop, where, what)
            counts[-1] += 1
        else:
            out.append((start, stop, where, what))
            counts.append(1)
    return [(s, e, w, f"{what} x{n}" if n > 1 else what)
            for (s, e, w, what), n in zip(out, counts)]


def timeline(client: Any, query: Callable[[], Any]) -> tuple[float, list[Event], dict[str, float]]:
    """The query run once more: its wall time, its events, each worker's compute time."""
    EVENTS.clear()
    with get_task_stream(client) as stream:
        began = time.time()
        query()
        ended = time.time()
    events = list(EVENTS)
    workers = sorted({task["worker"] for task in stream.data})
    busy: dict[str, float] = defaultdict(float)
    for task in stream.data:
        where = f"w{workers.index(task['worker'])}"
        for part in task["startstops"]:
            node = NODES.get(task["key"])
            events.append((part["start"], part["stop"], where,
                           f"{part['action']} {stage_name_of(task['key'])}"
                           + ("" if node is None else f" #{node}")))
            if part["action"] == "compute":
                busy[where] += part["stop"] - part["start"]
    shifted = [(s - began, e - began, w, what) for s, e, w, what in merged(events)]
    return ended - began, shifted, dict(busy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    query_arguments(parser, "3,6,9")
    parser.add_argument("--warm", type=int, default=3, help="runs before the one shown")
    args = parser.parse_args()
    record(runner.Job, "__init__", lambda job, a: f"job {a[1] if len(a) > 1 else ''}")
    record(runner.Job, "wait", lambda job, a: f"wait {len(list(a[0]))}")
    record(runner.Job, "gather", lambda job, a: f"gather {len(list(a[0]))}")
    record(runner.Stage, "submit", lambda stage, a: f"submit {stage.name}")
    record_nodes(runner.Stage, "submit")
    record_actions(DistributedFrame, "to_pandas", "head")
    root = generate(args.dir, args.sf)
    with gpuframe.start_cluster(dashboard_address="127.0.0.1:0") as engine:
        print(f"gpuframe: {engine!r}; data: {root}")
        for number in parse_queries(args.queries):
            query = partial(run_query, number, partial(read_gpuframe, root))
            for _ in range(args.warm):
                query()
            ACTED.clear()
            wall, events, busy = timeline(engine.client, query)
            print(f"\nq{number}: wall {wall * 1e3:.1f} ms; computing "
                  + ", ".join(f"{w} {b * 1e3:.1f} ms" for w, b in sorted(busy.items()))
                  + "\n\n   from ms    to ms   took ms  where   what")
            for start, stop, where, what in events:
                print(f"{start * 1e3:10.1f} {stop * 1e3:8.1f} {(stop - start) * 1e3:9.1f}  "
                      f"{where:6s}  {what}")
            if ACTED:  # the frame whose action ran the query (head(n) runs a top-k's)
                print()
                ACTED[-1].explain()


if __name__ == "__main__":
    main()
