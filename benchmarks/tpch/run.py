"""TPC-H's 22 queries on gpuframe, each answer checked against DuckDB, with baselines in the run.

The data is generated once per scale factor (``datagen.py``). gpuframe runs on a local cluster
(GPUs where present, else CPU workers). Each query is timed on its first run (the plan built and
its files' footers read cold) and as the best of ``--repeat`` warm runs; each run builds the
query's frames again, from the read on. Baselines run in the same process on the same files:

  duckdb        DuckDB (CPU, all cores) on the official query texts; also the reference answers
  pandas        the same query code on pandas in this process (``pandas_engine``), tables read
                in each run
  dask          the same query code on dask.dataframe (``dask_engine``), on a cluster shaped as
                gpuframe's: dask_cudf with one worker per GPU (dask-cuda; UCX where
                distributed-ucxx is installed) where gpuframe ran on cuDF, else pandas on as many
                worker processes, sharing the cores; started after gpuframe's cluster is closed
  polars        polars on the CPU, and
  cudf-polars   cudf-polars' ``DaskEngine``, both on the PDS-H queries cudf_polars ships
  tasks         gpuframe itself with its task exchange (``GPUFRAME_EXCHANGE=tasks``), on the
                same cluster right after each query's own runs: what the default (direct)
                exchange gains

A baseline whose package is not importable is skipped with the reason printed. Ratios are the
baseline's best time over gpuframe's (above 1: gpuframe is faster); the total row has the sums
and the geometric mean of the ratios. The script exits with 1 if any gpuframe answer is wrong.

  python benchmarks/tpch/run.py --sf 1
  python benchmarks/tpch/run.py --sf 10 --queries 1,3,9 --baselines duckdb,cudf-polars
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import os
import sys
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import dask
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from query_stages import print_stages  # noqa: E402

import gpuframe  # noqa: E402
from gpuframe.cluster.hardware import ucx_available  # noqa: E402
from gpuframe.cluster.local import cuda_cluster  # noqa: E402
from gpuframe.config import ClusterOptions, resolve  # noqa: E402
from tpch.check import DuckDB, Verdict, compare  # noqa: E402
from tpch.dask_engine import read_parquet as read_dask  # noqa: E402
from tpch.datagen import generate  # noqa: E402
from tpch.pandas_engine import read_parquet as read_pandas  # noqa: E402
from tpch.queries import QUERIES  # noqa: E402

BASELINES = ("duckdb", "pandas", "dask", "polars", "cudf-polars", "tasks")


def answer(result: Any) -> pd.DataFrame:
    """A query's result as pandas: it is one already where the query ends in ``head(n)``."""
    return result if isinstance(result, pd.DataFrame) else result.to_pandas()


def run_query(number: int, read: Callable[[str], Any]) -> pd.DataFrame:
    return answer(QUERIES[number](read))


def read_gpuframe(root: Path, table: str) -> Any:
    return gpuframe.read_parquet(str(root / table))


def read_pandas_table(root: Path, table: str) -> Any:
    return read_pandas(root / table)


def read_dask_table(root: Path, table: str) -> Any:
    return read_dask(root / table)


def timed(run: Callable[[], pd.DataFrame], repeat: int) -> tuple[float, float, pd.DataFrame]:
    """The first run's seconds, the best of ``repeat`` more, and the first run's answer."""
    start = time.perf_counter()
    first = run()
    cold = time.perf_counter() - start
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return cold, best if repeat else cold, first


@dataclass(frozen=True)
class Shape:
    """What gpuframe's cluster was, for a baseline that starts one like it."""

    backend: str
    """gpuframe's backend, 'pandas' or 'cudf': dask.dataframe's names for them too."""
    on_gpu: bool
    workers: int
    dashboard: str
    devices: tuple[str, ...] = ()
    """The GPU each GPU worker drives, sorted: one named twice (``GPUFRAME_DEVICES=0,0``) gets
    two workers in each baseline too."""

    @classmethod
    def of(cls, engine: Any, dashboard: str) -> Shape:
        on_gpu = engine.backend.on_device
        devices = engine.client.run(first_visible_device).values() if on_gpu else ()
        return cls(engine.backend.name, on_gpu, len(engine.workers), dashboard,
                   tuple(sorted(devices)))


