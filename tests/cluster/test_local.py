import asyncio
import os
import threading

import pandas as pd
import pytest

import gpuframe
from gpuframe.backend import get_backend
from gpuframe.cluster.hardware import Gpu, ucx_available
from gpuframe.cluster.local import (
    LOOP_THREAD_NAME,
    UCX_ENVIRONMENT,
    CpuFallbackWarning,
    check_shared_gpus,
    choose_backend,
    choose_protocol,
    parse_devices,
    start_cluster,
    ucx_environment,
)
from gpuframe.errors import BackendError, ClusterError, OptionError, ProtocolError

TWO_GPUS = [Gpu(0, "NVIDIA H200", 141 * 2**30), Gpu(1, "NVIDIA H200", 141 * 2**30)]


def test_no_gpu_falls_back_to_pandas_and_says_so():
    with pytest.warns(CpuFallbackWarning, match="no NVIDIA GPU found.*pandas"):
        assert choose_backend(None, []).name == "pandas"


def test_gpus_without_cudf_fall_back_and_name_the_missing_package(monkeypatch):
    monkeypatch.setattr("gpuframe.cluster.local.has_module", lambda name: name != "cudf")
    with pytest.warns(CpuFallbackWarning, match="cudf not installed"):
        assert choose_backend(None, TWO_GPUS).name == "pandas"


def test_gpus_with_cudf_choose_cudf(monkeypatch):
    monkeypatch.setattr("gpuframe.cluster.local.has_module", lambda name: True)
    assert choose_backend(None, TWO_GPUS).name == "cudf"


def test_cudf_asked_for_without_gpu_is_an_error():
    with pytest.raises(BackendError, match="backend='cudf' cannot run here: no NVIDIA GPU"):
        choose_backend("cudf", [])


def test_protocol_choice(monkeypatch):
    monkeypatch.setattr("gpuframe.cluster.local.ucx_available", lambda: False)
    assert choose_protocol(None, get_backend("cudf")) == "tcp"
    with pytest.raises(ProtocolError, match="protocol='ucx' needs distributed-ucxx"):
        choose_protocol("ucx", get_backend("cudf"))
    with pytest.raises(ProtocolError, match="unknown protocol 'mpi'"):
        choose_protocol("mpi", get_backend("pandas"))
    monkeypatch.setattr("gpuframe.cluster.local.ucx_available", lambda: True)
    assert choose_protocol(None, get_backend("cudf")) == "ucx"
    # UCX on CPU workers only when asked
    assert choose_protocol(None, get_backend("pandas")) == "tcp"
    assert choose_protocol("ucx", get_backend("pandas")) == "ucx"


