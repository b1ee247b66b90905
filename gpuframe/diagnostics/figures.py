"""The engine's figures, drawn from a metrics summary; the dashboard page and the report share
them, so what a user watches live is what a report keeps.

Every rate stands next to the hardware limit measured at cluster start: ingest next to the disk
read limit, worker-pair transfers next to the peer copy (GPU) or memcpy (CPU) limit, stages next
to the limit of the path they use. A limit that could not be measured reads "n/a".
"""

from __future__ import annotations

import html
import math
from typing import Any

from bokeh.layouts import column, row
from bokeh.models import CategoricalAxis, ColumnDataSource, DataRange1d, FactorRange
from bokeh.models.annotations import Title
from bokeh.models.widgets import DataTable, Div, TableColumn
from bokeh.palettes import Blues256
from bokeh.plotting import figure

from .limits import GB, LIMIT_NAMES, rate_text
from .summary import LIMITS, TRANSFER, LimitName, Limits, Summary, WorkerLimits

LIMIT_OF_STAGE: dict[str, tuple[LimitName, ...]] = {"read": ("disk_read",),
                                                    TRANSFER: ("peer_copy", "memcpy")}
COMPUTE_LIMIT: tuple[LimitName, ...] = ("device_copy", "memcpy")
STAGE_COLUMNS = ("factor", "stage", "job", "seconds", "color", "label")
TABLE_COLUMNS = ("stage", "tasks", "wall", "task", "size", "rate", "limit")


def short(worker: str) -> str:
    """A worker address without its protocol, for axis labels."""
    return worker.split("://", 1)[-1]


def stage_limit(stage: str, limits: Limits) -> str:
    """The measured limit that bounds ``stage``, named: 'disk read <rate> GB/s'."""
    for name in LIMIT_OF_STAGE.get(stage, COMPUTE_LIMIT):
        if limits.get(name) is not None:
            return f"{LIMIT_NAMES[name]} {rate_text(limits[name])}"
    return "n/a"


