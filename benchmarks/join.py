"""Join throughput: gpuframe's merge against its baselines, with per-link bytes and bandwidth.

Shapes (--shapes, one or several):
  dask-cuda  dask-cuda's local_cudf_merge: equal sides of --rows-per-worker rows per worker,
             unique int64 keys on the left, --frac-match of the right's keys matching.
  seed       a left side 100x larger than the right, keys drawn from --keys distinct values.
  zipf       the seed's sizes, left keys Zipf-distributed (--zipf-a; a=1.5 puts ~38% of the left
             rows on one key), the right's keys distinct: how evenly the output lands matters.

Keys (--key-types, one or several): int64; string, the same values as 12-character strings;
two, the same values as two columns (int64 and int32) whose pairs are as distinct.

For each protocol in --protocols (clusters started one after the other) and each shape, both
engines join the same persisted inputs on the same cluster: gpuframe's hash-shuffle join
(broadcast_bytes=0) and its merge with default options (which may broadcast), then
dask.dataframe's merge (shuffle methods --baselines). On GPUs the run also measures, in the same
process: the NVLink (or PCIe) peer copy rate between the first two devices with CuPy, and
dask-cuda's own benchmark (`python -m dask_cuda.benchmarks.local_cudf_merge`, its dask-cuda shape)
over each protocol, run after gpuframe's cluster is closed.

The gpuframe shuffle join runs with each exchange of --exchanges (the engine's ``exchange``
option: 'direct', one send task per worker delivering to the peers' mailboxes, or 'tasks', a
Dask key per partition and bucket); the first is the one the speed-ups are taken against.

Throughput counts the bytes of both inputs, as dask-cuda's benchmark does. After the timed runs,
one more shuffle join per shape (first exchange) runs inside the engine's metrics: its per-link
bytes, a link's bandwidth (its bytes over the time it was busy, the union of its transfers'
intervals) and that bandwidth's share of the peer copy rate are printed, and with --stages its
stages too: tasks, wall seconds (the union of their intervals), summed task seconds and bytes,
so a run shows where the join's time went.

  python benchmarks/join.py --device cpu --rows-per-worker 1000000
  python benchmarks/join.py --device gpu --protocols ucx,tcp --devices 0,1 \\
      --rows-per-worker 200000000 --shapes dask-cuda,seed
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from gpuframe.cluster import Engine

GIB = 2**30
STATISTICS = {"median": np.median, "min": np.min}


KEY_COLUMNS = {"int64": ["key"], "string": ["key"], "two": ["key", "key_low"]}


def keyed(frame, key_type: str):
    """``frame`` (cuDF or pandas) with its int64 ``key`` as ``key_type``'s columns."""
    if key_type == "string":
        frame["key"] = frame["key"].astype(str).str.zfill(12)
    elif key_type == "two":
        frame["key_low"] = (frame["key"] % 65536).astype("int32")
        frame["key"] = frame["key"] // 65536
    return frame


def generate_chunk(i: int, rows: int, chunks: int, side: str, shape: str, frac_match: float,
                   keys: int, backend: str, zipf_a: float = 1.5, key_type: str = "int64"):
    """One partition of one side; built on the worker that will hold it."""
    rng = np.random.default_rng(1000 * i + (side == "right"))
    if shape == "seed":
        key = rng.integers(0, keys, rows, dtype="int64")
    elif shape == "zipf" and side == "right":  # each of the first keys once: the heavy ones too
        key = np.arange(rows * i, rows * (i + 1), dtype="int64") % keys
    elif shape == "zipf":
        key = (rng.zipf(zipf_a, rows) - 1) % keys
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

    return keyed(get_backend(backend).from_pandas(frame), key_type)


