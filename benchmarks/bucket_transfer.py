"""A shuffle bucket between two workers over TCP, on one GPU: as a plain cuDF frame (Dask has cuDF
copy it to pageable host memory) and as gpuframe's DeviceBucket (copied through the worker's
pinned pool, gpuframe/exchange/bucket.py), in the same run.

Two worker processes share the GPU: TCP moves buckets through host memory, so one GPU shows the
path that two do. Each transfer builds a bucket of 95-105M rows x 2 int64 (1.4-1.6 GiB; sizes
vary as buckets do, so the pool serves sizes other than the one it grew for) on one worker, then
times the other worker's task that pulls it and sums a column, and checks the sum. Two rounds of
both ways; the first round's first transfers include the workers' warm-up.

  python3 benchmarks/bucket_transfer.py
"""

import time

from distributed import Client, LocalCluster, wait

ROWS = (100_000_000, 95_000_000, 105_000_000, 100_000_000)
"""Rows of each transfer's bucket, 2 int64 a row."""


def make(rows: int, wrap: bool):
    """On the sending worker: a bucket of ``rows`` rows, wrapped or a plain cuDF frame."""
    import cudf
    import cupy

    from gpuframe.exchange.bucket import DeviceBucket

    frame = cudf.DataFrame({"key": cupy.arange(rows, dtype="int64"),
                            "payload": cupy.arange(rows, dtype="int64") * 3})
    return DeviceBucket(frame) if wrap else frame


def total(part) -> int:
    """On the receiving worker: the sum of the bucket's payload."""
    from gpuframe.exchange.bucket import arrived

    return int(arrived(part)["payload"].sum())


if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, protocol="tcp", dashboard_address=None,
                      memory_limit=0) as cluster, Client(cluster) as client:
        a, b = sorted(client.scheduler_info()["workers"])
        gib = [rows * 16 / 2**30 for rows in ROWS]
        for round_ in range(2):
            for wrap in (False, True):
                times = []
                for rows in ROWS:
                    x = client.submit(make, rows, wrap, workers=[a], pure=False)
                    wait(x)
                    start = time.perf_counter()
                    got = client.submit(total, x, workers=[b], pure=False).result()
                    times.append(time.perf_counter() - start)
                    assert got == 3 * rows * (rows - 1) // 2
                    del x
                name = "DeviceBucket (pinned pool)" if wrap else "cuDF frame (pageable)"
                print(f"round {round_} {name:27s}: s {[round(t, 3) for t in times]}  "
                      f"GiB/s {[round(g / t, 2) for g, t in zip(gib, times)]}")
