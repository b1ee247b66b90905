"""One warm gpuframe query's timeline on one clock: the client's jobs, submits, waits and
gathers beside each worker's task stream (compute and transfers), in milliseconds from the
query's start. Where ``--stages`` (``run.py``) says how long each stage took, this shows where a
query waits: the client planning before its first submit, a submit's cost, the gap between a
task and the next, the fetch of the result.

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
from gpuframe.runtime import runner  # noqa: E402
from tpch.datagen import generate  # noqa: E402
from tpch.run import parse_queries, query_arguments, read_gpuframe, run_query  # noqa: E402

Event = tuple[float, float, str, str]
"""(start, stop, where: 'client' or a worker, what)."""

EVENTS: list[Event] = []


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
            events.append((part["start"], part["stop"], where,
                           f"{part['action']} {stage_name_of(task['key'])}"))
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
    root = generate(args.dir, args.sf)
    with gpuframe.start_cluster(dashboard_address="127.0.0.1:0") as engine:
        print(f"gpuframe: {engine!r}; data: {root}")
        for number in parse_queries(args.queries):
            query = partial(run_query, number, partial(read_gpuframe, root))
            for _ in range(args.warm):
                query()
            wall, events, busy = timeline(engine.client, query)
            print(f"\nq{number}: wall {wall * 1e3:.1f} ms; computing "
                  + ", ".join(f"{w} {b * 1e3:.1f} ms" for w, b in sorted(busy.items()))
                  + "\n\n   from ms    to ms   took ms  where   what")
            for start, stop, where, what in events:
                print(f"{start * 1e3:10.1f} {stop * 1e3:8.1f} {(stop - start) * 1e3:9.1f}  "
                      f"{where:6s}  {what}")


if __name__ == "__main__":
    main()
