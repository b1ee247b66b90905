"""A join larger than the workers' memory, completed by spilling (issue #28, "Out of core").

Two Parquet datasets joined on int64 keys and the result persisted, so that inputs and output
are held at once: the left side has N distinct keys, the right side each of them twice, so the
join has exactly 2N rows and its left payload sums to twice the left side's. N is chosen so that
inputs plus output are --times times the workers' memory: device memory (``--limit`` a worker,
as ``device_memory_limit``) on GPUs, host memory (``memory_limit``) on the CPU. Host memory on
GPU workers is limited to --host-limit, so what leaves the device may leave the host for disk; a
GPU worker's process holds its CUDA context and cuDF's libraries in host memory before any data,
so a limit of a couple of GiB gets it restarted by its nanny
(benchmarks/results/2026-11-26-s20-gpus-h100x2.md).

The baseline, in the same run: the same join on the same files on a cluster without those
limits. The run fails unless both give 2N rows and the expected sum.

  python benchmarks/out_of_core.py --limit 1GiB --host-limit 6GiB        # 2 GPUs
  python benchmarks/out_of_core.py --limit 256MiB --rows 4000000         # the CPU
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from dask.utils import format_bytes, parse_bytes

ROW_BYTES = 16 + 2 * 16 + 2 * 24
"""Bytes a left key makes, in memory: its left row (key, payload), its two right rows, and its
two output rows (key and both payloads)."""


def generate(root: Path, rows: int, files: int) -> tuple[Path, float]:
    """Both sides under ``root`` (kept: made once per rows and files), and the left payload's
    sum."""
    where = root / f"out-of-core-{rows}-{files}"
    done = where / "left-sum"
    if done.exists():
        return where, float(done.read_text())
    rng = np.random.default_rng(3)
    total = 0.0
    for side in ("left", "right"):
        (where / side).mkdir(parents=True, exist_ok=True)
    for i, chunk in enumerate(np.array_split(np.arange(rows), files)):
        payload = rng.random(len(chunk))
        total += float(payload.sum())
        pq.write_table(pa.table({"k": rng.permutation(chunk), "a": payload}),
                       where / "left" / f"part-{i:03}.parquet")
        twice = np.concatenate([chunk, rng.permutation(chunk)])
        pq.write_table(pa.table({"k": twice, "b": rng.random(len(twice))}),
                       where / "right" / f"part-{i:03}.parquet")
    done.write_text(repr(total))
    return where, total


def disk_written(dask_worker: Any) -> int:
    """Bytes this worker spilled to disk (distributed's spill metrics, whether a task's result
    or the memory monitor spilled them)."""
    return int(sum(value for key, value in dask_worker.digests_total.items()
                   if isinstance(key, tuple) and key[-2:] == ("disk-write", "bytes")))


def off_device(dask_worker: Any) -> int | None:
    """Keys a dask-cuda worker holds off the device now (None where its store does not say)."""
    slow = getattr(getattr(dask_worker.data, "device_buffer", None), "slow", None)
    return len(slow) if slow is not None else None


def run(engine: Any, where: Path) -> tuple[float, int, float, dict[str, Any]]:
    """The join persisted: seconds, rows, the left payload's sum over the output, and what the
    workers spilled."""
    import gpuframe

    before = sum(engine.client.run(disk_written).values())
    start = time.perf_counter()
    left = gpuframe.read_parquet(str(where / "left"), engine=engine)
    right = gpuframe.read_parquet(str(where / "right"), engine=engine)
    joined = left.merge(right, on="k").persist()
    rows = len(joined)
    total = float(joined.agg(a=("a", "sum")).to_pandas()["a"].iloc[0])
    seconds = time.perf_counter() - start
    spilled = {"to disk": sum(engine.client.run(disk_written).values()) - before,
               "keys off device": engine.client.run(off_device)}
    del joined
    return seconds, rows, total, spilled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", default="1GiB",
                        help="memory a worker: device memory on GPUs, host memory on the CPU")
    parser.add_argument("--host-limit", default="6GiB",
                        help="host memory a GPU worker (spilled on to disk past it)")
    parser.add_argument("--times", type=float, default=2.0,
                        help="inputs plus output, in multiples of all workers' --limit")
    parser.add_argument("--rows", type=int, default=None, help="left rows (default: --times)")
    parser.add_argument("--files", type=int, default=16, help="Parquet files per side")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--backend", default=None, help="'cudf' or 'pandas'")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/gpuframe-out-of-core"))
    args = parser.parse_args(argv)

    import gpuframe
    from gpuframe.cluster.hardware import list_gpus
    from gpuframe.errors import GpuframeError

    on_gpu = args.backend == "cudf" or (args.backend is None and bool(list_gpus()))
    workers = args.workers or (len(list_gpus()) if on_gpu else 2)
    limit = parse_bytes(args.limit)
    rows = args.rows or math.ceil(args.times * workers * limit / ROW_BYTES)
    where, left_sum = generate(args.dir, rows, args.files)
    expected_rows, expected_sum = 2 * rows, 2 * left_sum
    data_bytes = rows * ROW_BYTES
    print(f"{'cudf' if on_gpu else 'pandas'} backend, {workers} workers; {rows:,} left keys, "
          f"{expected_rows:,} output rows; inputs and output {format_bytes(data_bytes)}, "
          f"{data_bytes / (workers * limit):.2f}x the workers' {args.limit} each", flush=True)

    limited = ({"device_memory_limit": limit, "memory_limit": args.host_limit} if on_gpu
               else {"memory_limit": limit})
    results: dict[str, tuple[float, int, float, dict[str, Any]] | GpuframeError] = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as spill:
        for name, options in (("limited", limited), ("unlimited", {})):
            with gpuframe.start_cluster(backend=args.backend, n_workers=workers,
                                        local_directory=spill, dashboard_address="127.0.0.1:0",
                                        **options) as engine:
                try:
                    outcome = run(engine, where)
                except GpuframeError as error:  # a worker killed for memory: the finding
                    results[name] = error
                    print(f"{name}: failed: {error}", flush=True)
                    continue
            results[name] = outcome
            seconds, got_rows, got_sum, spilled = outcome
            if got_rows != expected_rows or not math.isclose(got_sum, expected_sum,
                                                             rel_tol=1e-9):
                raise SystemExit(f"{name}: {got_rows:,} rows summing to {got_sum!r}; expected "
                                 f"{expected_rows:,} summing to {expected_sum!r}")
            print(f"{name}: {seconds:.2f} s, {got_rows:,} rows (right), spilled {spilled}",
                  flush=True)
    print("\n| cluster | seconds | rows | right | spilled to disk |")
    print("| --- | ---: | ---: | --- | ---: |")
    for name, result in results.items():
        if isinstance(result, GpuframeError):
            print(f"| {name} | failed: {type(result).__name__} | | | |")
            continue
        print(f"| {name} | {result[0]:.2f} | {result[1]:,} | yes | "
              f"{format_bytes(result[3]['to disk'])} |")
    finished = [r for r in results.values() if not isinstance(r, GpuframeError)]
    if len(finished) < len(results):
        return 1
    print(f"\nlimited against unlimited: {finished[1][0] / finished[0][0]:.2f}x (the "
          f"unlimited run's time over the limited one's)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