def first_visible_device() -> str:
    """The GPU this process drives: the first that ``CUDA_VISIBLE_DEVICES`` names."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]


@contextlib.contextmanager
def dask_cluster(shape: Shape) -> Iterator[None]:
    """A dask.distributed cluster shaped as gpuframe's, its client current and dask.dataframe's
    backend chosen to match, until the block ends. GPU workers get gpuframe's RMM pool and spill
    limit, a worker for each GPU gpuframe's workers drive (two on a GPU named twice, as
    gpuframe adds them)."""
    from distributed import Client, LocalCluster

    cluster: LocalCluster
    if shape.on_gpu:
        from dask_cuda.utils import parse_cuda_visible_device

        options = resolve(ClusterOptions)
        cluster = cuda_cluster([parse_cuda_visible_device(d) for d in shape.devices],
                               protocol="ucx" if ucx_available() else "tcp",
                               rmm_pool_size=options.rmm_pool_size,
                               device_memory_limit=options.device_memory_limit,
                               dashboard_address=shape.dashboard)
    else:
        cluster = LocalCluster(n_workers=shape.workers, processes=True, host="127.0.0.1",
                               threads_per_worker=max(1, (os.cpu_count() or 1) // shape.workers),
                               dashboard_address=shape.dashboard)
    with cluster, Client(cluster), dask.config.set({"dataframe.backend": shape.backend}):
        yield


class Polars:
    """cudf_polars' PDS-H queries, collected on polars' CPU engine or on cudf-polars'
    ``DaskEngine``."""

    def __init__(self, root: Path, shape: Shape | None) -> None:
        self.queries = pdsh_module().PDSHQueries
        # q11's fraction is 0.0001 / scale_factor; DuckDB's text and ours keep the spec's
        # validation value 0.0001 at every scale, so the answers are the same query's.
        self.config = types.SimpleNamespace(dataset_path=str(root), suffix="", scale_factor=1)
        self.shape = shape

    @contextlib.contextmanager
    def engine(self) -> Iterator[Any]:
        if self.shape is None:
            yield "in-memory"
            return
        with dask_engine(self.shape) as engine:
            yield engine

    def runner(self, number: int, engine: Any) -> Callable[[], pd.DataFrame]:
        query = getattr(self.queries, f"q{number}")
        return lambda: query(self.config).frame.collect(engine=engine).to_pandas()


@contextlib.contextmanager
def dask_engine(shape: Shape) -> Iterator[Any]:
    """cudf-polars' ``DaskEngine`` on workers driving the GPUs gpuframe's workers drive. It
    starts one worker per visible GPU itself; where gpuframe's name a GPU twice, it is given a
    cluster as its own would be (a nanny a worker, one thread, the GPU in its environment) with
    a worker for each."""
    from cudf_polars.engine.dask import DaskEngine

    if len(set(shape.devices)) == len(shape.devices):
        with DaskEngine() as engine:
            yield engine
        return
    import logging

    import distributed

    spec = {f"{number}-gpu{device}": {
        "cls": distributed.Nanny,
        "options": {"nthreads": 1, "silence_logs": logging.WARNING,
                    "memory_limit": distributed.system.MEMORY_LIMIT,
                    "env": {"CUDA_VISIBLE_DEVICES": device}},
    } for number, device in enumerate(shape.devices)}
    with distributed.SpecCluster(workers=spec, silence_logs=logging.WARNING) as cluster, \
            distributed.Client(cluster) as client, \
            DaskEngine(dask_client=client, engine_options={"allow_gpu_sharing": True}) as engine:
        yield engine


def pdsh_module() -> types.ModuleType:
    """cudf_polars' PDS-H queries (their module since cudf-polars 26.10)."""
    return importlib.import_module("cudf_polars.streaming.benchmarks.pdsh")


def baseline_problem(name: str) -> str | None:
    """Why the baseline cannot run here, or None."""
    if name in ("duckdb", "pandas", "dask", "tasks"):
        return None
    try:
        import polars  # noqa: F401

        pdsh_module()
    except ImportError as error:
        return f"{name} skipped: {error} (its queries are cudf_polars' PDS-H)"
    if name == "cudf-polars":
        try:
            from cudf_polars.engine.dask import DaskEngine  # noqa: F401
        except ImportError as error:
            return f"cudf-polars skipped: {error}"
    return None


