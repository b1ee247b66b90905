"""gpuframe's TPC-H queries under settings of the client taking turns on one cluster: what an
option read where the plan is made and lowered changes, on equal terms (the same workers, warm,
the same files), where two clusters one after the other would differ by more than the change.

Each setting is a list of ``NAME=VALUE`` environment variables set in this process (the client)
for its turns; ``-`` is the settings as they are. Every query runs once under each setting
first (cold footers, warm-up), then ``--rounds`` rounds, the settings' order reversed every other
round; each answer is checked against the first setting's. Printed per query: each setting's
best seconds and its ratio to the first's; then the per-query geometric mean of the ratios.

  python benchmarks/tpch/turns.py --sf 10 --rounds 3 - GPUFRAME_CLIENT_ROWS=0

``--scheduler ADDRESS`` runs them on a cluster already up (``gpuframe.connect``), of several
hosts say, instead of one of its own. Two workers sharing one GPU time what several workers pay
where one GPU is at hand: ``GPUFRAME_DEVICES=0,0 GPUFRAME_RMM_POOL_SIZE=0.4``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gpuframe  # noqa: E402
from tpch.check import compare  # noqa: E402
from tpch.datagen import generate  # noqa: E402
from tpch.run import parse_queries, query_arguments, read_gpuframe, run_query  # noqa: E402


def parse_setting(text: str) -> dict[str, str]:
    """``NAME=VALUE,NAME=VALUE`` (or ``-``: nothing changed) as variables."""
    if text == "-":
        return {}
    pairs = [item.partition("=") for item in text.split(",")]
    if not all(name and sep for name, sep, _ in pairs):
        raise SystemExit(f"setting {text!r}: give NAME=VALUE pairs, comma-separated, or -")
    return {name: value for name, _, value in pairs}


@contextmanager
def environment(variables: dict[str, str]) -> Iterator[None]:
    """``variables`` set in this process for the block, as they were after it."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    query_arguments(parser, "1-22")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of every setting")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--backend", default=None)
    parser.add_argument("--scheduler", default=None,
                        help="the address of a running cluster's scheduler to connect to")
    parser.add_argument("settings", nargs="+", help="NAME=VALUE[,NAME=VALUE...] or -")
    args = parser.parse_args(argv)
    numbers = parse_queries(args.queries)
    settings = [parse_setting(text) for text in args.settings]
    labels = args.settings
    root = generate(args.dir, args.sf)
    read = partial(read_gpuframe, root)
    best: list[dict[int, float]] = [{} for _ in settings]
    wrong: list[str] = []
    engine = gpuframe.start_cluster(backend=args.backend, n_workers=args.workers,
                                    dashboard_address="127.0.0.1:0") \
        if args.scheduler is None else gpuframe.connect(args.scheduler, backend=args.backend)
    with engine:
        print(f"gpuframe: {engine!r}; data: {root}")
        answers: dict[int, pd.DataFrame] = {}
        for rounds in range(args.rounds + 1):
            order = list(range(len(settings)))
            for s in order if rounds % 2 == 0 else order[::-1]:
                with environment(settings[s]):
                    for number in numbers:
                        start = time.perf_counter()
                        got = run_query(number, read)
                        seconds = time.perf_counter() - start
                        if number not in answers:
                            answers[number] = got
                        elif not (verdict := compare(number, got, answers[number])).ok:
                            wrong.append(f"q{number} under {labels[s]}: {verdict.reason}")
                        if rounds:  # the first round warms
                            best[s][number] = min(best[s].get(number, math.inf), seconds)
    print(table(numbers, labels, best))
    for problem in wrong:
        print(f"WRONG: {problem}")
    return 1 if wrong else 0


def table(numbers: list[int], labels: list[str], best: list[dict[int, float]]) -> str:
    head = ["query"] + [f"{label} s" for label in labels] + \
        [f"{label} / {labels[0]}" for label in labels[1:]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    logs = [0.0] * len(labels)
    for number in numbers:
        cells = [f"q{number}"] + [f"{b[number]:.3f}" for b in best]
        for s in range(1, len(labels)):
            ratio = best[s][number] / best[0][number]
            logs[s] += math.log(ratio)
            cells.append(f"{ratio:.3f}x")
        lines.append("| " + " | ".join(cells) + " |")
    total = ["geomean"] + [f"{sum(b.values()):.3f} (sum)" for b in best] + \
        [f"{math.exp(logs[s] / len(numbers)):.3f}x" for s in range(1, len(labels))]
    lines.append("| " + " | ".join(total) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
