"""The Parquet join of the join-speed goal: read two Parquet datasets, inner-join them, count the
rows and sum one column of each side. gpuframe (once per exchange of --exchanges) against
cudf-polars' ``DaskEngine`` (polars' CPU engine without GPUs) and dask.dataframe (dask_cudf on
GPUs), one after the other in the same run, per key type:

  int64   one int64 column
  string  one 12-character string column ("k" and 11 digits)
  two     two columns, int64 and int32

Data: the left side has --rows rows with distinct keys, the right side --rows rows whose keys
are drawn from twice the left's range, so about half match; each side has a float64 payload
(``a``, ``b``) and is written as --files Parquet files. Every engine's answer must equal
gpuframe's first one (rows exactly, sums to 1e-9), or the run fails.

  python benchmarks/parquet_join.py --rows 2000000 --keys int64,string,two
  python benchmarks/parquet_join.py --rows 200000000 --keys int64 --files 16
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from query_stages import print_stages  # noqa: E402
from tpch.run import Shape, dask_cluster, dask_engine, timed  # noqa: E402

KEYS = {"int64": ["k"], "string": ["k"], "two": ["k", "j"]}
STRING_DIGITS = 11


def key_columns(kind: str, values: np.ndarray) -> dict[str, pa.Array]:
    """The key columns of ``kind`` for the integers ``values`` (distinct values stay distinct)."""
    if kind == "int64":
        return {"k": pa.array(values, pa.int64())}
    if kind == "two":
        return {"k": pa.array(values // 7, pa.int64()), "j": pa.array(values % 7, pa.int32())}
    # "k" and the value in 11 zero-padded digits, built as one byte buffer: no Python strings
    digits = (values[:, None] // 10 ** np.arange(STRING_DIGITS - 1, -1, -1)) % 10
    text = np.empty((len(values), STRING_DIGITS + 1), np.uint8)
    text[:, 0] = ord("k")
    text[:, 1:] = digits + ord("0")
    offsets = np.arange(0, (len(values) + 1) * text.shape[1], text.shape[1], dtype=np.int32)
    return {"k": pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets),
                                             pa.py_buffer(text.tobytes()))}


def generate(root: Path, kind: str, rows: int, files: int) -> Path:
    """Both sides of ``kind`` under ``root`` (kept: made once per rows and files)."""
    where = root / f"{kind}-{rows}-{files}"
    if (where / "done").exists():
        return where
    rng = np.random.default_rng(7)
    left_keys = rng.permutation(rows)
    right_keys = rng.integers(0, 2 * rows, rows)
    for side, keys, payload in (("left", left_keys, "a"), ("right", right_keys, "b")):
        (where / side).mkdir(parents=True, exist_ok=True)
        for i, chunk in enumerate(np.array_split(keys, files)):
            columns = key_columns(kind, chunk)
            columns[payload] = pa.array(rng.random(len(chunk)))
            pq.write_table(pa.table(columns), where / side / f"part-{i:03}.parquet")
    (where / "done").touch()
    return where


def run_gpuframe(where: Path, keys: list[str]) -> pd.DataFrame:
    import gpuframe

    left = gpuframe.read_parquet(str(where / "left"))
    right = gpuframe.read_parquet(str(where / "right"))
    joined = left.merge(right, on=keys)
    return joined.agg(rows=("a", "count"), a=("a", "sum"), b=("b", "sum")).to_pandas()


def run_dask(where: Path, keys: list[str]) -> pd.DataFrame:
    """dask.dataframe's merge with the task shuffle: its default P2P shuffle of cuDF frames
    took over 30x gpuframe's time (benchmarks/results/2026-11-26-exchange-coldstart-gpus.md)."""
    import dask
    import dask.dataframe as dd

    left = dd.read_parquet(str(where / "left"))
    right = dd.read_parquet(str(where / "right"))
    joined = left.merge(right, on=keys, shuffle_method="tasks")
    rows, a, b = dask.compute(joined.a.count(), joined.a.sum(), joined.b.sum())
    return pd.DataFrame({"rows": [int(rows)], "a": [float(a)], "b": [float(b)]})


def run_polars(where: Path, keys: list[str], engine: Any) -> pd.DataFrame:
    import polars as pl

    left = pl.scan_parquet(str(where / "left" / "*.parquet"))
    right = pl.scan_parquet(str(where / "right" / "*.parquet"))
    query = left.join(right, on=keys).select(pl.len().alias("rows"), pl.col("a").sum(),
                                             pl.col("b").sum())
    frame = query.collect(engine=engine).to_pandas()
    return frame.astype({"rows": "int64", "a": "float64", "b": "float64"})


def same_answer(got: pd.DataFrame, expected: pd.DataFrame) -> bool:
    return (int(got["rows"].iloc[0]) == int(expected["rows"].iloc[0])
            and all(math.isclose(float(got[c].iloc[0]), float(expected[c].iloc[0]),
                                 rel_tol=1e-9) for c in ("a", "b")))


