"""Bring up a cluster on this host: one worker per GPU, or a CPU cluster where there is none.

GPUs get dask-cuda's LocalCUDACluster (one process per GPU, an RMM pool, spilling to host);
without GPUs, or when asked for the pandas backend, a distributed LocalCluster does the same job on
the CPU. Options come from :class:`gpuframe.config.ClusterOptions`.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import sys
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import dask
from dask.utils import parse_bytes
from distributed import Client, LocalCluster

from ..backend import Backend, get_backend
from ..config import ClusterOptions, resolve
from ..diagnostics.attach import attach
from ..errors import BackendError, ClusterError, OptionError, ProtocolError
from ..units import byte_text
from . import thread_streams
from .engine import Engine, set_current
from .hardware import Gpu, has_module, list_gpus, ucx_available
from .memory import spill_settings

logger = logging.getLogger("gpuframe")

PROTOCOLS = ("ucx", "tcp")
GPU_THREADS_PER_WORKER = 4
"""Threads of a GPU worker unless the options say: its reads, each decoded on its thread's
stream, overlap on the GPU, and the TPC-H queries take less time than on one thread
(benchmarks/results/2026-11-28-s34-gpus-h100x2.md)."""

LOOP_THREAD_NAME = "IO loop"
"""The name of the thread in which a Dask loop runner runs its event loop
(``distributed.utils.LoopRunner``)."""

UCX_ENVIRONMENT = {"UCXPY_PROGRESS_MODE": "thread", "UCXPY_ENABLE_PYTHON_FUTURE": "1"}
"""How UCX-Py progresses in gpuframe's processes over UCX, where the user's environment sets
neither. distributed-ucxx's default, ``blocking`` without Python futures, has each awaited UCX
request poll by yielding to the event loop again and again, so every open connection keeps its
process's event loop busy: the client's planning and the workers' tasks then wait for the GIL. A
progress thread that completes Python futures leaves the loop idle until a message comes
(benchmarks/results/2026-11-26-s20-gpus-h100x2.md)."""


class CpuFallbackWarning(UserWarning):
    """No usable GPU, so the cluster runs on the CPU with the pandas backend."""


def start_cluster(**options: Any) -> Engine:
    """Start a local cluster, make it the current engine, and return it.

    Keyword arguments are the fields of :class:`~gpuframe.config.ClusterOptions` (backend,
    protocol, n_workers, devices, rmm_pool_size, ...). Use the engine as a context manager or call
    ``close()`` to stop the cluster.
    """
    opts = resolve(ClusterOptions, options)
    cluster, backend, scheduler_protocol = start_dask_cluster(opts)
    release = hold_ucx_progress(cluster) if scheduler_protocol == "ucx" else None
    try:
        client = Client(cluster)
    except BaseException:
        try:
            cluster.close()
        finally:
            if release is not None:
                release()
        raise
    engine = set_current(Engine(client, backend, cluster, after_close=release))
    engine.streams_events = attach(client)
    engine.warm_up(opts.warm_up)
    logger.info("started %r", engine)
    return engine


def start_dask_cluster(opts: ClusterOptions) -> tuple[LocalCluster, Backend, str]:
    """The Dask cluster :func:`start_cluster` runs on, with its backend and the scheduler's
    protocol: dask-cuda's on GPUs, else a CPU ``LocalCluster``, with gpuframe's worker options
    and nothing of gpuframe's own on it yet (``benchmarks/cold_start.py`` times it alone)."""
    gpus = list_gpus()
    backend = choose_backend(opts.backend, gpus)
    protocol = choose_protocol(opts.protocol, backend)
    scheduler_protocol = (protocol if opts.scheduler_protocol is None
                          else choose_protocol(opts.scheduler_protocol, backend))
    if opts.n_workers is not None and opts.n_workers < 1:
        raise OptionError(f"n_workers={opts.n_workers}: a cluster needs at least one worker")
    if opts.threads_per_worker is not None and opts.threads_per_worker < 1:
        raise OptionError(f"threads_per_worker={opts.threads_per_worker} must be at least 1")
    if backend.on_device:
        return _start_gpu_cluster(opts, gpus, protocol, scheduler_protocol), backend, \
            scheduler_protocol
    return _start_cpu_cluster(opts, protocol, scheduler_protocol), backend, scheduler_protocol


def choose_backend(asked: str | None, gpus: list[Gpu]) -> Backend:
    """cudf where GPUs, cuDF and dask-cuda are all here; pandas otherwise, saying why."""
    missing = [m for m in ("cudf", "dask_cuda") if not has_module(m)]
    reason = None
    if not gpus:
        reason = "no NVIDIA GPU found"
    elif missing:
        reason = (f"GPUs found but {' and '.join(missing)} not installed "
                  "(pip install gpuframe[cu13])")
    if asked is None:
        if reason is None:
            return get_backend("cudf")
        warnings.warn(
            f"{reason}: starting a CPU LocalCluster with the pandas backend",
            CpuFallbackWarning,
            stacklevel=3,
        )
        return get_backend("pandas")
    chosen = get_backend(asked)
    if chosen.on_device and reason is not None:
        raise BackendError(f"backend='cudf' cannot run here: {reason}")
    return chosen