class EngineFigures:
    """The engine's figures for one summary (and optionally the job before it)."""

    def __init__(self, width: int = 1200) -> None:
        self.header = Div(name="gpuframe-header", width=width)
        self.ingest_source = ColumnDataSource(
            {"worker": [], "rate": [], "limit": [], "label": []}, name="gpuframe-ingest")
        self.ingest_workers = FactorRange()
        self.ingest = figure(title="Ingest GB/s per worker (bar) vs disk read limit (dash)",
                             x_range=self.ingest_workers, y_range=DataRange1d(start=0),
                             height=320, width=width // 2, tools="", toolbar_location=None,
                             name="gpuframe-ingest-figure")
        self.ingest.vbar(x="worker", top="rate", width=0.7, source=self.ingest_source,
                         color="#1f77b4")
        self.ingest.scatter(x="worker", y="limit", marker="dash", size=40, line_width=3,
                            color="#d62728", source=self.ingest_source)
        self.ingest.text(x="worker", y="rate", text="label", source=self.ingest_source,
                         text_align="center", text_baseline="bottom", text_font_size="9pt")
        self.ingest.yaxis.axis_label = "GB/s"

        self.pair_source = ColumnDataSource(
            {"source": [], "destination": [], "bytes": [], "color": [], "label": []},
            name="gpuframe-pairs")
        self.pairs_title = Title(text="Bytes moved per worker pair")
        self.pairs_from, self.pairs_to = FactorRange(), FactorRange()
        self.pairs = figure(title=self.pairs_title, x_range=self.pairs_from,
                            y_range=self.pairs_to, height=320, width=width // 2, tools="hover",
                            tooltips=[("from", "@source"), ("to", "@destination"),
                                      ("moved", "@label")],
                            toolbar_location=None, name="gpuframe-pairs-figure")
        self.pairs.rect(x="source", y="destination", width=0.95, height=0.95,
                        fill_color="color", line_color=None, source=self.pair_source)
        self.pairs.text(x="source", y="destination", text="label", text_align="center",
                        text_baseline="middle", text_font_size="8pt", source=self.pair_source)
        self.pairs.xaxis.axis_label = "from"
        self.pairs.yaxis.axis_label = "to"

        self.stage_source = ColumnDataSource(
            {name: [] for name in STAGE_COLUMNS}, name="gpuframe-stages")
        self.stage_factors = FactorRange()
        self.stages = figure(title="Wall seconds per stage: this job and the one before",
                             x_range=DataRange1d(start=0, range_padding=0.2),  # label room
                             y_range=self.stage_factors, height=360, width=width // 2,
                             tools="", toolbar_location=None, name="gpuframe-stages-figure")
        self.stages.hbar(y="factor", right="seconds", height=0.8, color="color",
                         source=self.stage_source)
        self.stages.text(x="seconds", y="factor", text="label", text_baseline="middle",
                         text_font_size="8pt", source=self.stage_source)
        self.stages.xaxis.axis_label = "seconds"
        for axis in self.stages.yaxis:
            if isinstance(axis, CategoricalAxis):
                axis.group_label_orientation = "horizontal"

        self.table_source = ColumnDataSource(
            {name: [] for name in TABLE_COLUMNS}, name="gpuframe-stage-table")
        self.table = DataTable(source=self.table_source, width=width // 2, height=360,
                               index_position=None, columns=[
                                   TableColumn(field="stage", title="stage", width=70),
                                   TableColumn(field="tasks", title="tasks", width=40),
                                   TableColumn(field="wall", title="wall s", width=55),
                                   TableColumn(field="task", title="task s", width=55),
                                   TableColumn(field="size", title="MB", width=55),
                                   TableColumn(field="rate", title="achieved", width=80),
                                   TableColumn(field="limit", title="hardware limit",
                                               width=150),
                               ])
        self.layout = column(self.header, row(self.ingest, self.pairs),
                             row(self.stages, self.table), name="gpuframe-engine")

    def update(self, current: Summary | None, previous: Summary | None = None,
               status: str = "") -> None:
        """Redraw from the summaries of a job (or a report block) and of the job before it."""
        summary = current or previous
        if summary is None:
            self.header.text = "<h2>gpuframe engine</h2><p>No gpuframe job has run yet.</p>"
            return
        typical = summary["typical_limits"]
        self.header.text = _header(summary, status)
        self._update_ingest(current, summary)
        self._update_pairs(current, summary, typical)
        self._update_stages(current, previous, typical)

    def _update_ingest(self, current: Summary | None, summary: Summary) -> None:
        workers = summary["workers"]
        ingest = current["ingest"] if current is not None else {}
        limits = summary["limits"]
        rates = [(ingest[w]["rate"] if w in ingest else 0.0) / GB for w in workers]
        disk = [(_limit(limits, w, "disk_read") or math.nan) / GB for w in workers]
        self.ingest_workers.factors = [short(w) for w in workers]
        self.ingest_source.data = {
            "worker": [short(w) for w in workers], "rate": rates, "limit": disk,
            "label": [f"{r:.2f}" for r in rates],
        }

    def _update_pairs(self, current: Summary | None, summary: Summary, typical: Limits) -> None:
        workers = [short(w) for w in summary["workers"]]
        pairs = current["pairs"] if current is not None else []
        top = max((p["bytes"] for p in pairs), default=0) or 1
        limit = typical.get("peer_copy") or typical.get("memcpy")
        which = "peer copy" if typical.get("peer_copy") else "memcpy"
        self.pairs_title.text = (f"Bytes moved per worker pair over {summary['protocol']} "
                                 f"({which} limit {rate_text(limit)})")
        self.pairs_from.factors = workers
        self.pairs_to.factors = workers
        self.pair_source.data = {
            "source": [short(p["source"]) for p in pairs],
            "destination": [short(p["destination"]) for p in pairs],
            "bytes": [p["bytes"] for p in pairs],
            "color": [Blues256[int(200 * (1 - p["bytes"] / top))] for p in pairs],
            "label": [f"{p['bytes'] / 1e6:.1f} MB, {rate_text(p['rate'])}" for p in pairs],
        }

    def _update_stages(self, current: Summary | None, previous: Summary | None,
                       typical: Limits) -> None:
        this = current["stages"] if current is not None else {}
        before = previous["stages"] if previous is not None else {}
        jobs = [("this job", this, "#1f77b4"), ("previous", before, "#aec7e8")]
        order = list(dict.fromkeys([*this, *before]))
        data: dict[str, list[Any]] = {name: [] for name in STAGE_COLUMNS}
        for stage in order:
            for job, stages, color in jobs:
                if stage in stages:
                    seconds = stages[stage]["wall_seconds"]
                    data["factor"].append((stage, job))
                    data["stage"].append(stage)
                    data["job"].append(job)
                    data["seconds"].append(seconds)
                    data["color"].append(color)
                    data["label"].append(f" {seconds:.3f} s")
        self.stage_factors.factors = data["factor"]
        self.stages.height = max(200, 60 + 24 * len(data["factor"]))  # a readable row each
        self.stage_source.data = dict(data)
        table: dict[str, list[Any]] = {name: [] for name in TABLE_COLUMNS}
        for stage, figures in this.items():
            wall = figures["wall_seconds"]
            table["stage"].append(stage)
            table["tasks"].append(figures["tasks"])
            table["wall"].append(f"{wall:.3f}")
            table["task"].append(f"{figures['task_seconds']:.3f}")
            table["size"].append(f"{figures['bytes'] / 1e6:.1f}")
            table["rate"].append(rate_text(figures["bytes"] / wall) if wall > 0 else "n/a")
            table["limit"].append(stage_limit(stage, typical))
        self.table_source.data = dict(table)


def _limit(limits: dict[str, WorkerLimits], worker: str, name: LimitName) -> float | None:
    """``worker``'s measured ``name`` limit; None where it has none."""
    return limits[worker].get(name) if worker in limits else None


def _header(summary: Summary, status: str) -> str:
    head = "".join(f"<th>{LIMIT_NAMES[n]}</th>" for n in LIMITS)
    rows = "".join(
        f"<tr><td>{html.escape(short(worker))}</td>"
        + "".join(f"<td>{rate_text(_limit(summary['limits'], worker, n))}</td>"
                  for n in LIMITS) + "</tr>"
        for worker in summary["workers"])
    return (f"<h2>gpuframe engine</h2><p>{len(summary['workers'])} workers over "
            f"{html.escape(summary['protocol'])}. {html.escape(status)}</p>"
            "<p>Hardware limits measured at cluster start (n/a: not measurable here):</p>"
            f"<table class='gpuframe-limits' border='1' cellpadding='3'><tr><th>worker</th>"
            f"{head}</tr>{rows}</table>")