def measure(name: str, kind: str, run: Callable[[], pd.DataFrame], repeat: int,
            answers: dict[str, pd.DataFrame], rows: list[dict[str, Any]]) -> None:
    """Time ``run`` (first and best of ``repeat``) and check its answer against the first
    engine's for ``kind``."""
    cold, best, got = timed(run, repeat)
    expected = answers.setdefault(kind, got)
    if not same_answer(got, expected):
        raise SystemExit(f"{name} on {kind} keys answered {got.to_dict('records')}, "
                         f"gpuframe {expected.to_dict('records')}")
    rows.append({"keys": kind, "engine": name, "first": cold, "best": best,
                 "rows": int(got["rows"].iloc[0])})
    print(f"{kind} keys, {name}: first {cold:.3f} s, best {best:.3f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows per side")
    parser.add_argument("--keys", default="int64,string,two", help="key types, of "
                        f"{', '.join(KEYS)}")
    parser.add_argument("--files", type=int, default=8, help="Parquet files per side")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/gpuframe-parquet-join"))
    parser.add_argument("--repeat", type=int, default=3, help="warm runs after the first")
    parser.add_argument("--workers", type=int, default=None,
                        help="workers (default: one per GPU, or per core)")
    parser.add_argument("--backend", default=None, help="'cudf' or 'pandas'")
    parser.add_argument("--exchanges", default="direct,tasks",
                        help="comma-separated gpuframe exchanges (the first is the reference)")
    parser.add_argument("--baselines", default="cudf-polars,dask",
                        help="comma-separated, of cudf-polars, dask")
    parser.add_argument("--dashboard", default="127.0.0.1:0")
    parser.add_argument("--stages", action="store_true",
                        help="run one more gpuframe query per key type and print its stages")
    args = parser.parse_args(argv)
    kinds = args.keys.split(",")
    for kind in kinds:
        if kind not in KEYS:
            parser.error(f"--keys: unknown key type {kind!r}; choose from {', '.join(KEYS)}")
    exchanges = args.exchanges.split(",")
    baselines = [b for b in args.baselines.split(",") if b]
    data = {kind: generate(args.dir, kind, args.rows, args.files) for kind in kinds}

    import gpuframe

    answers: dict[str, pd.DataFrame] = {}
    rows: list[dict[str, Any]] = []
    with gpuframe.start_cluster(backend=args.backend, n_workers=args.workers,
                                dashboard_address=args.dashboard) as engine:
        print(f"gpuframe: {engine!r}")
        shape = Shape.of(engine, args.dashboard)
        for kind in kinds:
            for way in exchanges:
                os.environ["GPUFRAME_EXCHANGE"] = way
                measure(f"gpuframe ({way} exchange)", kind,
                        partial(run_gpuframe, data[kind], KEYS[kind]), args.repeat, answers, rows)
        os.environ["GPUFRAME_EXCHANGE"] = exchanges[0]
        if args.stages:
            for kind in kinds:
                print_stages(engine, f"on {kind} keys",
                             partial(run_gpuframe, data[kind], KEYS[kind]))
    if "cudf-polars" in baselines:
        run_polars_baseline(shape, kinds, data, args.repeat, answers, rows)
    if "dask" in baselines:
        with dask_cluster(shape):
            for kind in kinds:
                measure("dask_cudf" if shape.on_gpu else "dask.dataframe", kind,
                        partial(run_dask, data[kind], KEYS[kind]), args.repeat, answers, rows)
    print(table(rows, f"gpuframe ({exchanges[0]} exchange)", args.rows))
    return 0


def run_polars_baseline(shape: Shape, kinds: list[str], data: dict[str, Path], repeat: int,
                        answers: dict[str, pd.DataFrame], rows: list[dict[str, Any]]) -> None:
    try:
        import polars  # noqa: F401
    except ImportError as error:
        print(f"cudf-polars skipped: {error}")
        return
    if not shape.on_gpu:
        for kind in kinds:
            measure("polars (CPU)", kind, partial(run_polars, data[kind], KEYS[kind], "in-memory"),
                    repeat, answers, rows)
        return
    with dask_engine(shape) as engine:
        for kind in kinds:
            measure("cudf-polars DaskEngine", kind,
                    partial(run_polars, data[kind], KEYS[kind], engine), repeat, answers, rows)


def table(rows: list[dict[str, Any]], reference: str, per_side: int) -> str:
    """Per key type and engine: first and best seconds, and the reference's speed-up over it
    (its best seconds over the reference's)."""
    ours = {r["keys"]: r["best"] for r in rows if r["engine"] == reference}
    lines = [f"{per_side:,} rows per side; speed-up: {reference}'s best against each engine's",
             "", "| keys | engine | first s | best s | speed-up | rows out |",
             "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['keys']} | {r['engine']} | {r['first']:.3f} | {r['best']:.3f} | "
                     f"{r['best'] / ours[r['keys']]:.2f}x | {r['rows']:,} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