def choose_protocol(asked: str | None, backend: Backend) -> str:
    """UCX for GPU workers when distributed-ucxx is installed, else TCP; an explicit choice is
    checked. CPU workers get TCP unless asked: UCX moves device buffers over NVLink, and a CPU
    join ran slower over it (benchmarks/results/2026-11-25-figures-from-diagnostics-comments.md).
    """
    if asked is None:
        return "ucx" if backend.on_device and ucx_available() else "tcp"
    if asked not in PROTOCOLS:
        raise ProtocolError(f"unknown protocol {asked!r}: choose one of {', '.join(PROTOCOLS)}")
    if asked == "ucx" and not ucx_available():
        raise ProtocolError(
            "protocol='ucx' needs distributed-ucxx, which is not installed here "
            "(pip install gpuframe[cu13]); use protocol='tcp' instead"
        )
    return asked


def parse_devices(devices: str | None, gpus: list[Gpu]) -> list[int]:
    """GPU indices from a CUDA_VISIBLE_DEVICES-style string, checked against this host."""
    if devices is None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if not visible:
            return [g.index for g in gpus]
        devices = visible
    try:
        indices = [int(part) for part in str(devices).split(",") if part.strip()]
    except ValueError:
        raise OptionError(f"devices={devices!r}: give GPU indices such as '0,1'") from None
    absent = [i for i in indices if not 0 <= i < len(gpus)]
    if absent or not indices:
        raise ClusterError(
            f"devices={devices!r} names GPU(s) {absent or 'none'}, but this host has "
            f"{len(gpus)} GPU(s): 0-{len(gpus) - 1}"
        )
    return indices


def check_shared_gpus(devices: list[int], gpus: list[Gpu],
                      rmm_pool_size: float | str | None) -> None:
    """A GPU named more than once in ``devices`` gets a worker each time, and each worker's RMM
    pool of ``rmm_pool_size`` (a fraction of the GPU's memory, or bytes) comes out of the same
    memory: where they cannot all fit, a :class:`ClusterError` that says so before any worker
    starts (rather than an RMM failure in the last worker to start)."""
    if rmm_pool_size is None:
        return
    memory = {gpu.index: gpu.memory_bytes for gpu in gpus}
    for index, workers in Counter(devices).items():
        if workers < 2:
            continue
        each = rmm_pool_size * memory[index] if isinstance(rmm_pool_size, float) \
            else parse_bytes(rmm_pool_size)
        if workers * each > memory[index]:
            raise ClusterError(
                f"devices={','.join(map(str, devices))} puts {workers} workers on GPU {index}, "
                f"whose RMM pools of rmm_pool_size={rmm_pool_size!r} each take "
                f"{byte_text(workers * each)} of its {byte_text(memory[index])}: give "
                f"rmm_pool_size at most {1 / workers:.2f} (or None)")


def _start_gpu_cluster(opts: ClusterOptions, gpus: list[Gpu], protocol: str,
                       scheduler_protocol: str) -> LocalCluster:
    devices = parse_devices(opts.devices, gpus)
    n_workers = opts.n_workers or len(devices)
    if n_workers > len(devices):
        raise ClusterError(
            f"n_workers={n_workers} asks for more GPU workers than the {len(devices)} GPU(s) "
            f"available ({','.join(map(str, devices))}); one worker drives one GPU"
        )
    devices = devices[:n_workers]
    check_shared_gpus(devices, gpus, opts.rmm_pool_size)
    # Imported before cuDF's import starts on a thread of its own (below): this thread then
    # imports nothing while that one runs.
    import dask_cuda  # noqa: F401

    # As LocalCUDACluster sets it, but before the client's cuDF import starts below: cuDF then
    # initializes no CUDA context in this process. This thread has finished its imports, and
    # holds no module's lock while the import runs beside the workers' start.
    os.environ["RAPIDS_NO_INITIALIZE"] = "True"
    # the worker processes take the config they start in
    with dask.config.set(spill_settings()), ucx_environment(protocol, scheduler_protocol) as env:
        # Started once the environment is set, and waited for before it is given back:
        # setting or removing a variable while another thread's C code reads the environment
        # (as cuDF's libraries do as they load) is not thread-safe in glibc.
        importing = get_backend("cudf").import_on_client()
        if opts.thread_streams:  # pylibcudf reads it as the worker imports cuDF (pre_import)
            env = {**env, thread_streams.ENVIRONMENT: "1"}
        try:
            return cuda_cluster(
                devices,
                threads_per_worker=opts.threads_per_worker or GPU_THREADS_PER_WORKER,
                protocol=protocol,
                rmm_pool_size=opts.rmm_pool_size,
                device_memory_limit=opts.device_memory_limit,
                memory_limit=opts.memory_limit,
                dashboard_address=opts.dashboard_address,
                local_directory=opts.local_directory,
                pre_import=["cudf"],
                env=env,
                scheduler_kwargs={"protocol": scheduler_protocol},
            )
        finally:
            if importing is not None:
                importing.join()


