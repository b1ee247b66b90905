"""Broadcast or shuffle: where does copying the small side to every worker stop paying?

Joins one large side (--rows-per-worker rows on each worker) with small sides of growing size,
once as a broadcast join and once as a hash-shuffle join (gpuframe.merge with broadcast_bytes
forced either way), on the same cluster, and prints a Markdown table of the two times and the
largest small side for which broadcasting was still faster: the measured value for
JoinOptions.broadcast_bytes.

  python benchmarks/join_broadcast.py --device cpu --rows-per-worker 1000000
  python benchmarks/join_broadcast.py --device gpu --protocol ucx --rows-per-worker 100000000 \\
      --small-mib 16,64,256,1024,4096
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd


def big_chunk(i: int, rows: int, key_range: int, backend: str):
    rng = np.random.default_rng(i)
    frame = pd.DataFrame({"key": rng.integers(0, key_range, rows, dtype="int64"),
                          "payload_big": rng.integers(0, 2**62, rows, dtype="int64")})
    from gpuframe.backend import get_backend

    return get_backend(backend).from_pandas(frame)


def small_chunk(i: int, rows: int, backend: str):
    frame = pd.DataFrame({"key": np.arange(i * rows, (i + 1) * rows, dtype="int64"),
                          "payload_small": np.arange(rows, dtype="int64")})
    from gpuframe.backend import get_backend

    return get_backend(backend).from_pandas(frame)


def side(engine, make, chunks: int, **kwargs):
    import dask.dataframe as dd

    import gpuframe

    meta = make(0, 0, backend=engine.backend.name, **{k: v for k, v in kwargs.items()
                                                      if k != "rows"})
    collection = dd.from_map(make, range(chunks), backend=engine.backend.name, meta=meta,
                             enforce_metadata=False, **kwargs)
    return gpuframe.from_dask(collection, engine=engine).persist()


def timed(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def merge_seconds(big, small, broadcast_bytes: int, repeats: int) -> float:
    """The median seconds of the two sides' inner join, its result released after each."""
    import gpuframe

    def run():
        result = gpuframe.merge(big, small, on="key", broadcast_bytes=broadcast_bytes).persist()
        del result

    return timed(run, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--protocol", choices=["tcp", "ucx"], default="tcp")
    parser.add_argument("--workers", type=int, default=None, help="default: GPUs, or CPU cores")
    parser.add_argument("--rows-per-worker", type=int, default=1_000_000,
                        help="rows of the large side on each worker")
    parser.add_argument("--small-mib", default="0.25,1,4,16,32,64",
                        help="sizes of the small side to try, MiB in all (16 bytes a row)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import gpuframe

    backend = "cudf" if args.device == "gpu" else "pandas"
    rows_out = []
    with gpuframe.start_cluster(backend=backend, protocol=args.protocol,
                                n_workers=args.workers) as engine:
        workers = len(engine.workers)
        big_rows = args.rows_per_worker
        big = side(engine, big_chunk, workers, rows=big_rows, key_range=4 * big_rows * workers)
        big_bytes = big.nbytes()
        for mib in (float(m) for m in args.small_mib.split(",")):
            rows = max(1, int(mib * 2**20 / 16 / workers))
            small = side(engine, small_chunk, workers, rows=rows)
            small_bytes = small.nbytes()
            times = {name: merge_seconds(big, small, threshold, args.repeats)
                     for name, threshold in (("broadcast", 2**62), ("shuffle", 0))}
            rows_out.append((small_bytes, times["broadcast"], times["shuffle"]))
            del small

        print(f"\n{engine.backend.name} backend, {workers} workers over {engine.protocol}; large "
              f"side {big_rows:,} rows per worker ({big_bytes / 2**20:.0f} MiB in all); inner "
              f"join; median of {args.repeats}\n")
    print("| small side (MiB) | broadcast (s) | shuffle (s) | broadcast / shuffle |")
    print("| ---: | ---: | ---: | ---: |")
    for nbytes, broadcast, shuffle in rows_out:
        print(f"| {nbytes / 2**20:.2f} | {broadcast:.3f} | {shuffle:.3f} | "
              f"{broadcast / shuffle:.2f} |")
    faster = [nbytes for nbytes, broadcast, shuffle in rows_out if broadcast < shuffle]
    print(f"\nlargest small side where broadcast won: "
          f"{(max(faster) / 2**20 if faster else 0):.2f} MiB")


if __name__ == "__main__":
    main()
