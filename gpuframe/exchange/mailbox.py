"""The direct exchange: buckets sent straight to their consumer's worker, with the scheduler
off the data path.

The task exchange (:func:`~gpuframe.exchange.exchange.exchange` with ``exchange='tasks'``)
makes every (partition, bucket) pair a Dask key, so a stage of ``P`` partitions into ``B``
buckets costs the scheduler ``P x B`` tasks and as many transfers to schedule. Here, as in
dask-cuda's explicit-comms, rapidsmpf's ``Shuffler`` and Dask's own P2P shuffle, one ``send``
task per worker cuts that worker's partitions into buckets and sends each bucket's rows to the
worker that consumes it over the cluster's comm layer (UCX or TCP), sealed where the packing
allows (one buffer a bucket, :mod:`~gpuframe.exchange.bucket`), as a message to the
:data:`DELIVER_HANDLER` handler, which files them in that worker's :class:`Mailbox`: in the
worker's data store, which spills them when memory runs short as it spills any result. The task
returns a :class:`Receipt` (rows per bucket per partition) once every peer has acknowledged its
pieces. Each consuming task depends on the ``W`` receipts alone, so a stage is ``W + B`` tasks
and ``W x B`` small edges, and it takes its bucket from the mailbox (:func:`arrivals`), checking
that every partition's piece came with the rows its receipt counts.

Nothing is left behind: when a worker releases a send task's receipt and the scheduler keeps it
nowhere else (every consumer has run, or the job was cancelled or failed), the worker tells every
peer to drop what the exchange still holds, and a worker keeps the ids of dropped exchanges for a
while, so pieces that a cancelled sender delivers late are discarded. A send task released
before its receipt is kept (its job or its speculation cancelled while it ran, even as it
returned) drops the exchange the same way: Dask discards such a task's result, so no receipt
of it is ever released. A replica released alone (Dask's active memory manager keeps one copy of
a key) drops nothing: the consumers on other workers still need their pieces.

Each delivery logs :data:`~gpuframe.diagnostics.stages.SEND_EVENT_TOPIC` with its bytes and
interval, which the engine's metrics count as a transfer between the two workers.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import OrderedDict
from collections.abc import MutableMapping, Sequence
from concurrent.futures import Future as ThreadFuture
from concurrent.futures import wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dask.sizeof import sizeof
from distributed import Client, get_worker
from distributed.diagnostics.plugin import WorkerPlugin
from distributed.metrics import time
from distributed.protocol import to_serialize

from ..diagnostics.stages import SEND_EVENT_TOPIC, job_of
from ..errors import PartitionError, WorkerLostError
from .bucket import DeviceBucket, arrived, register_with_dask_cuda
from .splitters import Splitter

if TYPE_CHECKING:
    from distributed import Worker

PLUGIN_NAME = "gpuframe-mailbox"
DELIVER_HANDLER = "gpuframe_deliver"
DROP_HANDLER = "gpuframe_drop"
SEND_PREFIX = "gpuframe-send-"
"""Starts the keys of send tasks (:func:`send`), whose results are :class:`Receipt` objects."""
PIECE_PREFIX = "gpuframe-piece-"
"""Names a received piece in the worker's data store; no task has such a key."""
DROPPED_REMEMBERED = 4096
"""Ids of dropped exchanges a worker remembers, to discard their late pieces."""
IN_FLIGHT_PARTITIONS = 2
"""Partitions whose pieces a send task may have in flight at once: the next partition is cut
while the last one's pieces travel, and no more, so a worker holds at most about two
partitions' copies besides its inputs."""
RELEASE_CHECK_S = 0.25
"""How often a send task waiting on its deliveries asks whether its job still wants it."""


class ExchangeError(PartitionError):
    """A bucket came incomplete: a piece that a sender's receipt counts never arrived."""


class SendReleasedError(PartitionError):
    """A send task's job gave it up (it failed or was cancelled) while the task's pieces were
    in flight: the task stops, and its deliveries with it."""


