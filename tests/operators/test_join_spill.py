"""A join bigger than its workers' memory completes by spilling to disk (distributed's spill
buffer, on the CPU), with the same rows as pandas."""

import dask
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster

import gpuframe
from gpuframe.backend import get_backend
from gpuframe.cluster.engine import Engine

ROWS = 600_000  # 2 x 9.6 MB in, per side; each worker holds ~10 MB of inputs and buckets


@pytest.fixture(scope="module")
def small_memory_engine(tmp_path_factory):
    """Two in-process workers with 16 MB each, spilling past 30% of it; never paused (the
    process alone uses more than the limit, which is only the spill budget here)."""
    memory = {"distributed.worker.memory.target": 0.3, "distributed.worker.memory.spill": False,
              "distributed.worker.memory.pause": False,
              "distributed.worker.memory.terminate": False}
    with dask.config.set(memory):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                               memory_limit="16MB", dashboard_address=":0",
                               local_directory=str(tmp_path_factory.mktemp("spill")))
    engine = Engine(Client(cluster), get_backend("pandas"), cluster)
    yield engine
    engine.close()


def spilled_by_stage(dask_worker):
    """Bytes this worker wrote to disk, per task prefix (distributed's spill metrics)."""
    out = {}
    for key, value in dask_worker.digests_total.items():
        if key[0] == "execute" and key[-2:] == ("disk-write", "bytes"):
            out[key[2]] = out.get(key[2], 0) + value
    return out


def test_join_larger_than_worker_memory_spills_and_matches_pandas(small_memory_engine):
    engine = small_memory_engine
    rng = np.random.default_rng(8)
    left = pd.DataFrame({"k": rng.permutation(ROWS), "a": rng.random(ROWS)})
    right = pd.DataFrame({"k": rng.integers(0, 2 * ROWS, ROWS), "b": np.arange(ROWS)})
    frames = (gpuframe.from_pandas(left, npartitions=4, engine=engine),
              gpuframe.from_pandas(right, npartitions=4, engine=engine))
    budget = 0.3 * 16e6
    assert frames[0].nbytes() + frames[1].nbytes() > 4 * budget
    result = gpuframe.merge(*frames, on="k", how="left", broadcast_bytes=0)
    # one task's buckets and output may take a quarter of the 16 MB: ~9.6 MB of buckets per
    # worker alone need 3 tasks each, and the output (made twice over, as the merge builds it)
    # as much again and more
    assert result.npartitions > 6 and sorted(set(result.owners)) == sorted(engine.workers)
    spilled = engine.client.run(spilled_by_stage)
    for stages in spilled.values():
        assert sum(v for k, v in stages.items() if k.startswith("gpuframe-")) > budget, stages
        assert stages.get("gpuframe-join", 0) > 0, stages  # spilled during the join itself
    got = result.to_pandas().sort_values(["k", "b"]).reset_index(drop=True)
    expected = left.merge(right, on="k", how="left").sort_values(["k", "b"])
    pd.testing.assert_frame_equal(got, expected.reset_index(drop=True))

