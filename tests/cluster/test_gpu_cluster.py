"""GPU bring-up: one worker per GPU, over UCX and TCP, and the demo on cuDF (run on the device)."""

import pytest

import gpuframe
from gpuframe.cluster.hardware import list_gpus, ucx_available
from gpuframe.cluster.local import GPU_THREADS_PER_WORKER
from gpuframe.demo import run_demo

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("protocol", ["ucx", "tcp"])
def test_one_worker_per_gpu_and_demo_on_cudf(protocol):
    if protocol == "ucx" and not ucx_available():
        pytest.skip("distributed-ucxx not installed")
    with gpuframe.start_cluster(protocol=protocol) as engine:
        assert engine.backend.name == "cudf"
        assert engine.protocol == protocol
        assert len(engine.workers) == len(list_gpus())
        threads = engine.client.scheduler_info()["workers"]
        assert {info["nthreads"] for info in threads.values()} == {GPU_THREADS_PER_WORKER}
        devices = engine.client.run(lambda: __import__("os").environ["CUDA_VISIBLE_DEVICES"])
        assert sorted(v.split(",")[0] for v in devices.values()) == \
            [str(g.index) for g in list_gpus()]
        warmed = engine.warmed(timeout=120)  # cuDF, the core and every peer link, on GPUs
        assert set(warmed) == set(engine.workers)
        assert all(set(parts) == {"parquet", "operators", "exchange", "kvikio"}
                   for parts in warmed.values())
        left = engine.client.run(lambda dask_worker: [
            name for name in __import__("os").listdir(dask_worker.local_directory)
            if name.startswith("gpuframe-warmup-")])
        assert not any(left.values())  # its Parquet file and KvikIO's sparse file removed
        result = run_demo(engine, rows=2_000_000)
        assert result.matches_pandas
        assert set(result.partitions_per_worker) == set(engine.workers)


def test_more_workers_than_gpus_is_refused():
    with pytest.raises(gpuframe.GpuframeError, match="more GPU workers"):
        gpuframe.start_cluster(n_workers=len(list_gpus()) + 1, protocol="tcp")
