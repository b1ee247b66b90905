"""One budget of requests in flight to a store for the whole host, shared by every worker
process on it.

Little's law sizes the requests in flight for the store's bandwidth shared by every reader of
the cluster (:func:`~.model.choose_concurrency`). A fetch that keeps only its own share in
flight leaves the rest of the host's idle whenever the other readers are not fetching (a worker
done with its files, a task decoding), and a host running more fetches than planned (another
query, fragments read at once) goes past it. So the fetches of a host share one budget:
:attr:`~.model.Concurrency.requests_in_flight` for each reader of the busiest host. Its tokens
are locks on the bytes of a file in the host's temporary directory, held by open file
description (``F_OFD_SETLK``): threads and processes take them alike, and a process that dies
holding some gives them back with its descriptors, so nothing waits on a token that no one will
return. gpuframe's own requests take a token each (:meth:`NodeBudget.run`): a lone fetch keeps
the whole budget in flight, and fetches at once share it. KvikIO's, which run in its own
threads, are leased as a count for the whole fetch (:meth:`NodeBudget.lease`).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import queue
import random
import struct
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from ..storage.base import StorageOptions, scheme_of
from .model import Concurrency
from .stores import store_of

Piece = TypeVar("Piece")
Fetched = TypeVar("Fetched")

OFD_LOCKS = hasattr(fcntl, "F_OFD_SETLK")
"""Linux's locks of open file descriptions, which tell apart the threads of one process."""
_LOCK = struct.Struct("hhqqi4x")
"""struct flock on 64-bit Linux: type, whence, start, length, pid (0 for OFD locks)."""


def lock_directory() -> str:
    """Where this host's budgets are: a folder of the user's in the temporary directory."""
    folder = os.path.join(tempfile.gettempdir(), f"gpuframe-budgets-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


class NodeBudget:
    """``tokens`` requests in flight to the store named ``store``, for every process of this
    host."""

    def __init__(self, store: str, tokens: int, directory: str | None = None):
        if tokens < 1:
            raise ValueError(f"a budget of {tokens} requests: at least 1")
        self.tokens = tokens
        digest = hashlib.sha1(store.encode()).hexdigest()[:16]
        self.path = os.path.join(directory or lock_directory(), f"{digest}.lock")

    def run(self, pieces: Sequence[Piece], fetch: Callable[[Piece], Fetched],
            threads: int | None = None) -> list[Fetched]:
        """``fetch(piece)`` of every piece, each holding a token of the budget, by ``threads``
        threads (default: one per token, at most one per piece), results in order; the first
        failure is raised once no fetch runs. Thread ``i`` waits on token ``first + i`` alone
        (the first chosen at random, so fetches of few pieces spread over the tokens): a thread
        never waits holding a token, so no two wait on each other."""
        count = max(1, min(threads or self.tokens, self.tokens, len(pieces)))
        first = random.randrange(self.tokens)
        todo: queue.SimpleQueue[int] = queue.SimpleQueue()
        for index in range(len(pieces)):
            todo.put(index)
        results: list[Fetched | None] = [None] * len(pieces)
        failures: list[BaseException] = []

        def work(token: int) -> None:
            fd = self._open()
            try:
                while not failures:
                    try:
                        index = todo.get_nowait()
                    except queue.Empty:
                        return
                    _lock(fd, token, fcntl.F_OFD_SETLKW)
                    try:
                        results[index] = fetch(pieces[index])
                    finally:
                        _lock(fd, token, fcntl.F_OFD_SETLK, fcntl.F_UNLCK)
            except BaseException as exc:  # noqa: BLE001 (raised by the caller's thread)
                failures.append(exc)
            finally:
                os.close(fd)

        workers = [threading.Thread(target=work, args=((first + i) % self.tokens,),
                                    name="gpuframe-range", daemon=True) for i in range(1, count)]
        for worker in workers:
            worker.start()
        work(first)  # this thread too: one piece starts no thread
        for worker in workers:
            worker.join()
        if failures:
            raise failures[0]
        return results  # type: ignore[return-value]  # every piece's slot is filled

    @contextmanager
    def lease(self, wanted: int) -> Iterator[int]:
        """Requests a fetch whose own threads make them (KvikIO's) may keep in flight until
        the block ends: ``wanted`` or fewer, what is free; one at least, waited for while
        none is."""
        fd = self._open()
        try:
            first = random.randrange(self.tokens)
            held = _take_free(fd, self.tokens, first, wanted)
            if not held:
                _lock(fd, first, fcntl.F_OFD_SETLKW)
                held = 1 + _take_free(fd, self.tokens, first + 1, wanted - 1)
            yield held
        finally:
            os.close(fd)  # every lock of this descriptor goes with it

    def held(self) -> int:
        """Tokens held on this host now (by descriptors other than a new one)."""
        fd = self._open()
        try:
            count, start = 0, 0
            while start < self.tokens:
                kind, _, at, length, _ = _LOCK.unpack(fcntl.fcntl(
                    fd, fcntl.F_OFD_GETLK,
                    _LOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, start, self.tokens - start, 0)))
                if kind == fcntl.F_UNLCK:
                    break
                # the kernel merges one holder's neighbouring tokens into one lock
                end = self.tokens if length == 0 else min(self.tokens, at + length)
                count += end - max(at, start)
                start = end
            return count
        finally:
            os.close(fd)

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)


def _lock(fd: int, byte: int, command: int, kind: int = fcntl.F_WRLCK) -> None:
    fcntl.fcntl(fd, command, _LOCK.pack(kind, os.SEEK_SET, byte, 1, 0))


def _take(fd: int, byte: int) -> bool:
    try:
        _lock(fd, byte, fcntl.F_OFD_SETLK)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _take_free(fd: int, tokens: int, first: int, wanted: int) -> int:
    """Free tokens taken, trying them from ``first`` round, until ``wanted`` are."""
    held = 0
    for i in range(tokens):
        if held >= wanted:
            break
        held += _take(fd, (first + i) % tokens)
    return held


def fetch_threads(requests_in_flight: int, budget: NodeBudget | None) -> int:
    """The threads of one fetch, CPU or GPU: the whole budget's tokens where the store has one
    (:meth:`NodeBudget.run`: a lone fetch keeps the host's whole budget in flight, and fetches
    at once split it, since each request holds a token), else ``requests_in_flight``."""
    return budget.tokens if budget else requests_in_flight


def node_budget(path: str, storage: StorageOptions, concurrency: Concurrency
                ) -> NodeBudget | None:
    """This host's budget for the store of ``path``: ``concurrency.requests_in_flight`` (as
    fitted to a fetch's ranges) for each reader of the busiest host, where the concurrency was
    measured on the cluster's workers; None for local files, configured or unmeasured
    concurrency, and where the system has no locks of open file descriptions."""
    if (concurrency.source != "measured" or concurrency.node_readers < 1
            or scheme_of(path) == "file" or not OFD_LOCKS):
        return None
    tokens = min(concurrency.requests_in_flight * concurrency.node_readers,
                 storage.max_requests_in_flight)
    return NodeBudget("/".join(part or "" for part in store_of(path, storage)), tokens)
