"""Selective reads: the bytes a filtered read fetches against the bytes it needs.

The script writes a Parquet dataset with a page index (--files files of row groups of
--row-group-rows rows, pages of about --page-bytes): ``ts`` (int64, increasing through the
dataset), ``key`` (random int64 in [0, --keys)), four float64 columns and a string column;
snappy, pyarrow's default dictionaries (which fall back to plain pages once a dictionary passes
1 MiB). It serves the files over HTTP on 127.0.0.1 (benchmarks/ingest_remote.py's server, in
its own process) unless --store local, and for each query reads all columns with
``gpuframe.read_parquet(filters=...)``. Per query it prints

  needed    what a read that fetches pages must fetch: the filter column of every row group
            the statistics keep, and of the other columns the dictionary page and the data
            pages holding a surviving row (from the files' page indexes, read here)
  gpuframe  the bytes the read fetched (its ReadReport: data and page indexes, not footers)
            and the requests it made
  pyarrow   the bytes pyarrow.parquet.read_table(filters=...) reads of the same files (row
            groups pruned by statistics, whole column chunks), counted by a file wrapper

and each one's ratio to needed. Goal (issue #3): gpuframe <= 1.2x needed. Seconds are the
whole read_parquet call (planning included) and pyarrow's read of the local files (no HTTP).
The first read of a store that plans at least ``probe_min_bytes`` probes its bandwidth on every
worker, once per store and client process (its bytes are in no ReadReport), and a first
selective read costs the workers imports and first decodes: a read of the first row, all
columns, with ``probe_min_bytes=0``, does both before the table, and its seconds are printed on
their own. (Without it the probe falls into the first query that plans 256 MiB, 'key, one
value', and a warm-up read that keeps no row runs no read task, so the first query pays the
workers' first selective read: benchmarks/results/2026-11-25-figures-from-code-comments.md.)

  python benchmarks/ingest_selective.py --bytes 256MiB
  python benchmarks/ingest_selective.py --device gpu --bytes 4GiB
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ingest import parse_bytes  # noqa: E402
from ingest_remote import start_http  # noqa: E402

FLOATS = 4
ROW_BYTES = 8 + 8 + 8 * FLOATS + 20  # ts, key, the floats, a string of ~16 chars + offset


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    add_dataset_arguments(parser, "256MiB")
    parser.add_argument("--store", choices=("http", "local"), default="http")
    parser.add_argument("--workers", type=int, default=None)
    return parser.parse_args()


def add_dataset_arguments(parser: argparse.ArgumentParser, size: str) -> None:
    """The options :func:`write_dataset` reads (its spec), and where it writes; ``size``: the
    default of --bytes."""
    parser.add_argument("--bytes", type=parse_bytes, default=parse_bytes(size),
                        help=f"dataset size before compression (default: {size})")
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--row-group-rows", type=int, default=512 * 1024)
    parser.add_argument("--page-bytes", type=parse_bytes, default=parse_bytes("64KiB"))
    parser.add_argument("--keys", type=int, default=100_000,
                        help="distinct values of the key column (default: 100000)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the dataset is written (default: a temporary folder)")


def write_dataset(folder: Path, args: argparse.Namespace) -> list[Path]:
    """The dataset's files, written once and reused while its spec is the same."""
    spec = {k: getattr(args, k) for k in ("bytes", "files", "row_group_rows", "page_bytes",
                                          "keys")}
    marker = folder / "_spec.json"
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return sorted(folder.glob("*.parquet"))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rows = max(1, args.bytes // ROW_BYTES // args.files)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(args.files):
        table = pa.table(
            {"ts": np.arange(i * rows, (i + 1) * rows, dtype=np.int64),
             "key": rng.integers(0, args.keys, rows),
             **{f"f{c}": rng.random(rows) for c in range(FLOATS)},
             "s": pa.array(rng.integers(97, 123, (rows, 16), dtype=np.uint8).view("S16")
                           .ravel()).cast(pa.string())})
        path = folder / f"part-{i:04d}.parquet"
        pq.write_table(table, path, row_group_size=args.row_group_rows,
                       data_page_size=args.page_bytes, write_page_index=True,
                       compression="snappy")
        paths.append(path)
    marker.write_text(json.dumps(spec))
    return paths


def needed_bytes(paths: list[Path], filters: list[tuple], plan) -> int:
    """Filter columns of the row groups the plan keeps, plus the dictionary and data pages of
    the other columns that hold surviving rows (found with the files' page indexes)."""
    from gpuframe.io.formats.pages import ParquetFooter, select_pages
    from gpuframe.io.formats.parquet import column_indices, footer_bytes

    filter_names = sorted({name for name, _, _ in filters})
    kept: dict[str, list[int]] = {}
    for fragment in plan.fragments:
        kept.setdefault(fragment.path, []).extend(fragment.units)
    total = 0
    expression = pq.filters_to_expression(filters)
    for path in paths:
        parquet = pq.ParquetFile(path)
        metadata = parquet.metadata
        footer = ParquetFooter(footer_bytes(metadata), str(path))
        filter_leaves = column_indices(metadata, filter_names)
        with open(path, "rb") as file:
            for group in kept.get(str(path), ()):
                row_group = metadata.row_group(group)
                total += sum(row_group.column(c).total_compressed_size for c in filter_leaves)
                head = parquet.read_row_group(group, columns=filter_names)
                head = head.append_column("row", pa.array(np.arange(head.num_rows)))
                rows = head.filter(expression)["row"].to_numpy()
                if len(rows) == 0:
                    continue
                for column in range(metadata.num_columns):
                    if column in filter_leaves:
                        continue
                    chunk = footer.column_chunk(group, column)
                    file.seek(chunk.offset_index[0])
                    locations = chunk.page_locations(file.read(chunk.offset_index[1]))
                    selection = select_pages(rows, locations, chunk.num_rows)
                    dictionary = chunk.dictionary_range(locations)
                    total += (dictionary[1] if dictionary else 0) + sum(
                        locations[p].compressed_page_size for p in selection.pages)
    return total


class CountingFile(io.RawIOBase):
    """A local file that counts the bytes read from it."""

    def __init__(self, path: Path):
        self.file = open(path, "rb")
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.file.seek(offset, whence)

    def tell(self) -> int:
        return self.file.tell()

    def readinto(self, buffer) -> int:
        n = self.file.readinto(buffer)
        self.bytes_read += n
        return n

    def close(self) -> None:
        self.file.close()
        super().close()


def pyarrow_read(paths: list[Path], filters: list[tuple]) -> tuple[int, int, float]:
    """(rows, bytes read, seconds) of pyarrow reading the files with ``filters``."""
    start = time.perf_counter()
    rows = fetched = 0
    for path in paths:
        counting = CountingFile(path)
        with pa.PythonFile(counting, mode="r") as handle:
            rows += pq.read_table(handle, filters=filters).num_rows
        fetched += counting.bytes_read
    return rows, fetched, time.perf_counter() - start


def main() -> None:
    args = parse_args()
    import gpuframe
    from gpuframe.io.planning.plan import plan_fragments
    from gpuframe.readers import read_parquet_with_report

    root = args.dir or Path(tempfile.gettempdir()) / "gpuframe-selective"
    paths = write_dataset(root, args)
    rows_per_file = pq.ParquetFile(paths[0]).metadata.num_rows
    total_rows = rows_per_file * len(paths)
    middle = total_rows // 2 + args.row_group_rows // 3  # inside a row group, not at its edge
    queries = {
        "ts, 0.1% of rows": [("ts", ">=", middle), ("ts", "<", middle + total_rows // 1000)],
        "ts, 2% of rows": [("ts", ">=", middle), ("ts", "<", middle + total_rows // 50)],
        "key, one value": [("key", "==", args.keys // 2)],
    }
    process = None
    if args.store == "http":
        process, url = start_http(root)
        sources = [f"{url}/{p.name}" for p in paths]
    else:
        sources = [str(p) for p in paths]
    backend = "cudf" if args.device == "gpu" else "pandas"
    try:
        with gpuframe.start_cluster(backend=backend, n_workers=args.workers) as engine:
            print(f"{backend} backend, {len(engine.workers)} workers; {len(paths)} files, "
                  f"{total_rows:,} rows, {sum(p.stat().st_size for p in paths) / 2**20:.0f} "
                  f"MiB, row groups of {args.row_group_rows:,} rows, pages of "
                  f"~{args.page_bytes / 2**10:.0f} KiB; store: {args.store}")
            start = time.perf_counter()
            read_parquet_with_report(sources, filters=[("ts", "==", 0)], engine=engine,
                                     probe_min_bytes=0)
            print(f"first read of the store (its first row; the store's probe, the workers' "
                  f"first selective read): {time.perf_counter() - start:.2f} s")
            print("| query | rows | needed MiB | gpuframe MiB | gpuframe / needed | "
                  "gpuframe requests | pyarrow MiB | pyarrow / needed | gpuframe s | "
                  "pyarrow s |")
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for name, filters in queries.items():
                plan = plan_fragments([str(p) for p in paths], filters=filters)
                needed = needed_bytes(paths, filters, plan)
                start = time.perf_counter()
                frame, report = read_parquet_with_report(sources, filters=filters,
                                                         engine=engine)
                seconds = time.perf_counter() - start
                rows = len(frame)
                del frame
                arrow_rows, arrow_bytes, arrow_seconds = pyarrow_read(paths, filters)
                if arrow_rows != rows:
                    raise SystemExit(f"{name}: gpuframe kept {rows} rows, pyarrow {arrow_rows}")
                print(f"| {name} | {rows:,} | {needed / 2**20:.2f} | "
                      f"{report.bytes_read / 2**20:.2f} | {report.bytes_read / needed:.2f}x | "
                      f"{report.requests:,} | {arrow_bytes / 2**20:.2f} | "
                      f"{arrow_bytes / needed:.2f}x | {seconds:.2f} | {arrow_seconds:.2f} |")
    finally:
        if process is not None:
            process.terminate()


if __name__ == "__main__":
    main()
