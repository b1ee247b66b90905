"""What a worker, and the client, can hold: memory limits and the disk a worker spills to.

A join sizes its tasks by the smallest worker limit (one task's buckets and output are in
memory at once) and refuses up front an output that every worker's memory and spill disk
together could not hold (:mod:`gpuframe.operators.join_size`); ``to_pandas()`` refuses a frame
larger than the client's free memory before it gathers.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

import dask
import psutil
from distributed import get_worker

SPILL_FRACTIONS = {"distributed.worker.memory.target": (0.6, 0.3),
                   "distributed.worker.memory.spill": (0.7, 0.4)}
"""Where a worker spills its results, as shares of its memory limit: (Dask's default,
gpuframe's). An exchange and a join hold more besides their results (buckets being cut, pieces
arriving, the merge's row indexers) than Dask's defaults leave room for: a join of twice the
workers' memory got a worker killed for memory at Dask's, now and then at 0.4 and 0.5, and
completed at these (benchmarks/results/2026-11-26-out-of-core-cpu.md)."""


@dataclass(frozen=True)
class WorkerMemory:
    """One worker's ``limit``, the bytes one task's data may take (device memory's limit on a
    GPU worker, where it is the lower, else host memory's; None: no limit), and its ``room``,
    the bytes of results it can hold in all: its memory limits plus the free disk of its spill
    directory where it spills (None: unbounded, no host limit)."""

    address: str
    limit: int | None
    room: int | None


def this_worker_memory() -> WorkerMemory | None:
    """On a worker: its memory (None outside a worker)."""
    try:
        worker = get_worker()
    except ValueError:
        return None
    manager = worker.memory_manager
    device = _positive(device_memory_limit(worker.data))
    host = _positive(manager.memory_limit)
    limits = [limit for limit in (device, host) if limit]
    if host is None:
        return WorkerMemory(worker.address, min(limits, default=None), None)
    spills = bool(manager.memory_target_fraction or manager.memory_spill_fraction)
    disk = shutil.disk_usage(worker.local_directory).free if spills else 0
    return WorkerMemory(worker.address, min(limits), sum(limits) + disk)


def spill_settings() -> dict[str, float]:
    """The Dask settings the workers of a cluster gpuframe starts spill by: gpuframe's
    :data:`SPILL_FRACTIONS`, except where the user configured another value than Dask's."""
    return {key: ours for key, (default, ours) in SPILL_FRACTIONS.items()
            if dask.config.get(key) == default}


def device_memory_limit(data: object) -> object:
    """The device memory limit of a dask-cuda worker's store (None on others): its
    DeviceHostFile keeps it as its device buffer's spill threshold (zict's ``n``), its
    ProxifyHostFile (JIT unspilling) in its manager."""
    buffer = getattr(data, "device_buffer", None)
    if buffer is not None and getattr(buffer, "n", None):
        return buffer.n
    manager = getattr(data, "manager", None)
    return getattr(data, "device_memory_limit",
                   getattr(manager, "_device_memory_limit", None))


def _positive(limit: object) -> int | None:
    return int(limit) if isinstance(limit, (int, float)) and limit > 0 else None


def available_here() -> int:
    """Bytes this process (the client) may still take before the host runs out of memory."""
    return int(psutil.virtual_memory().available)
