"""The direct exchange's mailboxes: pieces filed, taken once, checked against the receipts, and
dropped when no consumer needs them, even when the job fails."""

import socket
import threading
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

import gpuframe
from gpuframe.errors import OptionError
from gpuframe.exchange.exchange import exchange
from gpuframe.exchange.mailbox import (
    PIECE_PREFIX,
    PLUGIN_NAME,
    Claim,
    ExchangeError,
    Mailbox,
    MailboxPlugin,
    Receipt,
    arrivals,
    send,
)
from gpuframe.exchange.pack import hash_split
from gpuframe.exchange.placement import Contiguous
from gpuframe.exchange.splitters import HashSplitter
from gpuframe.runtime.runner import Job


def test_a_mailbox_gives_each_bucket_once_and_discards_late_pieces():
    data = {}
    box = Mailbox(data)
    assert box.put("x", 0, {0: "a0", 1: "a1"}) and box.put("x", 1, {1: "b1"})
    assert len(data) == 3  # held in the worker's data store
    assert box.take("x", 1) == {0: "a1", 1: "b1"}
    assert box.take("x", 1) == {}
    assert box.exchanges() == {"x": 1}
    box.drop("x")
    assert box.exchanges() == {} and data == {}
    assert not box.put("x", 2, {0: "late"})  # a cancelled sender's piece, after the drop
    assert box.exchanges() == {} and data == {}


