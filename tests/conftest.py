"""Fixtures shared by the whole suite: one real CPU cluster on loopback per session, the `gpu`
marker's skip rule, reads of a planned dataset, and (tests/served_datasets.py) real files and
servers to read."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from gpuframe.cluster.hardware import has_module, list_gpus

pytest_plugins = ["served_datasets"]

HAS_GPU = bool(list_gpus()) and has_module("cudf") and has_module("dask_cuda")


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with cuDF and dask-cuda")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def two_cpu_workers(protocol: str):
    """A two-worker pandas cluster over ``protocol`` on 127.0.0.1, closed after its user."""
    import gpuframe

    engine = gpuframe.start_cluster(backend="pandas", protocol=protocol, n_workers=2,
                                    dashboard_address="127.0.0.1:0")
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def cpu_engine():
    """A two-worker pandas cluster over TCP, shared by the session."""
    yield from two_cpu_workers("tcp")


@pytest.fixture(scope="module")
def ucx_engine():
    """The same over UCX (distributed-ucxx), for a module's tests."""
    yield from two_cpu_workers("ucx")


@pytest.fixture
def engine(cpu_engine):
    """The session's CPU engine, made current again for the test."""
    from gpuframe.cluster.engine import set_current

    return set_current(cpu_engine)


@pytest.fixture(scope="module")
def gpu_engine():
    """A cluster of cuDF workers over TCP, one per GPU, for a module's GPU tests."""
    import gpuframe

    with gpuframe.start_cluster(backend="cudf", protocol="tcp",
                                dashboard_address="127.0.0.1:0") as engine:
        yield engine


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical hive columns (as pandas reads them) as their categories' dtype; fresh index."""
    frame = frame.reset_index(drop=True)
    for name, dtype in frame.dtypes.items():
        if isinstance(dtype, pd.CategoricalDtype):
            frame[name] = frame[name].astype(dtype.categories.dtype)
    return frame


@pytest.fixture(name="check_same")
def _check_same():
    """Assert that a read's frame holds pandas' rows of the same files."""
    def check_same(ours, expected: pd.DataFrame) -> None:
        pd.testing.assert_frame_equal(_plain(ours.to_pandas()), _plain(expected))

    return check_same


@pytest.fixture
def read_plan():
    """``read_plan(plan, engine)``: a frame of exactly ``plan``'s read (no planning again), to
    read files changed after they were planned."""
    from gpuframe.frame import DistributedFrame
    from gpuframe.operators.scan import read_planned
    from gpuframe.plan.nodes import Persisted
    from gpuframe.runtime.runner import Job

    def read(plan, engine):
        with Job(engine, "read") as job:
            parts, _ = read_planned(job, plan)
            job.wait(parts.futures)
        return DistributedFrame(engine, Persisted(parts))

    return read


_PLAN_AND_SAY = """
import json, sys
from gpuframe.io.planning.plan import plan_fragments
try:
    plan_fragments(sys.argv[1], format=sys.argv[2])
except Exception as exc:
    print(json.dumps([type(exc).__module__, type(exc).__qualname__, str(exc)]))
"""


@pytest.fixture
def plan_bound_by_permissions():
    """``plan(source, format)``: ``plan_fragments`` run in a process that file permissions bind,
    its error raised again here. Tests run as root, whom permissions do not stop: as root the
    process runs without the capabilities that override them (``setpriv``), or the test is
    skipped where they cannot be dropped."""
    command = [sys.executable, "-c", _PLAN_AND_SAY]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv, permissions cannot be enforced")
        command = [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--", *command]

    def plan(source: str, format: str) -> None:
        done = subprocess.run([*command, source, format], capture_output=True, text=True,
                              timeout=60)
        if done.returncode != 0 and done.stderr.startswith("setpriv:"):
            pytest.skip(f"setpriv cannot drop capabilities here: {done.stderr.strip()}")
        assert done.returncode == 0, done.stderr
        if done.stdout.strip():
            module, name, message = json.loads(done.stdout)
            raise getattr(importlib.import_module(module), name)(message)

    return plan

