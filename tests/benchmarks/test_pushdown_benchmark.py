"""benchmarks/pushdown.py at a tiny size: its answers check out, the filter lands in the read,
and the lazy read fetches what the surviving rows need; and its answer check can say no."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pandas as pd

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "pushdown.py"


def load_script():
    spec = importlib.util.spec_from_file_location("pushdown_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_passes_its_answer_check_at_a_tiny_size(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--bytes", "2MiB", "--row-group-rows", "8192",
         "--keys", "1000", "--repeat", "1", "--workers", "2", "--dir", str(tmp_path)],
        check=False, capture_output=True, text=True, timeout=240)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr[-3000:]
    rows = [line for line in out.splitlines()
            if line.startswith(("| lazy |", "| eager |"))]
    assert len(rows) == 4, out
    assert all(row.rstrip().endswith("| ok |") for row in rows), out
    assert "answer checks: all ok" in out
    assert "filter inside the Scan line: yes" in out
    assert out.count("ReadReport of the same read") == 2 and "DIFFERENT" not in out
    assert "(goal <= 1.2x): PASS" in out, out


def test_the_answer_check_finds_a_wrong_answer():
    check = load_script().answer_check
    expected = pd.DataFrame({"ts": [3, 1, 2], "key": [7, 8, 9], "s": ["a", "b", "c"]})
    shuffled = expected.iloc[[2, 0, 1]]
    assert check(shuffled, expected) == "ok"
    assert "rows" in check(expected.iloc[:2], expected)
    changed = expected.assign(s=["a", "b", "x"])
    assert check(changed, expected) != "ok"
    assert "columns" in check(expected[["key", "ts", "s"]], expected)
