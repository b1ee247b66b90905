"""The engine: a Dask client bound to one backend, and the cluster it may own.

:func:`gpuframe.start_cluster` and :func:`connect` both return an :class:`Engine` and make it the
current one, which every gpuframe call uses unless given another. The backend is fixed when the
engine is made, so every frame of one engine holds partitions of the same kind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from distributed import Client

from ..backend import Backend, get_backend
from ..config import RuntimeOptions, resolve
from ..diagnostics.attach import attach
from ..errors import BackendError, ClusterError, OptionError
from ..exchange.bucket import wrapped
from ..exchange.mailbox import install
from ..exchange.sealed import seal_transfers
from . import warmup
from .hardware import worker_backend_support
from .memory import WorkerMemory
from .messages import prompt
from .roster import keep_roster
from .thread_streams import settle_thread_streams

if TYPE_CHECKING:
    from distributed.core import PooledRPCCall, rpc
    from distributed.deploy import Cluster
    from distributed.security import Security
    from typing_extensions import Self

logger = logging.getLogger("gpuframe")

_current: Engine | None = None


class Engine:
    """A running gpuframe cluster: its client, its backend, its workers in a fixed order."""

    def __init__(self, client: Client, backend: Backend, cluster: Cluster | None = None,
                 after_close: Callable[[], None] | None = None):
        self.client = client
        self.backend = backend
        self.cluster = cluster
        self.after_close = after_close
        """What to release once the cluster has closed, which its close still needs."""
        try:
            options = resolve(RuntimeOptions)
            interval = options.message_interval
            # Every worker's mailbox, now: registering it waits for every worker, which a first
            # exchange must not do (a silent worker would hold it, unwatched).
            install(client)
            if backend.on_device:
                settle_thread_streams(client)
                if options.sealed_transfers:
                    seal_transfers(client)
        except BaseException:  # an engine that never was leaves no cluster behind
            self.close()
            raise
        try:
            prompt(client, interval)
        except Exception as exc:  # noqa: BLE001 (only the steps between tasks are at stake)
            logger.warning("gpuframe messages left at Dask's intervals: %r", exc)
        self.roster = keep_roster(client)
        """The workers as the scheduler last sent them (None: asked of it each time)."""
        self.streams_events = False
        """Whether the scheduler takes the client's events on the stream of its tasks
        (:data:`~gpuframe.diagnostics.stages.CLIENT_EVENT_OP`), once the diagnostics attach."""
        self.warming: list[str] = []
        """The workers warming up (:mod:`~gpuframe.cluster.warmup`)."""
        self.memory: dict[str, WorkerMemory] = {}
        """Each worker's memory as a join's sample last found it: a later join may size its
        sends by it before its own sample returns."""

    def warm_up(self, asked: bool | None = True) -> None:
        """Start warming every worker in the background (:mod:`~gpuframe.cluster.warmup`)
        where ``asked``, or by default (None) on GPU workers: a warm-up that cannot start is
        logged, and the engine works on without it."""
        if not (asked or (asked is None and self.backend.on_device)):
            return
        workers = self.workers
        wrap = wrapped(self.backend.on_device, self.protocol)
        try:
            self.client.run(warmup.begin, self.backend.name, workers, wrap, workers=workers)
        except Exception as exc:  # noqa: BLE001 (only the first query's speed is at stake)
            logger.warning("gpuframe warm-up not started: %r", exc)
            return
        self.warming = workers

    def warmed(self, timeout: float | None = None) -> dict[str, dict[str, float]]:
        """Wait for the warm-up (at most ``timeout`` seconds); per worker, the seconds each of
        its parts took. A warm-up that failed raises its error here, and nowhere else."""
        warming, self.warming = self.warming, []
        if not warming:
            return {}
        return self.client.run(warmup.result, timeout, workers=warming)

    @property
    def scheduler(self) -> rpc | PooledRPCCall:
        """The client's connection to the scheduler, to call its handlers."""
        scheduler = self.client.scheduler
        if scheduler is None:
            raise ClusterError("the engine's client never connected to a scheduler")
        return scheduler

    @property
    def scheduler_address(self) -> str:
        """The scheduler's address, 'tcp://host:port' or 'ucx://host:port'."""
        return str(self.scheduler.address)

    @property
    def protocol(self) -> str:
        """The comm protocol the workers move data between them over: 'ucx', 'tcp', ... (the
        scheduler's where no worker has joined): the scheduler may listen on another."""
        workers = self.workers
        return (workers[0] if workers else self.scheduler_address).split("://", 1)[0]

    @property
    def workers(self) -> list[str]:
        """Worker addresses ordered by worker name (a GPU cluster names workers by GPU).

        From the :class:`~.roster.Roster` the scheduler keeps sending, else asked of the
        scheduler each time: ``Client.scheduler_info()`` returns a cache that the client's own
        periodic refresh can empty of workers at any moment."""
        names = self.roster.names if self.roster is not None else None
        if names is None:
            info = self.client.sync(self.scheduler.identity, n_workers=-1)["workers"]
            names = {address: info[address].get("name") for address in info}
        return sorted(names, key=lambda address: _natural(str(names[address]), address))

    @property
    def dashboard_link(self) -> str | None:
        return self.client.dashboard_link

    def close(self) -> None:
        """Close the client, and the cluster too when this engine started it."""
        global _current
        try:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()
        finally:
            release, self.after_close = self.after_close, None
            if release is not None:
                release()
        if _current is self:
            _current = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<gpuframe Engine backend={self.backend.name} protocol={self.protocol} "
            f"workers={len(self.workers)} dashboard={self.dashboard_link}>"
        )


