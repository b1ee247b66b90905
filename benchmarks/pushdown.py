"""Filter pushdown through a join: the lazy query against the same query run eagerly.

The script writes an orders dataset with a page index (benchmarks/ingest_selective.py's writer:
``ts`` increasing, ``key`` in [0, --keys), four floats and a string) and a customers table of
every key, given with ``from_pandas``. The query is written as a user would, the filter after
the join::

    joined = orders.merge(customers, on="key")
    result = joined[(joined.ts >= low) & (joined.ts < high)]   # --keep of the rows
    result.to_pandas()

and runs two ways on one cluster:

  lazy   as written: the optimizer moves the filter through the join into the read's
         ``filters=``, and the reader fetches only the pages that hold surviving rows
  eager  the orders read first (``read_parquet(...).persist()``), then the merge and the
         filter: every page of the dataset is fetched

Each path runs once as a warm-up (the workers' imports, the store's probe), then --repeat
rounds. Every round runs each path cold-ish (the client's cache of the files' footers
cleared, so planning reads them again; the OS page cache is kept) and then warm, and the path
that goes first alternates between rounds, so a busy spell on a shared host falls on both.

Per path it prints wall seconds (best and median, from the ``read_parquet`` call to the
result in pandas), the bytes the orders read fetched (``gpuframe.job_metrics()`` of the job
that read: the lazy path's ``to_pandas``, the eager path's ``persist``), the read stage's
seconds, rows, and an answer check of every run against pandas (or DuckDB, if installed) on
the same files. ``needed`` is what a read that fetches pages must fetch (ingest_selective's
count: the filter column of the row groups kept, and of the other columns the dictionary and
the data pages holding a surviving row). Goal: the lazy read fetches at most 1.2x needed.
Before the rounds, each path's read bytes are checked against a ReadReport of the same read
run on its own. The script exits with 1 if an answer check or that check fails.

  python benchmarks/pushdown.py --bytes 256MiB
  python benchmarks/pushdown.py --bytes 256MiB --store http
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

import gpuframe
from gpuframe.io.planning.metadata import PLANNED_METADATA
from gpuframe.io.planning.plan import plan_fragments
from gpuframe.readers import read_parquet_with_report

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ingest_remote import start_http
from ingest_selective import add_dataset_arguments, needed_bytes, write_dataset

GOAL = 1.2
"""Most bytes the lazy read may fetch, as a multiple of what the surviving rows need."""
PATHS = ("lazy", "eager")
TEMPERATURES = ("cold-ish", "warm")
MIB = 2**20


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    add_dataset_arguments(parser, "64MiB")  # the orders; --keys: also the customers' rows
    parser.add_argument("--keep", type=float, default=0.02,
                        help="share of the orders the filter keeps (default: 0.02)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds, each running both paths cold-ish and warm (default: 3)")
    parser.add_argument("--store", choices=("local", "http"), default="local",
                        help="local files, or the same files over HTTP on 127.0.0.1")
    parser.add_argument("--workers", type=int, default=None, help="default: GPUs, or CPU cores")
    args = parser.parse_args(argv)
    if not 0 < args.keep < 1:
        parser.error(f"--keep {args.keep}: a share between 0 and 1")
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: at least 1")
    return args


class MeasurementError(RuntimeError):
    """A job's figures are not those of the read the benchmark means."""


@dataclass(frozen=True)
class Query:
    """The orders' sources, the customers, and the filter's bounds."""

    sources: list[str]
    customers: pd.DataFrame
    low: int
    high: int

    @property
    def filters(self) -> list[tuple]:
        return [("ts", ">=", self.low), ("ts", "<", self.high)]


@dataclass
class Runs:
    """One path's runs at one temperature."""

    seconds: list[float] = field(default_factory=list)
    read_bytes: list[int] = field(default_factory=list)
    read_seconds: list[float] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)


def customers_table(keys: int) -> pd.DataFrame:
    """One customer per key, so the join keeps every order and the filter alone decides."""
    rng = np.random.default_rng(1)
    segments = np.array(["retail", "wholesale", "online", "partner"])
    return pd.DataFrame({"key": np.arange(keys, dtype=np.int64),
                         "segment": segments[rng.integers(0, len(segments), keys)],
                         "credit": rng.random(keys)})


def build_lazy(query: Query) -> gpuframe.DistributedFrame:
    """The query as a user writes it: the filter after the join."""
    orders = gpuframe.read_parquet(query.sources)
    joined = orders.merge(gpuframe.from_pandas(query.customers), on="key")
    return joined[(joined.ts >= query.low) & (joined.ts < query.high)]