class SlowStore(dict):
    """A data store whose reads wait for ``release``, as a spilled piece's read from disk."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = threading.Event()
        self.release = threading.Event()

    def __getitem__(self, key):
        self.reading.set()
        assert self.release.wait(30)
        return super().__getitem__(key)


def test_a_take_reading_a_spilled_piece_holds_up_no_delivery():
    """A task's take reads its pieces back outside the mailbox's lock: a delivery (filed on the
    worker's event loop) meanwhile goes through at once."""
    data = SlowStore()
    box = Mailbox(data)
    box.put("x", 0, {0: "a0", 1: "a1"})
    taken = {}
    taking = threading.Thread(target=lambda: taken.update(box.take("x", 0)))
    taking.start()
    assert data.reading.wait(30)
    delivered = threading.Thread(target=box.put, args=("x", 1, {1: "b1"}))
    delivered.start()
    delivered.join(timeout=5)
    alive = delivered.is_alive()
    data.release.set()
    taking.join(timeout=30)
    delivered.join(timeout=30)
    assert not alive, "the delivery waited for the take's read"
    assert taken == {0: "a0"}
    assert box.take("x", 1) == {0: "a1", 1: "b1"} and data == {}


def test_pieces_spill_to_disk_with_the_workers_results(tmp_path):
    from distributed.spill import SpillBuffer

    data = SpillBuffer(str(tmp_path), target=2_000_000)  # a worker's store, 2 MB in memory
    box = Mailbox(data)
    pieces = {b: pd.DataFrame({"x": np.arange(100_000) + b}) for b in range(8)}  # 0.8 MB each
    box.put("x", 0, pieces)
    assert len(data.slow) >= 5  # spilled to disk, as any result would be
    got = {b: box.take("x", b)[0] for b in range(8)}
    for b, frame in pieces.items():
        pd.testing.assert_frame_equal(got[b], frame)
    assert len(data) == 0


def held(engine) -> dict:
    """Pieces held per worker, for every exchange."""
    return engine.client.run(
        lambda dask_worker: dask_worker.plugins[PLUGIN_NAME].mailbox.exchanges())


def wait_until_empty(engine, seconds=10.0) -> dict:
    deadline = time.monotonic() + seconds
    while (left := held(engine)) and any(left.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture
def frames(engine):
    rng = np.random.default_rng(5)
    left = pd.DataFrame({"k": rng.integers(0, 2000, 30_000), "a": rng.random(30_000)})
    right = pd.DataFrame({"k": np.arange(2000), "b": np.arange(2000) * 3})
    return left, right


def test_nothing_stays_in_the_mailboxes_after_a_join(engine, frames):
    left, right = frames
    result = gpuframe.from_pandas(left, npartitions=6).merge(
        gpuframe.from_pandas(right, npartitions=4), on="k", broadcast_bytes=0).to_pandas()
    assert len(result) == len(left.merge(right, on="k"))
    assert not any(wait_until_empty(engine).values())


def boom(parts):
    raise RuntimeError("a consumer failed")


def test_a_failed_job_leaves_nothing_in_the_mailboxes(engine, frames):
    left, _ = frames
    frame = gpuframe.from_pandas(left, npartitions=6).persist()
    with pytest.raises(gpuframe.GpuframeError, match="a consumer failed"):
        with Job(engine, "test") as job:
            buckets = exchange(job, frame.partitions, HashSplitter(("k",), 4), Contiguous(),
                               "left")
            stage = job.stage("collect")
            futures = [stage.submit(arrivals if b else boom, parts, index=(b,), owner=owner)
                       for b, (parts, owner) in enumerate(zip(buckets.parts, buckets.owners))]
            job.wait(futures)
    assert not any(wait_until_empty(engine).values())


def test_a_missing_piece_fails_the_bucket_naming_it(engine):
    receipts = [Receipt({0: [5, 0]}), Receipt({3: [0, 2]})]
    future = engine.client.submit(arrivals, [Claim("no-such-exchange", 0), *receipts],
                                  pure=False)
    with pytest.raises(ExchangeError, match=r"bucket 0 .* partitions \[0, 3\] never arrived"):
        future.result()


def test_a_receipt_copy_dropped_alone_leaves_the_pieces(engine):
    """Dask's active memory manager drops the extra copies of a key: the sender's copy of a
    receipt that a consumer's worker fetched may go while that worker's consumers wait, and
    the pieces must stay until the receipt is released everywhere."""
    sender, consumer = engine.workers[:2]
    exchange_id = "gpuframe-send-test-0a.1"
    key = f"{exchange_id}-0"
    engine.client.run(lambda dask_worker: dask_worker.plugins[PLUGIN_NAME].mailbox.put(
        exchange_id, 0, {0: "piece"}))
    receipt = engine.client.submit(Receipt, {0: [1]}, exchange_id, (sender, consumer),
                                   key=key, workers=[sender])
    receipt.result()
    engine.client.replicate([receipt])
    engine.client.run_on_scheduler(lambda dask_scheduler: dask_scheduler
                                   .request_remove_replicas(sender, [key], stimulus_id="test"))
    deadline = time.monotonic() + 10
    while engine.client.who_has([receipt])[key] != (consumer,):
        assert time.monotonic() < deadline, engine.client.who_has([receipt])
        time.sleep(0.05)
    time.sleep(0.5)  # the sender's release, had it dropped the exchange, would have by now
    assert held(engine) == {sender: {exchange_id: 1}, consumer: {exchange_id: 1}}
    del receipt
    assert not any(wait_until_empty(engine).values())


def test_a_send_task_given_up_mid_delivery_frees_its_worker_and_its_pieces(engine):
    """A delivery to a peer that is gone retries its connection for Dask's connect timeout;
    once the job gives the send task up, the worker's thread must not wait that long, and the
    bucket it kept for itself must not stay behind: no receipt will drop it."""
    worker = engine.workers[0]
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        gone = f"tcp://127.0.0.1:{closed.getsockname()[1]}"
    exchange_id = "gpuframe-send-test-0b.1"
    sending = engine.client.submit(send, f"{exchange_id}-0", exchange_id, HashSplitter(("k",), 2),
                                   (worker, gone), [0], False, pd.DataFrame({"k": range(10)}),
                                   key=f"{exchange_id}-0", workers=[worker])
    time.sleep(1)  # the delivery is retrying by now
    assert held(engine)[worker] == {exchange_id: 1}
    sending.cancel()
    start = time.monotonic()
    assert engine.client.submit(int, 1, workers=[worker], pure=False).result(timeout=20) == 1
    assert time.monotonic() - start < 5
    assert not any(wait_until_empty(engine).values())


def test_buckets_travel_and_wait_sealed_and_open_as_their_frames(engine):
    """Rows the packing holds whole are sent and filed as one buffer a bucket, here and at the
    peer, and the consumer opens the frame the split gives."""
    workers = tuple(engine.workers[:2])
    exchange_id = "gpuframe-send-test-0d.1"
    part = pd.DataFrame({"k": np.arange(100), "v": np.arange(100) * 2.0, "s": ["x"] * 100})
    receipt = engine.client.submit(send, f"{exchange_id}-0", exchange_id, HashSplitter(("k",), 2),
                                   workers, [0], False, part, key=f"{exchange_id}-0",
                                   workers=[workers[0]])
    receipt.result()
    filed = engine.client.run(lambda dask_worker: sorted(
        type(piece).__name__ for key, piece in dask_worker.data.items()
        if str(key).startswith(f"{PIECE_PREFIX}{exchange_id}")))
    assert filed == {worker: ["Parcel"] for worker in workers}
    for b, (worker, expected) in enumerate(zip(workers, hash_split(part, ["k"], 2))):
        got = engine.client.submit(arrivals, [Claim(exchange_id, b), receipt], workers=[worker],
                                   pure=False).result()
        pd.testing.assert_frame_equal(got[0], expected)
    del receipt
    assert not any(wait_until_empty(engine).values())


@pytest.mark.parametrize("how", ["inner", "left", "outer"])
def test_both_exchanges_give_the_same_rows(engine, frames, how, monkeypatch):
    left, right = frames
    answers = {}
    for way in ("direct", "tasks"):
        monkeypatch.setenv("GPUFRAME_EXCHANGE", way)
        joined = gpuframe.from_pandas(left, npartitions=5).merge(
            gpuframe.from_pandas(right, npartitions=3), on="k", how=how, broadcast_bytes=0)
        answers[way] = joined.to_pandas().sort_values(["k", "a"], ignore_index=True)
    pd.testing.assert_frame_equal(answers["direct"], answers["tasks"])


def test_an_unknown_exchange_is_refused_naming_the_option(engine, monkeypatch):
    monkeypatch.setenv("GPUFRAME_EXCHANGE", "carrier-pigeon")
    with pytest.raises(OptionError, match=r"exchange=.carrier-pigeon. \(GPUFRAME_EXCHANGE\)"):
        Job(engine, "test")


def test_send_tasks_in_batches_deliver_every_partition_once(engine, frames):
    """A side too large for one send task's memory is sent by several tasks a worker, each
    taking a batch of its partitions; the consumers wait for every receipt."""
    from dask.utils import key_split
    from distributed import get_task_stream

    left, _ = frames
    frame = gpuframe.from_pandas(left, npartitions=6).persist()
    with get_task_stream() as stream, Job(engine, "test") as job:
        buckets = exchange(job, frame.partitions, HashSplitter(("k",), 4), Contiguous(), "left",
                           batch=2)
        stage = job.stage("collect")
        futures = [stage.submit(arrivals, parts, index=(b,), owner=owner)
                   for b, (parts, owner) in enumerate(zip(buckets.parts, buckets.owners))]
        job.wait(futures)
        got = pd.concat([piece for pieces in job.gather(futures) for piece in pieces])
    sends = {t["key"] for t in stream.data if key_split(t["key"]).startswith("gpuframe-send")}
    held = pd.Series(frame.partitions.owners).value_counts()
    assert len(sends) == sum(-(-n // 2) for n in held) > len(held)  # 2 partitions a task
    pd.testing.assert_frame_equal(got.sort_values(["k", "a"], ignore_index=True),
                                  left.sort_values(["k", "a"], ignore_index=True))
    assert not any(wait_until_empty(engine).values())


@dataclass(frozen=True)
class SlowSecondPartition:
    """A hash splitter that takes its time over partition 1: a send task still running after
    partition 0's pieces were delivered."""

    splitter: HashSplitter

    @property
    def n(self) -> int:
        return self.splitter.n

    def split(self, frame: pd.DataFrame, index: int, sealed: bool = False) -> list:
        if index == 1:
            time.sleep(1.5)
        return self.splitter.split(frame, index, sealed)


def test_a_send_task_cancelled_while_it_runs_drops_what_it_delivered(engine):
    """Dask discards the result of a task cancelled while it runs, so its receipt is never
    released to drop the exchange: its worker drops it when the task is released (a
    speculation's sends are cancelled so whenever its sample decides otherwise)."""
    workers = engine.workers
    exchange_id = "gpuframe-send-test-0c.1"
    parts = [pd.DataFrame({"k": range(20)}), pd.DataFrame({"k": range(20, 40)})]
    sending = engine.client.submit(send, f"{exchange_id}-0", exchange_id,
                                   SlowSecondPartition(HashSplitter(("k",), 2)),
                                   tuple(workers), [0, 1], False, *parts,
                                   key=f"{exchange_id}-0", workers=[workers[0]])
    deadline = time.monotonic() + 10
    while not any(exchange_id in pieces for pieces in held(engine).values()):
        assert time.monotonic() < deadline, "partition 0 was never delivered"
        time.sleep(0.05)
    sending.cancel()  # while partition 1 is being cut
    time.sleep(2)  # the task has ended by now
    left = wait_until_empty(engine)
    assert not any(exchange_id in pieces for pieces in left.values()), left


@dataclass
class OneWorker:
    """What the mailbox plugin reads of its worker, for its transitions alone."""

    data: dict
    address: str = "tcp://127.0.0.1:1"


REGISTERED = ("the task's thread", "registers")
"""Where, among a send task's transitions, its thread tells the plugin it runs."""


@pytest.mark.parametrize("transitions", [
    [("ready", "executing"), REGISTERED, ("executing", "released"), ("cancelled", "memory"),
     ("released", "forgotten")],
    # released as it began, before the plugin knew it ran: its end is what tells
    [("ready", "executing"), ("executing", "released"), REGISTERED, ("cancelled", "memory"),
     ("released", "forgotten")],
], ids=["while-running", "as-it-began"])
def test_a_send_task_released_before_its_receipt_is_kept_drops_its_exchange(transitions):
    """However late in the task the release comes (CI's joins left pieces where a speculation
    was cancelled as its send task returned), the exchange is dropped: the task's result, its
    only receipt, is discarded."""
    import asyncio

    async def run() -> dict:
        plugin = MailboxPlugin()
        plugin.worker = OneWorker({})
        plugin.mailbox = Mailbox(plugin.worker.data)
        key, receipt = "gpuframe-send-x-0c.1-0", Receipt({}, "gpuframe-send-x-0c.1",
                                                         (OneWorker.address,))
        for start, finish in transitions:
            if (start, finish) == REGISTERED:
                plugin.sending[key] = receipt
                plugin.mailbox.put(receipt.exchange, 0, {0: pd.DataFrame({"k": [1]})})
            else:
                plugin.transition(key, start, finish)
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        return plugin.mailbox.exchanges()

    assert asyncio.run(run()) == {}
