"""Byte ranges of any :class:`~.base.RangeSource`, many requests in flight.

:func:`read_ranges` and :func:`read_ranges_into` cut long ranges into requests
(:func:`cut_requests`) and run them on a pool of threads (:func:`run_requests`); how many
requests, and of what size, is :mod:`gpuframe.io.tuning`'s to choose. :class:`RangeFile` hands
a source to readers that want a file object.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from ...errors import OptionError
from ..errors import RemoteError
from .base import RangeSource

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from ..tuning.budget import NodeBudget

Fetched = TypeVar("Fetched")
Request = tuple[int, int, int]
"""(index of the range or job it belongs to, offset, length) of one request."""


class RangeFile(io.RawIOBase):
    """A seekable, read-only file object over a :class:`~.base.RangeSource`.

    ``prefetched`` maps offsets to bytes already fetched (by :func:`read_ranges`); reads inside
    them are served from memory, others become one range request each. Wrap it in
    ``pyarrow.PythonFile`` to hand it to Arrow's Parquet reader.
    """

    def __init__(self, source: RangeSource, prefetched: Mapping[int, bytes] | None = None):
        super().__init__()
        self.source = source
        self._position = 0
        self._spans = sorted((offset, data) for offset, data in (prefetched or {}).items())

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.source.size()}
        self._position = base[whence] + offset
        return self._position

    def readinto(self, buffer: Buffer) -> int:
        view = memoryview(buffer).cast("B")
        want = min(len(view), max(0, self.source.size() - self._position))
        data = self._cached(self._position, want)
        if data is None:
            data = self.source.read_range(self._position, want)
        view[:len(data)] = data
        self._position += len(data)
        return len(data)

    def _cached(self, offset: int, length: int) -> bytes | None:
        for start, data in self._spans:
            if start <= offset and offset + length <= start + len(data):
                return data[offset - start:offset - start + length]
        return None


def read_ranges(source: RangeSource, ranges: Sequence[tuple[int, int]], max_in_flight: int,
                request_size: int | None = None, budget: NodeBudget | None = None
                ) -> list[bytes]:
    """The bytes of each (offset, length), fetched by up to ``max_in_flight`` threads (each
    request holding a token of the host's ``budget``, where given: :func:`run_requests`).

    Ranges longer than ``request_size`` are split into requests of that size and joined again,
    so one large column chunk is fetched in parallel too. The first failed request's error is
    raised; nothing partial is returned.
    """
    pieces = cut_requests(ranges, max_in_flight, request_size)
    fetched = run_requests(pieces, max_in_flight, lambda p: source.read_range(p[1], p[2]),
                           budget)
    joined: list[list[bytes]] = [[] for _ in ranges]
    for (index, _, _), data in zip(pieces, fetched):
        joined[index].append(data)
    return [b"".join(parts) for parts in joined]


def read_ranges_into(jobs: Sequence[tuple[RangeSource, Sequence[tuple[int, int]], memoryview]],
                     max_in_flight: int, request_size: int | None = None,
                     budget: NodeBudget | None = None) -> None:
    """:func:`read_ranges` for several files at once, each job's ranges landing at their own
    offsets of its buffer (as long as its file at least): no copies of the bytes, and one pool
    of ``max_in_flight`` requests over all the files, so no file waits for another's last
    request. A short answer is a :class:`RemoteError` naming the file and the range; ``budget``
    as for :func:`run_requests`."""
    pieces = [(job, start, length) for job, (_, ranges, _) in enumerate(jobs)
              for _, start, length in cut_requests(ranges, max_in_flight, request_size)]

    def fetch(piece: Request) -> None:
        source, _, buffer = jobs[piece[0]]
        read_exactly_into(source, piece[1], buffer[piece[1]:piece[1] + piece[2]])

    run_requests(pieces, max_in_flight, fetch, budget)


def read_exactly_into(source: RangeSource, offset: int, view: memoryview) -> None:
    """All of ``view`` from ``source`` at ``offset``: a short answer is a
    :class:`RemoteError` naming the file and the range."""
    count = source.read_range_into(offset, view)
    if count != len(view):
        raise RemoteError(f"{source.path}: bytes {offset}-{offset + len(view)} ended after "
                          f"{count} bytes; the file is shorter than its footer says")


def cut_requests(ranges: Sequence[tuple[int, int]], max_in_flight: int,
                 request_size: int | None) -> list[Request]:
    """(range index, offset, length) of each request: ranges cut at ``request_size`` (whole
    where it is None), for :func:`run_requests`."""
    if max_in_flight < 1:
        raise OptionError(f"max_in_flight={max_in_flight} must be at least 1")
    pieces: list[Request] = []
    for index, (offset, length) in enumerate(ranges):
        step = request_size or max(length, 1)
        pieces.extend((index, start, min(step, offset + length - start))
                      for start in range(offset, offset + length, step))
    return pieces


def run_requests(pieces: Sequence[Request], max_in_flight: int,
                 fetch: Callable[[Request], Fetched],
                 budget: NodeBudget | None = None) -> list[Fetched]:
    """``fetch(piece)`` of every piece, by up to ``max_in_flight`` threads, results in order;
    the first failure is raised. With the host's ``budget`` for the store, each fetch holds a
    token of it (:meth:`~gpuframe.io.tuning.budget.NodeBudget.run`)."""
    if budget is not None:
        return budget.run(pieces, fetch, max_in_flight)
    if len(pieces) <= 1 or max_in_flight == 1:
        return [fetch(piece) for piece in pieces]
    with ThreadPoolExecutor(min(max_in_flight, len(pieces)),
                            thread_name_prefix="gpuframe-range") as pool:
        return list(pool.map(fetch, pieces))

