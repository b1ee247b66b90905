import time

import pytest

from gpuframe.cluster.hardware import list_gpus
from gpuframe.diagnostics.limits import measure_limits


def test_cpu_limits_are_measured_and_gpu_ones_say_why_not(tmp_path):
    started = time.perf_counter()
    limits = measure_limits(str(tmp_path))
    assert time.perf_counter() - started < 2  # it runs at every cluster start
    assert limits.memcpy > 1e8 and limits.disk_read > 1e6  # bytes/s: any real host beats these
    assert limits.notes["disk_read"] == str(tmp_path)
    assert not list(tmp_path.iterdir())  # the probe file is gone
    if not list_gpus():
        assert limits.device_copy is limits.peer_copy is limits.host_device is None
        assert all("GPU" in limits.notes[name] for name in ("device_copy", "host_device"))


def test_disk_read_in_a_missing_directory_is_na_with_the_reason(tmp_path):
    limits = measure_limits(str(tmp_path / "missing"))
    assert limits.disk_read is None
    assert "cannot measure" in limits.notes["disk_read"]
    assert limits.memcpy > 0


@pytest.mark.gpu
def test_gpu_copies_are_measured():
    import cupy

    limits = measure_limits()
    assert limits.device_copy > limits.host_device > 1e9
    if cupy.cuda.runtime.getDeviceCount() > 1:
        assert limits.peer_copy > 1e9
    else:
        assert limits.peer_copy is None and "one GPU" in limits.notes["peer_copy"]


@pytest.mark.gpu
def test_gpu_cluster_workers_report_their_device_limits():
    import gpuframe

    with gpuframe.start_cluster(dashboard_address="127.0.0.1:0") as engine:
        frame = gpuframe.from_pandas(__import__("pandas").DataFrame({"a": range(1000)}))
        assert len(frame) == 1000
        metrics = gpuframe.job_metrics(engine=engine)
        assert set(metrics.limits) == set(engine.workers)
        for limits in metrics.limits.values():
            assert limits["device_copy"] > 1e9 and limits["host_device"] > 1e9
