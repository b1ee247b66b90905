"""Progress bars for gpuframe work, drawn by Dask's own progress bars with one bar per engine
stage (read, partition, send, join, gather, ...) instead of one per task prefix.

Engine calls such as ``merge`` and ``read_parquet`` return once their partitions are in worker
memory, so their progress is shown while they run: ``with gpuframe.progress(): ...`` watches the
engine's per-stage task counts on the scheduler from a background thread and draws them with
Dask's terminal bar or its Jupyter widget. ``gpuframe.progress(frame)`` follows given frames or
futures, exactly as :func:`distributed.progress` does.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

from dask.utils import key_split

from ..cluster.engine import Engine, current_engine
from .metrics import _scheduler_stage_tasks
from .stages import stage_of

if TYPE_CHECKING:
    from distributed.diagnostics.progressbar import MultiProgressWidget, TextProgressBar
    from typing_extensions import Self


def stage_group(key: Any) -> str:
    """The progress bar a task counts in: its gpuframe stage, else Dask's key prefix."""
    return stage_of(key) or key_split(key)


def progress(*objects: Any, notebook: bool | None = None, engine: Engine | None = None,
             **options: Any) -> Any:
    """Show the progress of gpuframe work.

    With frames (anything holding its partitions' ``futures``) or futures: their progress and
    that of everything they wait on, as :func:`distributed.progress` (blocks in a terminal; in
    Jupyter returns a widget at once, to be the cell's last expression); ``options`` go to it.
    Without: a context manager whose block's engine calls get live bars, e.g.
    ``with gpuframe.progress(): joined = a.merge(b)``.
    """
    from distributed.utils import is_kernel

    notebook = is_kernel() if notebook is None else notebook
    if not objects:
        return StageProgress(current_engine(engine), notebook)
    from distributed import progress as dask_progress

    futures = [f for obj in objects for f in getattr(obj, "futures", [obj])]
    return dask_progress(futures, notebook=notebook, multi=True, group_by=stage_group,
                         **options)


class StageProgress:
    """Live bars of the gpuframe tasks submitted inside a ``with`` block, per stage."""

    def __init__(self, engine: Engine, notebook: bool, interval: float = 0.2) -> None:
        self.engine = engine
        self.notebook = notebook
        self.interval = interval
        self.totals: dict[str, int] = {}
        self.remaining: dict[str, int] = {}
        self._widget: MultiProgressWidget | None = None  # in a notebook
        self._text: TextProgressBar | None = None  # in a terminal

    def __enter__(self) -> Self:
        from distributed.diagnostics.progressbar import (
            MultiProgressWidget,
            TextProgressBar,
        )

        address = self.engine.scheduler_address
        if self.notebook:
            from IPython.display import display

            self._widget = MultiProgressWidget([], scheduler=address)
            display(self._widget.widget)
        else:
            self._text = TextProgressBar([], scheduler=address, start=False)
        self._base = self._counts()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="gpuframe-progress",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join()
        self._update()
        self._draw(final=True)

    def _counts(self) -> dict[str, list[int]]:
        return self.engine.client.run_on_scheduler(_scheduler_stage_tasks)

    def _watch(self) -> None:
        while not self._done.wait(self.interval):
            self._update()
            self._draw(final=False)

    def _update(self) -> None:
        counts = self._counts()
        for stage, (submitted, done) in counts.items():
            before = self._base.get(stage, [0, 0])
            if submitted > before[0]:
                self.totals[stage] = submitted - before[0]
                self.remaining[stage] = max(0, self.totals[stage] - (done - before[1]))

    def _draw(self, final: bool) -> None:
        if not self.totals:
            return
        if self._widget is not None:
            if set(self.totals) != set(getattr(self._widget, "bars", ())):
                self._widget.widget.children = ()  # a new stage: Dask's widget redraws its bars
            self._widget._draw_bar(remaining=self.remaining, all=self.totals, status="running")
            if final:
                self._widget._draw_stop(remaining=self.remaining, status="finished")
        elif self._text is not None:
            self._text._draw_bar(remaining=sum(self.remaining.values()),
                                 all=sum(self.totals.values()))
            if final:
                sys.stdout.write("\n")
                sys.stdout.flush()