class Mailbox:
    """One worker's received pieces, ``exchange -> bucket -> source partition -> frame``, held
    in the worker's own data store: Dask's memory manager spills them to disk like any result
    (dask-cuda's, device to host to disk), where a mailbox of its own would hold them in
    memory the worker cannot see, and a join larger than memory could not complete."""

    def __init__(self, data: MutableMapping[Any, Any]) -> None:
        self._data = data
        self._lock = threading.Lock()
        self._held: dict[str, dict[int, dict[int, str]]] = {}
        self._dropped: OrderedDict[str, None] = OrderedDict()

    def put(self, exchange: str, source: int, pieces: dict[int, Any]) -> bool:
        """File ``pieces`` (bucket -> frame) of partition ``source``; False where the exchange
        was dropped already (the pieces are discarded)."""
        with self._lock:
            if exchange in self._dropped:
                return False
            buckets = self._held.setdefault(exchange, {})
            for bucket, frame in pieces.items():
                key = f"{PIECE_PREFIX}{exchange}-{bucket}-{source}"
                self._data[key] = frame
                buckets.setdefault(bucket, {})[source] = key
            return True

    def take(self, exchange: str, bucket: int) -> dict[int, Any]:
        """Remove and return bucket ``bucket``'s pieces, by source partition. Their keys leave
        the books under the lock, so no other call touches them after; they are read from the
        store outside it: a spilled piece is read back from host or disk, which must not hold
        up the deliveries that file pieces on the worker's event loop (:meth:`put`)."""
        with self._lock:
            buckets = self._held.get(exchange, {})
            keys = buckets.pop(bucket, {})
            if not buckets:
                self._held.pop(exchange, None)
        pieces = {source: self._data[key] for source, key in keys.items()}
        for key in keys.values():
            del self._data[key]
        return pieces

    def drop(self, exchange: str) -> None:
        """Forget what ``exchange`` holds here, and discard what comes for it later."""
        with self._lock:
            for keys in self._held.pop(exchange, {}).values():
                for key in keys.values():
                    if key in self._data:  # del: a spilled piece is not read back to drop it
                        del self._data[key]
            self._dropped[exchange] = None
            while len(self._dropped) > DROPPED_REMEMBERED:
                self._dropped.popitem(last=False)

    def exchanges(self) -> dict[str, int]:
        """Pieces held per exchange (for tests and diagnostics)."""
        with self._lock:
            return {x: sum(map(len, b.values())) for x, b in self._held.items()}


class MailboxPlugin(WorkerPlugin):
    """Gives each worker its :class:`Mailbox`, the handlers that fill and drop it, and the
    watch on send tasks' receipts that drops an exchange once no consumer needs it."""

    idempotent = True
    mailbox: Mailbox  # made on the worker, as is the loop: neither travels
    loop: asyncio.AbstractEventLoop

    def __init__(self) -> None:
        self.worker: Worker | None = None
        self._receipts: dict[Any, Receipt] = {}  # the receipts this worker holds, by key
        self.sending: dict[Any, Receipt] = {}
        """The send tasks running here, by key: what each one's receipt will name."""

    def setup(self, worker: Worker) -> None:
        self.worker = worker
        self.mailbox = Mailbox(worker.data)
        self.loop = asyncio.get_running_loop()  # the worker's: plugins are set up on it
        worker.handlers[DELIVER_HANDLER] = self._deliver
        worker.handlers[DROP_HANDLER] = self._drop
        register_with_dask_cuda()

    def _deliver(self, exchange: str, source: int, pieces: dict[int, Any]) -> bool:
        # Filed as they came: the consuming task opens them (arrivals), off the event loop.
        return self.mailbox.put(exchange, source, pieces)

    def _drop(self, exchange: str) -> None:
        self.mailbox.drop(exchange)

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        worker = self.worker
        if worker is None or not str(key).startswith(SEND_PREFIX):
            return
        ran = self.sending.pop(key, None) if finish != "executing" else None
        held = worker.data.get(key) if finish == "memory" else None
        if isinstance(held, Receipt):
            self._receipts[key] = held
        elif finish in ("released", "forgotten") and key in self._receipts:
            asyncio.ensure_future(self._release(worker, key, self._receipts.pop(key)))
        elif ran is not None and finish != "error":  # send() drops where the task failed
            # Released while it ran (here, or already as it began: then its end, its result
            # discarded, comes as 'memory' with no receipt kept): Dask discards a cancelled
            # task's result, and the exchange, dropped, refuses its late deliveries.
            asyncio.ensure_future(self._drop_everywhere(worker, ran))

    async def _release(self, worker: Worker, key: Any, receipt: Receipt) -> None:
        """Drop ``receipt``'s exchange here and at its peers, unless the scheduler still keeps
        ``key`` on another worker: then only this replica went, and consumers elsewhere may
        still need their pieces; the last holder drops the exchange."""
        try:
            holders = await worker.scheduler.who_has(keys=[key])
        except Exception:  # noqa: BLE001 (a scheduler gone: nothing will consume the pieces)
            holders = {}
        if not holders.get(key):
            await self._drop_everywhere(worker, receipt)

    async def _drop_everywhere(self, worker: Worker, receipt: Receipt) -> None:
        self.mailbox.drop(receipt.exchange)
        for peer in receipt.peers:
            if peer != worker.address:
                await _tell_drop(worker, peer, receipt.exchange)


