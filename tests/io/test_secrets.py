"""A URL's password never shows where other eyes look: reprs of a read's plan and tasks, the
read events the scheduler keeps, the client's read report, tasks' run_specs, errors, logs at
DEBUG, task keys, events, dashboard pages and performance reports (planted secrets grepped
for)."""

from __future__ import annotations

import logging
import pickle
import traceback
from urllib.parse import quote

import pandas as pd
import pytest
import requests
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.utils import key_split

import gpuframe
from gpuframe.diagnostics.stages import READ_EVENT_TOPIC
from gpuframe.errors import GpuframeError
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
        gathered = _every_key_gathered(engine)
    finally:
        engine.client.unregister_scheduler_plugin("run-spec-watch")
    expected = pd.read_parquet(http_server.root / PART)
    assert len(over_http.to_pandas()) == len(expected) == len(back) and written.files
    assert {"gpuframe-plan-metadata", "gpuframe-plan-measure", "gpuframe-read-parquet",
            "gpuframe-write"} <= stages, stages
    assert holding == []
    secrets = [secret.encode() for secret in (SECRET, token, s3_server.secret)]
    assert gathered
    assert [key for key, data in gathered.items() if any(s in data for s in secrets)] == []


def _every_key_gathered(engine) -> dict[str, bytes]:
    """What another client of the scheduler could gather: every key the workers hold, with its
    data pickled (read where it lies, as gathering each key would give it)."""
    def held(dask_worker) -> dict[str, bytes]:
        return {str(key): pickle.dumps(value) for key, value in dask_worker.data.items()}

    return {key: data for kept in engine.client.run(held).values()
            for key, data in kept.items()}


def test_sealed_secrets_reach_every_worker_by_one_token(engine):
    from gpuframe.io.errors import SecretsMissingError
    from gpuframe.io.storage.sealed import Secrets, unsealed

    url = f"http://reader:{SECRET}@host/{PART}"
    secrets = Secrets()
    hidden = secrets.redact(url)
    token = secrets.seal(engine.client)
    again = Secrets()
    again.redact(url)
    assert again.seal(engine.client) == token  # the same secrets: the same plugin
    assert set(engine.client.run(unsealed, hidden, token).values()) == {url}
    with pytest.raises(SecretsMissingError, match="did not reach"):
        unsealed(hidden, "no-such-token")


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
    assert secrets.restore(hidden_url) == url and secrets.restore(hidden_options) == options
    assert unsealed(hidden_options, None) is hidden_options
    plain = storage_options(endpoint="http://127.0.0.1:9", key="k")
    nothing = Secrets()
    assert nothing.redact(plain) is plain
    assert nothing.redact("/data/a.parquet") == "/data/a.parquet"
    assert nothing.seal(None) is None  # nothing to keep: no plugin


def _records_kept(dask_worker=None) -> None:
    """Every log record of this process, at DEBUG, kept in a list (on a worker too)."""
    keeper = _RecordKeeper()
    root = logging.getLogger()
    keeper.old_level = root.level
    root.setLevel(logging.DEBUG)
    root.addHandler(keeper)


def _records_taken(dask_worker=None) -> list[str]:
    """The records :func:`_records_kept` kept, formatted; logging as it was before."""
    root = logging.getLogger()
    (keeper,) = [h for h in root.handlers if isinstance(h, _RecordKeeper)]
    root.removeHandler(keeper)
    root.setLevel(keeper.old_level)
    return keeper.lines


class _RecordKeeper(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.old_level = logging.WARNING

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def test_no_secret_in_errors_debug_logs_keys_events_dashboard_or_report(
        engine, http_server, s3_server, tmp_path):
    """A URL's password, a header's value and an S3 secret, planted in reads that succeed and
    in one that fails, then looked for everywhere else eyes can look: the error and its
    traceback, every log line at DEBUG on the client and the workers, the scheduler's task keys
    and events, the dashboard's pages (each kept task's own page included), and the
    performance report of the block."""
    token = "t0ken-of-the-header"
    secrets = [SECRET, token, s3_server.secret]
    client = engine.client
    _records_kept()
    client.run(_records_kept)
    PLANNED_METADATA.clear()
    try:
        with gpuframe.report(tmp_path / "report.html"):
            over_http = read_parquet(_url(http_server),
                                     http_headers={"Authorization": f"Bearer {token}"}).persist()
            over_s3 = read_parquet(s3_server.url(PART),
                                   **s3_server.options(probe_min_bytes=0)).persist()
            with pytest.raises(GpuframeError) as failed:
                read_parquet(_url(http_server).replace(PART, "no/such.parquet"),
                             http_headers={"Authorization": f"Bearer {token}"}).to_pandas()
        assert len(over_http.to_pandas()) == len(over_s3.to_pandas()) > 0
        dashboard = client.dashboard_link.rsplit("/", 1)[0]
        keys = client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.tasks))
        pages = ["info/main/workers.html", "info/main/exceptions.html", "info/main/logs.html",
                 "gpuframe", *(f"info/task/{quote(str(key), safe='')}.html" for key in keys)]
        shown = {page: requests.get(f"{dashboard}/{page}", timeout=30).text for page in pages}
        events = client.run_on_scheduler(  # repr there: not every event pickles
            lambda dask_scheduler: repr(dask_scheduler.get_events()))
    finally:
        worker_lines = client.run(_records_taken)
        client_lines = _records_taken()
    error = "".join(traceback.format_exception(failed.value))
    places = {"error": error, "client log": "\n".join(client_lines),
              "worker logs": repr(worker_lines), "task keys": repr(keys),
              "events": events, "report": (tmp_path / "report.html").read_text(), **shown}
    # the keys of the two persisted reads at least: the failed read's and the probes' tasks
    # may be released and gone from the scheduler by then
    assert len(keys) >= 2 and len(client_lines) > 10 and all(worker_lines.values())
    assert "no/such.parquet" in error
    assert {place for place, text in places.items()
            if any(secret in text for secret in secrets)} == set()
