"""A new cluster warms its workers in the background: every part ran on every worker, beside a
query rather than ahead of it, and left nothing behind; it can be turned off."""

import pytest

import gpuframe
from gpuframe.cluster.warmup import sample_frame
from gpuframe.config import ClusterOptions, resolve
from gpuframe.diagnostics.metrics import _scheduler_stage_tasks
from gpuframe.errors import OptionError
from gpuframe.exchange.mailbox import PLUGIN_NAME


def test_the_warm_up_runs_every_part_on_every_worker():
    with pytest.warns(gpuframe.CpuFallbackWarning):
        engine = gpuframe.start_cluster(n_workers=2, protocol="tcp", warm_up=True,
                                        dashboard_address="127.0.0.1:0")
    with engine:
        assert engine.warming == engine.workers  # started, not waited for
        frame = gpuframe.from_pandas(sample_frame())
        expected = len(sample_frame().merge(sample_frame(), on="s"))
        assert len(frame.merge(frame, on="s", broadcast_bytes=0)) == expected  # meanwhile
        warmed = engine.warmed(timeout=60)
        assert set(warmed) == set(engine.workers) and engine.warming == []
        for parts in warmed.values():
            assert set(parts) == {"parquet", "operators", "exchange"}
            assert all(seconds > 0 for seconds in parts.values())
        stages = engine.client.run_on_scheduler(_scheduler_stage_tasks)
        assert "warmup" not in stages  # no task, so no worker's thread is taken from a query
        held = engine.client.run(
            lambda dask_worker: dask_worker.plugins[PLUGIN_NAME].mailbox.exchanges())
        assert not any(held.values())  # the warm-up's deliveries were dropped


@pytest.mark.parametrize("asked", [False, None])  # None: GPU workers only
def test_the_warm_up_can_be_turned_off_and_is_off_on_cpus(monkeypatch, asked):
    with pytest.warns(gpuframe.CpuFallbackWarning):
        engine = gpuframe.start_cluster(n_workers=1, protocol="tcp", warm_up=asked,
                                        dashboard_address="127.0.0.1:0")
    with engine:
        assert engine.warming == [] and engine.warmed() == {}
    monkeypatch.setenv("GPUFRAME_WARM_UP", "no")
    assert resolve(ClusterOptions).warm_up is False
    monkeypatch.setenv("GPUFRAME_WARM_UP", "maybe")
    with pytest.raises(OptionError, match="GPUFRAME_WARM_UP='maybe' is not a valid value"):
        resolve(ClusterOptions)


def test_a_failed_warm_up_is_raised_by_warmed_and_nowhere_else(engine):
    from gpuframe.cluster import warmup

    workers = engine.workers
    engine.client.run(warmup.begin, "no-such-backend", workers, False, workers=workers)
    engine.warming = workers
    with pytest.raises(gpuframe.GpuframeError, match="no-such-backend"):
        engine.warmed(timeout=30)
    assert engine.warming == []
    assert len(gpuframe.from_pandas(sample_frame())) == len(sample_frame())


def test_the_warm_up_reads_as_a_user_of_kvikio(tmp_path, monkeypatch):
    """cuDF's reads go through KvikIO's pool of threads: a query's read beside the warm-up's
    must not replace that pool under it, so the warm-up's Parquet round trip counts as a user
    of KvikIO's settings."""
    from types import SimpleNamespace

    import pandas as pd

    from gpuframe.cluster import warmup
    from gpuframe.io.readers.device import KVIKIO

    users = []
    read = pd.read_parquet

    def counted(*args, **kwargs):
        users.append(KVIKIO._users)
        return read(*args, **kwargs)

    monkeypatch.setattr(pd, "read_parquet", counted)
    monkeypatch.setattr(warmup, "send_from", lambda *args: None)
    monkeypatch.setattr(warmup, "forget", lambda *args: None)
    worker = SimpleNamespace(local_directory=str(tmp_path), address="tcp://127.0.0.1:1")
    parts = warmup.warm_worker(worker, "pandas", [worker.address], False)
    assert set(parts) == {"parquet", "operators", "exchange"}
    assert users == [1] and KVIKIO._users == 0
    assert list(tmp_path.iterdir()) == []  # its file removed


@pytest.mark.gpu
def test_kvikio_s_warm_up_reads_its_sparse_file_as_a_user_of_kvikio_and_removes_it(
        tmp_path, monkeypatch):
    """The reads that make KvikIO's bounce buffers count as a user of its settings (a query's
    read beside them keeps the pool of threads) and leave no file."""
    import kvikio

    from gpuframe.cluster import warmup
    from gpuframe.io.readers.device import KVIKIO

    users = []
    read = kvikio.CuFile.pread

    def counted(self, *args, **kwargs):
        users.append(KVIKIO._users)
        return read(self, *args, **kwargs)

    monkeypatch.setattr(kvikio.CuFile, "pread", counted)
    warmup.warm_kvikio(str(tmp_path))
    threads = warmup.storage_options().max_requests_in_flight
    assert users == [1] * threads and KVIKIO._users == 0
    assert list(tmp_path.iterdir()) == []