def forget(worker: Worker, exchange: str, peers: Sequence[str]) -> None:
    """From a thread of ``worker``'s other than its event loop: drop ``exchange`` there and at
    every peer, waiting for them."""
    plugin = _plugin(worker)
    plugin.mailbox.drop(exchange)
    for peer in peers:
        if peer != worker.address:
            asyncio.run_coroutine_threadsafe(_tell_drop(worker, peer, exchange),
                                             plugin.loop).result()


async def _tell_drop(worker: Worker, peer: str, exchange: str) -> None:
    try:
        await worker.rpc(peer).gpuframe_drop(exchange=exchange)
    except Exception:  # noqa: BLE001 (a peer gone holds nothing more to drop)
        pass


_installed: weakref.WeakSet[Client] = weakref.WeakSet()


def install(client: Client) -> None:
    """Give every worker of ``client``'s cluster (and every later one) its mailbox, once per
    client (the engine does, when it is made)."""
    if client not in _installed:
        client.register_plugin(MailboxPlugin(), name=PLUGIN_NAME)
        _installed.add(client)


def _plugin(worker: Worker) -> MailboxPlugin:
    plugin = worker.plugins.get(PLUGIN_NAME)
    if not isinstance(plugin, MailboxPlugin):
        raise PartitionError(f"worker {worker.address} has no gpuframe mailbox (its plugin "
                             f"{PLUGIN_NAME!r} is missing): the exchange cannot receive there")
    return plugin


@dataclass(frozen=True)
class Receipt:
    """What one send task delivered: per source partition, rows per bucket; and where, so that
    any worker holding it can drop the exchange everywhere (:class:`MailboxPlugin`)."""

    rows: dict[int, list[int]]
    exchange: str = ""
    peers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Claim:
    """Stands, in a consuming task's arguments, for bucket ``bucket`` of ``exchange``, followed
    there by the receipts of every send task (:func:`arrivals`)."""

    exchange: str
    bucket: int


def send(key: str, exchange: str, splitter: Splitter, owners: Sequence[str],
         sources: Sequence[int], wrap: bool, *parts: Any) -> Receipt:
    """The send task of one worker (its key ``key``): :func:`send_from` its worker, the
    exchange dropped everywhere when the task's receipt is released, or at once where the task
    fails and leaves no receipt."""
    worker = get_worker()
    _plugin(worker).sending[key] = Receipt({}, exchange, tuple(sorted(set(owners))))
    try:
        return send_from(worker, exchange, splitter, owners, sources, wrap, parts, job_of(key),
                         key)
    except BaseException:
        _abandon(worker, exchange, owners)
        raise


def _abandon(worker: Worker, exchange: str, peers: Sequence[str]) -> None:
    """Drop ``exchange`` here, and at ``peers`` without waiting for them: a peer that is gone
    would hold the worker's thread for the connect timeout."""
    plugin = _plugin(worker)
    plugin.mailbox.drop(exchange)
    for peer in sorted(set(peers) - {worker.address}):
        asyncio.run_coroutine_threadsafe(_tell_drop(worker, peer, exchange), plugin.loop)


