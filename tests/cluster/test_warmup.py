"""A new cluster warms its workers in the background: every part ran on every worker, as a named
stage, and left nothing behind; it can be turned off."""

import pytest

import gpuframe
from gpuframe.cluster.warmup import sample_frame
from gpuframe.config import ClusterOptions, resolve
from gpuframe.diagnostics.metrics import _scheduler_stage_tasks
from gpuframe.errors import OptionError
from gpuframe.exchange.mailbox import PLUGIN_NAME


def test_the_warm_up_runs_every_part_on_every_worker():
    with pytest.warns(gpuframe.CpuFallbackWarning):
        engine = gpuframe.start_cluster(n_workers=2, protocol="tcp",
                                        dashboard_address="127.0.0.1:0")
    with engine:
        assert set(engine.warming) == set(engine.workers)  # submitted, not waited for
        warmed = engine.warmed(timeout=60)
        assert set(warmed) == set(engine.workers) and engine.warming == {}
        for parts in warmed.values():
            assert set(parts) == {"parquet", "operators", "exchange"}
            assert all(seconds > 0 for seconds in parts.values())
        stages = engine.client.run_on_scheduler(_scheduler_stage_tasks)
        assert stages["warmup"] == [2, 2]  # a named stage: submitted, done
        assert gpuframe.job_metrics() is None  # and no job of the user's
        held = engine.client.run(
            lambda dask_worker: dask_worker.plugins[PLUGIN_NAME].mailbox.exchanges())
        assert not any(held.values())  # the warm-up's deliveries were dropped
        frame = gpuframe.from_pandas(sample_frame())
        assert len(frame.merge(frame, on="s", broadcast_bytes=0)) == len(
            sample_frame().merge(sample_frame(), on="s"))


def test_the_warm_up_can_be_turned_off(monkeypatch):
    with pytest.warns(gpuframe.CpuFallbackWarning):
        engine = gpuframe.start_cluster(n_workers=1, protocol="tcp", warm_up=False,
                                        dashboard_address="127.0.0.1:0")
    with engine:
        assert engine.warming == {} and engine.warmed() == {}
    monkeypatch.setenv("GPUFRAME_WARM_UP", "no")
    assert resolve(ClusterOptions).warm_up is False
    monkeypatch.setenv("GPUFRAME_WARM_UP", "maybe")
    with pytest.raises(OptionError, match="GPUFRAME_WARM_UP='maybe' is not a valid value"):
        resolve(ClusterOptions)
