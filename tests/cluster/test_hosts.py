"""The demo job across hosts: a scheduler on one network-namespace host, a worker on each of two
others, the client in the root namespace (tests/cluster/netns_hosts.py), over TCP and over TLS
with certificates from deploy/make-certs.sh. Skips, saying why, where namespaces cannot be made
(not root, no iproute2)."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from distributed.security import Security
from netns_hosts import Hosts, HostsUnavailable, wait_for_port

import gpuframe
from gpuframe.cluster.engine import connect
from gpuframe.errors import ClusterError, WorkerLostError

ROOT = Path(__file__).resolve().parents[2]
PORT = 8786


def _hosts(tmp_path_factory, count: int = 3) -> Hosts:
    try:
        return Hosts(count, tmp_path_factory.mktemp("host-logs")).__enter__()
    except HostsUnavailable as exc:
        pytest.skip(f"no network-namespace hosts here: {exc}")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """Two sets: the cluster's, and another CA's (a stranger's)."""
    sets = {}
    for name in ("cluster", "stranger"):
        folder = tmp_path_factory.mktemp(f"certs-{name}")
        subprocess.run(["bash", str(ROOT / "deploy" / "make-certs.sh"), str(folder)], check=True,
                       capture_output=True)
        sets[name] = folder
    return sets


def _tls_args(folder: Path) -> list[str]:
    return ["--tls-ca-file", str(folder / "ca.pem"), "--tls-cert", str(folder / "cert.pem"),
            "--tls-key", str(folder / "key.pem")]


def _security(folder: Path) -> Security:
    return Security(tls_ca_file=str(folder / "ca.pem"), tls_client_cert=str(folder / "cert.pem"),
                    tls_client_key=str(folder / "key.pem"), require_encryption=True)


@dataclass
class Cluster:
    protocol: str
    address: str
    hosts: Hosts
    security: Security | None  # what a client of the cluster presents


@pytest.fixture(scope="module", params=["tcp", "tls"])
def cluster(request, tmp_path_factory, certificates):
    """The scheduler on host 0, a worker on each of hosts 1 and 2."""
    protocol = request.param
    hosts = _hosts(tmp_path_factory)
    try:
        tls = _tls_args(certificates["cluster"]) if protocol == "tls" else []
        address = f"{protocol}://{hosts.addresses[0]}:{PORT}"
        hosts.start(0, "scheduler", "--host", hosts.addresses[0], "--port", str(PORT),
                    "--protocol", protocol, "--no-dashboard", *tls)
        wait_for_port(hosts.addresses[0], PORT)
        for host in (1, 2):
            hosts.start(host, "worker", address, "--host", hosts.addresses[host],
                        "--nthreads", "1", "--no-dashboard", "--name", f"w{host}", *tls)
        security = _security(certificates["cluster"]) if protocol == "tls" else None
        yield Cluster(protocol, address, hosts, security)
    finally:
        hosts.__exit__(None, None, None)


def _demo_tables(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Orders and customers as Parquet files in ``folder``, which every host sees."""
    rng = np.random.default_rng(5)
    orders = pd.DataFrame({"customer": rng.integers(0, 500, 20_000),
                           "amount": rng.random(20_000).round(3)})
    customers = pd.DataFrame({"customer": np.arange(500),
                              "segment": rng.choice(["retail", "online", "partner"], 500)})
    (folder / "orders").mkdir()
    (folder / "customers").mkdir()
    for i in range(4):
        orders[i::4].to_parquet(folder / "orders" / f"part-{i}.parquet")
    customers.to_parquet(folder / "customers" / "part-0.parquet")
    return orders, customers


def test_the_demo_job_runs_across_hosts(cluster, tmp_path):
    engine = connect(cluster.address, security=cluster.security, timeout=60)
    try:
        engine.client.wait_for_workers(2, timeout=60)
        assert sorted(w.split("://")[1].rsplit(":", 1)[0] for w in engine.workers) == \
            cluster.hosts.addresses[1:]
        assert all(w.startswith(f"{cluster.protocol}://") for w in engine.workers)
        orders, customers = _demo_tables(tmp_path)
        joined = gpuframe.merge(gpuframe.read_parquet(str(tmp_path / "orders")),
                                gpuframe.read_parquet(str(tmp_path / "customers")),
                                on="customer", broadcast_bytes=0)
        got = joined[joined.amount > 0.5].to_pandas()
        expected = orders.merge(customers, on="customer")
        expected = expected[expected.amount > 0.5]
        columns = list(expected.columns)
        pd.testing.assert_frame_equal(
            got[columns].sort_values(columns).reset_index(drop=True),
            expected.sort_values(columns).reset_index(drop=True), check_dtype=False)
    finally:
        engine.close()


@pytest.mark.parametrize("cluster", ["tls"], indirect=True)
def test_a_client_without_the_clusters_certificate_is_refused(cluster, certificates):
    with pytest.raises(ClusterError):
        connect(cluster.address, security=_security(certificates["stranger"]), timeout=5)
    with pytest.raises(ClusterError):  # no certificate at all, in plain TCP
        connect(cluster.address.replace("tls://", "tcp://"), timeout=5)


@pytest.mark.parametrize("cluster", ["tcp"], indirect=True)
@pytest.mark.timeout(120)
def test_a_worker_host_cut_off_fails_the_join_naming_it(cluster, tmp_path, monkeypatch):
    """The link of a worker host that holds half of the join's inputs goes down: the join ends
    in an error naming that worker within the allowed silence, not in a hang."""
    monkeypatch.setenv("GPUFRAME_WORKER_SILENCE", "5")
    engine = connect(cluster.address, timeout=60)
    try:
        engine.client.wait_for_workers(2, timeout=60)
        _demo_tables(tmp_path)
        orders = gpuframe.read_parquet(str(tmp_path / "orders")).persist()
        customers = gpuframe.read_parquet(str(tmp_path / "customers")).persist()
        cut = next(w for w in orders.owners if cluster.hosts.addresses[2] in w)
        cluster.hosts.link(2, up=False)
        try:
            started = time.monotonic()
            with pytest.raises(WorkerLostError, match="not been heard from|unheard") as raised:
                gpuframe.merge(orders, customers, on="customer", broadcast_bytes=0).to_pandas()
            assert cut in str(raised.value)
            assert time.monotonic() - started < 45
        finally:
            cluster.hosts.link(2, up=True)
    finally:
        engine.close()