def send_from(worker: Worker, exchange: str, splitter: Splitter, owners: Sequence[str],
              sources: Sequence[int], wrap: bool, parts: Sequence[Any],
              job: str | None, key: str | None = None) -> Receipt:
    """Cut ``parts`` (partitions ``sources``) into ``splitter``'s buckets and deliver bucket
    ``b``'s rows to ``owners[b]``; return once every peer has them. ``wrap``: remote pieces
    travel as :class:`~gpuframe.exchange.bucket.DeviceBucket`. ``job``: whose transfers the
    deliveries are, in the engine's metrics. ``key``: the send task this runs in, which stops
    (:class:`SendReleasedError`) once its job releases it; a delivery to a peer that died can
    otherwise hold the worker's thread for the whole connect timeout, retrying."""
    plugin = _plugin(worker)
    rows: dict[int, list[int]] = {}
    waves: list[list[ThreadFuture]] = []
    for source, part in zip(sources, parts):
        buckets = splitter.split(part, source, sealed=True)
        rows[source] = [len(bucket) for bucket in buckets]
        by_owner: dict[str, dict[int, Any]] = {}
        for b, bucket in enumerate(buckets):
            by_owner.setdefault(owners[b], {})[b] = bucket
        wave = []
        for owner, pieces in by_owner.items():
            if owner == worker.address:
                plugin.mailbox.put(exchange, source, pieces)
                continue
            if wrap:  # through pinned host memory, a buffer per column (bucket.py)
                pieces = {b: DeviceBucket(arrived(piece)) for b, piece in pieces.items()}
            wave.append(asyncio.run_coroutine_threadsafe(
                _deliver(worker, owner, exchange, source, pieces, job),
                plugin.loop))
        waves.append(wave)
        if len(waves) >= IN_FLIGHT_PARTITIONS:
            _finish(waves.pop(0), worker, key)
    for wave in waves:
        _finish(wave, worker, key)
    return Receipt(rows, exchange, tuple(sorted(set(owners))))


def _finish(wave: list[ThreadFuture], worker: Worker, key: str | None) -> None:
    """Wait for ``wave``'s deliveries, cancelling them if task ``key`` is released."""
    while wait(wave, timeout=RELEASE_CHECK_S).not_done:
        if key is not None and not _wanted(worker, key):
            for future in wave:
                future.cancel()
            raise SendReleasedError(f"send task {key} on {worker.address} was released by "
                                    "its job while its pieces were in flight")
    for future in wave:
        future.result()


def _wanted(worker: Worker, key: str) -> bool:
    """Whether ``worker``'s task ``key`` is still wanted: the scheduler marks an executing task
    'cancelled' when its job fails or is cancelled."""
    task = worker.state.tasks.get(key)
    return task is not None and task.state not in ("cancelled", "released")


async def _deliver(worker: Worker, owner: str, exchange: str, source: int,
                   pieces: dict[int, Any], job: str | None) -> None:
    """Send ``pieces`` to ``owner``'s mailbox and log the transfer."""
    start = time()
    try:
        await worker.rpc(owner).gpuframe_deliver(exchange=exchange, source=source,
                                                 pieces=to_serialize(pieces))
    except (OSError, asyncio.TimeoutError) as exc:
        raise WorkerLostError(f"worker {owner} could not be reached from {worker.address} to "
                              f"deliver partition {source}'s buckets: {exc!r}", owner) from exc
    worker.log_event(SEND_EVENT_TOPIC, {
        "job": job, "source": worker.address, "destination": owner, "start": start,
        "stop": time(), "bytes": int(sum(sizeof(p) for p in pieces.values()))})


def arrivals(parts: Sequence[Any]) -> list[Any]:
    """A consuming task's frames of one bucket: from an exchange's task keys (``parts`` are the
    pieces, None for none) or from this worker's mailbox (``parts`` is a :class:`Claim` and
    the send tasks' receipts), one frame per source partition in partition order."""
    if not parts or not isinstance(parts[0], Claim):
        return [arrived(p) for p in parts if p is not None]
    claim, receipts = parts[0], parts[1:]
    expected = {source: rows[claim.bucket]
                for receipt in receipts for source, rows in receipt.rows.items()}
    worker = get_worker()
    pieces = {source: arrived(piece)
              for source, piece in _plugin(worker).mailbox.take(claim.exchange,
                                                                claim.bucket).items()}
    missing = sorted(set(expected) - set(pieces))
    short = sorted(s for s in expected if s in pieces and len(pieces[s]) != expected[s])
    if missing or short:
        raise ExchangeError(f"bucket {claim.bucket} of exchange {claim.exchange} on "
                            f"{worker.address} is incomplete: partitions {missing} never "
                            f"arrived, partitions {short} arrived with other row counts than "
                            "were sent")
    return [pieces[source] for source in sorted(expected)]
