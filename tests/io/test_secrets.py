"""A URL's password never shows where other eyes look: reprs of a read's plan and tasks, the
read events the scheduler keeps, and the client's read report (a planted secret grepped for)."""

from __future__ import annotations

from gpuframe.diagnostics.stages import READ_EVENT_TOPIC
from gpuframe.io.planning.plan import plan_fragments
from gpuframe.io.tasks import fragment_tasks
from gpuframe.readers import read_parquet_with_report

SECRET = "pl4nted-s3cret"
PART = "flat/part-0.parquet"


def _url(http_server) -> str:
    return http_server.url.replace("http://", f"http://reader:{SECRET}@") + "/" + PART


def test_plans_and_tasks_show_no_password(http_server):
    plan = plan_fragments(_url(http_server), workers=["tcp://w0"])
    shown = [repr(plan), *map(repr, plan.fragments), *map(repr, fragment_tasks(plan))]
    assert all(SECRET not in text for text in shown)
    assert any("reader:***@" in text for text in shown)


def test_read_events_and_reports_show_no_password(engine, http_server):
    frame, report = read_parquet_with_report(_url(http_server))
    assert len(frame.to_pandas()) > 0
    events = engine.client.get_events(READ_EVENT_TOPIC)
    assert events and all(SECRET not in repr(message) for _, message in events)
    assert SECRET not in repr(report) and SECRET not in str(report)
