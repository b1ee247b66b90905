"""deploy/start-cluster.sh's scheduler: on loopback unless told where to listen, saying so, and
refusing TLS without certificates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "start-cluster.sh"


def _start(tmp_path: Path, *args: str, **env: str) -> subprocess.Popen:
    stand_in = tmp_path / "bin" / "dask"  # the real dask on a free port
    stand_in.parent.mkdir(exist_ok=True)
    stand_in.write_text(f'#!/usr/bin/env bash\nexec {Path(sys.executable).with_name("dask")} '
                        '"$@" --port 0\n')
    stand_in.chmod(0o755)
    return subprocess.Popen(
        ["bash", str(SCRIPT), *args], stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PATH": f"{stand_in.parent}:{os.environ['PATH']}",
             "DASHBOARD_ADDRESS": "127.0.0.1:0", **env})


def _address(process: subprocess.Popen, file: Path) -> str:
    deadline = time.monotonic() + 60
    while not (file.exists() and file.stat().st_size):
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "no scheduler file in 60 s"
        time.sleep(0.2)
    return json.loads(file.read_text())["address"]


@pytest.mark.timeout(90)
def test_the_scheduler_listens_on_loopback_unless_told_and_says_so(tmp_path):
    file = tmp_path / "scheduler.json"
    process = _start(tmp_path, "scheduler", str(file), "tcp")
    try:
        assert _address(process, file).startswith("tcp://127.0.0.1:")
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    assert "loopback only" in err and "GPUFRAME_SCHEDULER_HOST" in err


@pytest.mark.timeout(90)
def test_a_scheduler_told_where_to_listen_warns_it_is_unencrypted(tmp_path):
    file = tmp_path / "scheduler.json"
    process = _start(tmp_path, "scheduler", str(file), "tcp", GPUFRAME_SCHEDULER_HOST="127.0.0.2")
    try:
        assert _address(process, file).startswith("tcp://127.0.0.2:")
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    assert "unencrypted and unauthenticated" in err


def test_tls_without_certificates_is_refused(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT), "scheduler", str(tmp_path / "s.json"), "tls"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "GPUFRAME_TLS_DIR" in done.stderr
