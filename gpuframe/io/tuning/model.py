"""Little's law for a store: requests in flight and their size from what was measured of it.

:func:`choose_request_size` makes requests large enough that latency is a small part of each;
:func:`choose_concurrency` keeps enough of them in flight to cover the store's bandwidth times
the time each takes while the store delivers it (:func:`littles_law`), from the probes of
:mod:`.probe`; :func:`fit_to_ranges` adjusts the choice to the ranges a plan fetches.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...errors import OptionError
from ...units import byte_text
from ..storage.base import StorageOptions

DEFAULT_REQUEST_SIZE = 4 * 2**20
"""Request size where nothing was measured (``requests_in_flight`` set, no ``task_size``)."""
UNMEASURED_REQUESTS = 16
"""Requests in flight for a read too small to probe its store for (``probe_min_bytes``)."""
MIN_REQUEST_SIZE = 2**20
MAX_REQUEST_SIZE = 64 * 2**20
LATENCY_SHARE = 1 / 16
"""The part of each request's time that may go to latency (the per-request cost): requests
are made ``(1 - share) / share`` times latency x one request's rate long, so that fewer,
larger requests amortise it."""
WAVES = 4
"""Requests each request in flight should make in one fetch (:meth:`Concurrency.request_size_for`):
when a fetch is only one or two rounds of requests, its last round's stragglers leave the
other connections idle (benchmarks/results/2026-11-23-remote-device-copies-h200.md). Only the
GPU reader applies it, to its one fetch of all a task's files: a CPU fragment (128 MiB at most)
would have its requests cut to 1 MiB, which on a small CPU host cost more than the stragglers
(benchmarks/results/2026-11-25-figures-from-io-comments.md)."""


@dataclass(frozen=True)
class StoreProbe:
    """What one process measured of a store (:func:`~.probe.probe_storage`), rates in bytes/s.

    ``latency_s``: the time to first byte of a small read; ``stream_bandwidth``: one request's
    transfer rate when it is the only one; ``bandwidth``: what ``requests_at_once`` reads of
    ``request_size`` bytes got together at the knee of the probe's curve, where doubling them
    stopped paying, each taking ``request_seconds`` on average there. Little's law holds at the
    knee: ``requests_at_once = bandwidth x request_seconds / request_size``."""

    latency_s: float
    stream_bandwidth: float
    bandwidth: float
    request_seconds: float = 0.0
    """Mean seconds one request took at the knee; 0: not measured (as one request alone)."""
    request_size: int = 0
    """Bytes of each read at the knee."""
    requests_at_once: int = 1
    """Reads at once at the knee."""

    @property
    def loaded_bandwidth(self) -> float:
        """One request's transfer rate while the store delivers :attr:`bandwidth`: its time at
        the knee less one latency (at least a tenth of it, when the two are too close to tell
        apart). Below :attr:`stream_bandwidth` where requests at once slow each other down."""
        if self.request_seconds <= 0 or self.request_size <= 0:
            return self.stream_bandwidth
        transfer = max(self.request_seconds - self.latency_s, self.request_seconds / 10)
        return self.request_size / transfer


@dataclass(frozen=True)
class Concurrency:
    """Requests in flight and their size for one store, and the measurements behind them.

    Little's law: requests in flight = rate x time each spends in flight. ``readers`` tasks
    read at once (every worker thread) and share the store's ``bandwidth``, so each task's
    share serves ``share / request_size`` requests a second. Each request spends ``latency``
    waiting and ``request_size / stream_bandwidth`` transferring, where ``stream_bandwidth`` is
    one request's rate *while the store delivers its bandwidth*, measured at the knee of the
    probe's curve (:attr:`StoreProbe.loaded_bandwidth`), not alone: requests at once slow each
    other down, and the rate alone chose far too few requests
    (benchmarks/results/2026-11-25-figures-from-io-comments.md). So
    ``share / stream_bandwidth + latency * share / request_size`` requests keep a task's share
    busy; at the probe's request size they add up, over all readers, to the reads at once at
    its knee. The request size itself is chosen first, from latency and the rate of one request
    alone (``alone_bandwidth``), so that latency is at most :data:`LATENCY_SHARE` of each
    request's time (:func:`choose_request_size`).
    """

    latency_s: float
    bandwidth: float
    requests_in_flight: int
    request_size: int
    source: str = "measured"
    stream_bandwidth: float = 0.0
    """One request's transfer rate while the store delivers :attr:`bandwidth`; 0: the same as
    :attr:`bandwidth`."""
    readers: int = 1
    """Tasks reading at once, each with :attr:`requests_in_flight` requests; they share
    :attr:`bandwidth`."""
    mean_request: int = 0
    """The mean request a plan makes, when its ranges are shorter than :attr:`request_size`
    (:func:`fit_to_ranges`); 0: not fitted."""
    alone_bandwidth: float = 0.0
    """One request's transfer rate with no other request at once; 0: not measured."""
    probed_at_once: int = 0
    """Reads at once, over all probes, where the store's rate stopped growing; 0: not
    measured."""
    node_readers: int = 0
    """Readers on the host with the most: the fetches of a host take their requests from one
    budget of :attr:`requests_in_flight` for each of them, shared by its processes
    (:mod:`.budget`); 0: none, each fetch keeps its own."""

    @property
    def bytes_in_flight(self) -> int:
        return self.requests_in_flight * self.request_size

    @property
    def share(self) -> float:
        """The bandwidth one reading task can count on."""
        return self.bandwidth / max(1, self.readers)

    def request_size_for(self, nbytes: int) -> int:
        """The request size for one fetch of ``nbytes``: the chosen size, or smaller, so that
        each request in flight makes :data:`WAVES` requests, but never so small that latency
        takes more than :data:`LATENCY_SHARE` of a request's time at the rate each gets under
        load (:func:`choose_request_size`): on a store of high latency, requests cut smaller
        than that took twice as long (benchmarks/results/2026-11-24-kvikio-remote-h200.md).
        A configured size is kept as it is."""
        if self.source != "measured":
            return self.request_size
        waves = math.ceil(nbytes / (max(1, self.requests_in_flight) * WAVES))
        amortised = choose_request_size(self.latency_s, self.stream_bandwidth or self.bandwidth)
        return min(self.request_size, max(amortised, waves))

    def __repr__(self) -> str:
        if self.source != "measured":
            return (f"<Concurrency {self.source}: {self.requests_in_flight} requests of "
                    f"{byte_text(self.request_size)} in flight>")
        stream = self.stream_bandwidth or self.bandwidth
        readers = f" over {self.readers} readers" if self.readers > 1 else ""
        alone = (f"{self.alone_bandwidth / 1e6:.1f} MB/s per request alone, "
                 if self.alone_bandwidth else "")
        knee = f" at {self.probed_at_once} at once" if self.probed_at_once else ""
        mean = (f" ({byte_text(self.mean_request)} on average for this plan)"
                if self.mean_request else "")
        return (f"<Concurrency measured: latency {self.latency_s * 1e6:.0f} us, "
                f"bandwidth {self.bandwidth / 1e6:.1f} MB/s{readers}{knee} ({alone}"
                f"{stream / 1e6:.1f} MB/s per request{' under load' if alone else ''}) -> "
                f"{self.requests_in_flight} requests of {byte_text(self.request_size)}{mean} "
                f"in flight>")