def query_arguments(parser: argparse.ArgumentParser, queries: str) -> None:
    """The data's scale factor and folder and the queries to run (by default ``queries``): the
    arguments of every script that runs the queries on generated data."""
    parser.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1)")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/gpuframe-tpch"),
                        help="where the data is generated and kept, by scale factor")
    parser.add_argument("--queries", default=queries, help=f"e.g. 1-22, or 1,3,9 ({queries})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    query_arguments(parser, "1-22")
    parser.add_argument("--repeat", type=int, default=3, help="warm runs after the first")
    parser.add_argument("--workers", type=int, default=None,
                        help="gpuframe workers (default: one per GPU, or per core)")
    parser.add_argument("--backend", default=None, help="'cudf' or 'pandas' (default: cudf "
                        "where GPUs and cuDF are present)")
    parser.add_argument("--dashboard", default="127.0.0.1:8787",
                        help="where the cluster's dashboard listens (127.0.0.1:0: any port)")
    parser.add_argument("--stages", action="store_true",
                        help="run each query once more and print its stages")
    parser.add_argument("--baselines", default=",".join(BASELINES),
                        help=f"comma-separated, of {', '.join(BASELINES)}")
    args = parser.parse_args()
    numbers = parse_queries(args.queries)
    baselines = [b for b in args.baselines.split(",") if b]
    for name in baselines:
        if name not in BASELINES:
            parser.error(f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}")
    usable = []
    for name in baselines:
        problem = baseline_problem(name)
        if problem:
            print(problem)
        else:
            usable.append(name)

    root = generate(args.dir, args.sf)
    duck = DuckDB(root)
    rows: list[dict[str, Any]] = []
    with gpuframe.start_cluster(backend=args.backend, n_workers=args.workers,
                                dashboard_address=args.dashboard) as engine:
        print(f"gpuframe: {engine!r}; data: {root}")
        shape = Shape.of(engine, args.dashboard)
        for number in numbers:
            row: dict[str, Any] = {"query": number}
            expected = duck.answer(number)
            query = partial(run_query, number, partial(read_gpuframe, root))
            try:
                cold, best, got = timed(query, args.repeat)
                row.update(cold=cold, best=best, rows=len(got),
                           check=compare(number, got, expected))
            except Exception as error:  # one query's failure is a row of the table
                row.update(cold=math.nan, best=math.nan, rows=0,
                           check=Verdict(False, f"{type(error).__name__}: {error}"))
            if args.stages:
                print_stages(engine, f"q{number}", query)
            if "tasks" in usable:
                os.environ["GPUFRAME_EXCHANGE"] = "tasks"
                try:
                    row["tasks"] = checked_best("tasks", number, query, duck, args.repeat)
                finally:
                    del os.environ["GPUFRAME_EXCHANGE"]
            rows.append(row)
    for name in usable:
        try:
            run_baseline(name, root, duck, numbers, rows, args.repeat, shape)
        except Exception as error:  # a baseline that cannot start leaves the others' figures
            print(f"{name} failed: {type(error).__name__}: {error}")
        for row in rows:
            row.setdefault(name, math.nan)
    duck.close()
    print(table(rows, usable))
    return 0 if all(row["check"].ok for row in rows) else 1


def run_baseline(name: str, root: Path, duck: DuckDB, numbers: list[int],
                 rows: list[dict[str, Any]], repeat: int, shape: Shape) -> None:
    if name == "tasks":  # ran beside gpuframe's own runs, on its cluster
        return
    if name == "duckdb":
        for number, row in zip(numbers, rows):
            row["duckdb"] = timed(partial(duck.answer, number), repeat)[1]
        return
    if name in ("pandas", "dask"):
        read = read_pandas_table if name == "pandas" else read_dask_table
        cluster = dask_cluster(shape) if name == "dask" else contextlib.nullcontext()
        with cluster:
            for number, row in zip(numbers, rows):
                row[name] = checked_best(name, number, partial(run_query, number,
                                                               partial(read, root)), duck, repeat)
        return
    polars = Polars(root, shape if name == "cudf-polars" else None)
    with polars.engine() as engine:
        for number, row in zip(numbers, rows):
            row[name] = checked_best(name, number, polars.runner(number, engine), duck, repeat)


def checked_best(name: str, number: int, run: Callable[[], pd.DataFrame], duck: DuckDB,
                 repeat: int) -> float:
    """The best of ``repeat`` runs' seconds where the answer is DuckDB's; else nan, printed with
    the reason."""
    try:
        _, best, got = timed(run, repeat)
    except Exception as error:  # reported; the other queries go on
        print(f"{name} q{number}: {type(error).__name__}: {error}")
        return math.nan
    verdict = compare(number, got, duck.answer(number))
    if not verdict.ok:
        print(f"{name} q{number}: answer {verdict}")
    return best if verdict.ok else math.nan


def parse_queries(text: str) -> list[int]:
    numbers: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        numbers.extend(range(int(low), int(high or low) + 1))
    if not all(number in QUERIES for number in numbers):
        raise SystemExit(f"--queries {text!r}: TPC-H's queries are 1 to 22")
    return numbers


def table(rows: list[dict[str, Any]], baselines: list[str]) -> str:
    """The Markdown table: per query gpuframe's first and best seconds, each baseline's best
    and its ratio to gpuframe's, the rows, and the answer check."""
    head = ["query", "gpuframe first s", "gpuframe s"]
    for name in baselines:
        head += [f"{name} s", f"{name}/gpuframe"]
    head += ["rows", "check"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [f"q{row['query']}", _seconds(row["cold"]), _seconds(row["best"])]
        for name in baselines:
            cells += [_seconds(row[name]), _ratio(row[name], row["best"])]
        cells += [str(row["rows"]), str(row["check"]).replace("|", "/")]
        lines.append("| " + " | ".join(cells) + " |")
    total = ["total", _seconds(sum(r["cold"] for r in rows)),
             _seconds(sum(r["best"] for r in rows))]
    for name in baselines:
        ratios = [r[name] / r["best"] for r in rows if r[name] > 0 and r["best"] > 0]
        geometric = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else math.nan
        total += [_seconds(sum(r[name] for r in rows)),
                  "-" if math.isnan(geometric) else f"geomean {geometric:.2f}x"]
    ok = sum(r["check"].ok for r in rows)
    total += [str(sum(r["rows"] for r in rows)), f"{ok}/{len(rows)} OK"]
    lines.append("| " + " | ".join(total) + " |")
    return "\n".join(lines)


def _seconds(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}"


def _ratio(baseline: float, ours: float) -> str:
    if math.isnan(baseline) or math.isnan(ours) or ours <= 0:
        return "-"
    return f"{baseline / ours:.2f}x"


if __name__ == "__main__":
    sys.exit(main())
