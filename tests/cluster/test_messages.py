import pytest
from distributed import LocalCluster

from gpuframe.cluster.engine import connect
from gpuframe.config import RuntimeOptions
from gpuframe.errors import OptionError

DEFAULT = RuntimeOptions().message_interval


def _scheduler_streams(dask_scheduler):
    return ({w: s.interval for w, s in dask_scheduler.stream_comms.items()},
            {c: s.interval for c, s in dask_scheduler.client_comms.items()})


def _worker_stream(dask_worker):
    return dask_worker.batched_stream.interval


def test_the_engine_shortens_every_stream_between_client_scheduler_and_workers(cpu_engine):
    client = cpu_engine.client
    to_workers, to_clients = client.run_on_scheduler(_scheduler_streams)
    assert to_workers == dict.fromkeys(cpu_engine.workers, DEFAULT)
    assert to_clients[client.id] == DEFAULT
    assert client.run(_worker_stream) == dict.fromkeys(cpu_engine.workers, DEFAULT)
    assert client.scheduler_comm.interval == DEFAULT


def test_a_worker_that_joins_later_is_shortened_too(monkeypatch):
    monkeypatch.setenv("GPUFRAME_MESSAGE_INTERVAL", "0.0005")
    with LocalCluster(n_workers=1, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=":0") as cluster:
        engine = connect(cluster.scheduler_address)
        try:
            cluster.scale(2)
            engine.client.wait_for_workers(2, timeout=30)
            to_workers, _ = engine.client.run_on_scheduler(_scheduler_streams)
            assert list(to_workers.values()) == [0.0005, 0.0005]
            assert list(engine.client.run(_worker_stream).values()) == [0.0005, 0.0005]
        finally:
            engine.close()


def test_a_negative_interval_names_the_option(monkeypatch):
    monkeypatch.setenv("GPUFRAME_MESSAGE_INTERVAL", "-1")
    with LocalCluster(n_workers=1, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=":0") as cluster:
        with pytest.raises(OptionError, match="message_interval"):
            connect(cluster.scheduler_address)
