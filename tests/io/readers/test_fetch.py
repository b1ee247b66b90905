"""One file's planned bytes on a worker: requests in flight for the ranges at hand, and sparse
copies of remote files holding exactly the planned bytes."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import orc

from gpuframe.io.errors import (
    RemoteError,
)
from gpuframe.io.planning.plan import plan_fragments
from gpuframe.io.readers.cudf import copy_layouts
from gpuframe.io.readers.fetch import FileFetcher, fetch_sparse_copies
from gpuframe.io.readers.task import READERS
from gpuframe.io.storage import open_source
from gpuframe.io.tasks import fragment_tasks
from gpuframe.io.tuning.model import Concurrency


def test_fetcher_keeps_more_short_requests_in_flight(dataset_dir):
    """Little's law for the ranges at hand: pages far shorter than the plan's requests need
    more of them in flight to keep as many bytes in flight; fragments read at once share
    them; configured requests in flight stay as set."""
    [task, *_] = fragment_tasks(plan_fragments(str(dataset_dir / "flat"),
                                               storage={"requests_in_flight": 2}))
    measured = replace(task, concurrency=Concurrency(latency_s=0.001, bandwidth=1e9,
                                                     requests_in_flight=2,
                                                     request_size=16 * 2**20))
    pages = [(i * 2**16, 2**16) for i in range(100)]
    with (FileFetcher(measured) as alone, FileFetcher(measured, sharing=4) as shared,
          FileFetcher(task) as configured):
        # local files: no budget of the host's (node_budget)
        assert alone.budgeted([(0, 16 * 2**20)]) == (2, None)
        assert alone.budgeted(pages) == (17, None)  # 1 stream + 1 MB in flight / 64 KiB
        assert shared.budgeted(pages) == (4, None)
        assert configured.budgeted(pages) == (2, None)


@pytest.mark.parametrize("name", ["flat/part-0.parquet", "orc/part-0.orc"])
def test_sparse_copy_of_a_remote_file_reads_like_the_file(dataset_dir, http_server, name):
    """The layout of the copies the GPU reader hands cuDF (:func:`copy_layouts`), built here
    in host memory: only the planned ranges are fetched, and a reader opening the copy gets
    the units' rows as from the file itself."""
    kind = name.split("/")[0].replace("flat", "parquet")
    columns = ["name", "id"]
    local = plan_fragments(str(dataset_dir / name), columns, format=kind, partition_bytes=1)
    remote = plan_fragments(f"{http_server.url}/{name}", columns, format=kind,
                            partition_bytes=1, storage={"requests_in_flight": 2})
    http_server.reset()
    remote_tasks = fragment_tasks(remote)
    fetchers = [FileFetcher(task) for task in remote_tasks]
    copies = fetch_sparse_copies(copy_layouts(remote_tasks, fetchers), 2, None)  # all at once
    for fetcher, task in zip(fetchers, remote_tasks):
        planned = task.format.ranges(task.metadata, task.units, task.file_columns)
        assert fetcher.bytes_read == sum(n for _, n in planned)
        fetcher.source.close()
    for task, copy in zip(fragment_tasks(local), copies, strict=True):
        expected, _ = READERS["pandas"]().read("k", [task])
        if kind == "parquet":
            got = pq.ParquetFile(copy).read_row_groups(list(task.units), columns=columns)
        else:
            opened = orc.ORCFile(copy)
            got = pa.Table.from_batches([opened.read_stripe(i, columns=columns)
                                         for i in task.units])
        pd.testing.assert_frame_equal(got.to_pandas()[columns], expected.to_pandas())
    assert http_server.whole_file_gets() == 0
    assert all(r.method == "GET" for r in http_server.log)  # the planned size: no HEAD


@pytest.mark.parametrize("name", ["flat/part-0.parquet", "orc/part-0.orc"])
def test_sparse_copies_hold_the_planned_bytes_and_zeros_elsewhere(dataset_dir, http_server,
                                                                   name):
    """Byte for byte: the file's bytes in the planned ranges, the format's known pieces at
    their offsets, zeros everywhere else."""
    kind = name.split("/")[0].replace("flat", "parquet")
    remote = plan_fragments(f"{http_server.url}/{name}", ["id"], format=kind,
                            partition_bytes=1, storage={"requests_in_flight": 3})
    tasks = fragment_tasks(remote)
    fetchers = [FileFetcher(task) for task in tasks]
    copies = fetch_sparse_copies(copy_layouts(tasks, fetchers), 3, None)
    data = (dataset_dir / name).read_bytes()
    for task, fetcher, copy in zip(tasks, fetchers, copies, strict=True):
        length, known = task.format.sparse_layout(task.metadata, len(data))
        expected = bytearray(length)
        for offset, size in task.format.ranges(task.metadata, task.units, task.file_columns):
            expected[offset:offset + size] = data[offset:offset + size]
        for offset, piece in known.items():
            expected[offset:offset + len(piece)] = piece
        assert copy.getvalue() == expected
        assert copy.tell() == 0
        fetcher.source.close()


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_sparse_copies_cost_memory_only_where_written(tmp_path):
    """A copy's untouched bytes are neither zeroed nor copied up front: building a 256 MiB
    copy of which 2 MiB is written takes about that much memory, not 256 MiB."""
    size = 256 * 2**20
    path = tmp_path / "sparse.bin"
    rng = np.random.default_rng(1)
    ranges = [(4096, 2**20), (size - 2**20 - 8, 2**20)]
    with open(path, "wb") as file:
        file.truncate(size)  # holes on disk as well
        for offset, length in ranges:
            file.seek(offset)
            file.write(rng.bytes(length))
    known = {size: b"footer"}
    with open_source(str(path)) as source:
        before = _resident_bytes()
        [copy] = fetch_sparse_copies([(source, ranges, size + 6, known)], 2, 2**18)
        grown = _resident_bytes() - before
    assert grown < 32 * 2**20, f"building the copy took {grown / 2**20:.0f} MiB"
    view = np.frombuffer(copy.getbuffer(), np.uint8)
    data = np.fromfile(path, np.uint8)
    for offset, length in ranges:
        assert np.array_equal(view[offset:offset + length], data[offset:offset + length])
    assert bytes(view[size:]) == b"footer"
    assert np.count_nonzero(view) == np.count_nonzero(data) + 6  # the rest reads as zeros


def test_a_failed_fetch_into_sparse_copies_names_the_file(dataset_dir, http_server):
    size = (dataset_dir / "flat" / "part-0.parquet").stat().st_size
    with (open_source(f"{http_server.url}/flat/part-1.parquet") as good,
          open_source(f"{http_server.url}/brokenoff/flat/part-0.parquet") as broken,
          pytest.raises(RemoteError, match=r"brokenoff/flat/part-0.parquet: the response "
                                           r"to 'Range: bytes=0-\d+' broke off")):
        fetch_sparse_copies([(good, [(0, 4096)], size, {}),
                             (broken, [(0, size)], size, {})], 2, None)
