"""How long one delivery of the direct exchange takes between two workers, against the raw copy of
the same bytes, in the same run.

A task on worker A delivers pieces to worker B's mailbox the way the exchange's send task does
(``gpuframe.exchange.mailbox._deliver``), one at a time, and times each from its call to B's
acknowledgement: frames of 2 and 8 int64 columns, which travel as a buffer per column, and the
8 columns sealed (``hash_split(..., sealed=True)``: one buffer, as the exchange sends them). Each
case runs on idle workers and again with the workers' other threads busy: in pure Python (they
hold the GIL, as the pandas and Arrow glue of a query's tasks does) or launching GPU kernels
(CuPy). The baseline is a copy of the same bytes between the two GPUs (CuPy peer copy), or
within host memory on the CPU backend; the ratio is the delivery's time over the copy's. Dask's
own dependency transfer (a task on B taking A's frame as its argument, timed by the client) is
the other baseline. A first table gives the floor under every delivery: the hand-off to the
worker's event loop and back, Dask's own ``identity`` RPC, and a delivery of no piece.

  python3 benchmarks/exchange_latency.py [--rows 100000,1000000,4000000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path

from distributed import get_worker, wait

import gpuframe
from gpuframe.exchange.mailbox import PLUGIN_NAME, _deliver, forget
from gpuframe.exchange.pack import hash_split

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tpch.run import first_visible_device  # noqa: E402

LOADS = ("idle", "python", "gpu")
"""What the workers' other threads do while the deliveries are timed."""
PIECES = ((2, False), (8, False), (8, True))
"""(columns, sealed) of each case's piece."""
BUSY_S = 4.0
"""How long the busy threads run: past a case's deliveries (they begin 0.3 s in)."""


def make(rows: int, columns: int, on_device: bool, sealed: bool = False):
    """A frame of ``rows`` x ``columns`` int64, or its rows sealed in one buffer."""
    if on_device:
        import cudf
        import cupy as xp
    else:
        import numpy as xp
        import pandas as cudf
    frame = cudf.DataFrame({f"c{i}": xp.arange(rows, dtype="int64") + i for i in range(columns)})
    return hash_split(frame, ["c0"], 1, sealed=True)[0] if sealed else frame


def deliveries(peer: str, rows: int, columns: int, on_device: bool, sealed: bool,
               repeat: int) -> list[float]:
    """On worker A: seconds per delivery of one piece to ``peer``, ``repeat`` times."""
    worker = get_worker()
    loop = worker.plugins[PLUGIN_NAME].loop
    piece = make(rows, columns, on_device, sealed)
    exchange = f"latency-{uuid.uuid4().hex}"
    seconds = []
    try:
        for source in range(repeat):
            start = time.perf_counter()
            asyncio.run_coroutine_threadsafe(
                _deliver(worker, peer, exchange, source, {0: piece}, None), loop).result()
            seconds.append(time.perf_counter() - start)
    finally:
        forget(worker, exchange, [peer])
    return seconds


def floors(peer: str, repeat: int) -> dict[str, float]:
    """On worker A: median seconds of what every delivery pays whatever it carries: the hand-off
    from a task's thread to the worker's event loop and back, a round trip of Dask's own
    ``identity`` RPC, and a delivery of no piece (the RPC, the mailbox, the transfer's log)."""
    worker = get_worker()
    loop = worker.plugins[PLUGIN_NAME].loop
    exchange = f"latency-{uuid.uuid4().hex}"
    calls = {
        "hand-off to the event loop": lambda source: asyncio.sleep(0),
        "Dask's identity RPC": lambda source: worker.rpc(peer).identity(),
        "a delivery of no piece": lambda source: _deliver(worker, peer, exchange, source, {},
                                                          None),
    }
    medians = {}
    try:
        for name, call in calls.items():
            seconds = []
            for source in range(repeat):
                start = time.perf_counter()
                asyncio.run_coroutine_threadsafe(call(source), loop).result()
                seconds.append(time.perf_counter() - start)
            medians[name] = statistics.median(seconds)
    finally:
        forget(worker, exchange, [peer])
    return medians


def busy(load: str, seconds: float, on_device: bool) -> int:
    """Keep one thread of this worker busy for ``seconds``: Python bytecode or GPU kernels."""
    end = time.perf_counter() + seconds
    rounds = 0
    if load.startswith("gpu") and on_device:
        import cupy

        x = cupy.arange(4_000_000, dtype="float64")
        while time.perf_counter() < end:
            float((x * 2.0).sum())
            rounds += 1
        return rounds
    while time.perf_counter() < end:
        sum(range(10_000))
        rounds += 1
    return rounds


