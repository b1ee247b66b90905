"""One file's planned bytes on a worker, for the Arrow reader: a local path, a sparse copy of a
remote file holding only the planned ranges, or the ranges themselves; every fetch counted.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..errors import DatasetError
from ..storage import open_source
from ..storage.base import scheme_of
from ..storage.ranges import read_ranges, read_ranges_into
from ..tuning.budget import NodeBudget, fetch_threads, node_budget
from ..tuning.model import fit_to_ranges
from .device import CopyJob
from .failures import check_planned_size, naming_failures

if TYPE_CHECKING:
    from typing_extensions import Self

    from ..tasks import FragmentTask


class FileFetcher:
    """The bytes of one file's units, counting what it fetched: the
    :class:`~gpuframe.io.formats.base.Fetcher` a format's Arrow reader is handed.

    :meth:`file` hands a format's Arrow reader something to open: a local path (Arrow reads
    it; the planned bytes are counted) or, for remote files, a sparse copy holding the planned
    ranges (:func:`fetch_sparse_copies`). :meth:`bytes` fetches ranges for formats
    that parse bytes themselves (CSV, Parquet pages), local or remote, many requests in flight.
    ``sharing``: the fragments read at once with this one, which share the task's requests in
    flight (:meth:`budgeted`).
    """

    def __init__(self, task: FragmentTask, sharing: int = 1):
        self.task = task
        self.sharing = sharing
        self.local = scheme_of(task.path) == "file"
        self.source = open_source(task.path, task.storage, task.version)
        if self.local:
            try:
                check_planned_size(task, self.source)
            except DatasetError:
                self.source.close()
                raise
        self._local_bytes = 0
        self._local_requests = 0
        self.units_read = 0

    @property
    def bytes_read(self) -> int:
        return self._local_bytes + self.source.bytes_read

    @property
    def requests(self) -> int:
        return self._local_requests + self.source.requests

    def budgeted(self, ranges: Sequence[tuple[int, int]]) -> tuple[int, NodeBudget | None]:
        """Threads that fetch ``ranges``, and the host's budget for the store, whose tokens
        their requests take (:mod:`~gpuframe.io.tuning.budget`): this fragment's share, with
        the fragments read at once, of :func:`~gpuframe.io.tuning.budget.fetch_threads` for
        the requests in flight Little's law asks for these ranges: more where they are shorter
        than the plan's requests (a selective read's pages, from KiBs to a MiB against
        requests of 16 MiB), so that as many bytes stay in flight
        (:func:`~gpuframe.io.tuning.model.fit_to_ranges`)."""
        fitted = fit_to_ranges(self.task.concurrency, [n for _, n in ranges],
                               self.task.storage.max_requests_in_flight)
        budget = node_budget(self.task.path, self.task.storage, fitted)
        threads = fetch_threads(fitted.requests_in_flight, budget)
        return max(1, threads // self.sharing), budget

    def file(self, ranges: Sequence[tuple[int, int]],
             known: Mapping[int, bytes] | None = None) -> str | pa.NativeFile:
        """``known``: bytes the plan already holds (by offset), served without a request.

        A remote file becomes a sparse copy of it (:func:`fetch_sparse_copies`): pages never
        written cost no memory, and Arrow reads its buffer natively (a Python file object would
        hold the GIL on every read). The copy ends with the last byte it holds, not at the
        file's end (whose bytes it need not hold, nor its size: a HEAD where the task has no
        planned version): Arrow's Parquet reader, handed the footer, reads the planned chunks
        alone, and the ORC tail that Arrow reads from the file's end is among the known
        bytes."""
        if self.local:
            self._local_bytes += sum(n for _, n in ranges)
            self._local_requests += len(ranges)
            return self.task.path
        known = known or {}
        length = max([offset + n for offset, n in ranges]
                     + [offset + len(data) for offset, data in known.items()], default=0)
        threads, budget = self.budgeted(ranges)
        [copy] = fetch_sparse_copies([(self.source, ranges, length, known)], threads,
                                     self.task.concurrency.request_size, budget)
        return pa.BufferReader(copy.getbuffer())

    def bytes(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of ``ranges``; an ``EOFError`` where the file ends before one of them
        does (cut since planning), which :meth:`naming_failures` names: a short range parsed
        as CSV would be fewer rows, silently."""
        threads, budget = self.budgeted(ranges)
        data = read_ranges(self.source, ranges, threads, self.task.concurrency.request_size,
                           budget)
        for (offset, length), got in zip(ranges, data):
            if len(got) != length:
                raise EOFError(f"bytes {offset}-{offset + length} ended after {len(got)}")
        return data

    def read(self, units: Sequence[int], columns: Sequence[str]) -> pa.Table:
        self.units_read = max(self.units_read, len(units))
        with self.naming_failures(units):
            return self.task.format.read_units(self.task, self, units, columns)

    def read_rows(self, rows: Mapping[int, np.ndarray], columns: Sequence[str]) -> pa.Table:
        """``columns`` at ``rows`` (unit -> row indices in it), fetching what the format
        needs for them alone (:meth:`~gpuframe.io.formats.base.FileFormat.read_rows`)."""
        self.units_read = max(self.units_read, len(rows))
        with self.naming_failures(list(rows)):
            return self.task.format.read_rows(self.task, self, rows, columns)

    def naming_failures(self, units: Sequence[int]) -> AbstractContextManager[None]:
        """Failures of decoding ``units`` raised as the engine's errors naming the file and
        units (:func:`~.failures.naming_failures`)."""
        return naming_failures(self.task, units)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.source.close()


def fetch_sparse_copies(jobs: Sequence[CopyJob], requests_in_flight: int,
                        request_size: int | None, budget: NodeBudget | None = None
                        ) -> list[io.BytesIO]:
    """A file object per job ``(source, ranges, length, known)``: ``length`` bytes holding
    ``source``'s ``ranges`` at their offsets, fetched straight into place by one pool of
    ``requests_in_flight`` requests over all the jobs (each holding a token of the host's
    ``budget``, where given; a failed request raises naming its file), and the ``known`` bytes
    at theirs; the rest reads as zeros.

    The CPU reader's copies (:meth:`FileFetcher.file`; the GPU's are in device memory,
    :func:`~.cudf.read_device_copies`). Each is a ``BytesIO`` over a fresh ``bytes(length)``
    that it alone holds: CPython then lets ``getbuffer()`` write into those bytes in place (it
    copies them only while another reference exists), and Arrow reads that buffer without a
    copy. ``bytes(length)`` is ``calloc``'d: above glibc's mmap threshold (32 MiB at most),
    fresh pages that the kernel zeroes when a fetch thread first writes them, and pages never
    written cost nothing; below it, a ``memset`` of recycled heap. A ``BytesIO`` extended by
    seeking past its end would be zeroed whole, serially, before any fetch, a large share of a
    read (benchmarks/results/2026-11-23-ingest-h200.md)."""
    copies = [io.BytesIO(bytes(length)) for _, _, length, _ in jobs]
    views = [copy.getbuffer() for copy in copies]
    try:
        read_ranges_into([(source, ranges, view)
                          for (source, ranges, _, _), view in zip(jobs, views)],
                         requests_in_flight, request_size, budget)
        for (_, _, _, known), view in zip(jobs, views):
            for offset, data in known.items():
                view[offset:offset + len(data)] = data
    finally:
        for view in views:
            view.release()
    return copies


