"""How many requests to keep in flight to a store, and how large: measured, then Little's law.

A store is probed where its reads will run (:func:`probe_storage`): latency, one request's rate
alone, and what 2, 4, 8... reads at once get, up to the knee where more stop paying. From those,
:func:`choose_concurrency` makes requests large enough that latency is a small part of each, and
keeps enough in flight to cover the store's bandwidth times the time each request takes while the
store delivers it. Probes are remembered per store (:func:`remembered_concurrency`); the choice is
made for each read, and fitted to the ranges it fetches (:func:`fit_to_ranges`).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Sequence
from urllib.parse import urlparse

from ..errors import OptionError
from .storage import open_source
from .storage.base import RangeSource as Source
from .storage.base import StorageOptions, storage_options

BANDWIDTH_PROBE = 4 * 2**20
"""Bytes of each read that measures one request's rate alone (at most half the file): long
enough that transfer, not latency, dominates on a fast store."""
PARALLEL_PROBES = 32
"""The most concurrent reads that measure what a store serves to many requests at once: the
probe doubles them from 2 while the store's rate still grows (:data:`PROBE_GAIN`)."""
PROBE_GAIN = 1.15
"""Doubling the concurrent probes must raise the measured rate this much to go on. The step
that stops the ramp still counts when it gained at all (:func:`probe_storage`)."""
PROBE_READ_BYTES = 16 * 2**20
"""The largest read of the probe's concurrent steps, which read requests of the size chosen
for the store (:func:`choose_request_size`) up to this, however many run at once. Reads that
shrank as they multiplied (32 MiB in all a round: 2 MiB each at 16, 1 MiB at 32) measured a
Python server's ~1000 requests a second, not its bandwidth: 6.7 GB/s of a loopback server
from which 16 requests of 16 MiB got 12 (H200 host)."""
PROBE_MEMORY = 256 * 2**20
"""The most buffer memory one concurrent step reads into: past it, reads at once share buffers
(their bytes are thrown away), so 32 reads of 16 MiB need 256 MiB, not 512."""
PROBE_STEP_SECONDS = 0.1
"""The least time each probe step reads for, its reads repeated until then: a single round of
32 MiB lasts 16 ms at 2 GB/s, short enough that noise decided where the ramp stopped. Each
step (one read alone, then 2 to 32 at once) so takes 0.1 s, up to one read's time more, once
per store and process."""
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
other connections idle. H200, 1.8 GiB over loopback HTTP in one GPU read task: 32 requests of
32 MiB in flight (64 chunks, two rounds) 0.29-0.31 s; 16 of 16 MiB (eight rounds) 0.19-0.20 s.
Only the GPU reader applies it, to its one fetch of all a task's files. A CPU fragment (128 MiB
at most) would have its requests cut to 1 MiB, and on the 2-core CPU host those cost more than
the stragglers: 454 MiB over loopback HTTP, 16 x 1 MiB 2.61 s, 16 x 16 MiB 1.69 s (same run);
the rule in the CPU reader left untuned reads at 0.86-0.88x of 16 x 16 MiB, 0.96x without."""


@dataclass(frozen=True)
class StoreProbe:
    """What one process measured of a store (:func:`probe_storage`), rates in bytes/s.

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
    other down (3 requests of a loopback server that gave one alone 2.5 GB/s got ~1 GB/s each,
    H200 host), and the rate alone chose 3 requests where 16 read 4x as fast. So
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
        load (:func:`choose_request_size`): moto's S3 on an H200 host (latency 8.8 ms, 66 MB/s
        a request under load), 454 MiB cut to 136 requests of 3.5 MiB took 0.60-0.95 s, in
        32 of 16 MiB 0.29-0.36 s. A configured size is kept as it is."""
        if self.source != "measured":
            return self.request_size
        waves = math.ceil(nbytes / (max(1, self.requests_in_flight) * WAVES))
        amortised = choose_request_size(self.latency_s, self.stream_bandwidth or self.bandwidth)
        return min(self.request_size, max(amortised, waves))

    def __repr__(self) -> str:
        if self.source != "measured":
            return (f"<Concurrency {self.source}: {self.requests_in_flight} requests of "
                    f"{_human(self.request_size)} in flight>")
        stream = self.stream_bandwidth or self.bandwidth
        readers = f" over {self.readers} readers" if self.readers > 1 else ""
        alone = (f"{self.alone_bandwidth / 1e6:.1f} MB/s per request alone, "
                 if self.alone_bandwidth else "")
        knee = f" at {self.probed_at_once} at once" if self.probed_at_once else ""
        mean = (f" ({_human(self.mean_request)} on average for this plan)"
                if self.mean_request else "")
        return (f"<Concurrency measured: latency {self.latency_s * 1e6:.0f} us, "
                f"bandwidth {self.bandwidth / 1e6:.1f} MB/s{readers}{knee} ({alone}"
                f"{stream / 1e6:.1f} MB/s per request{' under load' if alone else ''}) -> "
                f"{self.requests_in_flight} requests of {_human(self.request_size)}{mean} "
                f"in flight>")


def _human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes} B"


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
                       fragment_bytes: int | None = None) -> Concurrency:
    """Requests in flight and their size from probes made at once by each reading process.

    The probes ran concurrently (one per worker), so each saw the store shared as it will be
    during the read: the store's bandwidth is the sum of what each got at its knee; latency,
    one request's rate alone and one request's rate under that load
    (:attr:`StoreProbe.loaded_bandwidth`) are their medians. ``readers``: the tasks that will
    read at once (default: one per probe); each gets ``bandwidth / readers``, and as many
    requests as Little's law asks for that share with the loaded rate (:func:`littles_law`),
    so that at the probes' request size all readers together keep as many requests in flight
    as the probes had at their knee. A ``task_size`` option fixes the request size.
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
                       probed_at_once=sum(p.requests_at_once for p in probes))