def make_side(engine, side: str, shape: str, key_type: str, args: argparse.Namespace):
    import dask.dataframe as dd

    chunks = len(engine.workers)
    rows = args.rows_per_worker
    if shape in ("seed", "zipf") and side == "right":
        rows = max(1, rows // 100)
    meta = generate_chunk(0, 2, 1, side, shape, 1.0, 2, engine.backend.name,
                          key_type=key_type)
    collection = dd.from_map(
        generate_chunk, range(chunks), rows=rows, chunks=chunks, side=side, shape=shape,
        frac_match=args.frac_match, keys=args.keys, backend=engine.backend.name,
        zipf_a=args.zipf_a, key_type=key_type, meta=meta, enforce_metadata=False,
    )
    return collection.persist()


def timed(run, repeats: int, statistic: str, starts: list | None = None) -> float:
    """The median (or min) seconds of ``repeats`` runs; each run's wall-clock start goes to
    ``starts``."""
    times = []
    for _ in range(repeats):
        if starts is not None:
            starts.append(time.time())
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return float(STATISTICS[statistic](times))


# --- GPU-only measurements ----------------------------------------------------------------------

def peer_copy_rate(src: int, dst: int, nbytes: int, repeats: int = 5) -> float:
    """GiB/s of cudaMemcpyPeer from device ``src`` to ``dst`` (CuPy), best of ``repeats``."""
    import cupy

    from gpuframe.diagnostics.limits import enable_peer_access

    runtime = cupy.cuda.runtime
    with cupy.cuda.Device(src):
        a = cupy.ones(nbytes, dtype=cupy.uint8)
    with cupy.cuda.Device(dst):
        b = cupy.empty(nbytes, dtype=cupy.uint8)
    enable_peer_access(cupy, src, dst)
    best = float("inf")
    for _ in range(repeats + 1):  # the first is a warm-up
        cupy.cuda.Device(src).synchronize()
        cupy.cuda.Device(dst).synchronize()
        start = time.perf_counter()
        runtime.memcpyPeer(b.data.ptr, dst, a.data.ptr, src, nbytes)
        cupy.cuda.Device(dst).synchronize()
        cupy.cuda.Device(src).synchronize()
        best = min(best, time.perf_counter() - start)
    with cupy.cuda.Device(dst):
        ok = bool((b[-16:] == 1).all())
    del a, b
    cupy.get_default_memory_pool().free_all_blocks()
    if not ok:
        raise RuntimeError(f"peer copy {src} -> {dst} did not arrive")
    return nbytes / GIB / best


def dask_cuda_merge(protocol: str, args: argparse.Namespace) -> tuple[float | None, str]:
    """dask-cuda's local_cudf_merge over ``protocol``: (throughput GiB/s, its command)."""
    command = [sys.executable, "-m", "dask_cuda.benchmarks.local_cudf_merge",
               "--protocol", protocol, "-d", args.devices, "-c", str(args.rows_per_worker),
               "--frac-match", str(args.frac_match), "--runs", str(args.repeats),
               "--no-show-p2p-bandwidth", *shlex.split(args.dask_cuda_args)]
    shown = " ".join(shlex.quote(c) for c in command[1:])
    done = subprocess.run(command, capture_output=True, text=True)
    match = re.search(r"^Throughput\s*\|\s*([\d.]+\s*[kMGT]?i?B)/s", done.stdout, re.MULTILINE)
    if done.returncode != 0 or match is None:
        tail = (done.stdout + done.stderr)[-2000:]
        print(f"dask-cuda baseline failed over {protocol} (exit {done.returncode}):\n{tail}")
        return None, shown
    from dask.utils import parse_bytes

    return parse_bytes(match.group(1).replace(" ", "")) / GIB, shown


# --- the run ------------------------------------------------------------------------------------

def run_protocol(protocol: str, args: argparse.Namespace, results: list, links: list,
                 balance: dict, stages: list) -> None:
    import gpuframe

    backend = "cudf" if args.device == "gpu" else "pandas"
    cluster_options: dict[str, Any] = {"backend": backend, "protocol": protocol,
                                       "n_workers": args.workers}
    if args.device == "gpu":
        cluster_options["devices"] = args.devices
    with gpuframe.start_cluster(**cluster_options) as engine:
        for shape in args.shapes.split(","):
            for key_type in args.key_types.split(","):
                run_shape(engine, protocol, shape, key_type, args, results, links, balance,
                          stages)


def run_shape(engine: Engine, protocol: str, shape: str, key_type: str,
              args: argparse.Namespace, results: list, links: list, balance: dict,
              stages: list) -> None:
    """Both engines' joins of one shape and key type; its inputs are released when this
    returns."""
    import dask
    from distributed import wait

    import gpuframe
    from gpuframe.diagnostics.jobs import mark, metrics_since

    names = {w: f"w{i}" for i, w in enumerate(engine.workers)}
    on = KEY_COLUMNS[key_type]
    left_ddf = make_side(engine, "left", shape, key_type, args)
    right_ddf = make_side(engine, "right", shape, key_type, args)
    left = gpuframe.from_dask(left_ddf).persist()
    right = gpuframe.from_dask(right_ddf).persist()
    nbytes = left.nbytes() + right.nbytes()
    lengths = gpuframe.merge(left, right, on=on, broadcast_bytes=0).partition_lengths()
    rows = sum(lengths)
    if key_type != "int64":
        shape = f"{shape}, {key_type} keys"
    where = (protocol, shape, nbytes, rows)
    balance[(protocol, shape)] = max(lengths) / max(rows / len(lengths), 1)

    def ours(**options):
        result = gpuframe.merge(left, right, on=on, **options).persist()
        del result

    exchanges = args.exchanges.split(",")
    for way in exchanges:
        os.environ["GPUFRAME_EXCHANGE"] = way
        name = "gpuframe shuffle join" + ("" if way == exchanges[0] else f", {way} exchange")
        results.append((*where, name, timed(lambda: ours(broadcast_bytes=0), args.repeats,
                                            args.statistic)))
    os.environ["GPUFRAME_EXCHANGE"] = exchanges[0]
    seconds = next(r[-1] for r in results if r[:4] == where and r[4] == "gpuframe shuffle join")
    bookmark = mark(engine)
    ours(broadcast_bytes=0)
    metrics = metrics_since(engine, bookmark)
    links.extend((protocol, shape, f"{names[p['source']]} -> {names[p['destination']]}",
                  p["bytes"], p["bytes"] / GIB / max(p["seconds"], 1e-9), seconds)
                 for p in metrics.pairs)
    if args.stages:
        stages.append((protocol, shape, metrics))
    results.append((*where, "gpuframe merge (default options)",
                    timed(ours, args.repeats, args.statistic)))
    for tasks in filter(None, args.partitions_per_worker.split(",")):
        results.append((*where, f"gpuframe shuffle join, {tasks} join tasks per worker",
                        timed(lambda k=int(tasks): ours(broadcast_bytes=0,
                                                        partitions_per_worker=k),
                              args.repeats, args.statistic)))
    for method in filter(None, args.baselines.split(",")):
        def baseline(method=method):
            with dask.config.set({"dataframe.shuffle.method": method}):
                joined = left_ddf.merge(right_ddf, on=on).persist()
                wait(joined)
                # Every repeat builds the same keys: released with a plain del, the
                # next repeat could find them still in memory and time nothing
                # (benchmarks/results/2026-11-25-figures-from-code-comments.md);
                # cancel waits for the release.
                engine.client.cancel(joined)
                del joined

        name = f"dask.dataframe merge ({method})"
        try:
            results.append((*where, name, timed(baseline, args.repeats, args.statistic)))
        except Exception as exc:  # a baseline that cannot run here is reported
            print(f"{name} failed over {protocol}, shape {shape}: {exc!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--protocols", default="tcp", help="comma-separated: tcp, ucx")
    parser.add_argument("--protocol", dest="protocols", help="alias of --protocols")
    parser.add_argument("--workers", type=int, default=None, help="default: GPUs, or CPU cores")
    parser.add_argument("--devices", default="0,1", help="GPUs (as CUDA_VISIBLE_DEVICES)")
    parser.add_argument("--rows-per-worker", type=int, default=1_000_000)
    parser.add_argument("--shapes", default="dask-cuda",
                        help="comma-separated: dask-cuda, seed, zipf")
    parser.add_argument("--zipf-a", type=float, default=1.5, help="Zipf exponent (zipf shape)")
    parser.add_argument("--shape", dest="shapes", help="alias of --shapes")
    parser.add_argument("--key-types", default="int64", help="comma-separated: "
                        + ", ".join(KEY_COLUMNS))
    parser.add_argument("--frac-match", type=float, default=0.3)
    parser.add_argument("--keys", type=int, default=5_000_000, help="distinct keys (seed shape)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baselines", default="p2p,tasks", help="dask shuffle methods to run")
    parser.add_argument("--dask-cuda", choices=["auto", "on", "off"], default="auto",
                        help="run dask-cuda's local_cudf_merge too (auto: on GPUs)")
    parser.add_argument("--dask-cuda-args", default="",
                        help="extra arguments for local_cudf_merge, e.g. '--rmm-pool-size 100GB'")
    parser.add_argument("--peer-copy-mib", type=int, default=1024,
                        help="bytes per peer copy when measuring the device-to-device rate")
    parser.add_argument("--partitions-per-worker", default="",
                        help="comma-separated join tasks per worker to run the shuffle join "
                             "with too (more tasks: transfers overlap earlier tasks' joins)")
    parser.add_argument("--exchanges", default="direct,tasks",
                        help="comma-separated exchanges to run the shuffle join with")
    parser.add_argument("--statistic", choices=sorted(STATISTICS), default="median",
                        help="of the repeats' times; min resists a machine others share")
    parser.add_argument("--stages", action="store_true",
                        help="run one more shuffle join per shape and print its stages")
    args = parser.parse_args()
    protocols = args.protocols.split(",")
    gpu = args.device == "gpu"

    peer = None
    if gpu:
        src, dst = (int(d) for d in args.devices.split(",")[:2])
        nbytes = args.peer_copy_mib * 2**20
        peer = min(peer_copy_rate(src, dst, nbytes), peer_copy_rate(dst, src, nbytes))

    results: list = []
    links: list = []
    balance: dict = {}
    stages: list = []
    for protocol in protocols:
        run_protocol(protocol, args, results, links, balance, stages)
    baseline_commands = []
    if args.dask_cuda == "on" or (args.dask_cuda == "auto" and gpu):
        for protocol in protocols:
            throughput, command = dask_cuda_merge(protocol, args)
            baseline_commands.append(command)
            if throughput is not None:
                results.append((protocol, "dask-cuda", None, None,
                                "dask-cuda local_cudf_merge", throughput))

    print(f"\n{'cudf' if gpu else 'pandas'} backend; {args.rows_per_worker:,} rows per worker "
          f"(seed, zipf: the right side 100x smaller); {args.statistic} of {args.repeats}")
    if peer is not None:
        print(f"peer copy rate between devices {args.devices} (CuPy memcpyPeer, the slower "
              f"direction): {peer:.1f} GiB/s")
    for command in baseline_commands:
        print(f"dask-cuda baseline: python {command}")
    print("\n| protocol | shape | engine | GiB in | rows out | seconds | GiB/s | "
          "gpuframe shuffle join speed-up | output rows max/mean per worker |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    ours = {(p, s): nb / GIB / sec for p, s, nb, _, name, sec in results
            if name == "gpuframe shuffle join"}
    for protocol, shape, nbytes, rows, name, value in results:
        if nbytes is None:  # dask-cuda reports a throughput, of its own shape
            rate, seconds, gib, out = value, "", "", ""
        else:
            rate, seconds = nbytes / GIB / value, f"{value:.3f}"
            gib, out = f"{nbytes / GIB:.2f}", f"{rows:,}"
        mine = ours.get((protocol, shape))
        speedup = f"{mine / rate:.2f}x" if mine else ""
        even = f"{balance[(protocol, shape)]:.2f}" if name == "gpuframe shuffle join" else ""
        print(f"| {protocol} | {shape} | {name} | {gib} | {out} | {seconds} | {rate:.2f} | "
              f"{speedup} | {even} |")
    print("\nPer-link bytes of one more gpuframe shuffle join (the engine's metrics):\n")
    print("| protocol | shape | link | GiB sent | link GiB/s (while busy) | "
          "GiB/s over the whole join | share of peer copy rate |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for protocol, shape, link, nbytes, active, seconds in links:
        share = f"{100 * active / peer:.0f}%" if peer else "n/a (no GPU)"
        print(f"| {protocol} | {shape} | {link} | {nbytes / GIB:.3f} | {active:.2f} | "
              f"{nbytes / GIB / seconds:.2f} | {share} |")
    if stages:
        print("\nStages of one more gpuframe shuffle join per shape (the engine's task records; "
              "wall: the union of the stage's task intervals):\n")
        print("| protocol | shape | stage | tasks | wall s | task s | GiB |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
        for protocol, shape, metrics in stages:
            for stage, figures in metrics.stages.items():
                print(f"| {protocol} | {shape} | {stage} | {figures['tasks']} | "
                      f"{figures['wall_seconds']:.3f} | {figures['task_seconds']:.3f} | "
                      f"{figures['bytes'] / GIB:.3f} |")
            print(f"| {protocol} | {shape} | all (first start to last stop) | | "
                  f"{metrics.stop - metrics.start:.3f} | | |")


if __name__ == "__main__":
    main()
