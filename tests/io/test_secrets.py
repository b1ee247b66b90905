"""A URL's password never shows where other eyes look: reprs of a read's plan and tasks, the
read events the scheduler keeps, and the client's read report (a planted secret grepped for)."""

from __future__ import annotations

import pickle

import pandas as pd
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.utils import key_split

from gpuframe.diagnostics.stages import READ_EVENT_TOPIC
from gpuframe.io.planning.metadata import PLANNED_METADATA
from gpuframe.io.planning.plan import plan_fragments
from gpuframe.io.tasks import fragment_tasks
from gpuframe.readers import read_parquet, read_parquet_with_report
from gpuframe.writers import write_parquet

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


class RunSpecWatch(SchedulerPlugin):
    """Pickles every task's run_spec as it starts to run; notes its stage and whether it holds
    a secret."""

    def __init__(self, secrets: list[str]) -> None:
        self.secrets = [secret.encode() for secret in secrets]
        self.holding: list[str] = []
        self.stages: set[str] = set()

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        task = self.scheduler.tasks.get(key)
        if finish != "processing" or task is None or task.run_spec is None:
            return
        self.stages.add(key_split(key))
        spec = pickle.dumps(task.run_spec)
        if any(secret in spec for secret in self.secrets):
            self.holding.append(str(key))


def _watched(dask_scheduler) -> tuple[list[str], set[str]]:
    watch = dask_scheduler.plugins["run-spec-watch"]
    return watch.holding, watch.stages


def test_no_task_holds_a_secret_in_its_run_spec(engine, http_server, s3_server):
    """Read, planning, measuring and write tasks get their credentials from secrets scattered
    to the workers, so the run_spec the scheduler keeps (which any of its clients can read)
    holds none: not a URL's password, a header's value, nor an S3 secret key. The S3 reads and
    writes succeed, so the workers restored the real credentials."""
    token = "t0ken-of-the-header"
    engine.client.register_plugin(RunSpecWatch([SECRET, token, s3_server.secret]),
                                  name="run-spec-watch")
    PLANNED_METADATA.clear()  # the files' metadata read by tasks, not taken from the cache
    try:
        over_http = read_parquet(_url(http_server),
                                 http_headers={"Authorization": f"Bearer {token}"}).persist()
        over_s3 = read_parquet(s3_server.url(PART), **s3_server.options(probe_min_bytes=0))
        written = write_parquet(over_s3, s3_server.url("sealed/out"),
                                storage=s3_server.options())
        back = read_parquet(s3_server.url("sealed/out"), **s3_server.options()).to_pandas()
        holding, stages = engine.client.run_on_scheduler(_watched)
    finally:
        engine.client.unregister_scheduler_plugin("run-spec-watch")
    expected = pd.read_parquet(http_server.root / PART)
    assert len(over_http.to_pandas()) == len(expected) == len(back) and written.files
    assert {"gpuframe-plan-metadata", "gpuframe-plan-measure", "gpuframe-read-parquet",
            "gpuframe-write"} <= stages, stages
    assert holding == []


def test_secrets_are_redacted_and_restored_whole():
    from gpuframe.io.storage.base import storage_options
    from gpuframe.io.storage.sealed import Secrets, unsealed

    options = storage_options(endpoint="http://127.0.0.1:9", key="k", secret=SECRET,
                              session_token="s3ss10n-t0k3n",
                              http_headers={"Authorization": "Bearer x"})
    url = f"http://reader:{SECRET}@host/{PART}"
    secrets = Secrets()
    hidden_url, hidden_options = secrets.redact(url), secrets.redact(options)
    shown = pickle.dumps((hidden_url, hidden_options))
    assert all(secret not in shown for secret in (SECRET.encode(), b"Bearer x", b"s3ss10n-t0k3n"))
    assert hidden_options.key == "k" and hidden_options.endpoint == options.endpoint
    assert unsealed([hidden_url], secrets) == [url]
    assert unsealed(hidden_options, secrets) == options
    assert unsealed(hidden_options, None) is hidden_options
    plain = storage_options(endpoint="http://127.0.0.1:9", key="k")
    nothing = Secrets()
    assert nothing.redact(plain) is plain
    assert nothing.redact("/data/a.parquet") == "/data/a.parquet"
    assert nothing.seal(None) is None  # nothing to keep: nothing scattered
