"""The ``gpuframe`` command: ``gpuframe info`` and ``gpuframe demo``."""

from __future__ import annotations

import argparse
import sys

from .cluster.hardware import describe_host
from .cluster.local import start_cluster
from .config import ClusterOptions, describe
from .demo import run_demo
from .diagnostics.limits import LIMIT_NAMES, measure_limits, rate_text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpuframe", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("info", help="GPUs, CUDA, UCX, GDS, library versions and measured "
                        "copy and disk bandwidths on this host")
    demo = commands.add_parser(
        "demo", help="start a local cluster (GPUs if present, else CPU) and run the demo job"
    )
    demo.add_argument("--rows", type=int, default=1_000_000, help="orders to generate")
    for name, default, meaning in describe(ClusterOptions):
        if name in ("backend", "protocol", "n_workers", "devices", "dashboard_address"):
            demo.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None,
                              type=int if name == "n_workers" else str,
                              help=f"{meaning} (default: {default})")
    args = parser.parse_args(argv)
    if args.command == "info":
        return _info()
    return _demo(args)


def _info() -> int:
    facts = describe_host()
    limits = measure_limits()
    for name, label in LIMIT_NAMES.items():
        note = limits.notes.get(name)
        facts[f"measured {label}"] = rate_text(getattr(limits, name)) + (
            f" ({note})" if note else "")
    width = max(map(len, facts))
    for key, value in facts.items():
        print(f"{key:<{width}}  {value}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    options = {k: v for k, v in vars(args).items()
               if k not in ("command", "rows") and v is not None}
    with start_cluster(**options) as engine:
        print(f"cluster: {engine.backend.name} backend, {len(engine.workers)} worker(s) over "
              f"{engine.protocol}; dashboard: {engine.dashboard_link}")
        result = run_demo(engine, rows=args.rows)
    print(f"joined {result.rows_in:,} orders with their customers: {result.rows_out:,} rows")
    print("partitions per worker: " + ", ".join(
        f"{worker} x{count}" for worker, count in sorted(result.partitions_per_worker.items())))
    print("revenue by segment:")
    print(result.revenue_by_segment.to_string())
    print("seconds: " + ", ".join(f"{stage} {secs:.2f}" for stage, secs in result.seconds.items()))
    print("check against pandas: " + ("OK" if result.matches_pandas else "MISMATCH"))
    return 0 if result.matches_pandas else 1


if __name__ == "__main__":
    sys.exit(main())
