"""Warm a cluster's workers in the background, so that the first query does not pay what each
worker process pays once.

A first query on a fresh GPU cluster takes many times a warm one, and a tiny join run before it
takes much of that away: the cost is per process, not per byte. On tiny frames, each worker does
what a first query would:

- import gpuframe's modules, which every task's function unpickles into (done as the warm-up
  starts, before :func:`begin` returns, while the cluster starts);
- CUDA loads each kernel's module at its first launch (lazy loading): cuDF's Parquet writer and
  reader, hash joins on int, string and two-column keys, groupby aggregations, sorts, and the
  native core's hash, pack and repeat-count kernels;
- the exchange's first delivery to each peer: the connection (UCX endpoints, TCP sockets), the
  serializers and, over TCP, the pinned pool buckets cross through, by a real delivery of a tiny
  frame to every worker's mailbox (dropped right after);
- KvikIO's bounce buffers (:func:`warm_kvikio`): without GPUDirect Storage, each of its threads
  reads a file into device memory through a pinned host buffer, which it allocates at its first
  use, and a local read runs up to ``max_requests_in_flight`` of them at once. Last: the longest
  part (pinning the buffers), and, beside the others, it held up cuDF's Parquet round trip,
  which reads through the same threads.

It runs in a thread of its own on each worker, not as a task: a query submitted meanwhile runs
beside it instead of queueing behind it on the workers' task threads, and whichever needs a
one-time cost first pays it. Started when the engine starts, on GPU workers unless asked
(``warm_up`` of :class:`~gpuframe.config.ClusterOptions`, and of
:func:`~gpuframe.cluster.engine.connect`);
:meth:`~gpuframe.cluster.engine.Engine.warmed` waits for it and says what each part took.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..backend import get_backend
from ..exchange.mailbox import forget, send_from
from ..exchange.row_hashes import hash_rows, longest_repeat
from ..exchange.splitters import HashSplitter
from ..io.readers.device import KVIKIO
from ..io.storage.base import storage_options

if TYPE_CHECKING:
    from distributed import Worker

WARMUP_ROWS = 4096
"""Rows of the warm-up frame: enough for every kernel a query launches, little to move."""


def sample_frame(rows: int = WARMUP_ROWS) -> pd.DataFrame:
    """The warm-up frame: int64, int32 and 12-character string keys, a float payload."""
    rng = np.random.default_rng(0)
    keys = rng.integers(0, rows // 8, rows)
    return pd.DataFrame({"k": keys, "j": (keys % 7).astype("int32"),
                         "s": [f"k{v:011d}" for v in keys], "x": rng.random(rows)})


def warm_worker(worker: Worker, backend_name: str, peers: list[str], wrap: bool
                ) -> dict[str, float]:
    """The warm-up of one worker: each part's seconds."""
    backend = get_backend(backend_name)
    seconds: dict[str, float] = {}

    def timed(part: str, start: float) -> None:
        seconds[part] = time.perf_counter() - start

    start = time.perf_counter()
    frame = backend.from_pandas(sample_frame())
    path = os.path.join(worker.local_directory, f"gpuframe-warmup-{os.getpid()}.parquet")
    try:
        # cuDF writes and reads through KvikIO's pool of threads, which a query's read beside
        # the warm-up must not replace meanwhile (KvikioSettings)
        with KVIKIO.using({}, wait=False):
            frame.to_parquet(path)
            frame = backend.module.read_parquet(path)
    finally:
        if os.path.exists(path):
            os.remove(path)
    timed("parquet", start)

    start = time.perf_counter()
    for keys in (["k"], ["s"], ["k", "j"]):
        HashSplitter(tuple(keys), max(2, len(peers))).split(frame, 0)
        longest_repeat(hash_rows(frame, keys))  # as a copied side's repeats are counted
        backend.join(frame, frame, "inner", keys, keys, ("_x", "_y"))
    frame.groupby("k").agg({"x": ["sum", "count", "mean", "min", "max", "var"]})
    frame.sort_values(["k", "s"])
    timed("operators", start)

    start = time.perf_counter()
    exchange = f"gpuframe-warmup-{worker.address}-{os.getpid()}"
    send_from(worker, exchange, HashSplitter(("k",), len(peers)), peers, [0], wrap, [frame],
              None)
    forget(worker, exchange, peers)
    timed("exchange", start)

    if backend.name == "cudf":
        start = time.perf_counter()
        warm_kvikio(worker.local_directory)
        timed("kvikio", start)
    return seconds


def warm_kvikio(directory: str) -> None:
    """KvikIO's pinned bounce buffers made, as many as a local read may use at once: reads of
    a sparse file (holes: nothing on disk), a buffer's bytes each, all at once on as many
    threads as a local read may set (``max_requests_in_flight``). A first read that made them
    itself took several times a warm one (benchmarks/results/2026-11-29-s43-gpu-h200.md);
    KvikIO keeps them for later reads. Every read lands in one buffer's device memory: the
    bytes are zeros, and dropped."""
    import kvikio
    import kvikio.defaults
    import rmm

    threads = storage_options().max_requests_in_flight
    buffer_bytes = kvikio.defaults.get("bounce_buffer_size")
    path = os.path.join(directory, f"gpuframe-warmup-{os.getpid()}.sparse")
    with open(path, "wb") as file:
        file.truncate(threads * buffer_bytes)
    try:
        target = rmm.DeviceBuffer(size=buffer_bytes)
        with KVIKIO.using({"num_threads": threads, "task_size": buffer_bytes}, wait=False), \
                kvikio.CuFile(path, "r") as file:
            reads = [file.pread(target, buffer_bytes, i * buffer_bytes) for i in range(threads)]
            for read in reads:
                read.get()
    finally:
        os.remove(path)


_warming: dict[str, Future] = {}
"""This worker process's warm-up, by worker address."""


def begin(backend_name: str, peers: list[str], wrap: bool, dask_worker: Worker) -> None:
    """Run on each worker (``Client.run``): start its warm-up in a thread of its own."""
    done: Future = Future()

    def run() -> None:
        try:
            done.set_result(warm_worker(dask_worker, backend_name, peers, wrap))
        except BaseException as exc:  # noqa: BLE001 (kept for warmed(), which raises it)
            done.set_exception(exc)

    _warming[dask_worker.address] = done
    threading.Thread(target=run, name="gpuframe-warmup", daemon=True).start()


async def result(timeout: float | None, dask_worker: Worker) -> dict[str, float]:
    """Run on each worker (``Client.run``): its warm-up's seconds per part, once it is done."""
    done = _warming.get(dask_worker.address)
    if done is None:
        return {}
    return await asyncio.wait_for(asyncio.wrap_future(done), timeout)
