"""Hosts for tests across machines, made on one machine: Linux network namespaces, each with its
own address, joined by veth pairs to a bridge in the root namespace, where the client runs.

The subnet is one that no interface or route of the machine already has, and ``ip route get``
must send its addresses to the bridge, so the machine's own network is never a target. Dask's
scheduler and workers run in the namespaces as the plain ``dask`` commands that users start on
their hosts; files are shared (only the network is namespaced), as on a cluster's shared storage.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

CANDIDATE_SUBNETS = ("10.213.47.0/24", "10.231.74.0/24", "172.30.199.0/24", "192.168.251.0/24")
DASK = Path(sys.executable).with_name("dask")


class HostsUnavailable(Exception):
    """Namespaces cannot be made here; the message says why (tests skip with it)."""


def _ip(*args: str, check: bool = True) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode:
        raise HostsUnavailable(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout


def free_subnet() -> ipaddress.IPv4Network:
    """The first candidate /24 that overlaps no address or route of the machine."""
    taken = []
    for line in _ip("-o", "-4", "addr", "show").splitlines():
        taken.append(ipaddress.ip_interface(line.split()[3]).network)
    for line in _ip("-4", "route", "show").splitlines():
        prefix = line.split()[0]
        if prefix != "default":
            taken.append(ipaddress.ip_network(prefix, strict=False))
    for candidate in map(ipaddress.ip_network, CANDIDATE_SUBNETS):
        if not any(candidate.overlaps(net) for net in taken):
            return candidate
    raise HostsUnavailable(f"every candidate subnet {CANDIDATE_SUBNETS} is in use here")


@dataclass
class Hosts:
    """``count`` namespaces ``names[i]`` at ``addresses[i]``, the bridge at ``gateway``."""

    count: int
    logs: Path
    tag: str = field(default_factory=lambda: f"gf{os.getpid() % 100000}")
    names: list[str] = field(default_factory=list)
    addresses: list[str] = field(default_factory=list)
    gateway: str = ""
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"{self.tag}b"

    def __enter__(self) -> Hosts:
        if os.geteuid() != 0:
            raise HostsUnavailable("network namespaces need root")
        if shutil.which("ip") is None:
            raise HostsUnavailable("no `ip` command (iproute2)")
        if not DASK.exists():
            raise HostsUnavailable(f"no dask command beside {sys.executable}")
        subnet = free_subnet()
        hosts = list(subnet.hosts())
        self.gateway = str(hosts[0])
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/{subnet.prefixlen}", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i in range(self.count):
                name, address = f"{self.tag}h{i}", str(hosts[10 + i])
                outside, inside = f"{self.tag}v{i}", f"{self.tag}p{i}"
                _ip("netns", "add", name)
                self.names.append(name)
                _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
                _ip("link", "set", outside, "master", self.bridge, "up")
                _ip("link", "set", inside, "netns", name)
                _ip("-n", name, "addr", "add", f"{address}/{subnet.prefixlen}", "dev", inside)
                _ip("-n", name, "link", "set", inside, "up")
                _ip("-n", name, "link", "set", "lo", "up")
                self.addresses.append(address)
            for address in self.addresses:
                route = _ip("route", "get", address)
                if f"dev {self.bridge}" not in route:
                    raise HostsUnavailable(f"{address} routes elsewhere than the bridge: {route}")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def start(self, host: int, *args: str) -> subprocess.Popen:
        """``dask *args`` on host ``host``, its output in ``logs``; stopped when the hosts go."""
        log = self.logs / f"{self.names[host]}-{len(self.processes)}.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                ["ip", "netns", "exec", self.names[host], str(DASK), *args],
                stdout=out, stderr=subprocess.STDOUT)
        self.processes.append(process)
        return process

    def link(self, host: int, up: bool) -> None:
        """Cut host ``host`` off the bridge, or join it again."""
        _ip("link", "set", f"{self.tag}v{host}", "up" if up else "down")

    def stop_processes(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()

    def __exit__(self, *exc: object) -> None:
        self.stop_processes()
        for name in self.names:
            _ip("netns", "del", name, check=False)
        _ip("link", "del", self.bridge, check=False)


def wait_for_port(address: str, port: int, timeout: float = 30) -> None:
    """Block until ``address:port`` takes connections from this (the root) namespace."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((address, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
