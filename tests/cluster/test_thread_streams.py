"""Workers whose threads run cuDF on streams of their own settle each task's stream before the
task counts as done; others keep Dask's executor. Real Dask workers; a recorder stands in for the
stream's synchronization, which needs a GPU."""

from __future__ import annotations

import sys
import threading
import types

import pytest
from distributed import Client, LocalCluster
from distributed.threadpoolexecutor import ThreadPoolExecutor

from gpuframe.cluster import thread_streams
from gpuframe.cluster.hardware import Gpu
from gpuframe.cluster.local import start_cluster
from gpuframe.cluster.thread_streams import SettlingThreadPoolExecutor, ThreadStreams

SETTLED: list[int] = []
"""The threads that settled, one entry per settle (the workers run in this process)."""


def record_settle() -> None:
    SETTLED.append(threading.get_ident())


def running_thread(i: int) -> int:
    return threading.get_ident()


def on_device() -> bool:
    return True


def on_host() -> bool:
    return False


@pytest.mark.parametrize("threads, streams, device, settling", [
    (2, "1", on_device, True),
    (1, "1", on_device, False),  # one thread: one stream, in order
    (2, None, on_device, False),  # cuDF on the legacy stream: one line
    (2, "1", on_host, False),  # no cuDF on a GPU: no stream to settle
])
def test_tasks_settle_their_thread_s_stream_where_threads_run_cudf_on_their_own(
        monkeypatch, threads, streams, device, settling):
    if streams is None:
        monkeypatch.delenv(thread_streams.ENVIRONMENT, raising=False)
    else:
        monkeypatch.setenv(thread_streams.ENVIRONMENT, streams)
    SETTLED.clear()
    with LocalCluster(n_workers=1, threads_per_worker=threads, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        client.register_plugin(ThreadStreams(record_settle, device),
                               name=thread_streams.PLUGIN_NAME)
        executor = client.run(lambda dask_worker: type(dask_worker.executors["default"]))
        futures = client.map(running_thread, range(40), pure=False)
        ran = client.gather(futures)
    assert list(executor.values()) == [SettlingThreadPoolExecutor if settling
                                       else ThreadPoolExecutor]
    if settling:  # once per task, by the thread that ran it, before its result was given
        assert sorted(SETTLED) == sorted(ran)
        assert len(set(ran)) <= threads
    else:
        assert SETTLED == []


def test_gpu_workers_run_cudf_on_streams_of_their_own_where_asked(monkeypatch):
    """start_cluster sets pylibcudf's switch in the GPU workers' environment where
    thread_streams asks for it, and not otherwise."""
    started: list[dict] = []

    class Started(Exception):
        pass

    def cluster(**kwargs: object) -> None:
        started.append(dict(kwargs["env"]))  # type: ignore[call-overload]
        raise Started

    monkeypatch.setitem(sys.modules, "dask_cuda", types.SimpleNamespace(LocalCUDACluster=cluster))
    monkeypatch.setattr("gpuframe.cluster.local.list_gpus", lambda: [Gpu(0, "GPU", 2**34)])
    monkeypatch.setattr("gpuframe.cluster.local.has_module", lambda name: True)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for options in ({"threads_per_worker": 4, "thread_streams": True},
                    {"threads_per_worker": 4}, {"threads_per_worker": 1}):
        with pytest.raises(Started):
            start_cluster(protocol="tcp", **options)
    assert [env.get(thread_streams.ENVIRONMENT) for env in started] == ["1", None, None]


@pytest.mark.gpu
@pytest.mark.parametrize("streams", [False, True])
def test_gpu_workers_of_several_threads_join_and_aggregate_right(streams, tmp_path):
    """Reads, a shuffle join and an aggregate on GPU workers of three threads, each thread's
    reads on its own stream, and with ``thread_streams`` all its cuDF work: the rows pandas
    gives, in every round (tasks on several threads at once, buckets handed between them)."""
    import numpy as np
    import pandas as pd

    import gpuframe

    rng = np.random.default_rng(5)
    n = 400_000
    for i in range(6):
        pd.DataFrame({"k": rng.integers(0, n, n), "v": rng.random(n)}).to_parquet(
            tmp_path / f"left-{i}.parquet")
        pd.DataFrame({"k": rng.permutation(n)[: n // 2], "w": rng.integers(0, 7, n // 2)}
                     ).to_parquet(tmp_path / f"right-{i}.parquet")
    left = pd.read_parquet([tmp_path / f"left-{i}.parquet" for i in range(6)])
    right = pd.read_parquet([tmp_path / f"right-{i}.parquet" for i in range(6)])
    expected = (left.merge(right, on="k").groupby("w", as_index=False)
                .agg(total=("v", "sum"), rows=("v", "size")).sort_values("w", ignore_index=True))
    with gpuframe.start_cluster(backend="cudf", protocol="tcp", threads_per_worker=3,
                                thread_streams=streams, dashboard_address="127.0.0.1:0"):
        for _ in range(3):
            joined = gpuframe.read_parquet(str(tmp_path / "left-*.parquet")).merge(
                gpuframe.read_parquet(str(tmp_path / "right-*.parquet")), on="k",
                broadcast_bytes=0)
            got = (joined.groupby("w", as_index=False)
                   .agg(total=("v", "sum"), rows=("v", "size")).to_pandas()
                   .sort_values("w", ignore_index=True))
            pd.testing.assert_frame_equal(got, expected, check_dtype=False, rtol=1e-9)