def raw_copy(nbytes: int, on_device: bool, repeat: int, devices: tuple[int, int]) -> float:
    """Median seconds of one copy of ``nbytes`` from the first worker's GPU to the second's
    (within one GPU where both drive it; host memory on the CPU)."""
    if not on_device:
        import numpy as np

        src = np.ones(nbytes, dtype="uint8")
        seconds = []
        for _ in range(repeat):
            start = time.perf_counter()
            src.copy()
            seconds.append(time.perf_counter() - start)
        return statistics.median(seconds)
    import cupy

    source, target = devices
    with cupy.cuda.Device(source):
        src = cupy.ones(nbytes, dtype="uint8")
    with cupy.cuda.Device(target):
        dst = cupy.empty(nbytes, dtype="uint8")
    seconds = []
    for _ in range(repeat):
        cupy.cuda.Device(target).synchronize()
        start = time.perf_counter()
        cupy.cuda.runtime.memcpyPeer(dst.data.ptr, target, src.data.ptr, source, nbytes)
        cupy.cuda.Device(target).synchronize()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def dask_hop(client, a: str, b: str, rows: int, columns: int, on_device: bool,
             repeat: int) -> float:
    """Median seconds for a task on ``b`` to run on ``a``'s frame: Dask's transfer."""
    seconds = []
    for _ in range(repeat):
        frame = client.submit(make, rows, columns, on_device, workers=[a], pure=False)
        wait(frame)
        start = time.perf_counter()
        client.submit(len, frame, workers=[b], pure=False).result()
        seconds.append(time.perf_counter() - start)
        del frame
    return statistics.median(seconds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="100000,1000000,4000000")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--protocol", default=None)
    parser.add_argument("--loads", default=",".join(LOADS),
                        help=f"of {', '.join(LOADS)}, comma-separated")
    args = parser.parse_args(argv)
    rows_list = [int(r) for r in args.rows.split(",")]
    if unknown := set(args.loads.split(",")) - set(LOADS):
        parser.error(f"--loads: no load {sorted(unknown)}; choose of {', '.join(LOADS)}")
    with gpuframe.start_cluster(n_workers=2, protocol=args.protocol, threads_per_worker=4,
                                dashboard_address=None) as engine:
        client = engine.client
        on_device = engine.backend.on_device
        a, b = engine.workers[:2]
        gpu = client.run(first_visible_device, workers=[a, b]) if on_device else {}
        devices = (int(gpu.get(a, 0)), int(gpu.get(b, 0)))
        print(f"backend {engine.backend.name}, protocol {engine.protocol}, {args.repeat} "
              "deliveries a case (medians; ms)")
        floor = client.submit(floors, b, max(args.repeat, 9), workers=[a], pure=False).result()
        print("| what every delivery pays, idle workers | ms |")
        print("|---|---:|")
        for name, seconds in floor.items():
            print(f"| {name} | {seconds * 1e3:.3f} |")
        print("| load | rows | piece | delivery ms | raw copy ms | delivery/raw | Dask hop ms |")
        print("|---|---:|---|---:|---:|---:|---:|")
        for columns, sealed in PIECES:  # the first delivery of each kind sets up its path
            client.submit(deliveries, b, 1000, columns, on_device, sealed, 3, workers=[a],
                          pure=False).result()
        for load in args.loads.split(","):
            for rows in rows_list:
                for columns, sealed in PIECES:
                    spinners = []
                    if load != "idle":
                        spinners = [client.submit(busy, load, BUSY_S, on_device, workers=[w],
                                                  pure=False)
                                    for w in (a, b) for _ in range(3)]
                        time.sleep(0.3)
                    seconds = client.submit(deliveries, b, rows, columns, on_device, sealed,
                                            args.repeat, workers=[a], pure=False).result()
                    hop = (dask_hop(client, a, b, rows, columns, on_device, 3)
                           if load == "idle" else float("nan"))
                    raw = raw_copy(rows * 8 * columns, on_device, args.repeat, devices)
                    delivery = statistics.median(seconds)
                    piece = f"{columns} columns{', sealed' if sealed else ''}"
                    print(f"| {load} | {rows:,} | {piece} | {delivery * 1e3:.2f} | "
                          f"{raw * 1e3:.3f} | {delivery / raw:.1f}x | {hop * 1e3:.2f} |",
                          flush=True)
                    wait(spinners)


if __name__ == "__main__":
    main()
