import pytest
import requests
from chromium import page_state
from distributed.metrics import time

import gpuframe
from gpuframe.cluster.hardware import list_gpus
from gpuframe.diagnostics.figures import short

PNG = b"\x89PNG\r\n\x1a\n"


def dashboard(engine) -> str:
    return engine.dashboard_link.rsplit("/", 1)[0]


def test_engine_page_is_served_and_in_the_dashboard_menu(cpu_engine):
    status = requests.get(dashboard(cpu_engine) + "/status", timeout=30)
    assert status.status_code == 200 and '<a href="gpuframe">Gpuframe</a>' in status.text
    page = requests.get(dashboard(cpu_engine) + "/gpuframe", timeout=30)
    assert page.status_code == 200 and '<a href="gpuframe">' in page.text
    assert requests.get(dashboard(cpu_engine) + "/no-such-page", timeout=30).status_code == 404


def test_dashboard_listens_on_loopback_by_default(cpu_engine):
    assert cpu_engine.dashboard_link.startswith("http://127.0.0.1:")


def test_engine_page_renders_the_job_in_chromium(shuffle_join, cpu_engine, chromium, artifacts):
    left, right = (gpuframe.from_pandas(shuffle_join[side]) for side in ("orders", "people"))
    assert len(left.merge(right, on="customer_id", broadcast_bytes=0)) == len(
        shuffle_join["result"])
    state, png = chromium.render(dashboard(cpu_engine) + "/gpuframe",
                                 page_state("hardware limit"))
    (artifacts / "engine-page.png").write_bytes(png)
    metrics = gpuframe.job_metrics(engine=cpu_engine)
    stages = state["sources"]["gpuframe-stages"]
    assert {"send", "transfer", "join"} <= set(stages["stage"])
    drawn = {s: sec for s, job, sec in zip(stages["stage"], stages["job"], stages["seconds"])
             if job == "this job"}
    assert drawn == pytest.approx({s: v["wall_seconds"] for s, v in metrics.stages.items()})
    pairs = state["sources"]["gpuframe-pairs"]
    assert sorted(zip(pairs["source"], pairs["destination"], pairs["bytes"])) == sorted(
        (short(p["source"]), short(p["destination"]), p["bytes"]) for p in metrics.pairs)
    assert state["sources"]["gpuframe-ingest"]["worker"] == [short(w) for w in
                                                             cpu_engine.workers]
    text = state["text"]
    assert "gpuframe engine" in text and "over tcp" in text and "memcpy" in text
    assert "GB/s" in text
    if not list_gpus():
        assert "n/a" in text  # device, peer and host-device copies cannot be measured here
    assert "Gpuframe" in state["menu"]
    assert len([area for area in state["canvases"] if area > 0]) >= 3  # the three plots drew
    assert png.startswith(PNG) and len(png) > 20_000


def test_connect_gives_an_existing_scheduler_the_page_and_keeps_its_records():
    import pandas as pd
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster:
        engine = gpuframe.connect(cluster.scheduler_address, backend="pandas")
        again = None
        try:
            assert len(gpuframe.from_pandas(pd.DataFrame({"a": range(100)}), engine=engine)) \
                == 100
            again = gpuframe.connect(cluster.scheduler_address, backend="pandas")
            metrics = gpuframe.job_metrics(engine=again)
            assert metrics.stages["load"]["tasks"] == 1  # the first engine's job, still there
            assert set(metrics.limits) == set(engine.workers)
            base = cluster.dashboard_link.rsplit("/", 1)[0]
            page = requests.get(base + "/gpuframe", timeout=30)
            assert page.status_code == 200 and '<a href="gpuframe">' in page.text
        finally:
            engine.close()
            if again is not None:
                again.close()


def test_engine_page_draws_the_latest_job_next_to_the_one_before(engine):
    """The page's document, built as the dashboard builds it for a browser tab, from a
    job_summary that reads the scheduler's jobs."""
    from bokeh.document import Document

    from gpuframe.diagnostics.metrics import _scheduler_job_summary
    from gpuframe.diagnostics.page import engine_doc
    from gpuframe.diagnostics.stages import JOB_EVENT_TOPIC, new_job, task_key

    client = engine.client
    for name, steps in (("first", [("read", 2)]), ("second", [("read", 3), ("join", 1)])):
        job = new_job()
        client.log_event(JOB_EVENT_TOPIC, {"job": job, "phase": "start", "name": name,
                                       "time": time()})
        for step, (stage, tasks) in enumerate(steps):
            # On one worker: Dask shifts each worker's times by its own estimate of the
            # worker's clock offset, which may order two workers' tasks wrongly under load.
            client.gather([client.submit(abs, -i, key=task_key(stage, job, step, i),
                                         workers=engine.workers[:1])
                           for i in range(tasks)])
        client.log_event(JOB_EVENT_TOPIC, {"job": job, "phase": "end", "name": name,
                                       "time": time()})

    def job_summary(which):
        return client.run_on_scheduler(_scheduler_job_summary, which=which)

    doc = Document()
    engine_doc(job_summary, None, {}, doc)
    stages = doc.get_model_by_name("gpuframe-stages").data
    assert list(zip(stages["stage"], stages["job"])) == [
        ("read", "this job"), ("read", "previous"), ("join", "this job")]
    table = doc.get_model_by_name("gpuframe-stage-table").data
    assert (table["stage"], table["tasks"]) == (["read", "join"], [3, 1])
    header = doc.get_model_by_name("gpuframe-header").text
    assert "Latest job (second): finished" in header
