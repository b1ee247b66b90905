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


def test_a_gpu_named_twice_gets_two_workers_that_join_over_ucx():
    """``devices="0,0"``: dask-cuda starts one worker a GPU, the second is added beside it;
    both drive GPU 0, each with its own RMM pool, and a shuffled join between them is pandas'."""
    if not ucx_available():
        pytest.skip("distributed-ucxx not installed")
    import numpy as np
    import pandas as pd

    with gpuframe.start_cluster(devices="0,0", rmm_pool_size=0.2, protocol="ucx",
                                dashboard_address="127.0.0.1:0", warm_up=False) as engine:
        assert len(engine.workers) == 2
        devices = engine.client.run(lambda: __import__("os").environ["CUDA_VISIBLE_DEVICES"])
        assert [v.split(",")[0] for v in devices.values()] == ["0", "0"]
        names = engine.client.run(lambda dask_worker: str(dask_worker.name))
        assert sorted(names.values()) == ["0", "0-1"]
        i = np.arange(200_000)
        left = pd.DataFrame({"k": i % 50_000, "x": i})
        right = pd.DataFrame({"k": np.arange(0, 100_000, 2), "y": np.arange(50_000)})
        got = gpuframe.from_pandas(left, npartitions=4, engine=engine).merge(
            gpuframe.from_pandas(right, npartitions=4, engine=engine), on="k",
            broadcast_bytes=0).to_pandas()
        expected = left.merge(right, on="k")
        pd.testing.assert_frame_equal(got.sort_values("x").reset_index(drop=True),
                                      expected.sort_values("x").reset_index(drop=True))
