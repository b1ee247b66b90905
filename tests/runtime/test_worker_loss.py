"""A job whose worker is lost or stops answering fails, naming it, instead of waiting forever:
Dask keeps a task pinned to a gone worker in 'no-worker', and keeps a silent worker for its
worker-ttl (5 minutes). Each test runs on a cluster of its own, since it breaks a worker."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pandas as pd
import pytest

import gpuframe
from gpuframe.errors import WorkerLostError


@pytest.fixture
def fresh_engine():
    engine = gpuframe.start_cluster(backend="pandas", protocol="tcp", n_workers=2,
                                    dashboard_address="127.0.0.1:0")
    yield engine
    engine.close()


def _frame(engine) -> gpuframe.DistributedFrame:
    rng = np.random.default_rng(3)
    data = pd.DataFrame({"k": rng.integers(0, 100, 4000), "v": rng.random(4000)})
    return gpuframe.from_pandas(data, npartitions=4, engine=engine).persist()


def _pid_of(engine, worker: str) -> int:
    return engine.client.run(os.getpid, workers=[worker])[worker]


@pytest.mark.timeout(90)
def test_a_killed_worker_fails_the_job_that_needs_its_partitions(fresh_engine):
    frame = _frame(fresh_engine)
    lost = frame.owners[0]
    os.kill(_pid_of(fresh_engine, lost), signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerLostError, match="left the cluster") \
            as raised:
        frame.to_pandas()
    assert lost in str(raised.value) and "stage's partitions" in str(raised.value)
    assert time.monotonic() - start < 30


@pytest.mark.timeout(90)
def test_a_silent_worker_fails_the_job_after_the_allowed_silence(fresh_engine, monkeypatch):
    monkeypatch.setenv("GPUFRAME_WORKER_SILENCE", "3")
    frame = _frame(fresh_engine)
    other = _frame(fresh_engine)
    stopped = frame.owners[0]
    pid = _pid_of(fresh_engine, stopped)
    os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        with pytest.raises(WorkerLostError, match="not been heard from|unheard") as raised:
            gpuframe.merge(frame, other, on="k", broadcast_bytes=0).to_pandas()
        assert stopped in str(raised.value) and "stage's partitions" in str(raised.value)
        assert time.monotonic() - start < 30
    finally:
        os.kill(pid, signal.SIGCONT)
