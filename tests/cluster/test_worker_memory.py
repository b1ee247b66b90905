"""What a worker can hold: its memory limit, and its spill disk only where it spills."""

import dask
from distributed import Client, LocalCluster

from gpuframe.cluster.memory import this_worker_memory


def memory_of(config: dict, memory_limit: str | int):
    with dask.config.set(config), \
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
