"""A scale model of the hash-shuffle join: the dask-cuda shape on 2 GPUs (to check against a
measurement), 8 GPUs (one DGX) and 16-64 GPUs over InfiniBand, for gpuframe's direct exchange
(one send task per worker a stage: the scheduler off the data path), for its task exchange (a
Dask key per bucket: the scheduler on the control path of every bucket) and for dask's
task-graph shuffle.

What it takes:
- measured here: the scheduler's cost per task, in the exchange's own pattern (a split task per
  input partition, a task per bucket, a join task per output partition), on a cluster of many
  small workers (--workers) on this machine;
- measured on GPUs (benchmarks/results/, passed as arguments): the exchange's link rate while
  busy and the GPU work per GB (sample, split, join);
- quoted from public sources: InfiniBand NDR, 400 Gb/s per GPU on a DGX H100 (8 ConnectX-7 ports
  for the compute fabric, NVIDIA's DGX H100 datasheet).

It predicts a join's seconds as GPU work + the exchange's transfer (NVLink within a host,
InfiniBand between hosts, whichever takes longer) + the scheduler's time for the tasks (which
gpuframe's exchange puts on the critical path: a bucket moves only once its task is scheduled),
and prints GB/s per GPU next to rapidsmpf's published bench_shuffle figures.

  python benchmarks/scale/model.py --workers 16
"""

from __future__ import annotations

import argparse
import operator
import time

GB = 1e9
GIB = 2**30
GPUS_PER_HOST = 8
# rapidsmpf's bench_shuffle, per GPU (rapidsmpf issue 590): 38 GB/s on 8 GPUs, 5 GB/s on 32.
RAPIDSMPF = {8: 38.0, 32: 5.0}


def measure_scheduler(workers: int, partitions: int, repeats: int, processes: bool) -> float:
    """Seconds per task of an exchange of ``partitions`` partitions on ``workers`` workers
    (splits, one task per bucket, joins, as gpuframe submits them), tasks that do nothing: the
    scheduler's and the comms' cost. With ``processes`` off the workers are threads of the
    scheduler's process and share its interpreter lock, which overstates it."""
    from distributed import Client, LocalCluster, wait

    def split(i: int, n: int) -> list[int]:
        return [i] * n

    def join(*parts: int) -> int:
        return len(parts)

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        best = float("inf")
        for r in range(repeats):
            start = time.perf_counter()
            splits = [client.submit(split, i, partitions, key=f"split-{r}-{i}")
                      for i in range(partitions)]
            buckets = [[client.submit(operator.getitem, s, b, key=f"send-{r}-{i}-{b}")
                        for i, s in enumerate(splits)] for b in range(partitions)]
            joins = [client.submit(join, *parts, key=f"join-{r}-{b}")
                     for b, parts in enumerate(buckets)]
            wait(joins)
            best = min(best, time.perf_counter() - start)
            del splits, buckets, joins
        tasks = partitions * (partitions + 2)
        return best / tasks


def direct_exchange_tasks(gpus: int) -> int:
    """gpuframe's shuffle join with its direct exchange, one partition per GPU a side: per side
    a sample and a send task per worker; a join task per bucket."""
    return 2 * (gpus + gpus) + gpus


def task_exchange_tasks(gpus: int) -> int:
    """The same with the task exchange: per side a sample, a split and a bucket per (partition,
    bucket); a join task per bucket."""
    return 2 * (2 * gpus + gpus * gpus) + gpus


def task_graph_tasks(gpus: int) -> int:
    """dask's tasks shuffle (one stage up to 32 partitions, max_branch 32), per side a group,
    a split per (partition, output) and a concat per output, then the joins."""
    stages = 1 if gpus <= 32 else 2
    return 2 * stages * (gpus + gpus * gpus + gpus) + gpus


def predict(gpus: int, args: argparse.Namespace, per_task: float) -> dict[str, float]:
    per_gpu = 2 * args.rows_per_gpu * args.bytes_per_row / GB  # both sides, GB
    hosts = max(1, gpus // GPUS_PER_HOST)
    off_host = (gpus - min(gpus, GPUS_PER_HOST)) / gpus  # share of a GPU's rows that leave it
    on_host = (min(gpus, GPUS_PER_HOST) - 1) / gpus
    transfer = max(per_gpu * on_host / (args.link_gib_s * GIB / GB),
                   per_gpu * off_host / args.ib_gb_s if hosts > 1 else 0.0)
    work = per_gpu * args.work_s_per_gb + args.fixed_s
    rows = {}
    for name, tasks in (("direct exchange", direct_exchange_tasks(gpus)),
                        ("task exchange", task_exchange_tasks(gpus)),
                        ("task-graph shuffle", task_graph_tasks(gpus))):
        seconds = work + transfer + tasks * per_task
        rows[name] = seconds
    rows["GB per GPU"] = per_gpu
    rows["transfer"] = transfer
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", default="2,8,16,32,64", help="GPU counts to predict")
    parser.add_argument("--workers", type=int, default=16, help="workers for the measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", action="store_true",
                        help="workers as threads of one process (see measure_scheduler)")
    parser.add_argument("--per-task", type=float, default=None,
                        help="scheduler seconds per task, instead of measuring it")
    parser.add_argument("--rows-per-gpu", type=int, default=200_000_000)
    parser.add_argument("--bytes-per-row", type=int, default=16, help="key and payload, int64")
    parser.add_argument("--link-gib-s", type=float, default=55.0,
                        help="the exchange's link rate while busy, GiB/s (measured on 2 H100s)")
    parser.add_argument("--ib-gb-s", type=float, default=50.0,
                        help="InfiniBand per GPU, GB/s (NDR 400 Gb/s)")
    parser.add_argument("--work-s-per-gb", type=float, default=0.035,
                        help="GPU seconds of split, send and join per GB a GPU holds (H100)")
    parser.add_argument("--fixed-s", type=float, default=0.015,
                        help="a join's fixed seconds: the sample's round trip")
    args = parser.parse_args()

    per_task = args.per_task
    if per_task is None:
        per_task = measure_scheduler(args.workers, args.workers, args.repeats,
                                     processes=not args.threads)
        print(f"scheduler: {per_task * 1e6:.0f} us a task (an exchange of {args.workers} "
              f"partitions on {args.workers} worker {'threads' if args.threads else 'processes'},"
              f" best of {args.repeats}, this machine)")
    print(f"\n{args.rows_per_gpu:,} rows a GPU a side, {args.bytes_per_row} B a row; link "
          f"{args.link_gib_s} GiB/s, InfiniBand {args.ib_gb_s} GB/s a GPU\n")
    print("| GPUs | hosts | tasks, direct | direct s | GB/s/GPU | tasks, task exchange "
          "| task exchange s | GB/s/GPU | task-graph s | GB/s/GPU | rapidsmpf GB/s/GPU |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for gpus in map(int, args.gpus.split(",")):
        rows = predict(gpus, args, per_task)
        per_gpu = rows["GB per GPU"]
        direct, tasks, graph = (f"{rows[name]:.3f} | {per_gpu / rows[name]:.1f}" for name in
                                ("direct exchange", "task exchange", "task-graph shuffle"))
        published = RAPIDSMPF.get(gpus)
        print(f"| {gpus} | {max(1, gpus // GPUS_PER_HOST)} | {direct_exchange_tasks(gpus)} | "
              f"{direct} | {task_exchange_tasks(gpus)} | {tasks} | {graph} | "
              f"{published if published else ''} |")


if __name__ == "__main__":
    main()