def littles_law(latency_s: float, bandwidth: float, request_size: int,
                max_in_flight: int, stream_bandwidth: float | None = None) -> tuple[int, int]:
    """(requests in flight, request size) that keep a store of ``bandwidth`` busy; see
    :class:`Concurrency`. ``stream_bandwidth``: one request's transfer rate while the store
    delivers ``bandwidth`` (default ``bandwidth``).

    When more than ``max_in_flight`` requests would be needed, requests grow instead, so the
    bytes in flight still cover ``bandwidth * latency_s``.
    """
    bandwidth = max(0.0, bandwidth)
    stream = stream_bandwidth if stream_bandwidth and stream_bandwidth > 0 else bandwidth
    streams = bandwidth / stream if stream > 0 else 1.0
    in_flight_bytes = max(0.0, latency_s) * bandwidth
    wanted = max(1, math.ceil(max(1.0, streams) + in_flight_bytes / request_size - 1e-9))
    if wanted <= max_in_flight:
        return wanted, request_size
    if max_in_flight == 1:
        return 1, request_size
    return max_in_flight, max(request_size, math.ceil(in_flight_bytes / (max_in_flight - 1)))


def choose_request_size(latency_s: float, stream_bandwidth: float, streams: float = 1.0,
                        fragment_bytes: int | None = None) -> int:
    """Bytes per request such that latency is at most :data:`LATENCY_SHARE` of its time.

    A request costs ``latency_s`` (time to first byte, with the client's and server's
    per-request work) plus ``size / stream_bandwidth``; so ``size = (1 - share) / share x
    latency x stream_bandwidth``, rounded up to a power of two within
    [:data:`MIN_REQUEST_SIZE`, :data:`MAX_REQUEST_SIZE`]. A fragment of ``fragment_bytes``
    must still split into ``streams`` requests (the concurrent streams the store needs), so
    the size is at most ``fragment_bytes / streams``.
    """
    wanted = (1 - LATENCY_SHARE) / LATENCY_SHARE * max(0.0, latency_s) * max(0.0,
                                                                              stream_bandwidth)
    size = MIN_REQUEST_SIZE
    while size < wanted and size < MAX_REQUEST_SIZE:
        size *= 2
    if fragment_bytes:
        while size > MIN_REQUEST_SIZE and size * max(1.0, streams) > fragment_bytes:
            size //= 2
    return size


