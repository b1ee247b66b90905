"""Warm a cluster's workers in the background, so that the first query does not pay what each
worker process pays once.

A first query on a fresh GPU cluster takes many times a warm one, and a tiny join run before it
takes most of that away: the cost is per process, not per byte. On tiny frames, one
``gpuframe-warmup`` task per worker does what a first query would:

- CUDA loads each kernel's module at its first launch (lazy loading): cuDF's Parquet writer and
  reader (with KvikIO's threads), hash joins on int, string and two-column keys, groupby
  aggregations, sorts, and the native core's hash and pack kernels;
- the exchange's first delivery to each peer: the connection (UCX endpoints, TCP sockets), the
  serializers and, over TCP, the pinned pool buckets cross through, by a real send of a tiny
  frame to every worker's mailbox (dropped right after).

The tasks are submitted when the engine starts (``warm_up`` of
:class:`~gpuframe.config.ClusterOptions`, and of :func:`~gpuframe.cluster.engine.connect`) and
not waited for: a query submitted meanwhile queues behind them on each worker.
:meth:`~gpuframe.cluster.engine.Engine.warmed` waits for them and says what each part took.
"""

from __future__ import annotations

import os
import time
import uuid

import numpy as np
import pandas as pd
from distributed import Client, Future, get_worker

from ..backend import Backend, get_backend
from ..diagnostics.stages import PREFIX
from ..exchange.bucket import HOST_PROTOCOLS
from ..exchange.mailbox import forget, install, send
from ..exchange.splitters import HashSplitter

WARMUP_ROWS = 4096
"""Rows of the warm-up frame: enough for every kernel a query launches, little to move."""


def sample_frame(rows: int = WARMUP_ROWS) -> pd.DataFrame:
    """The warm-up frame: int64, int32 and 12-character string keys, a float payload."""
    rng = np.random.default_rng(0)
    keys = rng.integers(0, rows // 8, rows)
    return pd.DataFrame({"k": keys, "j": (keys % 7).astype("int32"),
                         "s": [f"k{v:011d}" for v in keys], "x": rng.random(rows)})


def warm_worker(backend_name: str, key: str, peers: list[str], wrap: bool) -> dict[str, float]:
    """The warm-up task of one worker: each part's seconds."""
    worker = get_worker()
    backend = get_backend(backend_name)
    seconds: dict[str, float] = {}

    def timed(part: str, start: float) -> None:
        seconds[part] = time.perf_counter() - start

    start = time.perf_counter()
    frame = backend.from_pandas(sample_frame())
    path = os.path.join(worker.local_directory, f"gpuframe-warmup-{os.getpid()}.parquet")
    try:
        frame.to_parquet(path)
        frame = backend.module.read_parquet(path)
    finally:
        if os.path.exists(path):
            os.remove(path)
    timed("parquet", start)

    start = time.perf_counter()
    for keys in (["k"], ["s"], ["k", "j"]):
        HashSplitter(tuple(keys), max(2, len(peers))).split(frame, 0)
        backend.join(frame, frame, "inner", keys, keys, ("_x", "_y"))
    frame.groupby("k").agg({"x": ["sum", "count", "mean", "min", "max", "var"]})
    frame.sort_values(["k", "s"])
    timed("operators", start)

    start = time.perf_counter()
    exchange = f"{key}-exchange"
    send(key, exchange, HashSplitter(("k",), len(peers)), peers, [0], wrap, frame)
    forget(worker, exchange, peers)
    timed("exchange", start)
    return seconds


def submit_warm_up(client: Client, workers: list[str], backend: Backend, protocol: str
            ) -> dict[str, Future]:
    """Submit one warm-up task per worker, without waiting for them: its future by worker."""
    install(client)
    wrap = backend.on_device and protocol in HOST_PROTOCOLS
    # Keys of the "warmup" stage but of no job: a job's metrics, and the "current" job that
    # job_metrics() shows, are the user's queries alone.
    token = uuid.uuid4().hex
    futures = {}
    for i, worker in enumerate(workers):
        key = f"{PREFIX}warmup-{token}-{i}"
        futures[worker] = client.submit(warm_worker, backend.name, key, workers, wrap, key=key,
                                        workers=[worker], allow_other_workers=False,
                                        pure=False)
    return futures
