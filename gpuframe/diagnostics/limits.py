"""Hardware limits measured on each worker when the cluster starts (the worker side).

The dashboard and reports set every achieved rate next to what the hardware can do, so a user
sees at once whether a stage runs at disk, copy or link speed. The measurement is short (well
under a second): a host memory copy and a read of a freshly written file with its pages evicted
from the page cache; on a GPU also a device-to-device copy, a host-to-device copy from pinned
memory and a peer copy to the next visible GPU (CuPy). A limit that cannot be measured here is
None, shown as "n/a", with the reason in ``notes``.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .summary import LimitName, WorkerLimits

if TYPE_CHECKING:
    from distributed import Worker

HOST_BYTES = 32 * 2**20
DISK_BYTES = 16 * 2**20
GPU_BYTES = 256 * 2**20

GB = 1e9
GPU_LIMITS: tuple[LimitName, ...] = ("device_copy", "peer_copy", "host_device")

LIMIT_NAMES: dict[LimitName, str] = {
    "memcpy": "memcpy",
    "disk_read": "disk read",
    "device_copy": "device copy",
    "peer_copy": "peer copy",
    "host_device": "host-device copy",
}


@dataclass(frozen=True)
class HardwareLimits:
    """Bytes per second each path sustains on one worker; None where it cannot be measured."""

    memcpy: float | None = None
    disk_read: float | None = None
    device_copy: float | None = None
    peer_copy: float | None = None
    host_device: float | None = None
    notes: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> WorkerLimits:
        return WorkerLimits(memcpy=self.memcpy, disk_read=self.disk_read,
                            device_copy=self.device_copy, peer_copy=self.peer_copy,
                            host_device=self.host_device, notes=dict(self.notes))


def rate_text(value: float | None) -> str:
    """A rate for people: '<rate, two decimals> GB/s', or 'n/a' where it could not be measured."""
    return "n/a" if value is None else f"{value / GB:.2f} GB/s"


def measure_limits(directory: str | None = None) -> HardwareLimits:
    """Measure this process's paths; ``directory`` is where the disk is read (the worker's
    scratch space by default, else the temp directory)."""
    notes: dict[str, str] = {}
    values: dict[str, float | None] = {"memcpy": _memcpy_rate(HOST_BYTES)}
    try:
        values["disk_read"], where = _disk_read_rate(directory, DISK_BYTES)
        notes["disk_read"] = where
    except OSError as exc:
        values["disk_read"] = None
        notes["disk_read"] = f"cannot measure: {exc}"
    try:
        gpu, why = _gpu_rates(GPU_BYTES)
    except Exception as exc:  # noqa: BLE001 (a GPU failing the probe must not stop the cluster)
        gpu, why = {}, dict.fromkeys(GPU_LIMITS, f"cannot measure: {exc!r}")
    values.update(gpu)
    notes.update(why)
    return HardwareLimits(**values, notes=notes)


def calibrate_worker(dask_worker: Worker) -> WorkerLimits:
    """Run by ``Client.run`` on each worker: its limits, measured in its local directory."""
    return measure_limits(dask_worker.local_directory).as_dict()


def _memcpy_rate(size: int, repeats: int = 3) -> float:
    source = np.ones(size, dtype=np.uint8)
    target = np.empty_like(source)
    np.copyto(target, source)  # first touch pages outside the timing
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - start)
    return size / best


def _disk_read_rate(directory: str | None, size: int) -> tuple[float, str]:
    """Write, flush and evict a file, then time reading it back: the disk, not the page cache
    (on tmpfs there is no disk, and the figure is memory speed; the note names the directory)."""
    fd, path = tempfile.mkstemp(prefix="gpuframe-calibrate-", dir=directory)
    try:
        os.write(fd, np.arange(size, dtype=np.uint8).tobytes())
        os.fsync(fd)
        evicted = hasattr(os, "posix_fadvise")
        if evicted:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        buffer = bytearray(4 * 2**20)
        view = memoryview(buffer)
        start = time.perf_counter()
        with open(path, "rb", buffering=0) as handle:
            while handle.readinto(view):
                pass
        seconds = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    where = os.path.dirname(path) + ("" if evicted else " (page cache not evicted)")
    return size / seconds, where


def _gpu_rates(size: int) -> tuple[dict[str, float], dict[str, str]]:
    """Device, host-device and peer copy rates of this process's first visible GPU."""
    names = GPU_LIMITS
    try:
        import cupy as cp
    except ImportError:
        return {}, dict.fromkeys(names, "no GPU (CuPy not installed)")
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 (no driver or no device: the GPU limits are n/a)
        return {}, dict.fromkeys(names, f"no GPU ({exc})")
    if count == 0:
        return {}, dict.fromkeys(names, "no GPU")
    try:
        with cp.cuda.Device(0):
            return _copy_rates(cp, size, count)
    finally:  # give the probe's buffers back: the worker's memory belongs to its data
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()


def _copy_rates(cp: Any, size: int, count: int) -> tuple[dict[str, float], dict[str, str]]:
    """The copies :func:`_gpu_rates` times, from the current device; the buffers are this
    call's own, so they are free to give back once it returns."""
    runtime = cp.cuda.runtime
    rates: dict[str, float] = {}
    why: dict[str, str] = {}
    stream = cp.cuda.Stream(non_blocking=True)
    source = cp.empty(size, dtype=cp.uint8)
    target = cp.empty(size, dtype=cp.uint8)
    rates["device_copy"] = _timed_copy(cp, stream, size, lambda: runtime.memcpyAsync(
        target.data.ptr, source.data.ptr, size, runtime.memcpyDeviceToDevice, stream.ptr))
    pinned = cp.cuda.alloc_pinned_memory(size)
    rates["host_device"] = _timed_copy(cp, stream, size, lambda: runtime.memcpyAsync(
        target.data.ptr, pinned.ptr, size, runtime.memcpyHostToDevice, stream.ptr))
    if count > 1:
        enable_peer_access(cp, 0, 1)
        with cp.cuda.Device(1):
            peer = cp.empty(size, dtype=cp.uint8)
        rates["peer_copy"] = _timed_copy(cp, stream, size, lambda: runtime.memcpyPeerAsync(
            peer.data.ptr, 1, source.data.ptr, 0, size, stream.ptr))
    else:
        why["peer_copy"] = "one GPU visible to the worker"
    return rates, why


def enable_peer_access(cp: Any, a: int, b: int) -> bool:
    """Let devices ``a`` and ``b`` reach each other's memory, as UCX does for a transfer; without
    it cudaMemcpyPeer stages through the host, a fraction of the link's rate
    (benchmarks/results/2026-11-25-figures-from-diagnostics-comments.md). False where the
    devices cannot (no NVLink or P2P over PCIe)."""
    runtime = cp.cuda.runtime
    if not (runtime.deviceCanAccessPeer(a, b) and runtime.deviceCanAccessPeer(b, a)):
        return False
    for here, there in ((a, b), (b, a)):
        with cp.cuda.Device(here):
            try:
                runtime.deviceEnablePeerAccess(there)
            except runtime.CUDARuntimeError as exc:  # enabled before, by us or by UCX
                if "PeerAccessAlreadyEnabled" not in str(exc):
                    raise
    return True


def _timed_copy(cp: Any, stream: Any, size: int, copy: Any, repeats: int = 5) -> float:
    copy()  # warm up outside the timing
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record(stream)
    for _ in range(repeats):
        copy()
    stop.record(stream)
    stop.synchronize()
    return size * repeats / (cp.cuda.get_elapsed_time(start, stop) / 1000)
