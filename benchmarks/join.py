"""Join throughput: gpuframe's shuffle join against dask.dataframe's merge on the same cluster.

Shapes:
  dask-cuda  dask-cuda's local_cudf_merge: equal sides of --rows-per-worker rows per worker,
             unique int64 keys on the left, --frac-match of the right's keys matching.
  seed       a left side 100x larger than the right, keys drawn from --keys distinct values.

Both engines join the same persisted inputs; the baseline runs in the same process, on the same
cluster and protocol (shuffle methods 'tasks' and 'p2p'). Throughput counts the bytes of both
inputs, as dask-cuda's benchmark does. Prints a Markdown table with the ratio.

  python benchmarks/join.py --device cpu --rows-per-worker 2000000
  python benchmarks/join.py --device gpu --protocol ucx --rows-per-worker 200000000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd


def generate_chunk(i: int, rows: int, chunks: int, side: str, shape: str, frac_match: float,
                   keys: int, backend: str):
    """One partition of one side; built on the worker that will hold it."""
    rng = np.random.default_rng(1000 * i + (side == "right"))
    if shape == "seed":
        key = rng.integers(0, keys, rows, dtype="int64")
    elif side == "left":
        key = np.arange(rows * i, rows * (i + 1), dtype="int64")
    else:
        matching = int(rows * frac_match)
        key = np.concatenate([
            rng.integers(0, rows * chunks, matching, dtype="int64"),
            np.arange(rows * chunks * (2 + i), rows * chunks * (2 + i) + rows - matching,
                      dtype="int64"),
        ])
        rng.shuffle(key)
    frame = pd.DataFrame({"key": key, f"payload_{side}": rng.permutation(rows).astype("int64")})
    from gpuframe.backend import get_backend

    return get_backend(backend).from_pandas(frame)


def make_side(engine, side: str, args: argparse.Namespace):
    import dask.dataframe as dd

    chunks = len(engine.workers)
    rows = args.rows_per_worker
    if args.shape == "seed" and side == "right":
        rows = max(1, rows // 100)
    meta = generate_chunk(0, 2, 1, side, args.shape, 1.0, 2, engine.backend.name)
    collection = dd.from_map(
        generate_chunk, range(chunks), rows=rows, chunks=chunks, side=side, shape=args.shape,
        frac_match=args.frac_match, keys=args.keys, backend=engine.backend.name,
        meta=meta, enforce_metadata=False,
    )
    return collection.persist()


def timed(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--protocol", choices=["tcp", "ucx"], default="tcp")
    parser.add_argument("--workers", type=int, default=None, help="default: GPUs, or CPU cores")
    parser.add_argument("--rows-per-worker", type=int, default=2_000_000)
    parser.add_argument("--shape", choices=["dask-cuda", "seed"], default="dask-cuda")
    parser.add_argument("--frac-match", type=float, default=0.3)
    parser.add_argument("--keys", type=int, default=5_000_000, help="distinct keys (seed shape)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baselines", default="p2p,tasks", help="dask shuffle methods to run")
    args = parser.parse_args()

    import dask
    from distributed import wait

    import gpuframe

    backend = "cudf" if args.device == "gpu" else "pandas"
    with gpuframe.start_cluster(backend=backend, protocol=args.protocol,
                                n_workers=args.workers) as engine:
        left_ddf, right_ddf = make_side(engine, "left", args), make_side(engine, "right", args)
        left, right = gpuframe.from_dask(left_ddf), gpuframe.from_dask(right_ddf)
        nbytes = left.nbytes() + right.nbytes()
        rows = len(gpuframe.merge(left, right, on="key", broadcast_bytes=0))

        def ours():
            result = gpuframe.merge(left, right, on="key", broadcast_bytes=0)
            del result

        results = [("gpuframe shuffle join", timed(ours, args.repeats))]
        for method in filter(None, args.baselines.split(",")):
            def baseline(method=method):
                with dask.config.set({"dataframe.shuffle.method": method}):
                    joined = left_ddf.merge(right_ddf, on="key").persist()
                    wait(joined)
                    del joined

            name = f"dask.dataframe merge ({method})"
            try:
                results.append((name, timed(baseline, args.repeats)))
            except Exception as exc:  # a baseline that cannot run here is reported, not fatal
                print(f"{name} failed: {exc!r}")

        print(f"\n{engine.backend.name} backend, {len(engine.workers)} workers over "
              f"{engine.protocol}; shape {args.shape}; {args.rows_per_worker:,} rows per worker "
              f"per side; {nbytes / 2**30:.2f} GiB in; {rows:,} rows out; "
              f"median of {args.repeats}\n")
        ours_seconds = results[0][1]
        print("| engine | seconds | GiB/s | gpuframe speed-up |")
        print("| --- | --- | --- | --- |")
        for name, seconds in results:
            print(f"| {name} | {seconds:.3f} | {nbytes / 2**30 / seconds:.2f} | "
                  f"{seconds / ours_seconds:.2f}x |")


if __name__ == "__main__":
    main()
