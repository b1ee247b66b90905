"""The engine page of the scheduler's dashboard, at ``/gpuframe`` and in its top menu.

Distributed serves its own pages from one Bokeh application added to the scheduler's HTTP
server; this adds a second one next to it, with the dashboard's template and menu, so the page
works on any scheduler the metrics plugin reaches (a local cluster or ``connect()``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from distributed.metrics import time

from .summary import Summary

if TYPE_CHECKING:
    from bokeh.document import Document
    from distributed import Scheduler

ROUTE = "/gpuframe"
REFRESH_MS = 500

# The summary of the 'current' or 'previous' job, as the metrics plugin keeps them.
JobSummary = Callable[[str], Summary | None]

_serving: weakref.WeakSet[Scheduler] = weakref.WeakSet()
"""Schedulers whose dashboard serves the page: each client that connects registers a plugin
of its own, and the page must be added once."""


def add_engine_page(scheduler: Scheduler, job_summary: JobSummary) -> bool:
    """Serve the page of ``job_summary``'s jobs on ``scheduler``'s dashboard, once; False where
    it has no dashboard."""
    if scheduler in _serving:
        return True
    if not hasattr(scheduler, "http_application"):
        return False
    try:
        from bokeh.server.tornado import BokehTornado
        from distributed.dashboard.core import BokehApplication
        from distributed.dashboard.scheduler import template_variables
    except ImportError:  # the scheduler runs without bokeh: no dashboard to extend
        return False
    if not any(isinstance(app, BokehTornado) for app in scheduler.http_application.applications):
        return False  # the scheduler was started with its dashboard turned off
    from tornado.ioloop import IOLoop

    variables = template_variables(scheduler)
    if "gpuframe" not in variables["pages"]:
        variables["pages"].append("gpuframe")  # shared with the dashboard's own pages
    prefix = next((app.prefix for app in scheduler.http_application.applications
                   if isinstance(app, BokehTornado)), "")
    application = BokehApplication({ROUTE: partial(engine_doc, job_summary)}, scheduler,
                                   prefix=prefix, template_variables=variables)
    scheduler.http_application.add_application(application)
    application.initialize(IOLoop.current())
    application.start()
    _serving.add(scheduler)  # its HTTP server holds the application
    return True


def engine_doc(job_summary: JobSummary, scheduler: Scheduler, extra: dict[str, Any],
               doc: Document) -> None:
    """One browser tab's page: the engine's figures, refreshed from ``job_summary``."""
    from distributed.dashboard.components.scheduler import BOKEH_THEME, env

    from .figures import EngineFigures

    figures = EngineFigures()

    def update() -> None:
        current = job_summary("current")
        figures.update(current, job_summary("previous"), job_status(current, time()))

    update()
    doc.add_periodic_callback(update, REFRESH_MS)
    doc.title = "Dask: gpuframe engine"
    doc.add_root(figures.layout)
    doc.template = env.get_template("simple.html")
    doc.template_variables.update(extra)
    doc.theme = BOKEH_THEME


def job_status(summary: Summary | None, now: float) -> str:
    """Where the latest job stands, for the page's header."""
    if summary is None or summary["start"] is None:
        return ""
    name = f"Latest job ({summary['name']})" if summary["name"] else "Latest job"
    if summary["stop"] is None:
        return f"{name}: running, started {now - summary['start']:.1f} s ago."
    return (f"{name}: finished {now - summary['stop']:.1f} s ago, "
            f"{summary['stop'] - summary['start']:.2f} s long.")
