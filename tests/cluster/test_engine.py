import io
import socket
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from distributed import LocalCluster

import gpuframe
from gpuframe.cluster import engine as engine_module
from gpuframe.cluster.engine import connect, current_engine
from gpuframe.errors import BackendError, ClusterError, OptionError


def test_workers_are_ordered_by_name(cpu_engine):
    info = cpu_engine.client.scheduler_info(n_workers=-1)["workers"]
    assert [info[w]["name"] for w in cpu_engine.workers] == [0, 1]


def test_connect_by_address_joins_the_same_cluster(cpu_engine):
    joined = connect(cpu_engine.client.scheduler.address)
    try:
        assert joined.workers == cpu_engine.workers
        assert joined.backend.name == "pandas"
        assert joined.protocol == "tcp"
        assert current_engine() is joined
        frame = gpuframe.from_pandas(pd.DataFrame({"x": range(10)}))
        assert len(frame) == 10
    finally:
        joined.close()
    assert cpu_engine.cluster.status.name == "running", "a joined engine must not close the cluster"


def test_connect_by_scheduler_file(tmp_path):
    path = tmp_path / "scheduler.json"
    with LocalCluster(n_workers=1, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=":0",
                      scheduler_kwargs={"scheduler_file": str(path)}):
        joined = connect(scheduler_file=str(path))
        try:
            assert len(joined.workers) == 1
        finally:
            joined.close()


def test_connect_asking_for_cudf_names_the_workers_without_gpu(cpu_engine):
    with pytest.raises(BackendError, match="these have not: tcp://127.0.0.1"):
        connect(cpu_engine.client.scheduler.address, backend="cudf")


def test_connect_to_nothing_is_a_clear_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    reach = f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}"
    with pytest.raises(ClusterError, match=reach):
        connect(f"tcp://127.0.0.1:{port}", timeout=2)


def test_connect_needs_exactly_one_target():
    with pytest.raises(OptionError, match="exactly one"):
        connect()
    with pytest.raises(OptionError, match="exactly one"):
        connect("tcp://127.0.0.1:1", scheduler_file="x.json")


def test_no_current_engine_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(engine_module, "_current", None)
    with pytest.raises(ClusterError, match="call gpuframe.start_cluster"):
        gpuframe.from_pandas(pd.DataFrame({"x": [1]}))


CLUSTER_PROCESS = """
import sys, gpuframe
engine = gpuframe.start_cluster(dashboard_address="127.0.0.1:0")
print("SCHEDULER", engine.scheduler_address, flush=True)
sys.stdin.read()
engine.close()
"""


def test_a_client_of_another_process_joins_shuffled_sides(monkeypatch):
    """A cluster that another process started (as on several hosts, where the user's client
    joins a scheduler it did not start), on the GPUs where there are any: a join whose sides
    are both shuffled (none small enough to copy) gives pandas' answer. On one GPU, such a
    client, in a process of its own, saw a shuffle's pack fail (a staged kernel's launch refused:
    worker threads lowered its shared memory under each other; 2026-11-29-s42-gpu-h200.md).
    The address is read from its own line: UCX prints its warnings to the same output."""
    child = subprocess.Popen([sys.executable, "-c", CLUSTER_PROCESS], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        lines = (line.split() for line in child.stdout)
        address = next((words[1] for words in lines if words[:1] == ["SCHEDULER"]), None)
        assert address, "the cluster's process gave no scheduler address"
        monkeypatch.setenv("GPUFRAME_BROADCAST_BYTES", "1")
        rng = np.random.default_rng(3)
        left = pd.DataFrame({"k": rng.integers(0, 20_000, 200_000), "a": rng.random(200_000)})
        right = pd.DataFrame({"k": np.arange(20_000), "b": rng.random(20_000)})
        with connect(address, timeout=120):
            joined = gpuframe.from_pandas(left).merge(gpuframe.from_pandas(right), on="k")
            got = joined.to_pandas()
            plan = io.StringIO()
            joined.explain(file=plan)
            assert "| shuffle:" in plan.getvalue()
        expected = left.merge(right, on="k")
        pd.testing.assert_frame_equal(
            got.sort_values(["k", "a"]).reset_index(drop=True),
            expected.sort_values(["k", "a"]).reset_index(drop=True))
    finally:
        child.stdin.close()
        child.wait(timeout=120)
