"""Remote files copied into device memory, for cuDF to decode where they land.

The GPU reader hands cuDF one copy per remote file holding only the planned ranges
(:func:`~.cudf.read_device_copies`). Copies in host memory cost twice over: a fresh buffer per
read pays a page fault per page the fetch writes, and cuDF then moves pageable bytes to the
device itself (benchmarks/results/2026-11-23-remote-device-copies-h200.md; pinned bytes:
benchmarks/results/2026-11-25-figures-from-io-comments.md). So each request lands in a pinned
staging buffer that is reused (CuPy's pinned pool keeps them for the next read) and is copied
from there to its offset in the file's device buffer; cuDF reads device buffers as sources
(``rmm.DeviceBuffer`` is a pylibcudf span) without another copy.

The ranges themselves are read by KvikIO (``kvikio.RemoteFile.pread``: C++ threads over
libcurl, into device memory through its own pinned bounce buffers) wherever it can open the
files with the read's options (:func:`fetch_by_kvikio`), faster than the staging, most of all
for short requests (benchmarks/results/2026-11-24-kvikio-remote-h200.md); the staging is the
way for the rest (custom headers, proxies) and the fallback where KvikIO fails.

A copy is as long as the file (the planned ranges sit at their own offsets), so where the read
skips columns its device buffer holds gaps: :func:`copy_batches` bounds what the copies of one
cuDF call take together. :func:`device_memory` says how large this worker's GPU is, for the
partition budget.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import RemoteError
from ..storage.base import RangeSource
from ..storage.ranges import cut_requests, read_exactly_into, run_requests
from ..tuning.budget import NodeBudget, fetch_threads

if TYPE_CHECKING:
    import kvikio
    import rmm

logger = logging.getLogger(__name__)

COPY_SLACK = 2**30
"""Device bytes a batch of copies may always take (:func:`copy_batches`): small reads go in one
cuDF call whatever their gaps."""

STAGING_BYTES = 2**30
"""Pinned staging that one fetch may take (fewer requests at once where the plan's would need
more: 64 of 64 MiB would pin 4 GiB). CuPy's pinned pool keeps it for the next read."""

CopyJob = tuple[RangeSource, Sequence[tuple[int, int]], int, Mapping[int, bytes]]
"""One file's copy: (its source, the ranges to fetch at their own offsets, the copy's length,
bytes already known by offset: magic numbers, footer)."""


def place_known(jobs: Sequence[CopyJob], place: Callable[[int, int, memoryview], None]) -> None:
    """``place(job, offset, bytes)`` of every job's known bytes (magic numbers, footer)."""
    for job, (_, _, _, known) in enumerate(jobs):
        for offset, data in known.items():
            place(job, offset, memoryview(data))


def fetch_staged(jobs: Sequence[CopyJob], requests_in_flight: int, request_size: int | None,
                 staging: Callable[[int, int], Sequence[memoryview]],
                 place: Callable[[int, int, memoryview], None],
                 budget: NodeBudget | None = None) -> None:
    """Fetch every job's ranges by ``requests_in_flight`` requests at once, each into a free
    buffer of ``staging(requests, longest)`` (the fetch's requests and its longest request: as
    many buffers as should be in flight, each at least that long; fewer buffers than requests
    in flight hold the requests to their number), then ``place(job, offset, bytes)`` them; the
    known bytes are placed first. A short answer raises a
    :class:`~gpuframe.io.errors.RemoteError` naming the file and range
    (:func:`~gpuframe.io.storage.ranges.read_exactly_into`). With the host's ``budget``, each
    request holds a token of it."""
    place_known(jobs, place)
    pieces = [(job, start, length) for job, (_, ranges, _, _) in enumerate(jobs)
              for _, start, length in cut_requests(ranges, requests_in_flight, request_size)]
    free: queue.SimpleQueue[memoryview] = queue.SimpleQueue()
    buffers = staging(len(pieces), max((length for _, _, length in pieces), default=0))
    for buffer in buffers:
        free.put(buffer)

    def fetch(piece: tuple[int, int, int]) -> None:
        job, start, length = piece
        buffer = free.get()
        try:
            read_exactly_into(jobs[job][0], start, buffer[:length])
            place(job, start, buffer[:length])
        finally:
            free.put(buffer)

    # a thread waiting for a buffer would hold its token of the budget idle
    run_requests(pieces, min(requests_in_flight, max(1, len(buffers))), fetch, budget)


