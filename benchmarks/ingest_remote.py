"""Remote ingest: gpuframe.read_parquet over HTTP and S3, untuned against every fixed setting.

The script writes a Parquet dataset (--bytes, 4 columns of --kind, snappy), then starts two
servers on 127.0.0.1, each in its own process: an HTTP server that answers Range requests
(os.pread per request, keep-alive) and a moto S3 server holding the same files. For each store
it reads the dataset onto the workers with

  untuned   gpuframe's default: requests in flight and their size by Little's law, measured
            by the workers on the store's first reads (once per store and client process,
            when the script plans, before anything is timed); the files' footers kept from
            the read before (the server sends ETags), and, in a row of its own, read again
  T x S     each fixed setting of --threads (requests in flight per fragment) and --task-sizes
  raw       the same byte ranges (every column chunk the plan reads) fetched by --raw-threads
            threads in requests of --raw-sizes, in this process, into reused buffers, with no
            decoding: by Python threads into host memory and, on a GPU, by KvikIO into device
            memory (RemoteFile.pread, its threads and task size set so); the store's limit
            for these bytes is the best of them

and prints a Markdown table per store: seconds, GiB/s of planned bytes, and each setting's time
relative to untuned (above 1.00x: untuned is faster).

  python benchmarks/ingest_remote.py --device cpu --bytes 256MiB
  python benchmarks/ingest_remote.py --device gpu --bytes 4GiB --s3-bytes 1GiB
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import product
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ingest import parse_bytes, write_dataset  # noqa: E402

if TYPE_CHECKING:
    from gpuframe.cluster import Engine


class RangeHandler(BaseHTTPRequestHandler):
    """Files under ``root`` with Range support; one os.pread per request. Each answer carries
    the file's ETag and Last-Modified, as nginx and object stores send them. ``/_most``
    answers the most requests in flight at once since it was last asked, and starts again."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    root = Path(".")
    lock = threading.Lock()
    in_flight = 0
    most = 0

    def log_message(self, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        if self.path == "/_most":
            with RangeHandler.lock:
                answer, RangeHandler.most = str(RangeHandler.most).encode(), 0
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
            return
        with RangeHandler.lock:
            RangeHandler.in_flight += 1
            RangeHandler.most = max(RangeHandler.most, RangeHandler.in_flight)
        try:
            self._serve(body=True)
        finally:
            with RangeHandler.lock:
                RangeHandler.in_flight -= 1

    def _serve(self, body: bool) -> None:
        path = (self.root / self.path.split("?", 1)[0].lstrip("/")).resolve()
        if self.root not in path.parents or not path.is_file():
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        stat = path.stat()
        size = stat.st_size
        spec = self.headers.get("Range", "")
        start, end = 0, size - 1
        if spec.startswith("bytes="):
            first, _, last = spec[6:].partition("-")
            if first:
                start, end = int(first), min(size - 1, int(last) if last else size - 1)
            else:
                start = max(0, size - int(last))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        else:
            self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{stat.st_mtime_ns:x}-{size:x}"')
        self.send_header("Last-Modified", formatdate(stat.st_mtime, usegmt=True))
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        if body:
            fd = os.open(path, os.O_RDONLY)
            try:
                self.wfile.write(os.pread(fd, end - start + 1, start))
            finally:
                os.close(fd)


def serve_http(root: str) -> None:
    RangeHandler.root = Path(root).resolve()
    server = ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


SERVER_ENVIRONMENT = dict(os.environ)
"""The servers' environment: this process's before a Dask cluster starts, which sets
``MALLOC_TRIM_THRESHOLD_=65536`` in it for its workers. A server that inherits that gives each
answer's memory back to the system and pays page faults for the next, which slows the server
(benchmarks/results/2026-11-24-kvikio-remote-h200.md)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_http(root: Path) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, __file__, "--serve-http", str(root)],
                               stdout=subprocess.PIPE, text=True, env=SERVER_ENVIRONMENT)
    port = int(process.stdout.readline())
    return process, f"http://127.0.0.1:{port}"


def start_s3(paths: list[Path], root: Path) -> tuple[subprocess.Popen, dict]:
    import boto3
    import requests

    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                                str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=SERVER_ENVIRONMENT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                requests.get(endpoint, timeout=5)
                break
            except requests.RequestException:
                time.sleep(0.1)
        options = {"endpoint": endpoint, "key": "bench", "secret": "bench",
                   "region": "us-east-1"}
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench",
                          aws_secret_access_key="bench", region_name="us-east-1")
        s3.create_bucket(Bucket="bench")
        for path in paths:
            s3.upload_file(str(path), "bench", path.relative_to(root).as_posix())
    except BaseException:
        process.terminate()  # a server that never came up must not outlive the script
        raise
    return process, options


def raw_ranges(urls: list[str], ranges: dict[str, list[tuple[int, int]]], storage: dict,
               threads: int, request_size: int) -> int:
    """The planned ranges of every file, fetched by ``threads`` threads into one buffer each
    (reused, so no read pays for fresh pages, which would time the client's page faults rather
    than the store: benchmarks/results/2026-11-25-figures-from-code-comments.md), nothing
    decoded."""
    from gpuframe.io.storage import open_source
    from gpuframe.io.storage.base import storage_options

    options = storage_options(storage)
    sources = {url: open_source(url, options) for url in urls}
    pieces = [(url, start, min(request_size, offset + length - start))
              for url in urls for offset, length in ranges[url]
              for start in range(offset, offset + length, request_size)]
    buffers = threading.local()

    def fetch(piece: tuple[str, int, int]) -> int:
        if not hasattr(buffers, "view"):
            buffers.view = memoryview(bytearray(request_size))
        return sources[piece[0]].read_range_into(piece[1], buffers.view[:piece[2]])

    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(fetch, pieces))
    for source in sources.values():
        source.close()
    return total


class KvikioRanges:
    """The planned ranges read by KvikIO (``RemoteFile.pread``: C++ threads over libcurl) into
    one device buffer per file, allocated once, nothing decoded: the GPU reader's fetch
    without gpuframe around it."""

    def __init__(self, urls: list[str], ranges: dict[str, list[tuple[int, int]]],
                 sizes: dict[str, int], storage: dict):
        import cupy
        import kvikio

        s3 = {} if not storage else {
            "aws_region_name": storage["region"], "aws_access_key_id": storage["key"],
            "aws_secret_access_key": storage["secret"], "aws_endpoint_url": storage["endpoint"]}
        self.files = {url: kvikio.RemoteFile.open_s3_url(url, sizes[url], **s3) if s3
                      else kvikio.RemoteFile.open_http(url, sizes[url]) for url in urls}
        self.buffers = {url: cupy.empty(sizes[url], dtype=cupy.uint8) for url in urls}
        self.ranges = ranges

    def __call__(self, threads: int, request_size: int) -> int:
        import kvikio.defaults

        kvikio.defaults.set({"num_threads": threads, "task_size": request_size})
        futures = [file.pread(self.buffers[url][offset:offset + n], n, offset)
                   for url, file in self.files.items() for offset, n in self.ranges[url]]
        return sum(future.get() for future in futures)


def read(engine: Engine, urls: list[str], storage: dict, **options: object) -> None:
    """The dataset read onto the workers with ``options``, then released."""
    import gpuframe

    frame = gpuframe.read_parquet(urls, engine=engine, **storage, **options).persist()
    del frame


def read_anew(engine: Engine, urls: list[str], storage: dict) -> None:
    """The dataset read with gpuframe's defaults, its footers read again."""
    from gpuframe.io.planning.metadata import PLANNED_METADATA

    PLANNED_METADATA.clear()
    read(engine, urls, storage)


def timed(runs: dict, repeats: int, statistic: str) -> dict[str, float]:
    """Seconds of each of ``runs`` (name: callable): a warm-up of each (connections, imports
    on the workers), then ``repeats`` rounds that run every setting once each, each round
    starting one setting later, so a machine that others share slows all settings alike
    rather than whichever ran during a busy spell or after a particular neighbour."""
    for run in runs.values():
        run()
    names = list(runs)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(repeats):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            start = time.perf_counter()
            runs[name]()
            times[name].append(time.perf_counter() - start)
    pick = np.median if statistic == "median" else np.min
    return {name: float(pick(seconds)) for name, seconds in times.items()}


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--serve-http":
        serve_http(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--protocol", choices=["tcp", "ucx"], default="tcp")
    parser.add_argument("--workers", type=int, default=None, help="default: GPUs, or CPU cores")
    parser.add_argument("--bytes", type=parse_bytes, default=parse_bytes("256MiB"))
    parser.add_argument("--s3-bytes", type=parse_bytes, default=None,
                        help="a smaller dataset for moto, which keeps objects in Python; "
                             "default: --bytes")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--kind", default="float", help="column type (see ingest.py --types)")
    parser.add_argument("--stores", default="http,s3")
    parser.add_argument("--threads", default="1,4,16,64", help="requests in flight per task")
    parser.add_argument("--task-sizes", default="256KiB,1MiB,4MiB,16MiB")
    parser.add_argument("--raw-threads", default="16,64")
    parser.add_argument("--raw-sizes", default="4MiB,16MiB")
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds over every setting; each setting's median (or min)")
    parser.add_argument("--statistic", choices=["median", "min"], default="median",
                        help="min suits a machine that others share")
    parser.add_argument("--dir", default=None, help="where the dataset is written (kept)")
    args = parser.parse_args()

    import gpuframe
    from gpuframe.io.formats.parquet import column_chunk_ranges
    from gpuframe.io.planning.plan import plan_fragments
    from gpuframe.operators.scan import measure_on_workers, worker_memory
    from gpuframe.runtime.runner import Job

    root = Path(args.dir or os.path.join(tempfile.gettempdir(), "gpuframe-ingest-remote"))
    backend = "cudf" if args.device == "gpu" else "pandas"
    processes = []
    try:
        with gpuframe.start_cluster(backend=backend, protocol=args.protocol,
                                    n_workers=args.workers) as engine:
            print(f"\n{engine.backend.name} backend, {len(engine.workers)} workers over "
                  f"{engine.protocol}; {args.statistic} of {args.repeats} rounds over all "
                  "settings after a warm-up of each\n")
            for store in args.stores.split(","):
                nbytes = args.bytes if store == "http" or args.s3_bytes is None else args.s3_bytes
                name = f"remote-{nbytes}"
                paths = write_dataset(root / name / args.kind, "parquet", args.kind, 1, 0, "snappy",
                                      nbytes, args.files, 4)
                relative = [p.relative_to(root / name) for p in paths]
                if store == "http":
                    process, base = start_http(root / name)
                    urls = [f"{base}/{r.as_posix()}" for r in relative]
                    storage: dict = {}
                else:
                    process, storage = start_s3(paths, root / name)
                    urls = [f"s3://bench/{r.as_posix()}" for r in relative]
                processes.append(process)
                # planned as read_parquet plans (the workers' GPUs set the partitions'
                # size, which the request size depends on), so "untuned chose" is its choice
                with Job(engine, "plan") as job:
                    plan = plan_fragments(
                        urls, storage=storage, workers=engine.workers,
                        worker_memory=worker_memory(engine, engine.workers),
                        on_device=engine.backend.on_device,
                        measure=lambda path, options, fragment_bytes: measure_on_workers(
                            job, path, options, fragment_bytes))
                ranges = {url: [] for url in urls}
                for fragment in plan.fragments:
                    ranges[fragment.path].extend(column_chunk_ranges(
                        plan.footers[fragment.path], fragment.units, plan.columns_read))
                planned = plan.total_bytes

                runs = {"gpuframe untuned": partial(read, engine, urls, storage),
                        "gpuframe untuned, footers read again": partial(
                            read_anew, engine, urls, storage)}
                chosen = plan.concurrency
                for threads, size in product(args.threads.split(","),
                                             args.task_sizes.split(",")):
                    runs[f"gpuframe {threads} x {size}"] = partial(
                        read, engine, urls, storage, requests_in_flight=int(threads),
                        task_size=parse_bytes(size))
                kvikio_ranges = (KvikioRanges(urls, ranges, {url: plan.versions[url].size
                                                             for url in urls}, storage)
                                 if args.device == "gpu" else None)
                for threads, size in product(args.raw_threads.split(","),
                                             args.raw_sizes.split(",")):
                    runs[f"raw range reads, {threads} threads x {size}"] = partial(
                        raw_ranges, urls, ranges, storage, int(threads), parse_bytes(size))
                    if kvikio_ranges:
                        runs[f"raw KvikIO range reads, {threads} threads x {size}"] = partial(
                            kvikio_ranges, int(threads), parse_bytes(size))
                results = list(timed(runs, args.repeats, args.statistic).items())
                most = ""
                if store == "http":  # once more, counting requests at once at the server
                    urllib.request.urlopen(f"{base}/_most").read()
                    read(engine, urls, storage)
                    most = (f"; untuned kept at most "
                            f"{int(urllib.request.urlopen(f'{base}/_most').read())} requests "
                            "in flight at the server")
                    if chosen.node_readers:
                        most += (f" (the host's budget: {chosen.requests_in_flight} for each "
                                 f"of {chosen.node_readers} readers, more where ranges are "
                                 "shorter than the requests)")
                untuned = results[0][1]
                best_fixed = min(s for n, s in results if n.startswith("gpuframe ") and
                                 "untuned" not in n)
                best_raw = min(s for n, s in results if n.startswith("raw"))
                print(f"### {store}: {planned / 2**20:.0f} MiB planned in {len(urls)} files; "
                      f"untuned chose {chosen!r}\n")
                anew = results[1][1]
                print(f"untuned / best fixed: {best_fixed / untuned:.2f}x; untuned vs best raw: "
                      f"{best_raw / untuned:.0%} of raw throughput ({best_raw / anew:.0%} with "
                      f"the footers read again){most}\n")
                print("| setting | seconds | GiB/s | untuned speed-up |")
                print("| --- | --- | --- | --- |")
                for setting, seconds in results:
                    print(f"| {setting} | {seconds:.3f} | {planned / 2**30 / seconds:.2f} | "
                          f"{seconds / untuned:.2f}x |")
                print(flush=True)
    finally:
        for process in processes:
            process.terminate()
            process.wait(10)


if __name__ == "__main__":
    main()
