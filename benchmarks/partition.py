"""Microbenchmark of the hash pack into buckets (gpuframe.exchange.pack.hash_pack)
against the usual ways of doing the same on the same data, in the same run.

CPU: the native core (hash, count, scatter of every column into one packed buffer) against the
pandas path (pd.util.hash_pandas_object, then one take per destination) and a NumPy path (a
vectorised hash, a stable argsort by destination, then one gather per column).
GPU: the native core on a cuDF frame against cuDF's DataFrame.partition_by_hash (libcudf's
hash_partition, then a split into one frame per destination), and against a plain device-to-device
copy of the same number of bytes (CuPy), the ceiling for anything that reads and writes the data
once.

Every path is timed end to end (allocations included) over --repeat rounds after one warm-up,
the paths taking turns in each round; the table gives each path's best and median, GB/s counts
the table's bytes once (at the best). Prints a Markdown table. Examples:

    python benchmarks/partition.py --rows 10000000
    python benchmarks/partition.py --device gpu --rows 100000000
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="where to partition (default: cpu)")
    parser.add_argument("--rows", type=int, default=None,
                        help="rows of the table (default: 10M on cpu, 100M on gpu)")
    parser.add_argument("--columns", type=int, default=4,
                        help="int64/float64 columns, the first --keys of them keys (default: 4)")
    parser.add_argument("--keys", type=int, default=1, help="key columns (default: 1)")
    parser.add_argument("--strings", type=int, default=0,
                        help="extra string columns (default: 0)")
    parser.add_argument("--string-chars", type=int, default=8,
                        help="mean length of those strings, drawn from [mean/2, 3*mean/2] "
                             "(default: 8)")
    parser.add_argument("--destinations", type=int, default=8,
                        help="destinations, e.g. workers (default: 8)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads of the native path (default: one per core)")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (default: 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--phases", action="store_true",
                        help="gpu: also time the native path's phases (count, scatter) alone")
    args = parser.parse_args()
    if args.rows is None:
        args.rows = 100_000_000 if args.device == "gpu" else 10_000_000
    if not 1 <= args.keys <= args.columns:
        parser.error("--keys must be between 1 and --columns")
    return args


def make_table(args: argparse.Namespace):
    """A pyarrow Table: int64 keys drawn from [0, rows), then float64 and int64 payloads."""
    import pyarrow as pa

    rng = np.random.default_rng(args.seed)
    columns = {}
    for c in range(args.columns):
        if c < args.keys or c % 2 == 0:
            columns[f"c{c}"] = pa.array(rng.integers(0, max(args.rows, 1), args.rows))
        else:
            columns[f"c{c}"] = pa.array(rng.random(args.rows))
    if args.strings:
        pool = np.array(["".join(rng.choice(list("abcdefghij"), k))
                         for k in rng.integers(args.string_chars // 2,
                                               args.string_chars * 3 // 2 + 1, 4096)],
                        dtype=object)
        for s in range(args.strings):
            columns[f"s{s}"] = pa.array(pool[rng.integers(0, len(pool), args.rows)],
                                        pa.string())
    return pa.table(columns)


def timed_in_turns(paths: list[tuple[str, Callable[[], object]]], repeat: int,
                   sync: Callable[[], None] = lambda: None) -> list[tuple[str, list[float]]]:
    """Each path's times (s) over ``repeat`` rounds after one warm-up each. Within a round the
    paths take turns, so that a drift of the machine (clocks, memory, a neighbour) reaches every
    path alike instead of whichever ran last."""
    for _, run in paths:
        run()
        sync()
    times: list[list[float]] = [[] for _ in paths]
    for _ in range(repeat):
        for (_, run), kept in zip(paths, times):
            start = time.perf_counter()
            result = run()
            sync()
            kept.append(time.perf_counter() - start)
            del result
    return [(name, kept) for (name, _), kept in zip(paths, times)]


def splitmix_numpy(keys: list[np.ndarray]) -> np.ndarray:
    """A vectorised 64-bit hash of several int64/float64 columns (the NumPy baseline's own)."""
    h = np.full(len(keys[0]), 0x9E3779B97F4A7C15, dtype=np.uint64)
    for k in keys:
        x = k.view(np.uint64) ^ h
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        h = x ^ (x >> np.uint64(31))
    return h


def cpu_rows(args: argparse.Namespace) -> tuple[list[tuple[str, list[float]]], int, str]:
    import pandas as pd

    from gpuframe.exchange.pack import hash_pack

    table = make_table(args)
    on = [f"c{c}" for c in range(args.keys)]
    n = args.destinations
    frame = table.to_pandas()
    arrays = [frame[name].to_numpy() for name in frame.columns]

    def native():
        return hash_pack(table, on, n, threads=args.threads)

    def pandas_path():
        hashes = pd.util.hash_pandas_object(frame[on], index=False).to_numpy()
        dest = hashes % np.uint64(n)
        return [frame.take(np.flatnonzero(dest == d)) for d in range(n)]

    def numpy_path():
        dest = splitmix_numpy([frame[k].to_numpy() for k in on]) % np.uint64(n)
        order = np.argsort(dest, kind="stable")
        bounds = np.cumsum(np.bincount(dest.astype(np.int64), minlength=n))[:-1]
        return [np.split(a[order], bounds) for a in arrays]

    results = timed_in_turns([("gpuframe native (hash + pack)", native),
                              ("pandas: hash_pandas_object + take", pandas_path),
                              ("numpy: hash + argsort + take", numpy_path)], args.repeat)
    nbytes = sum(c.nbytes for c in table.columns)
    threads = args.threads or os.cpu_count()
    return results, nbytes, f"{platform.processor() or platform.machine()}, {threads} threads"


def gpu_rows(args: argparse.Namespace) -> tuple[list[tuple[str, list[float]]], int, str]:
    import cudf
    import cupy
    import rmm
    from rmm.allocators.cupy import rmm_cupy_allocator

    from gpuframe.exchange.pack import hash_pack

    # One pool for every path, so none pays for cudaMalloc.
    rmm.reinitialize(pool_allocator=True)
    cupy.cuda.set_allocator(rmm_cupy_allocator)
    frame = cudf.DataFrame.from_arrow(make_table(args))
    on = [f"c{c}" for c in range(args.keys)]
    n = args.destinations
    nbytes = int(frame.memory_usage(index=False).sum())
    source = cupy.empty(nbytes, dtype=cupy.uint8)
    target = cupy.empty_like(source)
    sync = cupy.cuda.get_current_stream().synchronize

    def native():
        return hash_pack(frame, on, n)

    def cudf_path():
        return frame.partition_by_hash(on, n, keep_index=False)

    def copy():
        target.data.copy_from_device_async(source.data, nbytes)

    results = timed_in_turns([("gpuframe native (hash + pack)", native),
                              ("cudf: partition_by_hash (hash_partition + split)", cudf_path),
                              ("device-to-device copy of the same bytes (cupy)", copy)],
                             args.repeat, sync)
    if args.phases:
        print_phases(frame, on, n, args.repeat)
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    return results, nbytes, f"{props['name'].decode()}, cudf {cudf.__version__}"


def print_phases(frame, on: list[str], n: int, repeat: int) -> None:
    """Where the native path's time goes: each phase timed alone by CUDA events, best of
    ``repeat``."""
    import cupy

    from gpuframe import _core
    from gpuframe.exchange.pack_device import _device_arg, _device_columns
    from gpuframe.exchange.pack_layout import _key_indices

    columns = _device_columns(frame)
    keys = _key_indices([name for name, _ in columns], on)
    args = [_device_arg(name, column) for name, column in columns]
    stream = cupy.cuda.get_current_stream()
    best: dict[str, float] = {}
    for _ in range(repeat + 1):
        marks = [cupy.cuda.Event() for _ in range(5)]
        marks[0].record(stream)
        core = _core.CudaPartition(args, keys, len(frame), n)
        scratch = cupy.empty(core.scratch_bytes, dtype=cupy.uint8)
        marks[1].record(stream)
        core.count(scratch, stream.ptr)
        marks[2].record(stream)
        buffer = cupy.empty(core.total_bytes, dtype=cupy.uint8)
        marks[3].record(stream)
        core.scatter(buffer, stream.ptr)
        marks[4].record(stream)
        marks[4].synchronize()
        for name, a, b in (("set-up", 0, 1), ("count (+ host layout)", 1, 2),
                           ("output allocation", 2, 3), ("scatter", 3, 4), ("all", 0, 4)):
            ms = cupy.cuda.get_elapsed_time(marks[a], marks[b])
            best[name] = min(best.get(name, float("inf")), ms)
    print("| native phase | ms |\n| --- | ---: |")
    for name, ms in best.items():
        print(f"| {name} | {ms:.3f} |")
    print()


def main() -> None:
    args = parse_args()
    results, nbytes, where = (gpu_rows if args.device == "gpu" else cpu_rows)(args)
    best = [min(times) for _, times in results]
    median = [statistics.median(times) for _, times in results]
    print(f"## Hash partition-and-pack, {args.device}: {args.rows:,} rows x {args.columns} "
          f"columns (+{args.strings} string of ~{args.string_chars} chars), {args.keys} "
          f"key(s), {args.destinations} destinations, {nbytes / 1e9:.2f} GB\n")
    print(f"{where}; {args.repeat} rounds after a warm-up, the paths taking turns in each.\n")
    print("| path | best (ms) | median (ms) | rows/s (M) | GB/s | best / native's |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for (name, _), fastest, middle in zip(results, best, median):
        print(f"| {name} | {fastest * 1e3:.2f} | {middle * 1e3:.2f} | "
              f"{args.rows / fastest / 1e6:.0f} | {nbytes / fastest / 1e9:.2f} | "
              f"{fastest / best[0]:.2f} |")
    print()
    baseline, goal = ("cuDF", ">= 2x") if args.device == "gpu" else ("pandas", ">= 3x")
    print(f"- native vs {baseline}: {best[1] / best[0]:.2f}x faster by the bests, "
          f"{median[1] / median[0]:.2f}x by the medians (goal: {goal})")
    if args.device == "gpu":
        print(f"- native vs the copy: {best[0] / best[2]:.2f}x the copy's time (goal: <= 3x)")
    else:
        print(f"- native vs numpy: {best[2] / best[0]:.2f}x faster")


if __name__ == "__main__":
    main()