def cuda_cluster(devices: Sequence[Any], **options: Any) -> LocalCluster:
    """dask-cuda's ``LocalCUDACluster`` (with ``options``) of a worker for each entry of
    ``devices``. dask-cuda names each worker by its GPU, so it starts one worker a GPU: each
    further time ``devices`` names a GPU, a worker as its first (the same GPU, RMM pool and
    spill settings) under a name of its own."""
    from dask_cuda import LocalCUDACluster

    gpus_once = list(dict.fromkeys(devices))
    cluster = LocalCUDACluster(CUDA_VISIBLE_DEVICES=gpus_once, n_workers=len(gpus_once),
                               **options)
    further = {f"{device}-{again}": copy.deepcopy(cluster.worker_spec[device])
               for device, workers in Counter(devices).items() for again in range(1, workers)}
    if further:
        try:
            cluster.worker_spec.update(further)
            cluster.sync(cluster._correct_state)  # started as dask-cuda starts its own
        except BaseException:
            cluster.close()
            raise
    return cluster


def _start_cpu_cluster(opts: ClusterOptions, protocol: str,
                       scheduler_protocol: str) -> LocalCluster:
    with dask.config.set(spill_settings()), ucx_environment(protocol, scheduler_protocol) as env:
        return LocalCluster(
            n_workers=opts.n_workers or os.cpu_count() or 1,
            threads_per_worker=opts.threads_per_worker or 1,
            processes=True,
            protocol=protocol,
            host="127.0.0.1",
            memory_limit=opts.memory_limit,
            dashboard_address=opts.dashboard_address,
            local_directory=opts.local_directory,
            env=env,
            scheduler_kwargs={"protocol": scheduler_protocol},
        )


@contextmanager
def ucx_environment(*protocols: str) -> Iterator[dict[str, str]]:
    """While a cluster starts whose ``protocols`` (the workers', the scheduler's) include UCX:
    :data:`UCX_ENVIRONMENT`, unless the environment sets any of it (the user chose), set in
    this process (UCX-Py reads it once, when the scheduler's first connection starts it here)
    and given back for the nannies to set in every worker process they start, restarts
    included; nothing for TCP alone."""
    ucx = "ucx" in protocols
    if ucx:
        stop_stale_ucx_notifier()
    chosen = any(name in os.environ for name in UCX_ENVIRONMENT)
    env = dict(UCX_ENVIRONMENT) if ucx and not chosen else {}
    os.environ.update(env)
    try:
        yield env
    finally:
        for name in env:
            os.environ.pop(name, None)


def hold_ucx_progress(cluster: LocalCluster) -> Callable[[], None]:
    """Keep this process's UCX-Py notifier thread running until the returned release is called,
    after ``cluster`` (its scheduler listening on UCX here) has closed.

    distributed-ucxx stops that thread as its last connection here aborts. The cluster's close
    aborts its watch on the scheduler while a read is pending, and that read's future, which
    only the thread completes, then never does: the close waits forever."""
    from distributed_ucxx.ucxx import _deregister_dask_resource, _register_dask_resource

    async def register() -> int:  # on the cluster's loop, where the thread completes futures
        return _register_dask_resource()

    resource = cluster.sync(register)
    return lambda: _deregister_dask_resource(resource)


def stop_stale_ucx_notifier() -> None:
    """Stop this process's UCX-Py notifier thread where the event loop it completes futures on
    no longer runs, or its Dask loop runner has stopped it, or the thread has died.

    UCX-Py binds that thread to the loop that ran its first connection, and distributed-ucxx stops
    it only once its last connection is gone. One left from a closed cluster (a connection not yet
    collected) hands the next cluster's UCX requests futures of the dead loop, and that cluster
    fails to start ("attached to a different loop"). Stopped, the next connection starts a thread
    on its own loop."""
    context = getattr(sys.modules.get("ucxx.core"), "_ctx", None)
    thread = getattr(context, "notifier_thread", None)
    if context is None or thread is None:
        return
    loop = getattr(thread, "_args", (None,))[0]  # a thread's arguments go once it has ended
    if thread.is_alive() and isinstance(loop, asyncio.AbstractEventLoop) and loop.is_running() \
            and not _stopped_by_its_runner(loop):
        return
    context.stop_notifier_thread()
    context.worker.clear_python_futures_pool()  # what a thread that died left made on its loop
    logger.info("stopped a UCX-Py notifier thread left on an event loop that has stopped")


def _stopped_by_its_runner(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` runs in the thread of a Dask loop runner that has stopped it: a closed
    cluster's loop still shutting down. Its runner waits 10 s for that and then lets the next
    cluster start, the loop still running, on a loaded machine."""
    from distributed.utils import LoopRunner

    running = list(LoopRunner._all_loops)
    if any(getattr(io_loop, "asyncio_loop", None) is loop for io_loop in running):
        return False
    ident = getattr(loop, "_thread_id", None)  # set while the loop runs
    return any(thread.ident == ident and thread.name == LOOP_THREAD_NAME
               for thread in threading.enumerate())
