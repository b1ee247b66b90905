"""Little's law over what a probe measured, on probes given by hand."""

from __future__ import annotations

import math

from gpuframe.io.storage.base import storage_options
from gpuframe.io.tuning import model
from gpuframe.io.tuning.model import (
    Concurrency,
    StoreProbe,
    choose_concurrency,
    choose_request_size,
    fit_to_ranges,
    littles_law,
)

PART = "flat/part-0.parquet"


def test_littles_law():
    # 10 ms x 1 GB/s = 10 MB in flight: 3 requests of 4 MiB waiting, one more transferring.
    assert littles_law(0.010, 1e9, 4 * 2**20, 64) == (4, 4 * 2**20)
    assert littles_law(0.0, 1e9, 4 * 2**20, 64) == (1, 4 * 2**20)
    # 100 ms x 10 GB/s = 1 GB in flight needs more than 8 requests: they grow instead.
    count, size = littles_law(0.1, 1e10, 4 * 2**20, 8)
    assert count == 8 and size * (count - 1) >= 1e9
    # One request gets a quarter of what the store serves: four streams before any latency.
    assert littles_law(0.0, 1e9, 4 * 2**20, 64, stream_bandwidth=2.5e8) == (4, 4 * 2**20)
    assert littles_law(0.010, 1e9, 4 * 2**20, 64, stream_bandwidth=2.5e8) == (7, 4 * 2**20)


def test_request_size_amortises_latency():
    # 1 ms x 1 GB/s: a 15 MB request spends 1/16 of its time waiting; rounded up to 16 MiB.
    assert choose_request_size(0.001, 1e9) == 16 * 2**20
    assert choose_request_size(0.0, 1e9) == model.MIN_REQUEST_SIZE
    assert choose_request_size(1.0, 1e10) == model.MAX_REQUEST_SIZE
    # A 16 MiB fragment must still split into the 4 streams the store needs.
    assert choose_request_size(0.001, 1e9, streams=4, fragment_bytes=16 * 2**20) == 4 * 2**20


def test_fit_to_ranges_keeps_small_chunks_covered():
    # 10 ms x 200 MB/s = 2 MB in flight: with 32 MiB requests 2 suffice, but a plan of 1 MiB
    # column chunks makes 1 MiB requests, so 1 stream + 2 MB / 1 MiB = 3 are needed.
    chosen = Concurrency(0.010, 200e6, 2, 32 * 2**20, stream_bandwidth=200e6)
    fitted = fit_to_ranges(chosen, [2**20] * 8, 64)
    assert (fitted.requests_in_flight, fitted.request_size, fitted.mean_request) == (
        3, 32 * 2**20, 2**20)
    assert "1.0 MiB on average" in repr(fitted)
    assert fit_to_ranges(chosen, [64 * 2**20], 64) is chosen  # split into full requests
    configured = Concurrency(0.0, 0.0, 5, 2**20, "configured")
    assert fit_to_ranges(configured, [100] * 4, 64) is configured


def test_fit_to_ranges_takes_no_range_it_would_not_use():
    """A plan makes its ranges as the fit takes them: configured or unmeasured concurrency
    takes none (a read planned for its schema alone computes no page ranges)."""
    def ranges():
        raise AssertionError("ranges taken")
        yield 0

    for source in ("configured", "unmeasured"):
        given = Concurrency(0.0, 0.0, 5, 2**20, source)
        assert fit_to_ranges(given, ranges(), 64) is given


def test_a_fetch_makes_several_rounds_of_requests():
    chosen = Concurrency(0.001, 8e9, 32, 32 * 2**20, stream_bandwidth=230e6)
    # 1.8 GiB by 32 requests of 32 MiB would be two rounds: four rounds of ~14 MiB instead
    size = chosen.request_size_for(1818 * 2**20)
    assert size == math.ceil(1818 * 2**20 / (32 * model.WAVES))
    assert chosen.request_size_for(100 * 2**30) == 32 * 2**20  # never larger than chosen
    # never below the size where latency is 1/16 of a request: 15 x 1 ms x 230 MB/s -> 4 MiB
    assert chosen.request_size_for(2**20) == 4 * 2**20
    # a store of long latency and slow requests (moto's S3) keeps requests long: 454 MiB by
    # 32 in flight in 16 MiB requests (15 x 8.8 ms x 66 MB/s), not 136 of 3.5 MiB
    slow = Concurrency(0.0088, 2.0e9, 32, 64 * 2**20, stream_bandwidth=66e6)
    assert slow.request_size_for(454 * 2**20) == 16 * 2**20
    configured = Concurrency(0.0, 0.0, 32, 32 * 2**20, "configured")
    assert configured.request_size_for(2**20) == 32 * 2**20


def test_choose_concurrency_applies_littles_law_at_the_probes_knee():
    # A fast loopback server's probe: 469 us, 2.53 GB/s alone, 16 reads of 16 MiB at once 12.1 GB/s.
    knee = StoreProbe(469e-6, 2.53e9, 12.1e9, 16 * 2**24 / 12.1e9, 2**24, 16)
    chosen = choose_concurrency([knee], storage_options())
    assert chosen.request_size == 32 * 2**20  # 15 x 469 us x 2.53 GB/s, a power of two
    assert chosen.requests_in_flight == 16, chosen
    assert "16 at once" in repr(chosen) and "2530.0 MB/s per request alone" in repr(chosen)
    # The rate alone in Little's law chose 3.
    assert littles_law(469e-6, 6.68e9, 32 * 2**20, 64, 2.53e9)[0] == 3
    # Two workers probed at once, each reaching its knee at 8 reads of 4 MiB in 40 ms; 8 worker
    # threads then share the 2 x 800 MB/s, so each keeps 2 of the 16 requests in flight.
    worker = StoreProbe(0.002, 100e6, 800e6, 0.040, 4 * 2**20, 8)
    shared = choose_concurrency([worker, worker], storage_options(task_size=4 * 2**20),
                                       readers=8)
    assert (shared.requests_in_flight, shared.readers, shared.probed_at_once) == (2, 8, 16)
    # A probe with nothing measured under load counts on the rate alone.
    alone = StoreProbe(0.010, 1e9, 1e9)
    assert choose_concurrency([alone], storage_options(task_size=4 * 2**20)
                                     ).requests_in_flight == 4