def test_devices_are_checked_against_the_host(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert parse_devices(None, TWO_GPUS) == [0, 1]
    assert parse_devices("1", TWO_GPUS) == [1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert parse_devices(None, TWO_GPUS) == [1]
    with pytest.raises(ClusterError, match=r"GPU\(s\) \[3\].*2 GPU\(s\): 0-1"):
        parse_devices("0,3", TWO_GPUS)
    with pytest.raises(OptionError, match="devices='gpu0'"):
        parse_devices("gpu0", TWO_GPUS)


def test_workers_sharing_a_gpu_must_fit_their_pools_in_its_memory():
    """A GPU named twice gets two workers, whose RMM pools share its memory."""
    check_shared_gpus([0, 1], TWO_GPUS, 0.75)  # one worker a GPU: anything goes
    check_shared_gpus([0, 0], TWO_GPUS, 0.4)
    check_shared_gpus([0, 0], TWO_GPUS, "60GB")
    check_shared_gpus([0, 0, 0], TWO_GPUS, None)
    with pytest.raises(ClusterError, match=r"devices=0,0,1 puts 2 workers on GPU 0.*"
                                           r"rmm_pool_size=0.75.*at most 0.50"):
        check_shared_gpus([0, 0, 1], TWO_GPUS, 0.75)
    with pytest.raises(ClusterError, match="3 workers on GPU 1.*'60GB'.*at most 0.33"):
        check_shared_gpus([1, 1, 1], TWO_GPUS, "60GB")


def test_more_gpu_workers_than_gpus_is_an_error(monkeypatch):
    monkeypatch.setattr("gpuframe.cluster.local.list_gpus", lambda: TWO_GPUS)
    monkeypatch.setattr("gpuframe.cluster.local.has_module", lambda name: True)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(ClusterError, match="n_workers=3 asks for more GPU workers than the 2"):
        start_cluster(n_workers=3, protocol="tcp")


@pytest.mark.parametrize("options, error, message", [
    ({"n_workers": 0, "backend": "pandas"}, OptionError, "n_workers=0"),
    ({"threads_per_worker": 0, "backend": "pandas"}, OptionError, "threads_per_worker=0"),
    ({"protocol": "carrier-pigeon", "backend": "pandas"}, ProtocolError, "carrier-pigeon"),
    ({"backend": "polars"}, BackendError, "polars"),
    ({"workers": 2}, OptionError, "unknown option 'workers'"),
])
def test_bad_options_fail_before_anything_starts(options, error, message):
    with pytest.raises(error, match=message):
        start_cluster(**options)


def test_start_cluster_on_cpu_gives_a_current_engine():
    with pytest.warns(CpuFallbackWarning):
        engine = start_cluster(n_workers=1, protocol="tcp", dashboard_address="127.0.0.1:0")
    try:
        assert engine.backend.name == "pandas"
        assert engine.protocol == "tcp"
        assert len(engine.workers) == 1
        assert [info["nthreads"] for info in
                engine.client.scheduler_info()["workers"].values()] == [1]
        assert engine.dashboard_link.startswith("http://127.0.0.1:")
        frame = gpuframe.from_pandas(__import__("pandas").DataFrame({"x": [1, 2, 3]}))
        assert frame.engine is engine
    finally:
        engine.close()
    assert engine.cluster.status.name == "closed"


def test_ucx_progress_settings_hold_while_a_ucx_cluster_starts(monkeypatch):
    for name in UCX_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    with ucx_environment("ucx") as env:
        assert env == UCX_ENVIRONMENT
        assert {name: os.environ[name] for name in UCX_ENVIRONMENT} == UCX_ENVIRONMENT
    assert not any(name in os.environ for name in UCX_ENVIRONMENT)
    with ucx_environment("tcp") as env:
        assert env == {}
        assert not any(name in os.environ for name in UCX_ENVIRONMENT)


def test_a_user_choice_of_ucx_progress_is_left_alone(monkeypatch):
    monkeypatch.setenv("UCXPY_PROGRESS_MODE", "blocking")
    monkeypatch.delenv("UCXPY_ENABLE_PYTHON_FUTURE", raising=False)
    with ucx_environment("ucx") as env:
        assert env == {}
        assert os.environ["UCXPY_PROGRESS_MODE"] == "blocking"
        assert "UCXPY_ENABLE_PYTHON_FUTURE" not in os.environ


def ucx_progress() -> tuple[str, bool]:
    """On a worker: how its UCX-Py context progresses (its UCX connections started it)."""
    import ucxx

    context = ucxx.core._get_ctx()
    return context.progress_mode, context._enable_python_future


@pytest.mark.skipif(not ucx_available(), reason="distributed-ucxx not installed")
def test_ucx_workers_progress_by_thread_with_futures(monkeypatch):
    for name in UCX_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    with start_cluster(backend="pandas", protocol="ucx", n_workers=2,
                       dashboard_address="127.0.0.1:0") as engine:
        frame = gpuframe.from_pandas(__import__("pandas").DataFrame({"x": range(10)}),
                                     npartitions=2)
        assert len(frame) == 10
        assert list(engine.client.run(ucx_progress).values()) == [("thread", True)] * 2
    assert not any(name in os.environ for name in UCX_ENVIRONMENT)


def notifier_on_a_stopped_loop() -> None:
    """What a closed UCX cluster can leave in its process: UCX-Py's notifier thread bound to the
    cluster's event loop, which has stopped and closed."""
    import distributed_ucxx.ucxx
    import ucxx

    async def start_notifier():
        distributed_ucxx.ucxx.init_once()
        ucxx.core._get_ctx().start_notifier_thread()

    loop = asyncio.new_event_loop()
    with ucx_environment("ucx"):
        loop.run_until_complete(start_notifier())
    loop.close()
    assert ucxx.core._get_ctx().notifier_thread is not None


@pytest.mark.skipif(not ucx_available(), reason="distributed-ucxx not installed")
def test_a_ucx_cluster_starts_after_one_left_its_notifier_on_a_stopped_loop(monkeypatch):
    for name in UCX_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    notifier_on_a_stopped_loop()
    with start_cluster(backend="pandas", protocol="ucx", n_workers=2,
                       dashboard_address="127.0.0.1:0") as engine:
        keys = gpuframe.from_pandas(pd.DataFrame({"k": range(10)}), npartitions=2)
        assert len(keys.merge(keys, on="k", broadcast_bytes=0).to_pandas()) == 10
        assert all(worker.startswith("ucx://") for worker in engine.workers)


def notifier_on_a_loop_shutting_down() -> threading.Event:
    """What a closed UCX cluster can leave on a loaded machine: UCX-Py's notifier thread bound
    to the cluster's event loop, which its Dask loop runner has stopped (it waited 10 s) but
    which still runs in its thread, shutting down. Set the event returned to let it end."""
    import distributed_ucxx.ucxx
    import ucxx

    bound, ending = threading.Event(), threading.Event()

    async def hold_the_notifier():
        distributed_ucxx.ucxx.init_once()
        context = ucxx.core._get_ctx()
        context.stop_notifier_thread()  # any earlier test's, so that it binds to this loop
        context.worker.clear_python_futures_pool()
        context.start_notifier_thread()
        bound.set()
        await asyncio.get_running_loop().run_in_executor(None, ending.wait)

    def run():
        loop = asyncio.new_event_loop()
        loop.run_until_complete(hold_the_notifier())
        loop.close()

    with ucx_environment("ucx"):
        threading.Thread(target=run, name=LOOP_THREAD_NAME, daemon=True).start()
        assert bound.wait(30)
    return ending


@pytest.mark.skipif(not ucx_available(), reason="distributed-ucxx not installed")
def test_a_ucx_cluster_starts_while_a_closed_clusters_loop_still_shuts_down(monkeypatch):
    for name in UCX_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    ending = notifier_on_a_loop_shutting_down()
    try:
        with start_cluster(backend="pandas", protocol="ucx", n_workers=2,
                           dashboard_address="127.0.0.1:0") as engine:
            keys = gpuframe.from_pandas(pd.DataFrame({"k": range(10)}), npartitions=2)
            assert len(keys.merge(keys, on="k", broadcast_bytes=0).to_pandas()) == 10
            assert all(worker.startswith("ucx://") for worker in engine.workers)
    finally:
        ending.set()


@pytest.mark.skipif(not ucx_available(), reason="distributed-ucxx not installed")
@pytest.mark.parametrize("options, listens_on", [
    ({}, "tcp"), ({"scheduler_protocol": "ucx"}, "ucx"), ({"scheduler_protocol": None}, "ucx")])
def test_the_scheduler_of_a_ucx_cluster_listens_on_tcp_unless_asked(options, listens_on):
    """The scheduler's small messages go over TCP by default (None: the workers' protocol);
    the workers' data goes over UCX either way."""
    with start_cluster(backend="pandas", protocol="ucx", n_workers=2,
                       dashboard_address="127.0.0.1:0", **options) as engine:
        assert engine.scheduler_address.startswith(f"{listens_on}://")
        assert engine.protocol == "ucx"
        assert all(worker.startswith("ucx://") for worker in engine.workers)
        keys = gpuframe.from_pandas(pd.DataFrame({"k": range(100)}), npartitions=4)
        assert len(keys.merge(keys, on="k", broadcast_bytes=0).to_pandas()) == 100


def test_an_unknown_scheduler_protocol_is_refused_before_anything_starts():
    with pytest.raises(ProtocolError, match="unknown protocol 'udp'"):
        start_cluster(backend="pandas", scheduler_protocol="udp")


@pytest.mark.skipif(not ucx_available(), reason="distributed-ucxx not installed")
def test_a_scheduler_over_ucx_keeps_the_notifier_thread_until_its_cluster_has_closed(monkeypatch):
    """Stopped while the close aborts the cluster's watch on its scheduler, the thread never
    completes that pending read, and the close waits forever (on a loaded machine). So the
    thread stops, if at all, once the cluster has closed: not at all where UCX connections of
    the process's other clusters (earlier tests') still hold it."""
    import ucxx

    stops = []
    stop = ucxx.stop_notifier_thread
    engine = start_cluster(backend="pandas", protocol="ucx", n_workers=1,
                           dashboard_address="127.0.0.1:0", scheduler_protocol="ucx")
    cluster = engine.cluster

    def recording_stop():
        stops.append(cluster.status.name)
        stop()

    monkeypatch.setattr(ucxx, "stop_notifier_thread", recording_stop)
    engine.close()
    assert all(status == "closed" for status in stops), stops  # without the hold: "closing"
    assert (ucxx.core._get_ctx().notifier_thread is None) == bool(stops)
