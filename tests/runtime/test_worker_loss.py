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
    assert lost in str(raised.value) and "the worker's partitions, by stage" \
        in str(raised.value)
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
        assert stopped in str(raised.value) and "the worker's partitions, by stage" \
            in str(raised.value)
        assert time.monotonic() - start < 30
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.mark.timeout(90)
def test_a_silent_worker_that_only_receives_buckets_fails_the_join(monkeypatch):
    """The stopped worker holds no input: the senders wait on it, and its bucket's consumer,
    pinned to it, waits on them. The job still fails naming it, not at Dask's worker-ttl."""
    monkeypatch.setenv("GPUFRAME_WORKER_SILENCE", "3")
    with gpuframe.start_cluster(backend="pandas", protocol="tcp", n_workers=3,
                                dashboard_address="127.0.0.1:0") as engine:
        rng = np.random.default_rng(4)
        data = pd.DataFrame({"k": rng.integers(0, 100, 4000), "v": rng.random(4000)})
        frame = gpuframe.from_pandas(data, npartitions=2, engine=engine).persist()
        other = gpuframe.from_pandas(data, npartitions=2, engine=engine).persist()
        idle = sorted(set(engine.workers) - set(frame.owners) - set(other.owners))
        assert idle, "every worker holds an input partition"
        pid = _pid_of(engine, idle[0])
        os.kill(pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            with pytest.raises(WorkerLostError, match="not been heard from") as raised:
                gpuframe.merge(frame, other, on="k", broadcast_bytes=0).to_pandas()
            assert idle[0] in str(raised.value)
            assert time.monotonic() - start < 30
        finally:
            os.kill(pid, signal.SIGCONT)


@pytest.mark.timeout(120)
def test_a_worker_restarted_for_its_memory_is_named_with_the_reason():
    """A join whose output outgrows a worker's memory limit: the nanny restarts the worker,
    and the job fails at once, saying so and what to change, not with a cancelled future."""
    from distributed import LocalCluster

    keys = pd.DataFrame({"k": np.zeros(6000, dtype="int64"), "v": np.arange(6000.0)})
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="400MiB",
                      host="127.0.0.1", dashboard_address=None) as cluster, \
            gpuframe.connect(cluster.scheduler_address) as engine:
        left = gpuframe.from_pandas(keys, engine=engine)
        right = gpuframe.from_pandas(keys.rename(columns={"v": "w"}), engine=engine)
        start = time.monotonic()
        with pytest.raises(WorkerLostError, match=r"restarted by its nanny: its process held "
                                                  r".*, more than its memory limit allows; "
                                                  r"give the workers more memory"):
            len(left.merge(right, on="k"))  # 36M rows, about 860 MiB
        assert time.monotonic() - start < 60
