"""Many ranges of one or several sources at once, and a file object over a source."""

from __future__ import annotations

import threading
import time

import pytest

from gpuframe.io.errors import (
    RemoteError,
)
from gpuframe.io.storage import open_source
from gpuframe.io.storage.base import (
    Source,
    storage_options,
)
from gpuframe.io.storage.ranges import read_ranges, read_ranges_into

PART = "flat/part-0.parquet"


def test_read_ranges_fetches_only_the_ranges(dataset_dir, http_server):
    data = (dataset_dir / PART).read_bytes()
    ranges = [(0, 4), (1000, 3000), (len(data) - 8, 8)]
    http_server.reset()
    source = open_source(f"{http_server.url}/{PART}")
    got = read_ranges(source, ranges, max_in_flight=4, request_size=1024)
    assert got == [data[o:o + n] for o, n in ranges]
    assert http_server.bytes_served() == sum(n for _, n in ranges)
    assert len([r for r in http_server.log if r.method == "GET"]) == 1 + 3 + 1
    assert source.requests == 5 and source.bytes_read == sum(n for _, n in ranges)


@pytest.mark.parametrize("store", ["local", "http", "s3"])
def test_read_ranges_into_places_each_range_at_its_offset(dataset_dir, http_server, s3_server,
                                                          store):
    data = (dataset_dir / PART).read_bytes()
    where = {"local": str(dataset_dir / PART), "http": f"{http_server.url}/{PART}",
             "s3": s3_server.url(PART)}[store]
    options = storage_options(s3_server.options() if store == "s3" else None)
    source = open_source(where, options)
    ranges = [(0, 4), (1000, 3000), (len(data) - 8, 8)]
    buffer = bytearray(b"x" * len(data))
    read_ranges_into([(source, ranges, memoryview(buffer))], max_in_flight=3, request_size=1024)
    for offset, length in ranges:
        assert buffer[offset:offset + length] == data[offset:offset + length]
    assert buffer[4:1000] == b"x" * 996  # nothing else was written
    assert source.bytes_read == sum(n for _, n in ranges)
    longer = memoryview(bytearray(len(data) + 100))
    with pytest.raises(RemoteError, match=r"part-0.parquet: bytes .* ended after 8 bytes"):
        read_ranges_into([(source, [(len(data) - 8, 108)], longer)], max_in_flight=1)


class _SlowSource(Source):
    """Counts how many reads overlap in time."""

    def __init__(self):
        super().__init__("slow://")
        self.active = self.peak = 0
        self.guard = threading.Lock()

    def _fetch_size(self):
        return 10**6

    def _read(self, offset, length):
        with self.guard:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(0.02)
        with self.guard:
            self.active -= 1
        return bytes(length)


def test_read_ranges_keeps_max_in_flight():
    source = _SlowSource()
    read_ranges(source, [(i * 100, 100) for i in range(12)], max_in_flight=3)
    assert source.peak == 3
    single = _SlowSource()
    read_ranges(single, [(i * 100, 100) for i in range(4)], max_in_flight=1)
    assert single.peak == 1
