"""Ingest throughput: gpuframe's readers against their limit and the usual readers, cold and warm.

The data-property matrix of cuDF's reader benchmarks: a dataset per combination of format
(--formats: parquet, orc, csv), column type (int, float, string, timestamp, decimal, list; CSV
takes the first four), run length (1, 32), cardinality (unlimited, 1000) and compression
(snappy, none; CSV is written uncompressed), each about --bytes in --files files of --columns
columns. Each dataset is read by, in the same run and on the same cluster:

  raw         threads reading the files' bytes (os.pread, --raw-threads): the storage's limit
  gpuframe    gpuframe.read_parquet / read_orc / read_csv onto the workers (untuned:
              Little's-law concurrency)
  pyarrow     pyarrow's reader of the format in this process (its own threads)
  dask        dask.dataframe.read_<format>(...).persist() on the same workers
  dask_cudf   dask_cudf.read_<format>(...).persist() (with --device gpu): cuDF's own readers

Cold runs drop the page cache first: ``echo 1 > /proc/sys/vm/drop_caches`` where permitted
(root, not in a read-only /proc), else ``posix_fadvise(POSIX_FADV_DONTNEED)`` on every file
(which drops only clean, unmapped pages of those files); the table says which. Throughput counts
the bytes of the files on disk. Prints one Markdown table per dataset, with each engine's time
relative to gpuframe's and gpuframe's share of the raw read.

  python benchmarks/ingest.py --device cpu --bytes 256MiB --types int,string
  python benchmarks/ingest.py --device gpu --bytes 4GiB --dir /raid/ingest --formats parquet,orc
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import product
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.csv
import pyarrow.orc
import pyarrow.parquet as pq

TYPES = ("int", "float", "string", "timestamp", "decimal", "list")
CSV_TYPES = ("int", "float", "string", "timestamp")  # what a CSV file holds as text
UNLIMITED = 0


def write_file(path: Path, fmt: str, schema: pa.Schema, compression: str,
               tables: Iterator[pa.Table]) -> None:
    """``tables`` (of ``schema``) as one file of ``fmt``."""
    if fmt == "parquet":
        with pq.ParquetWriter(path, schema, compression=compression) as writer:
            for table in tables:
                writer.write_table(table, row_group_size=1_000_000)
    elif fmt == "orc":
        orc_compression = "uncompressed" if compression == "none" else compression
        with pa.orc.ORCWriter(path, compression=orc_compression) as writer:
            for table in tables:
                writer.write(table)
    else:
        with pa.csv.CSVWriter(path, schema) as writer:
            for table in tables:
                writer.write_table(table)


def file_bytes_per_row(fmt: str, table: pa.Table, compression: str) -> float:
    """The bytes a row of ``table`` takes in a file of ``fmt``."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"probe.{fmt}"
        write_file(path, fmt, table.schema, compression, iter([table]))
        return path.stat().st_size / len(table)


def parse_bytes(text: str) -> int:
    units = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 10**3, "mb": 10**6, "gb": 10**9}
    lowered = text.strip().lower()
    for suffix, scale in sorted(units.items(), key=lambda item: -len(item[0])):
        if lowered.endswith(suffix):
            return int(float(lowered[:-len(suffix)]) * scale)
    return int(lowered)


def column(kind: str, rows: int, run_length: int, cardinality: int,
           rng: np.random.Generator) -> pa.Array:
    """``rows`` values of ``kind``: runs of ``run_length`` equal values, drawn from
    ``cardinality`` distinct ones (0: unlimited)."""
    distinct = -(-rows // run_length)
    high = cardinality if cardinality else 2**40
    values = rng.integers(0, high, distinct, dtype=np.int64)
    if cardinality:  # a fixed pool of distinct values, so strings and floats have 1000 too
        pool = rng.integers(0, 2**40, cardinality, dtype=np.int64)
        values = pool[values]
    ints = pa.array(np.repeat(values, run_length)[:rows])
    if kind == "int":
        return ints
    if kind == "float":
        return pa.array(ints.to_numpy() * 1e-3)
    if kind == "string":
        return pa.compute.binary_join_element_wise("v", ints.cast(pa.string()), "-")
    if kind == "timestamp":
        return ints.cast(pa.timestamp("ms"))
    if kind == "decimal":
        return ints.cast(pa.decimal128(21, 2)).cast(pa.decimal128(18, 2))
    if kind == "list":  # four values per row
        flat = np.repeat(ints.to_numpy(), 4) + np.tile(np.arange(4), rows)
        offsets = np.arange(0, 4 * rows + 1, 4, dtype=np.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))
    raise ValueError(kind)


