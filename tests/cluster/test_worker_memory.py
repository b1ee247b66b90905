"""What a worker can hold: its memory limit, and its spill disk only where it spills."""

import dask
from distributed import Client, LocalCluster

from gpuframe.cluster.memory import this_worker_memory


def memory_of(config: dict, memory_limit: str | int):
    # The worker runs in this process, whose memory (the whole test session's) may pass the
    # limit's pause threshold before its task runs: it would then never run.
    unpaused = {"distributed.worker.memory.pause": False, **config}
    with dask.config.set(unpaused), \
            LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                         memory_limit=memory_limit, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        return client.submit(this_worker_memory).result()


def test_a_worker_that_spills_can_hold_its_limit_and_its_free_disk():
    found = memory_of({}, "300MiB")
    assert found.limit == 300 * 2**20
    assert found.room is not None and found.room > found.limit


def test_a_worker_that_never_spills_holds_its_limit_alone_and_one_without_a_limit_anything():
    never = {"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False}
    found = memory_of(never, "300MiB")
    assert (found.limit, found.room) == (300 * 2**20, 300 * 2**20)
    unlimited = memory_of({}, 0)
    assert (unlimited.limit, unlimited.room) == (None, None)


def test_outside_a_worker_there_is_nothing_to_tell():
    assert this_worker_memory() is None


def test_a_dask_cuda_store_tells_its_device_limit_and_others_none():
    """DeviceHostFile keeps the limit as its device buffer's spill threshold (zict's ``n``),
    ProxifyHostFile in its manager; a plain worker's store has none."""
    from types import SimpleNamespace

    import zict

    from gpuframe.cluster.memory import device_memory_limit

    device_host_file = SimpleNamespace(device_buffer=zict.Buffer({}, {}, 2**30))
    proxify_host_file = SimpleNamespace(manager=SimpleNamespace(_device_memory_limit=2**29))
    assert device_memory_limit(device_host_file) == 2**30
    assert device_memory_limit(proxify_host_file) == 2**29
    assert device_memory_limit({}) is None


def test_the_workers_gpuframe_starts_spill_early_unless_configured_otherwise():
    """An exchange and a join hold more than their results: gpuframe's workers spill at 30%
    of their limit (Dask's default 60%); a value the user set is kept."""
    import gpuframe

    def spills_at(dask_worker):
        return (dask_worker.memory_manager.memory_target_fraction,
                dask_worker.memory_manager.memory_spill_fraction)

    with gpuframe.start_cluster(backend="pandas", n_workers=1,
                                dashboard_address="127.0.0.1:0") as engine:
        assert list(engine.client.run(spills_at).values()) == [(0.3, 0.4)]
    with dask.config.set({"distributed.worker.memory.target": 0.5}), \
            gpuframe.start_cluster(backend="pandas", n_workers=1,
                                   dashboard_address="127.0.0.1:0") as engine:
        assert list(engine.client.run(spills_at).values()) == [(0.5, 0.4)]