def copy_batches(jobs: Sequence[CopyJob]) -> list[list[int]]:
    """The jobs in runs of consecutive ones, each decoded by one cuDF call, whose copies take
    together at most twice the bytes all the jobs fetch, or :data:`COPY_SLACK` if more (a job
    whose copy alone is larger is a run alone). Reading every column, the copies are about as
    long as what they fetch, and one call decodes every file at once; reading few columns of
    many files, the gaps between their chunks never add up to more than the budget."""
    fetched = sum(n for _, ranges, _, _ in jobs for _, n in ranges)
    budget = max(2 * fetched, COPY_SLACK)
    batches: list[list[int]] = []
    held = 0
    for index, (_, _, length, _) in enumerate(jobs):
        if batches and held + length <= budget:
            batches[-1].append(index)
            held += length
        else:
            batches.append([index])
            held = length
    return batches


class KvikioSettings:
    """KvikIO's settings (its process-wide defaults) for the reads of one process, which may run
    on several worker threads at once.

    A new thread count drains KvikIO's pool of threads and starts another; done while another
    thread's read had tasks in that pool, it hung (a worker of two threads, on GPUs:
    benchmarks/results/2026-11-28-s33-gpus-h100x2.md), and a new task size would cut a read in
    flight by two sizes. So settings change only while no read of this process uses KvikIO.
    One worker thread (the default) always finds none."""

    def __init__(self) -> None:
        self._idle = threading.Condition()
        self._users = 0

    @contextmanager
    def using(self, settings: Mapping[str, Any], wait: bool) -> Iterator[None]:
        """While the block reads through KvikIO: ``settings``, those that differ from what
        KvikIO holds (a new pool of threads costs a read that asks for the same count), set
        if no other read is in flight. Where one is, ``wait`` says whether this read waits for
        KvikIO to be idle (its settings must hold: a remote read's timeout, the thread count
        its host's budget leased) or reads with the settings in force (a local read, whose
        threads and task size only set its speed). A block that asks for no settings (cuDF's
        own reads and writes, which go through KvikIO's pool too) only counts as a user."""
        if settings:
            import kvikio.defaults

        with self._idle:
            changed = {key: value for key, value in settings.items()
                       if kvikio.defaults.get(key) != value}
            while wait and changed and self._users:
                self._idle.wait()
                changed = {key: value for key, value in changed.items()
                           if kvikio.defaults.get(key) != value}
            if changed and not self._users:
                kvikio.defaults.set(changed)
            self._users += 1
        try:
            yield
        finally:
            with self._idle:
                self._users -= 1
                if not self._users:
                    self._idle.notify_all()


KVIKIO = KvikioSettings()
"""This process's KvikIO settings, shared by its reads (:class:`KvikioSettings`)."""


