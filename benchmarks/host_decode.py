"""Reads of few column chunks decoded on the host against all on the GPU: one worker's read of
each TPC-H table (half its fragments, in one call of the cuDF reader), with the plain string
columns decoded by pyarrow on the host's cores as gpuframe chooses
(:func:`gpuframe.io.formats.parquet.host_decoded_columns`), and with every column decoded by
cuDF, taking turns on one GPU; the best of --repeat, in ms, and the ratio. Needs cuDF and the
data of ``benchmarks/tpch/datagen.py``. Example (on the device):

    python3 benchmarks/host_decode.py --dir /tmp/tpch/sf10
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

READS = [
    ("part", ["p_partkey", "p_name"]),
    ("part", ["p_partkey", "p_type", "p_size", "p_brand"]),
    ("customer", ["c_custkey", "c_phone", "c_acctbal", "c_name"]),
    ("supplier", ["s_suppkey", "s_name", "s_address", "s_nationkey"]),
    ("partsupp", ["ps_partkey", "ps_suppkey", "ps_supplycost"]),
    ("orders", ["o_orderkey", "o_custkey", "o_comment"]),
    ("nation", ["n_nationkey", "n_name"]),
]
"""Reads of TPC-H's queries: small tables with plain strings, one whose strings have
dictionaries, and large tables, which keep every column on the GPU."""


def best_ms(read: Callable[[], object], repeat: int) -> float:
    """The least time of ``repeat`` runs of ``read``, the device synchronized around each."""
    import cupy

    read()
    times = []
    for _ in range(repeat):
        cupy.cuda.runtime.deviceSynchronize()
        start = time.perf_counter()
        read()
        cupy.cuda.runtime.deviceSynchronize()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="a TPC-H scale's folder")
    parser.add_argument("--repeat", type=int, default=5, help="timed reads of each way")
    args = parser.parse_args()

    import rmm

    rmm.reinitialize(pool_allocator=True, initial_pool_size=8 * 2**30)
    from gpuframe.io.formats import parquet
    from gpuframe.io.planning.plan import plan_fragments
    from gpuframe.io.readers.task import READERS
    from gpuframe.io.tasks import fragment_tasks

    chosen_chunks = parquet.HOST_DECODE_CHUNKS
    print("| table | columns | row groups | on the host | host ms | all on the GPU ms | ratio |")
    print("|---|---|---:|---|---:|---:|---:|")
    for table, columns in READS:
        tasks = fragment_tasks(plan_fragments(str(args.dir / table), columns=columns))
        half = tasks[:max(1, len(tasks) // 2)]

        def read(tasks: list = half) -> object:
            return READERS["cudf"]().read("host-decode", tasks)

        hosted = parquet.host_decoded_columns(half)
        host = best_ms(read, args.repeat)
        parquet.HOST_DECODE_CHUNKS = 0
        try:
            device = best_ms(read, args.repeat)
        finally:
            parquet.HOST_DECODE_CHUNKS = chosen_chunks
        groups = sum(len(task.units) for task in half)
        print(f"| {table} | {', '.join(columns)} | {groups} | {', '.join(hosted) or '-'} | "
              f"{host:.2f} | {device:.2f} | {device / host:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
