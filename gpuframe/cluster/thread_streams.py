"""Where asked, each thread of a GPU worker runs its cuDF work on a CUDA stream of its own, and
every task ends once that stream has done its work.

With one thread a worker (the default), every kernel goes on the device's legacy default stream,
in one line. With more, tasks could overlap on the GPU, which pylibcudf allows where
``CUDF_PER_THREAD_STREAM=1`` is set as it is imported: each thread's cuDF work then goes on its
own per-thread default stream. That stream's work is ordered with its thread's and with the
legacy stream's (CuPy's, the core's, UCX's), never with another thread's. So a worker whose
cuDF runs so gets an executor (:class:`SettlingThreadPoolExecutor`) whose threads synchronize
their stream after each task: whatever reads a task's output afterwards (a task on another
thread, a transfer to a peer, a spill) finds it complete.

Off unless ``thread_streams`` asks (:class:`~gpuframe.config.ClusterOptions`), until measured on
GPUs: what a worker receives is rebuilt on its event loop's thread, on that thread's stream (over
TCP, cuDF copies the frames to the device there), which no task's settling covers.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from distributed.diagnostics.plugin import WorkerPlugin
from distributed.threadpoolexecutor import ThreadPoolExecutor

from .hardware import worker_backend_support

if TYPE_CHECKING:
    from collections.abc import Callable

    from distributed import Client, Worker

ENVIRONMENT = "CUDF_PER_THREAD_STREAM"
"""pylibcudf's switch: "1" as it is imported puts each thread's cuDF work on its own stream."""
PLUGIN_NAME = "gpuframe-thread-streams"


def per_thread_streams() -> bool:
    """Whether this process's cuDF runs each thread's work on its own stream."""
    return os.environ.get(ENVIRONMENT) == "1"


def runs_cudf() -> bool:
    """Whether this process runs cuDF on a GPU (a CPU worker has no stream to settle, whatever
    packages it has)."""
    return all(worker_backend_support().values())


def synchronize_thread_stream() -> None:
    """Wait for the calling thread's per-thread default stream."""
    from rmm.pylibrmm.stream import PER_THREAD_DEFAULT_STREAM

    PER_THREAD_DEFAULT_STREAM.synchronize()


class SettlingThreadPoolExecutor(ThreadPoolExecutor):
    """Dask's executor of a worker's tasks, whose threads synchronize their stream after each
    task (``settle``). Dask runs a task in an executor whose type's name holds
    ``ThreadPoolExecutor`` as it runs its own (contextvars and thread states kept)."""

    def __init__(self, threads: int, settle: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(threads, **kwargs)
        self.settle = settle

    # (Dask's executor and concurrent.futures' Executor type submit differently)
    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return super().submit(_settled, self.settle, fn, *args, **kwargs)


def _settled(settle: Callable[[], None], fn: Callable[..., Any], *args: Any,
             **kwargs: Any) -> Any:
    result = fn(*args, **kwargs)
    settle()
    return result


class ThreadStreams(WorkerPlugin):
    """Gives a worker of several threads whose cuDF runs each thread's work on its own stream
    a :class:`SettlingThreadPoolExecutor` for its tasks, before any task of the engine runs;
    other workers keep Dask's. ``settle``: what each thread does after each task;
    ``on_device``: whether the worker runs cuDF."""

    idempotent = True

    def __init__(self, settle: Callable[[], None] = synchronize_thread_stream,
                 on_device: Callable[[], bool] = runs_cudf) -> None:
        self.settle = settle
        self.on_device = on_device

    def setup(self, worker: Worker) -> None:
        threads = worker.state.nthreads
        if threads < 2 or not per_thread_streams() or not self.on_device():
            return
        default = worker.executors["default"]
        if type(default) is not ThreadPoolExecutor:  # settled already, or not Dask's own
            return
        worker.executors["default"] = SettlingThreadPoolExecutor(
            threads, self.settle, thread_name_prefix="Dask-Default-Threads")
        default.shutdown(wait=False)  # a task already running on it finishes there


def settle_thread_streams(client: Client) -> None:
    """Every worker's tasks, now and as workers join, settled where their threads run cuDF on
    streams of their own (:class:`ThreadStreams`)."""
    client.register_plugin(ThreadStreams(), name=PLUGIN_NAME)