def fetch_by_kvikio(jobs: Sequence[CopyJob], copies: Sequence[rmm.DeviceBuffer],
                    requests_in_flight: int, request_size: int | None) -> bool:
    """Every job's ranges read by KvikIO straight into its device copy (``copies``, in the jobs'
    order), with ``requests_in_flight`` threads and tasks of ``request_size`` bytes (KvikIO's
    ``num_threads`` and ``task_size``): True. False, nothing read, where KvikIO is missing or
    cannot open some job's file with the read's options
    (:meth:`~gpuframe.io.storage.base.RangeSource.kvikio_args`); False too, after a warning,
    where KvikIO fails, whatever it raises (an older KvikIO's missing setting as well as a
    store's error): the caller's own requests then fetch the bytes, or raise the error that
    names the file and range. KvikIO checks no answer's version, so once the bytes are in, each
    file's is asked again (:meth:`~gpuframe.io.storage.base.RangeSource.confirm_version`), and a
    file changed since planning raises :class:`~gpuframe.io.errors.FileChangedError`."""
    opens = [how for how in (source.kvikio_args() for source, _, _, _ in jobs) if how is not None]
    if not jobs or len(opens) < len(jobs):
        return False
    try:
        import cupy
        import kvikio
        import kvikio.defaults
    except ImportError:
        return False
    if not kvikio.is_remote_file_available():  # a KvikIO built without libcurl
        return False
    files: list[kvikio.RemoteFile] = []
    reads: list[tuple[RangeSource, int, int, kvikio.IOFuture]] = []
    failure: BaseException | None = None
    with ExitStack() as in_kvikio:  # until every read is in
        try:  # (KvikIO before 26.10, which this was built on, lacks some of these settings)
            # KvikIO streams each task through a bounce buffer (16 MiB): longer tasks run
            # slower (benchmarks/results/2026-11-25-figures-from-io-comments.md)
            task_size = max(1, min(request_size or max(n for _, ranges, _, _ in jobs
                                                       for _, n in ranges),
                                   kvikio.defaults.get("bounce_buffer_size")))
            settings = {"num_threads": requests_in_flight, "task_size": task_size,
                        "http_timeout": max(1, round(max(how.timeout for how in opens)))}
            in_kvikio.enter_context(KVIKIO.using(settings, wait=True))
            for (source, ranges, _, _), how, copy in zip(jobs, opens, copies):
                files.append(getattr(kvikio.RemoteFile, how.method)(**how.kwargs))
                view = cupy.asarray(copy)
                reads.extend((source, offset, length, files[-1].pread(
                    view[offset:offset + length], length, offset)) for offset, length in ranges)
        except BaseException as exc:  # noqa: BLE001 (raised below, once nothing is in flight)
            failure = exc
        for source, offset, length, future in reads:  # all of them: they write into the copies
            try:
                got = future.get()
            except BaseException as exc:  # noqa: BLE001 (the first failure is raised below)
                failure = failure or exc
                continue
            if got != length and failure is None:
                failure = RemoteError(f"{source.path}: bytes {offset}-{offset + length} ended "
                                      f"after {got} bytes")
        for file in files:
            file.close()
    if failure is not None:
        if not isinstance(failure, Exception):  # an interrupt, not a failed read
            raise failure
        logger.warning("KvikIO could not read %s (%s); gpuframe's own requests fetch them",
                       ", ".join(source.path for source, _, _, _ in jobs), failure)
        return False
    sources = [source for source, _, _, _ in jobs if source.check_version]
    run_requests([(i, 0, 0) for i in range(len(sources))], requests_in_flight,
                 lambda piece: sources[piece[0]].confirm_version())
    for source, ranges, _, _ in jobs:
        source.record(sum(-(-n // task_size) for _, n in ranges), sum(n for _, n in ranges))
    return True


def fetch_device_copies(jobs: Sequence[CopyJob], requests_in_flight: int,
                        request_size: int | None, budget: NodeBudget | None = None
                        ) -> list[rmm.DeviceBuffer]:
    """An ``rmm.DeviceBuffer`` per job, ``length`` bytes holding the job's ranges and known
    bytes at their offsets: the ranges read by KvikIO (:func:`fetch_by_kvikio`), or else by
    :func:`fetch_staged` through pinned buffers (at most :data:`STAGING_BYTES` of them); the
    rest is whatever the allocation held, which a reader of the planned units never touches.

    With the host's ``budget`` for the store (:mod:`~gpuframe.io.tuning.budget`), KvikIO's
    threads are ``requests_in_flight`` of its tokens or fewer, what is free, leased for the
    fetch; the staged fetch's requests take a token each, by as many threads as it has."""
    import cupy
    import rmm

    copies = [rmm.DeviceBuffer(size=length) for _, _, length, _ in jobs]

    def place(job: int, offset: int, data: memoryview) -> None:
        host = np.frombuffer(data, np.uint8)
        cupy.cuda.runtime.memcpy(copies[job].ptr + offset, host.ctypes.data, host.nbytes,
                                 cupy.cuda.runtime.memcpyHostToDevice)

    with budget.lease(requests_in_flight) if budget else nullcontext(requests_in_flight) as n:
        read = fetch_by_kvikio(jobs, copies, n, request_size)
    if read:
        place_known(jobs, place)
        return copies
    threads = fetch_threads(requests_in_flight, budget)

    def staging(pieces: int, size: int) -> list[memoryview]:
        buffers = min(threads, pieces, STAGING_BYTES // max(1, size))
        pinned = [cupy.cuda.alloc_pinned_memory(max(1, size)) for _ in range(max(1, buffers))]
        return [np.frombuffer(p, np.uint8, size).data for p in pinned]

    fetch_staged(jobs, threads, request_size, staging, place, budget)
    return copies


def device_memory() -> int:
    """Bytes of this process's GPU: run on each worker for the partition budget."""
    import cupy

    return int(cupy.cuda.Device().mem_info[1])
