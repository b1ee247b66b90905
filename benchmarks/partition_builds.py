"""A/B of gpuframe_cpp builds: the CUDA partition-and-pack of several source trees (or compile
flags) checked and timed side by side on one GPU, without cuDF, Dask or a staged stack.

Each build is configured and built with CMake from its tree (a directory holding gpuframe's
CMakeLists.txt and gpuframe_cpp/, e.g. ``.`` and a ``git worktree`` of another revision carried
to the device) into its own folder, then loaded in its own process (two builds of ``_core`` in
one process would clash). There, the build's CUDA partition must write exactly the bytes of its
own CPU core on odd layouts (widths 1 to 8, slice offsets, nulls, strings, several keys, 1 to
2000 destinations), then count and scatter are timed by CUDA events on --rows rows x 4 int64
(key column 0) and --strings string columns (4 to 12 bytes a value), best of 8, beside a
device-to-device copy of the same bytes. The builds run in --rounds rounds, each in the other
order; the table gives each build's best, and a checksum of its packed output, which must be the
same for every build. Example (on the device):

    git worktree add .device/before ae95868   # here, then carry .device/before
    python3 benchmarks/partition_builds.py --build kept=.device/before --build new=. \\
        --cuda-flags new=-DSOME_SWITCH=1 --destinations 8,64,256
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from itertools import product

import numpy as np

BUILD_ROOT = "/tmp/gpuframe-builds"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", action="append", default=[], metavar="NAME=TREE",
                        help="a build and its source tree (repeat; at least one)")
    parser.add_argument("--cuda-flags", action="append", default=[], metavar="NAME=FLAGS",
                        help="CMAKE_CUDA_FLAGS of a build (repeat)")
    parser.add_argument("--arch", default="90-real", help="CMAKE_CUDA_ARCHITECTURES")
    parser.add_argument("--destinations", default="8,64,256")
    parser.add_argument("--rows", type=int, default=100_000_000)
    parser.add_argument("--strings", type=int, default=0,
                        help="string columns after the 4 int64 ones (default: 0)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", nargs=2, metavar=("FOLDER", "DESTINATIONS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.child and not args.build:
        parser.error("name at least one --build NAME=TREE")
    return args


def build(name: str, tree: str, flags: str, arch: str) -> str:
    """The folder of ``tree``'s ``_core`` built with ``flags``; raises with CMake's output."""
    folder = os.path.join(BUILD_ROOT, name)
    steps = [["cmake", "-S", tree, "-B", folder, "-DCMAKE_BUILD_TYPE=Release",
              f"-DCMAKE_CUDA_ARCHITECTURES={arch}", f"-DPython_EXECUTABLE={sys.executable}",
              f"-DCMAKE_CUDA_FLAGS={flags}", "-DGPUFRAME_CUDA=ON"],
             ["cmake", "--build", folder, "-j", str(max(1, (os.cpu_count() or 2) // 2))]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"build {name} failed: {' '.join(step)}\n{done.stdout[-3000:]}"
                               f"{done.stderr[-3000:]}")
    return folder


def odd_layouts(core, rows: int, seed: int, nulls: bool) -> list[tuple]:
    """The core's column tuples of a table of every width, sliced, with nulls if asked; the
    string column last."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)

    def column(values: np.ndarray, skip: int = 0) -> tuple:
        mask = rng.random(len(values)) < 0.1 if nulls else None
        array = pa.array(values, mask=mask).slice(skip)
        buffers = [None if b is None else np.frombuffer(b, np.uint8) for b in array.buffers()]
        validity = buffers[0] if array.null_count else None
        if pa.types.is_string(array.type):
            return (core.STRING, 4, array.offset, buffers[2], validity, buffers[1])
        kind = core.FLOATING if pa.types.is_floating(array.type) else core.FIXED
        return (kind, array.type.bit_width // 8, array.offset, buffers[1], validity, None)

    words = np.array(["", "a", "bb", "ccc", "dddddddd", "x" * 40, "ünï"], dtype=object)
    return [column(rng.integers(-50, 50, rows + 3), 3),
            column(rng.integers(0, 255, rows + 1).astype(np.uint8), 1),
            column(rng.integers(-999, 999, rows).astype(np.int16)),
            column(rng.integers(-2**31, 2**31 - 1, rows + 5).astype(np.int32), 5),
            column(rng.normal(size=rows)),
            column(rng.normal(size=rows + 2).astype(np.float32), 2),
            column(rng.choice(words, rows))]


def string_column(core, rows: int, seed: int) -> tuple:
    """The core's tuple of a device string column of ``rows`` values of 4 to 12 letters."""
    import cupy as cp

    rng = cp.random.default_rng(seed)
    offsets = cp.zeros(rows + 1, cp.int32)
    cp.cumsum(rng.integers(4, 13, rows, dtype=cp.int32), out=offsets[1:])
    chars = rng.integers(97, 123, int(offsets[-1]), dtype=cp.uint8)
    return (core.STRING, 4, 0, chars, None, offsets.view(cp.uint8))


def child(folder: str, destinations: list[int], rows: int, strings: int) -> None:
    """Check and time the build in ``folder``; print one JSON line."""
    sys.path.insert(0, folder)
    import _core
    import cupy as cp

    def device(args: list[tuple]) -> list[tuple]:
        return [tuple(cp.asarray(x) if isinstance(x, np.ndarray) else x for x in arg)
                for arg in args]

    checked = 0
    for n_rows in (1, 31, 2049, 200_003):
        for nulls in (False, True):
            with_strings = odd_layouts(_core, n_rows, n_rows + nulls, nulls)
            without = with_strings[:6]  # one plain key of it: the scatter hashes staged keys
            host_tables = {"with strings": with_strings, "without": without}
            device_tables = {name: device(table) for name, table in host_tables.items()}
            cases = [("with strings", keys) for keys in ([0], [3], [6, 0], [6])]
            cases += [("without", keys) for keys in ([0], [3], [4], [5])]
            for (table, keys), n in product(cases, (1, 2, 7, 8, 64, 200, 1000, 2000)):
                host = _core.HostPartition(host_tables[table], keys, n_rows, n)
                want = np.empty(host.total_bytes, np.uint8)
                host.scatter(want)
                for fill in (0, 255):  # every byte written, whatever was there
                    core = _core.CudaPartition(device_tables[table], keys, n_rows, n)
                    scratch = cp.full(core.scratch_bytes, fill, cp.uint8)  # kept: the
                    core.count(scratch, 0)  # scatter reads it
                    out = cp.full(core.total_bytes, fill, cp.uint8)
                    core.scatter(out, 0)
                    if not np.array_equal(out.get(), want):
                        raise AssertionError(f"{folder}: other bytes than the CPU core's "
                                             f"({n_rows} rows, nulls {nulls}, table {table}, "
                                             f"keys {keys}, {n} destinations, fill {fill})")
                checked += 1
    columns = [cp.random.default_rng(7 + i).integers(0, 2**62, rows, dtype=cp.int64)
               for i in range(4)]
    args = [(_core.FIXED, 8, 0, c.view(cp.uint8), None, None) for c in columns]
    args += [string_column(_core, rows, 11 + s) for s in range(strings)]
    result: dict = {"checked": checked}
    marks = [cp.cuda.Event() for _ in range(4)]
    for n in destinations:
        best = (float("inf"), float("inf"))
        for _ in range(8):
            core = _core.CudaPartition(args, [0], rows, n)
            scratch = cp.empty(core.scratch_bytes, cp.uint8)
            marks[0].record()
            core.count(scratch, 0)
            marks[1].record()
            out = cp.empty(core.total_bytes, cp.uint8)
            marks[2].record()
            core.scatter(out, 0)
            marks[3].record()
            marks[3].synchronize()
            times = (cp.cuda.get_elapsed_time(marks[0], marks[1]),
                     cp.cuda.get_elapsed_time(marks[2], marks[3]))
            best = min(best, times, key=sum)
        words = out[:out.size // 8 * 8].view(cp.uint64)
        weights = cp.arange(words.size, dtype=cp.uint64) * cp.uint64(0x9E3779B97F4A7C15)
        result[str(n)] = {"count": best[0], "scatter": best[1],
                          "checksum": int((words ^ weights).sum())}
        del out, scratch, words, weights
    total = sum(c.nbytes for c in columns) + sum(a[3].nbytes + a[5].nbytes for a in args[4:])
    source, target = cp.empty(total, cp.uint8), cp.empty(total, cp.uint8)
    copies = []
    for _ in range(8):
        marks[0].record()
        target.data.copy_from_device_async(source.data, total)
        marks[1].record()
        marks[1].synchronize()
        copies.append(cp.cuda.get_elapsed_time(marks[0], marks[1]))
    result["copy"] = min(copies)
    print("RESULT " + json.dumps(result), flush=True)


def main() -> None:
    args = parse_args()
    if args.child:
        child(args.child[0], [int(n) for n in args.child[1].split(",")], args.rows,
              args.strings)
        return
    trees = dict(b.split("=", 1) for b in args.build)
    flags = dict(f.split("=", 1) for f in args.cuda_flags)
    unknown = set(flags) - set(trees)
    if unknown:
        raise SystemExit(f"--cuda-flags names no --build: {', '.join(sorted(unknown))}")
    with ThreadPoolExecutor(len(trees)) as pool:
        folders = dict(zip(trees, pool.map(
            lambda name: build(name, trees[name], flags.get(name, ""), args.arch), trees)))
    results: dict[str, list[dict]] = {name: [] for name in trees}
    names = list(trees)
    for round_ in range(args.rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            done = subprocess.run([sys.executable, __file__, "--rows", str(args.rows),
                                   "--strings", str(args.strings), "--child", folders[name],
                                   args.destinations], capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            if done.returncode != 0 or not lines:
                raise SystemExit(f"build {name} failed its run:\n{done.stdout[-3000:]}"
                                 f"{done.stderr[-3000:]}")
            results[name].append(json.loads(lines[0][len("RESULT "):]))
    print(f"{args.rows:,} rows x 4 int64 and {args.strings} string columns; each build checked "
          f"against its CPU core on {results[names[0]][0]['checked']} layouts; best of 8 in each "
          f"of {args.rounds} rounds\n")
    print("| build | destinations | count ms | scatter ms | sum ms | copy ms | output checksum |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, runs in results.items():
        for n in args.destinations.split(","):
            best = min((run[n] for run in runs), key=lambda r: r["count"] + r["scatter"])
            print(f"| {name} | {n} | {best['count']:.3f} | {best['scatter']:.3f} | "
                  f"{best['count'] + best['scatter']:.3f} | "
                  f"{min(run['copy'] for run in runs):.3f} | {best['checksum']:x} |")
    sums = {n: {run[n]["checksum"] for runs in results.values() for run in runs}
            for n in args.destinations.split(",")}
    if any(len(s) > 1 for s in sums.values()):
        raise SystemExit("the builds packed different bytes")


if __name__ == "__main__":
    main()
