"""``with gpuframe.report("join.html"):``: Dask's performance report of the block, with the
engine's figures for the same span on top (stages, ingest, worker pairs, hardware limits)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from distributed.metrics import time

from ..cluster.engine import Engine, current_engine
from ..errors import GpuframeError
from .jobs import JobMetrics, mark, metrics_since

if TYPE_CHECKING:
    from bokeh.resources import ResourcesMode
    from typing_extensions import Self


class ReportError(GpuframeError, RuntimeError):
    """The report could not be made or written."""


class report:
    """Context manager: on exit, write ``filename`` (HTML) covering what ran inside the block.

    ``mode`` is Bokeh's resources mode, as in :class:`distributed.performance_report`: None or
    "cdn" loads BokehJS from its CDN (a small file), "inline" embeds it (works offline).
    After the block, ``metrics`` holds the engine's :class:`JobMetrics` for it.
    """

    def __init__(self, filename: str | Path = "gpuframe-report.html",
                 mode: ResourcesMode | None = None, engine: Engine | None = None) -> None:
        self.filename = Path(filename)
        self.mode = mode
        self.engine = engine
        self.metrics: JobMetrics | None = None

    def __enter__(self) -> Self:
        self.engine = current_engine(self.engine)
        client = self.engine.client
        self._bookmark = mark(self.engine)
        self._start = client.run_on_scheduler(lambda dask_scheduler: time())
        self._last_count = client.run_on_scheduler(
            lambda dask_scheduler: dask_scheduler.monitor.count)
        client.get_task_stream(start=0, stop=0)  # make sure Dask records the task stream
        return self

    def __exit__(self, *exc_info: object) -> None:
        engine = current_engine(self.engine)  # the one __enter__ took
        dask_html = engine.client.sync(engine.scheduler.performance_report, start=self._start,
                                       last_count=self._last_count, code="gpuframe job",
                                       mode=self.mode)
        self.metrics = metrics_since(engine, self._bookmark)
        page = engine_section_into(dask_html, self.metrics, self.mode)
        try:
            self.filename.write_text(page, encoding="utf-8")
        except OSError as exc:
            raise ReportError(f"cannot write the report {self.filename}: {exc}") from exc


def engine_section_into(dask_html: str, metrics: JobMetrics,
                        mode: ResourcesMode | None = None) -> str:
    """Dask's report page with the engine's figures above its own tabs: one BokehJS serves both
    (the engine's document is embedded into the page Dask set up), plus the tables bundle that
    Dask's page does not load."""
    from bokeh.embed import components
    from bokeh.resources import Resources

    from .figures import EngineFigures

    figures = EngineFigures()
    figures.update(metrics.as_summary(), None, "Report of one gpuframe block.")
    script, div = components(figures.layout)
    tables = Resources(mode=mode or "cdn", components=["bokeh-tables"]).render_js()
    head = dask_html.rfind("</head>")  # inline BokehJS may hold the tag names in strings
    body = dask_html.find("<body>", head)
    if head < 0 or body < 0:
        raise ReportError("Dask's performance report has no <head> and <body>: cannot add the "
                          "engine's figures to it")
    body += len("<body>")
    return (dask_html[:head] + tables + dask_html[head:body] + f"\n{div}\n{script}\n"
            + dask_html[body:])
