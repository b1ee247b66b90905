"""One budget of requests in flight per host and store: tokens that the requests of every
thread and process of the host take, given back by a process that dies holding them."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from dataclasses import replace

import pytest

from gpuframe.io.planning.plan import plan_fragments
from gpuframe.io.readers.fetch import FileFetcher
from gpuframe.io.storage.base import storage_options
from gpuframe.io.tasks import fragment_tasks
from gpuframe.io.tuning.budget import OFD_LOCKS, NodeBudget, node_budget
from gpuframe.io.tuning.model import Concurrency

pytestmark = pytest.mark.skipif(not OFD_LOCKS, reason="no locks of open file descriptions")

MEASURED = Concurrency(latency_s=0.001, bandwidth=1e9, requests_in_flight=3,
                       request_size=2**20, node_readers=2)


class InFlight:
    """Requests in flight now, and the most at once, over every process that shares it."""

    def __init__(self, context=multiprocessing):
        self.now = context.Value("i", 0)
        self.most = context.Value("i", 0)

    def fetch(self, piece: int) -> int:
        with self.now.get_lock():
            self.now.value += 1
            self.most.value = max(self.most.value, self.now.value)
        time.sleep(0.02)
        with self.now.get_lock():
            self.now.value -= 1
        return piece * 2


def fetch_all(directory: str, counter: InFlight, start: multiprocessing.Event) -> None:
    start.wait()
    NodeBudget("http/store", 4, directory).run(range(24), counter.fetch)


def hold_every_token(directory: str, held: multiprocessing.Event) -> None:
    with NodeBudget("http/store", 4, directory).lease(4):
        held.set()
        time.sleep(60)


def test_the_requests_of_one_fetch_keep_the_whole_budget_in_flight(tmp_path):
    counter = InFlight()
    budget = NodeBudget("http/store", 4, str(tmp_path))
    assert budget.run(list(range(20)), counter.fetch, threads=16) == [i * 2 for i in range(20)]
    assert counter.most.value == 4
    assert budget.held() == 0


def test_fetches_of_two_processes_share_one_budget(tmp_path):
    """Each process alone would keep 4 requests in flight: together they keep 4, not 8."""
    context = multiprocessing.get_context("spawn")
    counter, start = InFlight(context), context.Event()
    processes = [context.Process(target=fetch_all, args=(str(tmp_path), counter, start))
                 for _ in range(2)]
    for process in processes:
        process.start()
    start.set()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    assert counter.most.value == 4


def test_a_process_killed_holding_tokens_gives_them_back(tmp_path):
    context = multiprocessing.get_context("spawn")
    held = context.Event()
    holder = context.Process(target=hold_every_token, args=(str(tmp_path), held))
    holder.start()
    try:
        assert held.wait(60)
        budget = NodeBudget("http/store", 4, str(tmp_path))
        assert budget.held() == 4
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(10)
        with budget.lease(4) as leased:
            assert leased == 4
    finally:
        holder.kill()


def test_a_lease_takes_what_is_free_and_waits_while_nothing_is(tmp_path):
    budget = NodeBudget("http/store", 4, str(tmp_path))
    leased: list[int] = []
    waiter = threading.Thread(target=lambda: leased.append(_lease_once(budget, 2)))
    with budget.lease(3) as first:
        assert first == 3
        with budget.lease(4) as second:
            assert second == 1
            waiter.start()
            time.sleep(0.2)
            assert waiter.is_alive() and not leased, "no token is free: the lease waits"
    waiter.join(10)
    assert leased and 1 <= leased[0] <= 2


def _lease_once(budget: NodeBudget, wanted: int) -> int:
    with budget.lease(wanted) as leased:
        return leased


def test_a_failed_request_is_raised_once_the_others_have_stopped(tmp_path):
    budget = NodeBudget("http/store", 3, str(tmp_path))

    def fetch(piece: int) -> int:
        if piece == 5:
            raise OSError("bytes 5-6: connection reset")
        return piece

    with pytest.raises(OSError, match="connection reset"):
        budget.run(list(range(40)), fetch)
    assert budget.held() == 0


def test_a_budget_is_the_requests_of_every_reader_of_the_busiest_host():
    options = storage_options()
    budget = node_budget("http://store:80/data/a.parquet", options, MEASURED)
    assert budget is not None and budget.tokens == 6
    again = node_budget("http://store:80/other/b.parquet", options, MEASURED)
    assert again is not None and again.path == budget.path, "one budget per store"
    assert node_budget("/data/a.parquet", options, MEASURED) is None
    assert node_budget("http://store:80/a", options, replace(MEASURED, node_readers=0)) is None
    assert node_budget("http://store:80/a", options,
                       replace(MEASURED, source="configured")) is None


def test_a_fetchers_requests_wait_for_the_hosts_tokens(http_server):
    """A worker's read of a remote file waits while the host's other readers hold the whole
    budget, and goes on once they give it back."""
    [task, *_] = fragment_tasks(plan_fragments(f"{http_server.url}/flat/part-0.parquet",
                                               storage={"requests_in_flight": 2}))
    task = replace(task, concurrency=replace(MEASURED, requests_in_flight=1, node_readers=2))
    ranges = [(0, 100), (100, 50)]
    got: list[bytes] = []
    with FileFetcher(task) as fetcher:
        threads, budget = fetcher.budgeted(ranges)
        assert budget is not None and budget.tokens > 1
        assert threads == min(budget.tokens, task.storage.max_requests_in_flight)
        reader = threading.Thread(target=lambda: got.extend(fetcher.bytes(ranges)))
        with budget.lease(budget.tokens) as held:
            assert held == budget.tokens
            reader.start()
            time.sleep(0.3)
            assert reader.is_alive() and not got
        reader.join(30)
    data = (http_server.root / "flat" / "part-0.parquet").read_bytes()
    assert got == [data[:100], data[100:150]]