def choose_concurrency(probes: Sequence[StoreProbe], storage: StorageOptions,
                       readers: int | None = None,
                       fragment_bytes: int | None = None,
                       node_readers: int = 0) -> Concurrency:
    """Requests in flight and their size from probes made at once by each reading process.

    The probes ran concurrently (one per worker), so each saw the store shared as it will be
    during the read: the store's bandwidth is the sum of what each got at its knee; latency,
    one request's rate alone and one request's rate under that load
    (:attr:`StoreProbe.loaded_bandwidth`) are their medians. ``readers``: the tasks that will
    read at once (default: one per probe); each gets ``bandwidth / readers``, and as many
    requests as Little's law asks for that share with the loaded rate (:func:`littles_law`),
    so that at the probes' request size all readers together keep as many requests in flight
    as the probes had at their knee. A ``task_size`` option fixes the request size.
    ``node_readers``: the readers of the host with the most, whose fetches share one budget
    (:attr:`Concurrency.node_readers`).
    """
    if not probes:
        raise OptionError("choose_concurrency needs at least one probe")
    latency = _median([p.latency_s for p in probes])
    alone = _median([p.stream_bandwidth for p in probes])
    loaded = _median([p.loaded_bandwidth for p in probes])
    bandwidth = sum(p.bandwidth for p in probes)
    readers = max(1, readers or len(probes))
    share = bandwidth / readers
    streams = share / loaded if loaded > 0 else 1.0
    size = storage.task_size or choose_request_size(latency, min(alone, share) if share > 0
                                                    else alone, streams, fragment_bytes)
    count, request_size = littles_law(latency, share, size, storage.max_requests_in_flight,
                                      loaded)
    return Concurrency(latency, bandwidth, count, request_size, stream_bandwidth=loaded,
                       readers=readers, alone_bandwidth=alone,
                       probed_at_once=sum(p.requests_at_once for p in probes),
                       node_readers=node_readers)


def fit_to_ranges(concurrency: Concurrency, lengths: Iterable[int],
                  max_in_flight: int) -> Concurrency:
    """``concurrency`` for the requests a plan will make: ranges (column chunks) shorter than
    the request size are one request each, and more of them must be in flight to cover the
    same bandwidth x latency. Little's law again, with the plan's mean request; never fewer
    requests in flight than chosen before. Configured or unmeasured concurrency is returned as
    is, without taking ``lengths`` (which a plan makes as they are taken)."""
    if concurrency.source != "measured":
        return concurrency
    lengths = [n for n in lengths if n > 0]
    if not lengths:
        return concurrency
    size = concurrency.request_size
    mean = math.ceil(sum(lengths) / sum(math.ceil(n / size) for n in lengths))
    if mean >= size:
        return concurrency
    count, _ = littles_law(concurrency.latency_s, concurrency.share, mean, max_in_flight,
                           concurrency.stream_bandwidth)
    return dataclasses.replace(concurrency, mean_request=mean,
                               requests_in_flight=max(count, concurrency.requests_in_flight))


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


