"""benchmarks/ingest_remote.py at a tiny size, over HTTP: it writes its dataset, serves it, and
prints a row for gpuframe untuned, a fixed setting and the raw range reads, and the most
requests in flight the server saw at once from the untuned read."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "ingest_remote.py"


def test_the_benchmark_reads_a_served_dataset_at_a_tiny_size(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--bytes", "4MiB", "--files", "6",
         "--stores", "http", "--threads", "4", "--task-sizes", "1MiB", "--raw-threads", "4",
         "--raw-sizes", "1MiB", "--repeats", "1", "--workers", "2", "--dir", str(tmp_path)],
        check=False, capture_output=True, text=True, timeout=240)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr[-3000:]
    assert re.search(r"### http: [\d.]+ MiB planned in 6 files", out), out
    assert re.search(r"untuned kept at most [1-9]\d* requests in flight at the server", out), out
    for row in ("| gpuframe untuned |", "| gpuframe 4 x 1MiB |",
                "| raw range reads, 4 threads x 1MiB |"):
        assert row in out, out