def _natural(name: str, address: str) -> tuple:
    return (len(name), name, address) if name.isdigit() else (float("inf"), name, address)


def set_current(engine: Engine) -> Engine:
    global _current
    _current = engine
    return engine


def current_engine(engine: Engine | None = None) -> Engine:
    """``engine`` if given, else the current one; a clear error when there is none."""
    if engine is not None:
        return engine
    if _current is None:
        raise ClusterError(
            "no gpuframe cluster: call gpuframe.start_cluster() or gpuframe.connect() first"
        )
    return _current


def connect(address: str | None = None, *, scheduler_file: str | None = None,
            backend: str | None = None, timeout: float = 30,
            security: Security | None = None, warm_up: bool | None = None) -> Engine:
    """Join a running Dask scheduler (one worker per GPU on each host) and make it current.

    The backend is cudf when every worker has a GPU and cuDF, else pandas; ask for one with
    ``backend=`` and get an error naming the workers that cannot run it. ``security``: Dask's
    TLS settings for a ``tls://`` scheduler (``Security(tls_ca_file=..., tls_client_cert=...,
    tls_client_key=..., require_encryption=True)``; certificates from
    ``deploy/make-certs.sh``); without them the Dask configuration's ``distributed.comm.tls``
    applies. ``warm_up``: warm the workers in the background (:meth:`Engine.warm_up`); None: on
    GPU workers only.
    """
    if (address is None) == (scheduler_file is None):
        raise OptionError("connect() takes exactly one of address= or scheduler_file=")
    target = address or f"scheduler_file={scheduler_file}"
    try:
        client = Client(address, scheduler_file=scheduler_file, timeout=timeout,
                        security=security)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ClusterError(f"cannot reach the Dask scheduler at {target}: {exc}") from exc
    try:
        client.wait_for_workers(1, timeout=timeout)
        support = client.run(worker_backend_support)
        chosen = _backend_for_workers(backend, support)
    except BaseException as exc:
        client.close()
        if isinstance(exc, TimeoutError):
            raise ClusterError(
                f"no worker joined the scheduler at {target} in {timeout} s") from exc
        raise
    logger.info("connected to %s: %d workers, backend %s", target, len(support), chosen.name)
    chosen.import_on_client()
    engine = set_current(Engine(client, chosen))
    engine.streams_events = attach(client)
    engine.warm_up(warm_up)
    return engine


def _backend_for_workers(asked: str | None, support: dict[str, dict[str, bool]]) -> Backend:
    lacking = sorted(w for w, s in support.items() if not (s["gpu"] and s["cudf"]))
    if asked is None:
        return get_backend("pandas" if lacking else "cudf")
    chosen = get_backend(asked)
    if chosen.on_device and lacking:
        raise BackendError(
            "backend='cudf' needs a GPU and cuDF on every worker; these have not: "
            + ", ".join(lacking)
        )
    return chosen
