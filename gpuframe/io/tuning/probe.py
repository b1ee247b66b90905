"""Measuring a store from one process: latency, one request's rate alone, and the knee of its
rate against requests at once (:func:`probe_storage`), what :mod:`.model` chooses from.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from ..storage import open_source
from ..storage.base import RangeSource, StorageOptions, storage_options
from .model import StoreProbe, choose_request_size

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
Python server's requests a second, not its bandwidth
(benchmarks/results/2026-11-25-figures-from-io-comments.md)."""
PROBE_MEMORY = 256 * 2**20
"""The most buffer memory one concurrent step reads into: past it, reads at once share buffers
(their bytes are thrown away), so 32 reads of 16 MiB need 256 MiB, not 512."""
PROBE_STEP_SECONDS = 0.1
"""The least time each probe step reads for, its reads repeated until then: a single round of
32 MiB lasts milliseconds on a fast store, short enough that noise decided where the ramp
stopped. Each step (one read alone, twice, then 2 to 32 at once) so takes 0.1 s, up to one
read's time more, once per store and process."""


def probe_storage(source: RangeSource, storage: StorageOptions | None = None,
                  probes: int = 3) -> StoreProbe:
    """Latency, one request's rate, and the knee of the store's rate against requests at once,
    from a few first reads in this process.

    Latency is the fastest of ``probes`` 4 KiB reads; one request's rate alone comes from reads
    of :data:`BANDWIDTH_PROBE` bytes (at least ``task_size``) one after another, less that
    latency each, the better of two such steps. From those two the request size
    (:func:`choose_request_size`, or ``task_size``; at most :data:`PROBE_READ_BYTES` and half
    the file), and reads of that size, 2, 4, 8... at once (up to :data:`PARALLEL_PROBES` and
    the requests-in-flight limit), while doubling them still raises the rate by
    :data:`PROBE_GAIN`. The knee is the count that got the highest rate, the last step's too
    when it gained less than that but gained: near a flat top the ramp's stop moves with
    noise, and too few requests in flight cost more than too many
    (benchmarks/results/2026-11-23-remote-device-copies-h200.md). Its rate and the
    mean time of one read there go into the probe, so Little's law can use the response time
    under load (:class:`~.model.Concurrency`). One read alone is not timed again at that size:
    latency plus its transfer at the rate alone.

    A step that did not gain is read again and the better of its two rates counts: one pause
    (a collection, a busy neighbour) in a step of 16 stopped the ramp at 8 reads of a store
    that serves 32 (2-core CI host, full suite).

    Each step reads for :data:`PROBE_STEP_SECONDS`, and its last reads end up to one read's
    time later (~16 latencies, by the request size's rule); at most 8 steps, the read alone
    and the one past the knee twice. Peak memory: the buffers of one step, at most
    :data:`PROBE_MEMORY` (256 MiB; 32 reads of 8 MiB or less take 32 x their size). The rate
    of one read alone is not the rate under load: Little's law given it chooses far too few
    requests (benchmarks/results/2026-11-25-figures-from-io-comments.md)."""
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
    # Two steps, the better counts: one pause in a step of a read or two (a collection, a busy
    # neighbour) took the rate alone to a fifth (2-core CI host, full suite), and the request
    # size chosen from it with it.
    stream = max(_transfer_rate(source, length, latency) for _ in range(2))
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


def _read_together(source: RangeSource, offsets: Sequence[int], length: int, buffer: memoryview,
                   until: float = 0.0) -> list[tuple[int, int, float]]:
    """(bytes, reads, seconds) of each thread reading ``length`` bytes at its offset, all at
    once (a thread each); each thread reads on, the next ranges of the file in turn, until
    ``until`` (a ``time.perf_counter()``) has passed.

    Into ``buffer``, slices of ``length`` that threads take in turn (several threads share one
    where it holds fewer slices than threads: the bytes are thrown away), as reads fill their
    sparse copies: a new bytes object a read would time the client's page faults instead of the
    store (benchmarks/results/2026-11-25-figures-from-io-comments.md)."""
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


def _transfer_rate(source: RangeSource, length: int, latency: float) -> float:
    """Bytes a second of one request alone: reads of ``length`` bytes one after another for
    :data:`PROBE_STEP_SECONDS`.

    Transfer time is what the reads took beyond one latency each; when the two are too close
    to tell apart (tiny files, noise), count at least a tenth of it rather than divide by
    ~0."""
    [(nbytes, reads, elapsed)] = _read_together(source, [0], length, _probe_buffer(1, length),
                                                time.perf_counter() + PROBE_STEP_SECONDS)
    return nbytes / max(elapsed - reads * latency, elapsed / 10)


def _loaded_rate(source: RangeSource, offsets: Sequence[int], length: int) -> tuple[float, float]:
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
