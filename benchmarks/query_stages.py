"""One more warm gpuframe query, and its stages from the engine's task records: where a
benchmark's query spends its time (``--stages`` of ``parquet_join.py`` and ``tpch/run.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pandas as pd

from gpuframe.diagnostics.jobs import mark, metrics_since


def print_stages(engine: Any, label: str, run: Callable[[], pd.DataFrame]) -> None:
    """One more warm query's stages, from the engine's task records: where its time goes."""
    bookmark = mark(engine)
    began = time.perf_counter()
    run()
    took = time.perf_counter() - began
    metrics = metrics_since(engine, bookmark)
    print(f"\nStages of one more gpuframe query, {label} (wall: the union of the stage's "
          "task intervals; from and to: seconds after the query's first task started)\n\n"
          "| stage | tasks | from s | to s | wall s | task s | GiB |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for stage, figures in metrics.stages.items():
        print(f"| {stage} | {figures['tasks']} | {figures['first_start'] - metrics.start:.3f} | "
              f"{figures['last_stop'] - metrics.start:.3f} | {figures['wall_seconds']:.3f} | "
              f"{figures['task_seconds']:.3f} | {figures['bytes'] / 2**30:.3f} |")
    print(f"| all (first start to last stop) | | | | {metrics.stop - metrics.start:.3f} | | |\n"
          f"| the query, as the client timed it | | | | {took:.3f} | | |", flush=True)