def fit_to_ranges(concurrency: Concurrency, lengths: Sequence[int],
                  max_in_flight: int) -> Concurrency:
    """``concurrency`` for the requests a plan will make: ranges (column chunks) shorter than
    the request size are one request each, and more of them must be in flight to cover the
    same bandwidth x latency. Little's law again, with the plan's mean request; never fewer
    requests in flight than chosen before. Configured concurrency is returned as is."""
    lengths = [n for n in lengths if n > 0]
    if concurrency.source != "measured" or not lengths:
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


_measured: dict[tuple[str, str, str | None], tuple[tuple[StoreProbe, ...], int]] = {}
_measured_lock = threading.Lock()


def _store_of(path: str, storage: StorageOptions) -> tuple[str, str, str | None]:
    """What one measurement covers: a scheme and host (and the S3 endpoint)."""
    if "://" not in path or path.startswith("file://"):
        return ("file", "", None)
    parsed = urlparse(path)
    return (parsed.scheme, parsed.netloc, storage.endpoint if parsed.scheme == "s3" else None)


def forget_measurements() -> None:
    """Drop every store's probes, so the next read measures again."""
    with _measured_lock:
        _measured.clear()


def remembered_concurrency(path: str, storage: StorageOptions,
                           probe: Callable[[], tuple[Sequence[StoreProbe], int]],
                           fragment_bytes: int | None = None) -> Concurrency:
    """The concurrency for ``path``'s store: configured, or chosen (:func:`choose_concurrency`)
    for this read's ``storage`` options and ``fragment_bytes`` from the store's probes, made
    by ``probe()`` (the probes, and the readers that will share the store) on its first read.

    An explicit ``requests_in_flight`` option wins over any measurement. The probes are kept
    per store (scheme, host and S3 endpoint) for the life of the process, so only the first
    read of a store pays for them (:func:`forget_measurements` clears them); the choice is
    made again for each read, since it depends on the read: a plan of 128 MiB partitions caps
    requests at 4 MiB where 32 streams must share a partition, and a choice kept from it held
    a GPU's reads of 4 GiB partitions to 4 MiB requests (H200: 3.64 GiB/s, 16 MiB 4.66)."""
    if storage.requests_in_flight is not None:
        return Concurrency(0.0, 0.0, storage.requests_in_flight,
                           storage.task_size or DEFAULT_REQUEST_SIZE, "configured")
    store = _store_of(path, storage)
    with _measured_lock:
        known = _measured.get(store)
    if known is None:
        probes, readers = probe()
        with _measured_lock:
            known = _measured.setdefault(store, (tuple(probes), readers))
    return choose_concurrency(known[0], storage, readers=known[1],
                              fragment_bytes=fragment_bytes)


