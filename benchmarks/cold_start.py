"""A cold cluster: start-up and the first query, against a warm query and Dask's own cluster.

Each variant runs in a fresh Python process, so every worker and the client start cold, and
with an empty CuPy kernel cache of its own (``CUPY_CACHE_DIR``), as on a machine's first run: a
cache an earlier variant filled spared the later ones' first queries CuPy's compiles
(--shared-kernel-cache keeps the user's cache, as on later runs):

  dask     dask-cuda's LocalCUDACluster (LocalCluster without GPUs) and a client, started
           alone with gpuframe's worker options: the start-up gpuframe adds to.
  warm-up  gpuframe.start_cluster(warm_up=True), its background warm-up, then the query at once.
  warmed   the same, the query once the warm-up is done (its wait counted in start-up): what
           the first query still pays that the warm-up does not cover, apart from the two
           running side by side.
  none     the same with warm_up=False.

The query is benchmarks/parquet_join.py's (read two Parquet datasets, join on int64 keys, count
and sum) on --rows rows per side; a warm query is the best of --repeat runs after the first.
The goal: start_cluster plus the first query within start-up plus 1.5x a warm query.

  python benchmarks/cold_start.py --rows 50000000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from parquet_join import KEYS, generate, run_gpuframe  # noqa: E402

VARIANTS = ("dask", "warm-up", "warmed", "none")


def child(variant: str, data: Path, repeat: int, workers: int | None) -> dict[str, Any]:
    """One variant's figures, measured in this (fresh) process."""
    start = time.perf_counter()
    if variant == "dask":
        from distributed import Client

        import gpuframe  # noqa: F401 (imported as the other variants import it, untimed)
        from gpuframe.cluster.local import start_dask_cluster
        from gpuframe.config import ClusterOptions, resolve

        start = time.perf_counter()
        cluster, _, _ = start_dask_cluster(resolve(ClusterOptions, {"n_workers": workers}))
        client = Client(cluster)
        up = time.perf_counter() - start
        client.close()
        cluster.close()
        return {"start": up}
    import gpuframe
    from gpuframe.diagnostics.jobs import mark, metrics_since

    start = time.perf_counter()
    engine = gpuframe.start_cluster(n_workers=workers, warm_up=variant != "none",
                                    dashboard_address="127.0.0.1:0")
    warm_up = engine.warmed() if variant == "warmed" else {}
    up = time.perf_counter() - start

    def query() -> tuple[float, dict[str, float], list[tuple[str, float]]]:
        """The query's seconds, its stages' wall seconds from the engine's records, and where
        the workers' task threads spent it (Dask's sampling profiler)."""
        bookmark = mark(engine)
        begin, start = time.time(), time.perf_counter()
        run_gpuframe(data, KEYS["int64"])
        seconds = time.perf_counter() - start
        stages = metrics_since(engine, bookmark).stages
        profile = engine.client.profile(start=begin, stop=time.time())
        return (seconds, {name: round(f["wall_seconds"], 3) for name, f in stages.items()},
                hot_frames(profile))

    with engine:
        first, first_stages, first_hot = query()
        warm, warm_stages, _ = min(query() for _ in range(repeat))
        return {"start": up, "first": first, "warm": warm, "protocol": engine.protocol,
                "warm_up": warm_up,
                "backend": engine.backend.name, "workers": len(engine.workers),
                "stages": {"first": first_stages, "warm": warm_stages}, "hot": first_hot}


def hot_frames(profile: dict[str, Any], top: int = 25) -> list[tuple[str, float]]:
    """The functions the sampled threads were inside for the largest share of samples."""
    inside: dict[str, int] = {}

    def walk(node: dict[str, Any], seen: frozenset[str]) -> None:
        where = node.get("description", {})
        name = f"{Path(where.get('filename', '?')).name}:{where.get('name', '?')}"
        if name not in seen:
            inside[name] = inside.get(name, 0) + node.get("count", 0)
        for child in node.get("children", {}).values():
            walk(child, seen | {name})

    walk(profile, frozenset())
    total = max(profile.get("count", 0), 1)
    ranked = sorted(inside.items(), key=lambda item: -item[1])[:top]
    return [(name, round(count / total, 3)) for name, count in ranked]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows per side")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/gpuframe-parquet-join"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--shared-kernel-cache", action="store_true",
                        help="every variant uses the user's CuPy kernel cache")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    data = generate(args.dir, "int64", args.rows, args.files)
    if args.child:
        print(json.dumps(child(args.child, data, args.repeat, args.workers)))
        return 0
    figures: dict[str, dict[str, Any]] = {}
    for variant in args.variants.split(","):
        command = [sys.executable, __file__, "--child", variant, "--rows", str(args.rows),
                   "--files", str(args.files), "--dir", str(args.dir), "--repeat",
                   str(args.repeat)] + (["--workers", str(args.workers)] if args.workers else [])
        with tempfile.TemporaryDirectory(prefix=f"gpuframe-cold-{variant}-") as cache:
            env = dict(os.environ) if args.shared_kernel_cache else \
                dict(os.environ, CUPY_CACHE_DIR=cache)
            done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            print(f"{variant} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
            return 1
        figures[variant] = json.loads(done.stdout.strip().splitlines()[-1])
    print(table(figures, args.rows))
    print("\nStages' wall seconds (the engine's records; client stages run on the client):")
    for variant, f in figures.items():
        for which, stages in f.get("stages", {}).items():
            print(f"- {variant}, {which} query: "
                  + ", ".join(f"{name} {wall:.3f}" for name, wall in stages.items()))
    for variant, f in figures.items():
        for worker, parts in f.get("warm_up", {}).items():
            print(f"- {variant}'s warm-up on {worker}: "
                  + ", ".join(f"{part} {seconds:.3f}" for part, seconds in parts.items()))
    for variant, f in figures.items():
        if f.get("hot"):
            print(f"\nWhere the workers' task threads were in {variant}'s first query (share "
                  "of samples inside each function):")
            print("\n".join(f"- {share:.1%} {name}" for name, share in f["hot"]))
    return 0


def table(figures: dict[str, dict[str, Any]], rows: int) -> str:
    """Start-up, first and warm query seconds per variant, and the goal's ratio: (start-up +
    first query - Dask's start-up) over a warm query."""
    base = figures.get("dask", {}).get("start")
    some = next((f for f in figures.values() if "backend" in f), {})
    lines = [f"{rows:,} rows per side; {some.get('workers')} workers, backend "
             f"{some.get('backend')}, protocol {some.get('protocol')}", "",
             "| variant | start-up s | first query s | warm query s | first / warm | "
             "(start-up + first - Dask's start-up) / warm |", "|---|---:|---:|---:|---:|---:|"]
    for variant, f in figures.items():
        if "first" not in f:
            lines.append(f"| {variant} (cluster alone) | {f['start']:.2f} | | | | |")
            continue
        goal = ((f["start"] + f["first"] - base) / f["warm"]) if base is not None else None
        lines.append(f"| {variant} | {f['start']:.2f} | {f['first']:.3f} | {f['warm']:.3f} | "
                     f"{f['first'] / f['warm']:.2f}x | "
                     + (f"{goal:.2f}x |" if goal is not None else "- |"))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
