"""The engine page of the scheduler's dashboard, at ``/gpuframe`` and in its top menu.

Distributed serves its own pages from one Bokeh application added to the scheduler's HTTP
server; this adds a second one next to it, with the dashboard's template and menu, so the page
works on any scheduler the metrics plugin reaches (a local cluster or ``connect()``).
"""

from __future__ import annotations

import logging
from typing import Any

from distributed.metrics import time

logger = logging.getLogger("gpuframe")

ROUTE = "/gpuframe"
REFRESH_MS = 500


def add_engine_page(scheduler: Any) -> bool:
    """Serve the page on ``scheduler``'s dashboard, once; False where it has no dashboard."""
    if getattr(scheduler, "_gpuframe_page", None) is not None:
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
    application = BokehApplication({ROUTE: engine_doc}, scheduler, prefix=prefix,
                                   template_variables=variables)
    scheduler.http_application.add_application(application)
    application.initialize(IOLoop.current())
    application.start()
    scheduler._gpuframe_page = application
    return True


def engine_doc(scheduler: Any, extra: dict[str, Any], doc: Any) -> None:
    """One browser tab's page: the engine's figures, refreshed from the metrics plugin."""
    from distributed.dashboard.components.scheduler import BOKEH_THEME, env

    from .figures import EngineFigures
    from .metrics import plugin_of

    figures = EngineFigures()

    def update() -> None:
        plugin = plugin_of(scheduler)
        window = plugin.job_window("current")
        status = ""
        if window is not None:
            state = "running" if plugin.in_flight else "finished"
            status = (f"Latest job: {state}, started {time() - window[0]:.1f} s ago, "
                      f"{window[1] - window[0]:.2f} s long.")
        figures.update(plugin.job_summary("current"), plugin.job_summary("previous"), status)

    update()
    doc.add_periodic_callback(update, REFRESH_MS)
    doc.title = "Dask: gpuframe engine"
    doc.add_root(figures.layout)
    doc.template = env.get_template("simple.html")
    doc.template_variables.update(extra)
    doc.theme = BOKEH_THEME