def unmeasured_concurrency(storage: StorageOptions) -> Concurrency:
    """The concurrency of a read that plans fewer than ``probe_min_bytes``: the probe reads for
    about a second (a 0.74 MiB file's first read over loopback HTTP took 0.74 s and fetched
    311 MB, 0.04 s and 0.8 MB once probed; 2-core CPU), more than such a read takes with any
    sensible setting. :data:`UNMEASURED_REQUESTS` of ``task_size`` (else
    :data:`DEFAULT_REQUEST_SIZE`); nothing is remembered, so a larger read still probes."""
    return Concurrency(0.0, 0.0, min(UNMEASURED_REQUESTS, storage.max_requests_in_flight),
                       storage.task_size or DEFAULT_REQUEST_SIZE, "unmeasured")


def measure_storage(source: Source, storage: StorageOptions | None = None, probes: int = 3,
                    fragment_bytes: int | None = None) -> Concurrency:
    """Requests in flight and their size for ``source``'s store, measured in this process
    (:func:`probe_storage`, then :func:`choose_concurrency` for one reader); the probe is
    remembered per store (:func:`remembered_concurrency`). A read on a cluster measures on
    its workers instead (``gpuframe.io.read.measure_on_workers``)."""
    storage = storage or storage_options()
    return remembered_concurrency(
        source.path, storage, lambda: ([probe_storage(source, storage, probes)], 1),
        fragment_bytes)