def read_figures(action: str) -> tuple[int, float]:
    """(bytes, wall seconds) of the read stage of the latest job, which must be ``action``'s,
    finished: a job of another name would count another read, or none."""
    metrics = gpuframe.job_metrics()
    if metrics is None or metrics.name != action or metrics.running:
        name = None if metrics is None else metrics.name
        raise MeasurementError(f"the latest job is {name!r}, not a finished {action!r}")
    if "read" not in metrics.stages:
        raise MeasurementError(f"job {action!r} ran no read; stages: {list(metrics.stages)}")
    return metrics.stages["read"]["bytes"], metrics.stages["read"]["wall_seconds"]


def no_read(action: str) -> None:
    """Raise if ``action``'s job (the latest) read anything: its bytes would be missed."""
    metrics = gpuframe.job_metrics()
    if metrics is None or metrics.name != action:
        raise MeasurementError(f"the latest job is not {action!r}")
    if "read" in metrics.stages:
        raise MeasurementError(f"job {action!r} read {metrics.stages['read']['bytes']:,} bytes "
                               "after the orders were persisted")


def run_lazy(query: Query) -> tuple[pd.DataFrame, int, float]:
    """The result, and the bytes and seconds of the read inside the action's job."""
    table = build_lazy(query).to_pandas()
    return (table, *read_figures("to_pandas"))


def run_eager(query: Query) -> tuple[pd.DataFrame, int, float]:
    """The orders read in full first, then the merge and the filter."""
    orders = gpuframe.read_parquet(query.sources).persist()
    read_bytes, read_seconds = read_figures("persist")
    joined = orders.merge(gpuframe.from_pandas(query.customers), on="key")
    table = joined[(joined.ts >= query.low) & (joined.ts < query.high)].to_pandas()
    no_read("to_pandas")
    return table, read_bytes, read_seconds


def expected_answer(paths: list[Path], query: Query) -> tuple[pd.DataFrame, str]:
    """The query on the local files by DuckDB where installed, else by pandas; and which."""
    try:
        import duckdb
    except ImportError:
        orders = pq.read_table(paths).to_pandas()
        kept = orders[(orders.ts >= query.low) & (orders.ts < query.high)]
        return kept.merge(query.customers, on="key"), "pandas"
    customers = query.customers  # noqa: F841 (DuckDB finds it by name)
    files = ", ".join(f"'{p}'" for p in paths)
    sql = (f"SELECT o.*, c.segment, c.credit FROM read_parquet([{files}]) o "
           f"JOIN customers c USING (key) WHERE o.ts >= {query.low} AND o.ts < {query.high}")
    return duckdb.sql(sql).df(), "DuckDB"


def answer_check(got: pd.DataFrame, expected: pd.DataFrame) -> str:
    """'ok', or the first difference: columns, row count, then values in ``ts`` order (``ts``
    is unique, so sorting pairs the rows; a string column may come as object or string)."""
    if list(got.columns) != list(expected.columns):
        return f"columns {list(got.columns)}, expected {list(expected.columns)}"
    if len(got) != len(expected):
        return f"{len(got):,} rows, expected {len(expected):,}"
    left = got.sort_values("ts").reset_index(drop=True)
    right = expected.sort_values("ts").reset_index(drop=True)
    try:
        pd.testing.assert_frame_equal(left, right, check_dtype=False)
    except AssertionError as exc:
        return " ".join(str(exc).split())[:200]
    return "ok"


def release() -> None:
    """Drop the last run's frames so their partitions leave the workers before the next."""
    gc.collect()


def timed_run(run: Callable[[Query], tuple[pd.DataFrame, int, float]], query: Query,
              expected: pd.DataFrame, runs: Runs) -> None:
    """One run of a path, timed, its answer checked outside the time."""
    start = time.perf_counter()
    table, read_bytes, read_seconds = run(query)
    runs.seconds.append(time.perf_counter() - start)
    runs.read_bytes.append(read_bytes)
    runs.read_seconds.append(read_seconds)
    runs.rows.append(len(table))
    runs.answers.append(answer_check(table, expected))
    del table
    release()
    if runs.answers[-1] != "ok":
        print(f"answer check failed: {runs.answers[-1]}", file=sys.stderr)


def cross_check(query: Query, read_bytes: list[int]) -> bool:
    """Whether each path's job_metrics() bytes (lazy, eager) equal the ReadReport of the same
    read run on its own, which counts the read tasks' own fetches: the figure is the read's."""
    agree = True
    for (path, filters), figure in zip((("lazy", query.filters), ("eager", None)), read_bytes):
        report = read_parquet_with_report(query.sources, filters=filters)[1]
        same = report.bytes_read == figure
        agree &= same
        print(f"{path}: job_metrics() read bytes {figure:,}, ReadReport of the same read "
              f"{report.bytes_read:,}: {'equal' if same else 'DIFFERENT'}")
        release()
    print()
    return agree


