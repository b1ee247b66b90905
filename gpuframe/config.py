"""Engine options: typed objects whose defaults live here and nowhere else.

Each options class is resolved in three layers, later ones winning: the defaults below, then
``GPUFRAME_<NAME>`` environment variables (so a deployment can set them once for every process),
then the keyword arguments of the call. Unknown names and unparsable values raise
:class:`~gpuframe.errors.OptionError` naming the option and where it came from.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import OptionError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

ENV_PREFIX = "GPUFRAME_"

Options = TypeVar("Options", bound="DataclassInstance")


def _text(value: str) -> str:
    return value


def _count(value: str) -> int:
    return int(value)


def _size(value: str) -> float | str:
    """A memory size: a fraction of the device ('0.8') or a byte string ('40GB')."""
    try:
        return float(value)
    except ValueError:
        return value


def _seconds(value: str) -> float:
    seconds = float(value)
    if seconds < 0:
        raise ValueError("a duration is 0 or more seconds")
    return seconds


def _flag(value: str) -> bool:
    if value.lower() not in ("1", "0", "true", "false", "yes", "no"):
        raise ValueError(f"{value!r} is not one of 1, 0, true, false, yes, no")
    return value.lower() in ("1", "true", "yes")


def _option(default: Any, parse: Callable[[str], Any], doc: str) -> Any:
    return field(default=default, metadata={"parse": parse, "doc": doc})


@dataclass(frozen=True)
class ClusterOptions:
    """How :func:`gpuframe.start_cluster` brings a local cluster up."""

    backend: str | None = _option(
        None, _text, "'cudf', 'pandas', or None: cudf where GPUs and cuDF are present"
    )
    protocol: str | None = _option(
        None, _text, "'ucx', 'tcp', or None: UCX where distributed-ucxx is installed, else TCP"
    )
    scheduler_protocol: str | None = _option(
        "tcp", _text, "'tcp', 'ucx', or None (the workers' protocol): what the scheduler listens "
        "on, for its small messages with the client and the workers, which TCP delivers sooner "
        "than UCX; the workers move data between them over their own protocol"
    )
    n_workers: int | None = _option(
        None, _count, "workers; None: one per visible GPU, or one per CPU core without GPUs"
    )
    devices: str | None = _option(
        None, _text, "GPUs to use, as in CUDA_VISIBLE_DEVICES ('0,1'); None: all. A GPU named "
        "twice ('0,0') gets two workers, whose RMM pools must fit in it together"
    )
    threads_per_worker: int | None = _option(
        None, _count, "threads in each worker process; None: 4 on GPU workers, whose threads "
        "each decode their reads on a CUDA stream of their own, so that a query's reads "
        "overlap; 1 on CPU workers, one a core"
    )
    thread_streams: bool = _option(
        False, _flag, "GPU workers of several threads run each thread's cuDF work on a CUDA "
        "stream of its own, each task ending once its stream is done (CUDF_PER_THREAD_STREAM=1 "
        "in the worker processes), so that their tasks overlap on the GPU; off until measured "
        "(each read decodes on a stream of its own either way)"
    )
    rmm_pool_size: float | str | None = _option(
        0.75, _size, "RMM pool per GPU worker: fraction of device memory or bytes; None: no pool"
    )
    device_memory_limit: float | str | None = _option(
        0.8, _size, "device memory held before a GPU worker spills to host; None: never"
    )
    memory_limit: float | str = _option(
        "auto", _size, "host memory per worker before it spills to disk"
    )
    dashboard_address: str = _option(
        "127.0.0.1:8787", _text, "where the dashboard listens; loopback unless exposed"
    )
    local_directory: str | None = _option(None, _text, "scratch space for spilled data")
    warm_up: bool | None = _option(
        None, _flag, "warm each worker in the background as the cluster starts (a tiny query "
        "of every kind), so the first query does not pay each process's one-time costs; None: "
        "on GPU workers only (CPU workers have little to warm, and would share their cores "
        "with the first query)",
    )


@dataclass(frozen=True)
class JoinOptions:
    """How :func:`gpuframe.merge` moves rows between workers."""

    broadcast_bytes: int = _option(
        64 * 2**20, _count,
        "broadcast the smaller side to every worker when it holds at most this many bytes "
        "(and broadcast_ratio allows it); a cap on the copy every worker holds, which a side "
        "the plan's estimates chose to copy may pass by up to half again once sampled or "
        "gathered (running the query again would cost more); a side estimated under half of "
        "it is copied without sampling; the default is the backend's (64 MiB on pandas, "
        "2 GiB on cuDF: Backend.broadcast_bytes)",
    )
    broadcast_rows: int = _option(
        100_000, _count,
        "broadcast a side of at most this many rows by the plan (its reads' row counts, which "
        "filters, groupbys and semi joins only lower), and within broadcast_bytes at the "
        "plan's row width, without sampling either side: copying it costs less than "
        "sampling's round trip, which waits for both sides to be computed; 0: always sample",
    )
    broadcast_ratio: float | None = _option(
        1.0, float,
        "broadcast only when the small side's bytes times the workers are at most this times "
        "the large side's: past that, each worker's hash table of the whole small side costs "
        "more than its share of the shuffle (benchmarks/join_broadcast.py; "
        "benchmarks/results/2026-11-25-figures-from-code-comments.md); None: bytes alone decide",
    )
    skew_threshold: float | None = _option(
        0.25, float,
        "split a key across workers when its sampled rows on a side exceed this fraction of "
        "one worker's share of that side; None or 0: never split",
    )
    skew_sample_rows: int = _option(
        10_000, _count, "key rows sampled per partition to find heavy keys",
    )
    partitions_per_worker: int | None = _option(
        None, _count,
        "join tasks (output partitions) per worker; None: as many as keep one task's buckets "
        "and its output (estimated from the key sample, many-to-many fan-out included) within "
        "join_memory_fraction of a worker's memory limit",
    )
    join_memory_fraction: float = _option(
        0.25, float,
        "the share of a worker's memory limit one join task's buckets and output may take",
    )
    fuse_copies: bool = _option(
        True, _flag,
        "run a join that copies a side to every worker without sampling, where its other side "
        "is a join's output that nothing else reads, in that join's tasks: a task and a "
        "scheduler round trip fewer per partition; off: a join task of its own",
    )

    prefilter_groups: bool = _option(
        True, _flag,
        "where the join keeps only the groups of a groupby (on its side) whose keys its other "
        "side holds, and the plan estimates that side filtered and smaller, the groupby first "
        "semi-joins its input with those keys, so that it aggregates (and moves) their rows "
        "only: gpuframe.plan.group_prefilter; off: every group is made",
    )

    def broadcasts(self, small: float, large: float, n_workers: int) -> bool:
        """Whether copying the ``small`` side (bytes) to every worker beats shuffling both:
        it must fit ``broadcast_bytes``, and each worker's hash table of all of it must not
        outgrow its share of the shuffle (``broadcast_ratio``)."""
        if small > self.broadcast_bytes:
            return False
        return self.broadcast_ratio is None or small * n_workers <= self.broadcast_ratio * large


@dataclass(frozen=True)
class RuntimeOptions:
    """How a job runs on its workers and watches them."""

    worker_silence: float = _option(
        60.0, float,
        "seconds a worker that runs or holds a job's tasks may go unheard (no heartbeat) before "
        "the job fails naming it; Dask itself waits its worker-ttl (5 minutes) before it drops "
        "such a worker, and a task pinned to it waits forever",
    )
    exchange: str = _option(
        "direct", _text,
        "how rows move between workers: 'direct' (one send task per worker, buckets sent "
        "straight to the peers' mailboxes) or 'tasks' (a Dask key per partition and bucket)",
    )
    message_interval: float = _option(
        0.001, _seconds,
        "seconds the engine's client, the scheduler and the workers may hold a message to send "
        "it with later ones (Dask's own intervals of a few milliseconds delay each step from a "
        "task to the next)",
    )
    sealed_transfers: bool = _option(
        False, _flag,
        "GPU workers send the cuDF frames that Dask moves between them (a copied side's "
        "partitions, partials to their tree) packed in one buffer, where cuDF sends a buffer "
        "per column and UCX pays for each; off until measured on GPUs",
    )


@dataclass(frozen=True)
class GroupByOptions:
    """How a groupby combines its partial aggregates."""

    strategy: str = _option(
        "auto", _text,
        "'tree' (partials combined in rounds, the result in one partition), 'shuffle' "
        "(partials hashed on the keys to every worker) or 'auto': tree up to tree_max_rows",
    )
    tree_max_rows: int = _option(
        1_000_000, _count,
        "the most partial-aggregate rows, summed over the partitions, that 'auto' reduces as a "
        "tree: past it the groups are too many for one worker to finish them all; counted, "
        "unless the plan bounds or estimates the input's rows within it (a tree task that "
        "then takes more than twice it fails, and the query runs again, counting)",
    )
    tree_fanin: int = _option(8, _count, "partials one task of a tree reduction combines")
    client_rows: int = _option(
        10_000, _count,
        "the most rows of each partial aggregate that an action fetching the aggregate "
        "(to_pandas) has the client finish, in pandas, where the plan bounds them, they were "
        "counted, or the plan's estimate chose the tree (then only where every partial holds "
        "no more; the workers finish otherwise): a few groups merged there cost less than a "
        "transfer to one worker and two more tasks; 0: never",
    )
    partitions_per_worker: int = _option(
        1, _count, "output partitions (hash buckets) per worker after a shuffle",
    )


def resolve(cls: type[Options], overrides: Mapping[str, Any] | None = None,
            environ: Mapping[str, str] | None = None,
            defaults: Mapping[str, Any] | None = None) -> Options:
    """Build ``cls`` from its defaults (``defaults`` replacing some, where the right value
    depends on the engine), the environment, then ``overrides``."""
    environ = os.environ if environ is None else environ
    known = {f.name: f for f in dataclasses.fields(cls)}
    values: dict[str, Any] = dict(defaults or {})
    for name, spec in known.items():
        variable = ENV_PREFIX + name.upper()
        if variable in environ:
            values[name] = _parse(environ[variable], spec, f"environment variable {variable}")
    for name, value in (overrides or {}).items():
        if name not in known:
            raise OptionError(
                f"unknown option {name!r} for {cls.__name__}; known options: "
                + ", ".join(sorted(known))
            )
        values[name] = value
    return cls(**values)


def describe(cls: type[DataclassInstance]) -> list[tuple[str, Any, str]]:
    """(name, default, meaning) of every option of ``cls``, for help texts."""
    return [(f.name, f.default, f.metadata["doc"]) for f in dataclasses.fields(cls)]


def _parse(text: str, spec: dataclasses.Field, origin: str) -> Any:
    if text.strip().lower() in ("", "none"):
        return None
    try:
        return spec.metadata["parse"](text.strip())
    except ValueError as exc:
        raise OptionError(f"{origin}={text!r} is not a valid value for {spec.name}: {exc}") from exc