def probe_storage(source: Source, storage: StorageOptions | None = None,
                  probes: int = 3) -> StoreProbe:
    """Latency, one request's rate, and the knee of the store's rate against requests at once,
    from a few first reads in this process.

    Latency is the fastest of ``probes`` 4 KiB reads; one request's rate alone comes from reads
    of :data:`BANDWIDTH_PROBE` bytes (at least ``task_size``) one after another, less that
    latency each. From those two the request size (:func:`choose_request_size`, or
    ``task_size``; at most :data:`PROBE_READ_BYTES` and half the file), and reads of that size,
    2, 4, 8... at once (up to :data:`PARALLEL_PROBES` and the requests-in-flight limit), while
    doubling them still raises the rate by :data:`PROBE_GAIN`. The knee is the count that got
    the highest rate, the last step's too when it gained less than that but gained: near a
    flat top the ramp's stop moves with noise, and too few requests in flight cost more than
    too many (H200 host, loopback HTTP, two loans: knees at 32 and at 8 reads at once, 7.3 and
    6.2 GB/s; reads of 1.8 GiB with 32 requests 5.26 GiB/s, with 9 4.50, fixed 64 never slower
    than fixed 16). Its rate and the mean time of one read there go into the probe, so Little's
    law can use the response time under load (:class:`Concurrency`). One read alone is not
    timed again at that size: latency plus its transfer at the rate alone.

    A step that did not gain is read again and the better of its two rates counts: one pause
    (a collection, a busy neighbour) in a step of 16 stopped the ramp at 8 reads of a store
    that serves 32 (2-core CI host, full suite).

    Each step reads for :data:`PROBE_STEP_SECONDS`, and its last reads end up to one read's
    time later (~16 latencies, by the request size's rule); at most 7 steps, the one past the
    knee twice. Peak memory: the buffers of one step, at most :data:`PROBE_MEMORY` (256 MiB;
    32 reads of 8 MiB or less take 32 x their size). On a 16-core H200 host a loopback HTTP
    server gave one 4 MiB read alone 2.5 GB/s and 16 of 16 MiB at once 12 GB/s; the rate alone
    in Little's law chose 3 requests of 32 MiB (2.9 GiB/s, 0.25x of 16 x 16 MiB)."""
    storage = storage or storage_options()
    size = source.size()
    probe = min(4096, size)
    latencies = []
    for i in range(max(1, probes)):
        start = time.perf_counter()
        source.read_range(min(i * probe, max(0, size - probe)), probe)
        latencies.append(time.perf_counter() - start)
    latency = min(latencies)
    half = max(probe, size // 2)
    length = min(max(storage.task_size or 0, BANDWIDTH_PROBE), PROBE_READ_BYTES, half)
    stream = _transfer_rate(source, length, latency)
    each = min(storage.task_size or choose_request_size(latency, stream), PROBE_READ_BYTES,
               half)
    if each <= 0 or stream <= 0:  # an empty file: nothing to time
        return StoreProbe(latency, stream, stream)
    seconds = latency + each / stream
    bandwidth, knee = each / seconds, 1
    most = min(PARALLEL_PROBES, storage.max_requests_in_flight)
    span = max(1, size - each + 1)
    together = 2
    while together <= most:
        offsets = [(i * each) % span for i in range(together)]
        _read_together(source, offsets, probe, memoryview(bytearray(probe)))  # connect first
        rate, per_read = _loaded_rate(source, offsets, each)
        if rate < bandwidth * PROBE_GAIN:  # the top, or a pause mid-step: read it again
            rate, per_read = max((rate, per_read), _loaded_rate(source, offsets, each))
        grew = rate >= bandwidth * PROBE_GAIN
        if rate > bandwidth:
            bandwidth, seconds, knee = rate, per_read, together
        if not grew:
            break
        together *= 2
    return StoreProbe(latency, stream, bandwidth, seconds, each, knee)


def probe_store(path: str, storage: StorageOptions) -> StoreProbe:
    """:func:`probe_storage` of the file at ``path``: the measuring task run on a worker."""
    with open_source(path, storage) as source:
        return probe_storage(source, storage)


def _read_together(source: Source, offsets: Sequence[int], length: int, buffer: memoryview,
                   until: float = 0.0) -> list[tuple[int, int, float]]:
    """(bytes, reads, seconds) of each thread reading ``length`` bytes at its offset, all at
    once (a thread each); each thread reads on, the next ranges of the file in turn, until
    ``until`` (a ``time.perf_counter()``) has passed.

    Into ``buffer``, slices of ``length`` that threads take in turn (several threads share one
    where it holds fewer slices than threads: the bytes are thrown away), as reads fill their
    sparse copies: a new bytes object a read would time the client's page faults instead of the
    store (16 threads of 4 MiB ``read_range`` got 1 GiB/s of a loopback server from which
    ``read_ranges_into`` got 9 on a 16-core host)."""
    slots = max(1, len(buffer) // max(1, length))
    stride = len(offsets) * length
    span = max(1, source.size() - length + 1)
    start = time.perf_counter()

    def read_on(index: int) -> tuple[int, int, float]:
        slot = index % slots
        view, offset = buffer[slot * length:(slot + 1) * length], offsets[index]
        nbytes = reads = 0
        while reads == 0 or time.perf_counter() < until:
            nbytes += source.read_range_into(offset, view)
            reads += 1
            offset = (offset + stride) % span
        return nbytes, reads, max(time.perf_counter() - start, 1e-9)

    if len(offsets) == 1:
        return [read_on(0)]
    with ThreadPoolExecutor(len(offsets), thread_name_prefix="gpuframe-probe") as pool:
        return list(pool.map(read_on, range(len(offsets))))


def _probe_buffer(together: int, length: int) -> memoryview:
    """Room for ``together`` reads of ``length`` bytes, at most :data:`PROBE_MEMORY` of it
    (never less than one read)."""
    slots = max(1, min(together, PROBE_MEMORY // max(1, length)))
    return memoryview(bytearray(slots * length))


def _transfer_rate(source: Source, length: int, latency: float) -> float:
    """Bytes a second of one request alone: reads of ``length`` bytes one after another for
    :data:`PROBE_STEP_SECONDS`.

    Transfer time is what the reads took beyond one latency each; when the two are too close
    to tell apart (tiny files, noise), count at least a tenth of it rather than divide by
    ~0."""
    [(nbytes, reads, elapsed)] = _read_together(source, [0], length, _probe_buffer(1, length),
                                                time.perf_counter() + PROBE_STEP_SECONDS)
    return nbytes / max(elapsed - reads * latency, elapsed / 10)


def _loaded_rate(source: Source, offsets: Sequence[int], length: int) -> tuple[float, float]:
    """(bytes a second, mean seconds of one read) of reading ``length`` bytes at each offset,
    all at once, for :data:`PROBE_STEP_SECONDS`: what the store delivers to that many requests,
    and the time each takes meanwhile, by Little's law: reads at once / reads a second.

    Each thread's bytes and reads a second count up to its own last read's end: a thread whose
    last read ended early waited for the others' (up to one read's time) reading nothing, and
    the whole step's time would count that wait as the store's."""
    threads = _read_together(source, offsets, length, _probe_buffer(len(offsets), length),
                             time.perf_counter() + PROBE_STEP_SECONDS)
    rate = sum(nbytes / seconds for nbytes, _, seconds in threads)
    return rate, len(threads) / sum(reads / seconds for _, reads, seconds in threads)