def make_table(kind: str, rows: int, columns: int, run_length: int, cardinality: int,
               seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({f"{kind}_{i}": column(kind, rows, run_length, cardinality, rng)
                     for i in range(columns)})


def write_dataset(folder: Path, fmt: str, kind: str, run_length: int, cardinality: int,
                  compression: str, nbytes: int, files: int, columns: int) -> list[Path]:
    """The dataset's files, written once and reused while its spec is the same."""
    spec = {"format": fmt, "kind": kind, "run": run_length, "cardinality": cardinality,
            "compression": compression, "bytes": nbytes, "files": files, "columns": columns}
    marker = folder / "_spec.json"
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return sorted(folder.glob(f"*.{fmt}"))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    probe = make_table(kind, 200_000, columns, run_length, cardinality, 0)
    rows_per_file = max(1, int(nbytes / files / file_bytes_per_row(fmt, probe, compression)))
    paths = []
    for i in range(files):
        path = folder / f"part-{i:04d}.{fmt}"
        tables = (make_table(kind, min(4_000_000, rows_per_file - start), columns, run_length,
                             cardinality, 1 + i * 1000 + start)
                  for start in range(0, rows_per_file, 4_000_000))
        write_file(path, fmt, probe.schema, compression, tables)
        paths.append(path)
    marker.write_text(json.dumps(spec))
    return paths


def drop_cache(paths: list[Path]) -> str:
    """Evict the files from the page cache; returns how."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("1\n")
        return "drop_caches"
    except OSError:
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        return "fadvise"


def raw_read(paths: list[Path], threads: int, chunk: int = 16 * 2**20) -> int:
    """Every byte of ``paths``, read by ``threads`` threads in ``chunk``-byte preads."""
    pieces = []
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    try:
        for fd in fds:
            size = os.fstat(fd).st_size
            pieces.extend((fd, offset, min(chunk, size - offset))
                          for offset in range(0, size, chunk))
        with ThreadPoolExecutor(threads) as pool:
            return sum(pool.map(lambda p: len(os.pread(p[0], p[2], p[1])), pieces))
    finally:
        for fd in fds:
            os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--protocol", choices=["tcp", "ucx"], default="tcp")
    parser.add_argument("--workers", type=int, default=None, help="default: GPUs, or CPU cores")
    parser.add_argument("--bytes", type=parse_bytes, default=parse_bytes("256MiB"),
                        help="Parquet bytes per dataset (e.g. 4GiB)")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--columns", type=int, default=4)
    parser.add_argument("--formats", default="parquet", help="parquet, orc, csv")
    parser.add_argument("--types", default=",".join(TYPES))
    parser.add_argument("--run-lengths", default="1,32")
    parser.add_argument("--cardinalities", default="0,1000", help="0: unlimited")
    parser.add_argument("--compressions", default="snappy,none")
    parser.add_argument("--modes", default="cold,warm")
    parser.add_argument("--engines", default="raw,gpuframe,pyarrow,dask,dask_cudf")
    parser.add_argument("--raw-threads", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3,
                        help="median of this many, after one untimed warm-up run")
    parser.add_argument("--dir", default=None, help="where datasets are written (kept)")
    args = parser.parse_args()

    import dask
    import dask.dataframe as dd
    from distributed import wait

    import gpuframe
    from gpuframe.io.planning.plan import plan_fragments
    from gpuframe.operators.scan import worker_memory

    root = Path(args.dir or os.path.join(tempfile.gettempdir(), "gpuframe-ingest"))
    engines = [e for e in args.engines.split(",") if e != "dask_cudf" or args.device == "gpu"]
    backend = "cudf" if args.device == "gpu" else "pandas"
    with gpuframe.start_cluster(backend=backend, protocol=args.protocol,
                                n_workers=args.workers) as engine:
        def release(collection):
            """Every repeat builds the same keys: released with a plain del, the next repeat
            could find them still in memory; cancel waits until they are gone."""
            engine.client.cancel(collection)

        def run_gpuframe(folder, fmt):
            frame = getattr(gpuframe, f"read_{fmt}")(str(folder), engine=engine).persist()
            del frame

        def run_pyarrow(folder, fmt):
            if fmt == "parquet":
                pq.read_table(str(folder))
            else:
                read = pa.orc.read_table if fmt == "orc" else pa.csv.read_csv
                for path in sorted(folder.glob(f"*.{fmt}")):
                    read(str(path))

        def dask_source(folder, fmt):
            return str(folder) if fmt == "parquet" else str(folder / f"*.{fmt}")

        def run_dask(folder, fmt):
            with dask.config.set({"dataframe.backend": "pandas"}):
                collection = getattr(dd, f"read_{fmt}")(dask_source(folder, fmt)).persist()
            wait(collection)
            release(collection)

        def run_dask_cudf(folder, fmt):
            import dask_cudf

            collection = getattr(dask_cudf, f"read_{fmt}")(dask_source(folder, fmt)).persist()
            wait(collection)
            release(collection)

        runners = {"gpuframe": run_gpuframe, "pyarrow": run_pyarrow, "dask": run_dask,
                   "dask_cudf": run_dask_cudf}
        print(f"\n{engine.backend.name} backend, {len(engine.workers)} workers over "
              f"{engine.protocol}; {args.bytes / 2**20:.0f} MiB per dataset in {args.files} "
              f"files of {args.columns} columns; median of {args.repeats} after a warm-up; "
              f"raw: {args.raw_threads} threads\n")
        matrix = product(args.formats.split(","), args.types.split(","),
                         [int(r) for r in args.run_lengths.split(",")],
                         [int(c) for c in args.cardinalities.split(",")],
                         args.compressions.split(","))
        done = set()
        for fmt, kind, run_length, cardinality, compression in matrix:
            if fmt == "csv":
                compression = "none"
            name = (f"{fmt}-{kind}-run{run_length}-"
                    f"{'unlimited' if cardinality == UNLIMITED else cardinality}-{compression}")
            if name in done or (fmt == "csv" and kind not in CSV_TYPES):
                continue
            done.add(name)
            paths = write_dataset(root / name, fmt, kind, run_length, cardinality, compression,
                                  args.bytes, args.files, args.columns)
            nbytes = sum(p.stat().st_size for p in paths)
            plan = plan_fragments(str(root / name), format=fmt, workers=engine.workers,
                                  worker_memory=worker_memory(engine, engine.workers),
                                  on_device=engine.backend.on_device)
            rows = []
            for mode in args.modes.split(","):
                how = "page cache kept"
                results = {}
                for engine_name in engines:
                    times = []
                    for repeat in range(args.repeats + 1):  # the first is a warm-up, untimed
                        if mode == "cold":
                            how = drop_cache(paths)
                        else:
                            raw_read(paths, args.raw_threads)  # warm the page cache
                        start = time.perf_counter()
                        try:
                            if engine_name == "raw":
                                raw_read(paths, args.raw_threads)
                            else:
                                runners[engine_name](root / name, fmt)
                        except Exception as exc:  # a baseline that cannot run is reported
                            print(f"{engine_name} failed on {name}: {exc!r}")
                            times = []
                            break
                        if repeat:
                            times.append(time.perf_counter() - start)
                    if times:
                        results[engine_name] = float(np.median(times))
                rows.append((mode, how, results))
            print(f"### {name}: {nbytes / 2**20:.0f} MiB in {len(paths)} files\n\n"
                  f"gpuframe's plan (untuned): {plan!r}\n")
            print("| mode | engine | seconds | GiB/s | gpuframe speed-up | gpuframe / raw |")
            print("| --- | --- | --- | --- | --- | --- |")
            for mode, how, results in rows:
                ours = results.get("gpuframe")
                raw = results.get("raw")
                for engine_name, seconds in results.items():
                    ratio = f"{seconds / ours:.2f}x" if ours else "-"
                    share = (f"{raw / ours:.0%}" if ours and raw and engine_name == "gpuframe"
                             else "")
                    print(f"| {mode} ({how}) | {engine_name} | {seconds:.3f} | "
                          f"{nbytes / 2**30 / seconds:.2f} | {ratio} | {share} |")
            print(flush=True)


if __name__ == "__main__":
    main()
