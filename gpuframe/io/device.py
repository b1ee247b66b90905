"""Remote files copied into device memory, for cuDF to decode where they land.

The GPU reader hands cuDF one copy per remote file holding only the planned ranges
(:func:`~gpuframe.io.read.read_device_copies`). Copies in host memory cost twice over: a fresh
buffer per read pays a page fault per page the fetch writes, and cuDF then moves pageable
bytes to the device itself. On an H200 host, 1.78 GiB of column chunks over loopback HTTP:
fetched into fresh host copies 1.01 s, into reused buffers 0.16 s; decoded by cuDF from the
pageable copies 0.25 s, from the same bytes once pinned 0.056 s. So each request lands in a
pinned staging buffer that is reused (CuPy's pinned pool keeps them for the next read) and is
copied from there to its offset in the file's device buffer; cuDF reads device buffers as
sources (``rmm.DeviceBuffer`` is a pylibcudf span) without another copy: fetched in 0.19 s,
decoded in 0.019 s.

A copy is as long as the file (the planned ranges sit at their own offsets), so where the read
skips columns its device buffer holds gaps: :func:`copy_batches` bounds what the copies of one
cuDF call take together.
"""

from __future__ import annotations

import queue
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .remote import Source, cut_requests, read_exactly_into, run_requests

COPY_SLACK = 2**30
"""Device bytes a batch of copies may always take (:func:`copy_batches`): small reads go in one
cuDF call whatever their gaps."""

STAGING_BYTES = 2**30
"""Pinned staging that one fetch may take (fewer requests at once where the plan's would need
more: 64 of 64 MiB would pin 4 GiB). CuPy's pinned pool keeps it for the next read."""

CopyJob = tuple[Source, Sequence[tuple[int, int]], int, Mapping[int, bytes]]
"""One file's copy: (its source, the ranges to fetch at their own offsets, the copy's length,
bytes already known by offset: magic numbers, footer)."""


def fetch_staged(jobs: Sequence[CopyJob], requests_in_flight: int, request_size: int | None,
                 staging: Callable[[int, int], Sequence[memoryview]],
                 place: Callable[[int, int, memoryview], None]) -> None:
    """Fetch every job's ranges by ``requests_in_flight`` requests at once, each into a free
    buffer of ``staging(requests, longest)`` (the fetch's requests and its longest request: as
    many buffers as should be in flight, each at least that long; fewer buffers than requests
    in flight hold the requests to their number), then ``place(job, offset, bytes)`` them; the
    known bytes are placed first. A short answer raises a
    :class:`~gpuframe.io.errors.RemoteError` naming the file and range
    (:func:`~gpuframe.io.remote.read_exactly_into`)."""
    for job, (_, _, _, known) in enumerate(jobs):
        for offset, data in known.items():
            place(job, offset, memoryview(data))
    pieces = [(job, start, length) for job, (_, ranges, _, _) in enumerate(jobs)
              for _, start, length in cut_requests(ranges, requests_in_flight, request_size)]
    free: queue.SimpleQueue[memoryview] = queue.SimpleQueue()
    for buffer in staging(len(pieces), max((length for _, _, length in pieces), default=0)):
        free.put(buffer)

    def fetch(piece: tuple[int, int, int]) -> None:
        job, start, length = piece
        buffer = free.get()
        try:
            read_exactly_into(jobs[job][0], start, buffer[:length])
            place(job, start, buffer[:length])
        finally:
            free.put(buffer)

    run_requests(pieces, requests_in_flight, fetch)


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


def fetch_device_copies(jobs: Sequence[CopyJob], requests_in_flight: int,
                        request_size: int | None) -> list[Any]:
    """An ``rmm.DeviceBuffer`` per job, ``length`` bytes holding the job's ranges and known
    bytes at their offsets (:func:`fetch_staged` through pinned buffers, at most
    :data:`STAGING_BYTES` of them); the rest is whatever the allocation held, which a reader of
    the planned units never touches."""
    import cupy
    import rmm

    copies = [rmm.DeviceBuffer(size=length) for _, _, length, _ in jobs]

    def staging(pieces: int, size: int) -> list[memoryview]:
        buffers = min(requests_in_flight, pieces, STAGING_BYTES // max(1, size))
        pinned = [cupy.cuda.alloc_pinned_memory(max(1, size)) for _ in range(max(1, buffers))]
        return [memoryview(np.frombuffer(p, np.uint8, size)) for p in pinned]

    def place(job: int, offset: int, data: memoryview) -> None:
        host = np.frombuffer(data, np.uint8)
        cupy.cuda.runtime.memcpy(copies[job].ptr + offset, host.ctypes.data, host.nbytes,
                                 cupy.cuda.runtime.memcpyHostToDevice)

    fetch_staged(jobs, requests_in_flight, request_size, staging, place)
    return copies