def rounds(query: Query, expected: pd.DataFrame, repeat: int) -> dict[tuple[str, str], Runs]:
    """``repeat`` rounds of every path cold-ish then warm, the first path alternating."""
    runners = {"lazy": run_lazy, "eager": run_eager}
    results = {(p, t): Runs() for p in PATHS for t in TEMPERATURES}
    for round_ in range(repeat):
        order = PATHS[round_ % 2:] + PATHS[:round_ % 2]
        for temperature in TEMPERATURES:
            for path in order:
                if temperature == "cold-ish":
                    PLANNED_METADATA.clear()
                timed_run(runners[path], query, expected, results[(path, temperature)])
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    root = args.dir or Path(tempfile.gettempdir()) / "gpuframe-pushdown"
    paths = write_dataset(root, args)
    total_rows = sum(pq.ParquetFile(p).metadata.num_rows for p in paths)
    low = total_rows // 2 + args.row_group_rows // 3  # inside a row group, not at its edge
    high = min(total_rows, low + max(1, round(total_rows * args.keep)))
    customers = customers_table(args.keys)
    process = None
    if args.store == "http":
        process, url = start_http(root)
        sources = [f"{url}/{p.name}" for p in paths]
    else:
        sources = [str(p) for p in paths]
    query = Query(sources, customers, low, high)
    plan = plan_fragments([str(p) for p in paths], filters=query.filters)
    needed = needed_bytes(paths, query.filters, plan)
    expected, checker = expected_answer(paths, query)
    backend = "cudf" if args.device == "gpu" else "pandas"
    try:
        with gpuframe.start_cluster(backend=backend, n_workers=args.workers) as engine:
            print(f"{backend} backend, {len(engine.workers)} workers; store: {args.store}; "
                  f"orders: {len(paths)} files, {total_rows:,} rows, "
                  f"{sum(p.stat().st_size for p in paths) / MIB:.1f} MiB, row groups of "
                  f"{args.row_group_rows:,} rows, pages of ~{args.page_bytes / 2**10:.0f} KiB; "
                  f"customers: {len(customers):,} rows (from_pandas); filter "
                  f"{low:,} <= ts < {high:,} ({high - low:,} rows, {args.keep:.1%}); "
                  f"answers checked by {checker}\n")
            text = io.StringIO()
            build_lazy(query).explain(file=text)
            print("explain() of the lazy query:\n\n```\n" + text.getvalue().rstrip() + "\n```\n")
            scan = [line for line in text.getvalue().splitlines() if "Scan" in line]
            pushed = bool(scan) and all(f"'ts', '{op}'" in scan[0] for op in (">=", "<"))
            print(f"filter inside the Scan line: {'yes' if pushed else 'NO'}")

            warm_up = Runs()
            for run in (run_lazy, run_eager):
                timed_run(run, query, expected, warm_up)
            agree = cross_check(query, warm_up.read_bytes)

            results = rounds(query, expected, args.repeat)
    finally:
        if process is not None:
            process.terminate()
            process.wait(10)

    print(f"{args.repeat} rounds; seconds from the read_parquet call to the result in pandas; "
          "read: the orders read's stage in job_metrics()\n")
    print("| path | runs | best s | median s | read MiB | needed MiB | read / needed | "
          "read s (median) | rows | answer |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    failed = [a for runs in (warm_up, *results.values()) for a in runs.answers if a != "ok"]
    for (path, temperature), runs in results.items():
        most = max(runs.read_bytes)
        read = f"{most / MIB:.2f}" if min(runs.read_bytes) == most else \
            f"{min(runs.read_bytes) / MIB:.2f}-{most / MIB:.2f}"
        bad = [a for a in runs.answers if a != "ok"]
        answer = "ok" if not bad else f"{len(bad)} failed: {bad[0]}"
        print(f"| {path} | {temperature} x{len(runs.seconds)} | {min(runs.seconds):.3f} | "
              f"{statistics.median(runs.seconds):.3f} | {read} | {needed / MIB:.2f} | "
              f"{most / needed:.2f}x | {statistics.median(runs.read_seconds):.3f} | "
              f"{max(runs.rows):,} | {answer} |")
    lazy_bytes = max(b for t in TEMPERATURES for b in results[("lazy", t)].read_bytes)
    ratio = lazy_bytes / needed
    print(f"\nlazy read / needed: {ratio:.2f}x (goal <= {GOAL}x): "
          f"{'PASS' if ratio <= GOAL else 'FAIL'}")
    for temperature in TEMPERATURES:
        lazy = statistics.median(results[("lazy", temperature)].seconds)
        eager = statistics.median(results[("eager", temperature)].seconds)
        print(f"speed-up of lazy over eager, {temperature} (medians): {eager / lazy:.2f}x")
    eager_bytes = max(b for t in TEMPERATURES for b in results[("eager", t)].read_bytes)
    print(f"bytes fetched, eager / lazy: {eager_bytes / lazy_bytes:.1f}x")
    if not agree:
        print("read bytes: job_metrics() and the ReadReport DIFFER (see above)")
    if failed:
        print(f"answer checks failed: {len(failed)}")
    else:
        print("answer checks: all ok")
    return 1 if failed or not agree else 0


if __name__ == "__main__":
    sys.exit(main())
