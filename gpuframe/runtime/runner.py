"""The stage runner: what every operator's tasks have in common.

An operator describes its work as stages (``read``, ``partition``, ``join``, ...) of tasks, one
per partition or bucket, and hands them to the :class:`Job` of the user action that runs the plan.
The job owns everything else, so that no operator has plumbing of its own:

- task names, ``gpuframe-<stage>-<job>.<step>-<index>`` (:func:`~gpuframe.diagnostics.stages.
  task_key`), which the dashboard's task stream and the engine's metrics group by stage and job;
- owners and pinning: a task runs on the worker that will own its output;
- failure: the first failed task fails the action, naming the stage, partition and worker where
  the failure started (the scheduler's blame), and every task of the job still held is
  cancelled (no partial result survives);
- the job's start and end events, and each output partition's rows and bytes per plan node,
  which ``explain()`` shows after a run.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from time import sleep
from typing import TYPE_CHECKING, Any, NoReturn

import pandas as pd
from dask.sizeof import sizeof
from dask.typing import Key
from distributed import Future, as_completed, get_worker
from distributed.metrics import time

from ..config import RuntimeOptions, resolve
from ..diagnostics.stages import (
    CLIENT_EVENT_OP,
    JOB_EVENT_TOPIC,
    OUTPUT_EVENT_TOPIC,
    STAGE_EVENT_TOPIC,
    job_of,
    new_job,
    task_key,
)
from ..errors import ClusterError, GpuframeError, OptionError, PartitionError, WorkerLostError
from ..units import byte_text

if TYPE_CHECKING:
    from distributed import Scheduler, Worker

    from ..cluster.engine import Engine
    from ..exchange.placement import Partitioning, RangeOrdering

logger = logging.getLogger("gpuframe")

EXCHANGES = ("direct", "tasks")
"""How an exchange moves rows (:class:`~gpuframe.config.RuntimeOptions`' ``exchange``)."""

SETTLE_SECONDS = 30.0
"""The longest a job that lost a worker to its memory waits for the cluster to settle before it
raises (:meth:`Job._settle`): a nanny restarts its worker within seconds."""
SETTLE_POLL_SECONDS = 0.2

LOST_RESULT_POLL = 0.1
"""Seconds between the checks :meth:`Job.gather` makes that the results it fetches are still
held."""
MEMORY_RESTART_TOPIC = "worker-restart-memory"
"""The event a nanny logs when it restarts its worker for holding more than its memory limit
allows (distributed's ``NannyMemoryManager``)."""


@dataclass
class Partitions:
    """An operator's output: one future per partition, the worker that owns each, the schema
    (an empty pandas frame), and how rows were placed (None: nothing known)."""

    futures: list[Future]
    owners: list[str]
    meta: pd.DataFrame
    partitioning: Partitioning | None = None
    lengths: list[int] | None = field(default=None, repr=False)
    """Rows per partition, once counted."""
    ordering: RangeOrdering | None = None
    """How rows are ordered across the partitions (None: nothing known)."""
    rows_at_most: int | None = None
    """A bound on all partitions' rows learnt as they ran (a tree aggregate's counted
    partials), where the plan's own bounds know none: a join may then copy them to every
    worker without sampling them (None: nothing learnt)."""

    def __post_init__(self) -> None:
        if len(self.futures) != len(self.owners):
            raise ValueError(f"{len(self.futures)} partitions but {len(self.owners)} owners")

    def __len__(self) -> int:
        return len(self.futures)


@dataclass(frozen=True)
class _TaskInfo:
    stage: str
    partition: int
    owner: str | None


class Job:
    """The tasks of one user action (a persist, a ``to_pandas``, a ``len``, ...).

    Use it as a context manager: it logs the job's start and end for the metrics, and cancels
    every task it submitted if the block fails."""

    def __init__(self, engine: Engine, name: str, speculates: bool = True) -> None:
        self.engine = engine
        self.name = name
        self.speculates = speculates
        """Whether the job's joins act before their checks return, each checked on the workers
        (a side copied unsampled whose keys may repeat, a shuffle sent as the plan's estimates
        say); not in an action's second run, once a check has failed."""
        self.id = new_job()
        self.backend = engine.backend.name
        self.workers = engine.workers
        """The workers in engine order, asked once: every stage of the job places by them."""
        if not self.workers:
            where = getattr(engine.client.scheduler, "address", "its scheduler")
            raise ClusterError(f"{name}: the cluster at {where} has no workers (none started, "
                               "or all left); see the workers' logs")
        self.notes: dict[int, str] = {}
        """What each plan node decided at run time (a join's strategy), for ``explain()``."""
        self._steps = 0
        # Weakly: an intermediate result (a bucket) is released once the tasks that read it
        # have run, as Dask releases any key no one holds, not when the whole action ends.
        self._submitted: weakref.WeakSet[Future] = weakref.WeakSet()
        self._info: dict[Key, _TaskInfo] = {}
        options = resolve(RuntimeOptions)
        if options.exchange not in EXCHANGES:
            raise OptionError(f"exchange={options.exchange!r} (GPUFRAME_EXCHANGE): one of "
                              f"{', '.join(EXCHANGES)}")
        self.exchange = options.exchange
        self.worker_silence = options.worker_silence
        # Often enough to notice a lost worker within a fraction of the allowed silence, and
        # one cheap scheduler call in a few seconds of a long job otherwise.
        self._check_every = min(5.0, max(self.worker_silence / 4, 0.5))

    def __enter__(self) -> Job:
        # Not waited for: the metrics file a task that finishes before the start under its
        # job too.
        self._event(JOB_EVENT_TOPIC, {"job": self.id, "phase": "start", "name": self.name,
                                      "time": time()})
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        if error is not None:
            self.cancel()
        # A call of its own, as the caller's reads of the job's metrics are: they must not
        # overtake it, as they could a message the client's stream holds back.
        self._event(JOB_EVENT_TOPIC, {"job": self.id, "phase": "end", "name": self.name,
                                      "time": time()}, streamed=False)

    def stage(self, name: str) -> Stage:
        """A new stage of this job: its tasks' keys share a step number."""
        self._steps += 1
        return Stage(self, name, self._steps)

    def client_stage(self, name: str, seconds: float) -> None:
        """Record ``seconds`` of work done on the client (planning) as a stage of the job."""
        self._event(STAGE_EVENT_TOPIC, {"job": self.id, "stage": name, "seconds": seconds})

    def wait(self, futures: Sequence[Future]) -> None:
        """Block until ``futures`` are in memory; on the first failure, cancel the job's tasks
        and raise naming the stage, partition and worker where it started. A worker that the
        job needs and that left the cluster or went unheard fails it too (:meth:`_watch`)."""
        futures = list(futures)
        done = threading.Event()
        lost: list[tuple[str, Key, str]] = []
        watchdog = threading.Thread(target=self._watch, args=(futures, done, lost),
                                    name=f"gpuframe-watch-{self.id}", daemon=True)
        watchdog.start()
        try:
            for future in as_completed(futures):
                if future.status != "finished":
                    if lost:
                        worker, key, why = lost[0]
                        self._lost(worker, why, future.key, key)
                    self.fail(future)
        finally:
            done.set()

    def _watch(self, futures: list[Future], done: threading.Event,
               lost: list[tuple[str, Key, str]]) -> None:
        """Beside :meth:`wait`: every few seconds, ask the scheduler whether what ``futures``
        need can still come (:func:`stalled`); where it cannot, note why in ``lost`` and cancel
        the job, which ends the wait."""
        while not done.wait(self._check_every):
            pending = [f.key for f in futures if not f.done()]
            try:
                found = self.engine.client.run_on_scheduler(stalled, keys=pending,
                                                            silence=self.worker_silence)
            except Exception:  # a scheduler that cannot run it: Dask's own timeouts apply
                return
            if found:
                lost.append(found)
                self.cancel()
                return

    def _lost(self, worker: str, why: str, waited: Key, stuck: Key,
              cause: BaseException | None = None) -> NoReturn:
        """Cancel the job and raise :class:`WorkerLostError`: ``worker`` ``why``, so the job
        cannot finish the stage of task ``waited`` (what it was waiting for), held up at task
        ``stuck`` (the one found stuck, or the one that failed); the partitions of each stage
        that ``worker`` held or was to make are named too. Where a nanny restarted it for its
        memory, first wait for the cluster to settle (:meth:`_settle`)."""
        self.cancel()
        gone = worker.split(", ")
        if _memory_restart(self.engine.client.get_events(MEMORY_RESTART_TOPIC), gone):
            self._settle()
        held: dict[str, list[int]] = {}
        for info in self._info.values():  # in the order the stages were submitted
            if info.owner in gone and info.partition >= 0:
                held.setdefault(info.stage, []).append(info.partition)
        stage = self._info[waited].stage if waited in self._info else "current"
        lost = "; ".join(f"{name} {_spans(parts)}" for name, parts in held.items())
        raise WorkerLostError(
            f"worker {worker} {why}: job {self.id} ({self.name}) cannot finish its {stage} "
            f"stage (held up at task {stuck})"
            + (f"; the worker's partitions, by stage: {lost}" if lost else ""), worker
        ) from cause

    def _settle(self) -> None:
        """Wait, at most :data:`SETTLE_SECONDS`, until no worker still runs a task of this job
        (a cancelled task runs to its end, and one that outgrows its worker's memory gets that
        worker restarted too) and the cluster has as many workers as the job started with, so
        that the next job starts on a whole cluster rather than on a worker about to go."""
        deadline = time() + SETTLE_SECONDS
        while time() < deadline:
            try:
                running = self.engine.client.run(runs_tasks_of, self.id)
            except Exception:  # noqa: BLE001 (a worker going away as asked: ask again)
                running = {"": True}
            if not any(running.values()) and len(self.engine.workers) >= len(self.workers):
                return
            sleep(SETTLE_POLL_SECONDS)

    def held_bytes(self, futures: Sequence[Future]) -> int:
        """Bytes the workers hold of ``futures``' results, as they reported them to the
        scheduler when each task finished (Dask's ``sizeof``); no data moves."""
        held = self.engine.client.nbytes(keys=[f.key for f in futures], summary=False)
        return int(sum(held.values()))

    def gather(self, futures: Sequence[Future]) -> list[Any]:
        """The results of ``futures`` (small ones: samples, counts), failing as :meth:`wait`.
        A result lost on its way here (its worker died after the task finished) is waited for
        again under :meth:`wait`'s watch: Dask's own gather waits for it to be made again, for
        ever where its task is pinned to the worker that died."""
        futures = list(futures)
        while True:
            self.wait(futures)
            # A fetch left waiting on a lost result ends when the job cancels its tasks.
            fetch = _Fetch(self.engine.client, futures, f"gpuframe-gather-{self.id}")
            while not fetch.done.wait(LOST_RESULT_POLL):
                if any(future.status != "finished" for future in futures):
                    break
            else:
                if fetch.error is None:
                    return fetch.results
                if all(future.status == "finished" for future in futures):
                    raise fetch.error

    def fail(self, failed: Future) -> NoReturn:
        """Raise the failure of ``failed`` (see :meth:`wait`), the job's tasks cancelled: a
        :class:`WorkerLostError` where one of its workers left the cluster, or where a task
        failed for a worker it could not reach."""
        error = failed.exception() if failed.status == "error" else None
        started = self._blamed(failed.key) if error is not None else failed.key
        if error is None or isinstance(error, WorkerLostError):
            gone = sorted({i.owner for i in self._info.values() if i.owner}
                          - set(self.engine.workers))
            if gone:
                restarts = self.engine.client.get_events(MEMORY_RESTART_TOPIC)
                self._lost(", ".join(gone), f"left the cluster{_memory_restart(restarts, gone)}"
                           ", and the partitions it held with it", failed.key, started, error)
            if isinstance(error, WorkerLostError) and error.worker:
                self._lost(error.worker, "could not be reached by a peer", failed.key, started,
                           error)
        if error is None:
            info = self._info.get(failed.key)
            self.cancel()
            where = f"{info.stage} task of partition {info.partition}" if info else "a task"
            raise PartitionError(f"{where} of job {self.id} was cancelled or lost before it "
                                 f"finished (owner {info.owner if info else 'unknown'})")
        trace = failed.traceback()
        info = self._info[started] if started in self._info else self._info[failed.key]
        self.cancel()
        note = (f"raised by the {info.stage} task {started} (partition {info.partition}) on "
                f"{info.owner or 'any worker'}")
        if getattr(error, "gpu_context_lost", False) and info.owner:
            note += "; " + self._restart(info.owner)
        if isinstance(error, GpuframeError):
            # The engine's own errors (a file gone, a column missing) reach the caller as
            # themselves, so ``except FileNotFoundError`` works as for a local failure.
            error.add_note(note)
            raise error.with_traceback(trace)
        raise PartitionError(f"partition {info.partition} ({info.stage}, owner "
                             f"{info.owner or 'any'}) is error: {error!r}; {note}") from error

    def _blamed(self, key: Key) -> Key:
        """The task whose error ``key`` carries (itself, or a task it depended on), as the
        scheduler blames it; ``key`` where the scheduler cannot say."""
        try:
            return self.engine.client.run_on_scheduler(blamed_task, key=key) or key
        except Exception:  # a scheduler without gpuframe: the failed task itself is named
            return key

    def cancel(self) -> None:
        """Cancel every task of this job that is still held."""
        held = list(self._submitted)
        if held:
            self.engine.client.cancel(held, force=True)

    def _restart(self, worker: str) -> str:
        """Restart ``worker`` through its nanny (its GPU context is gone, and with it what it
        held); a note of what became of it."""
        try:
            status = self.engine.client.restart_workers([worker]).get(worker)
        except Exception as exc:  # no nanny, or it did not come back: the error stands
            return (f"{worker} could not be restarted ({type(exc).__name__}: {exc}): restart "
                    f"the cluster")
        return f"{worker} was restarted ({status}): the partitions it held are lost"

    def track(self, stage: str, futures: Sequence[Future]) -> None:
        """Count ``futures``, made by other means (a dask collection computed), as tasks of
        this job's ``stage``: they fail and are cancelled with it."""
        for i, future in enumerate(futures):
            self._submitted.add(future)
            self._info[future.key] = _TaskInfo(stage, i, None)

    def _submit(self, key: str, info: _TaskInfo, fn: Callable[..., Any], args: tuple,
                strict: bool, priority: int) -> Future:
        workers = [info.owner] if info.owner else None
        future = self.engine.client.submit(fn, *args, key=key, workers=workers,
                                           allow_other_workers=not strict and bool(workers),
                                           pure=False, priority=priority)
        self._submitted.add(future)
        self._info[key] = info
        return future

    def _event(self, topic: str, msg: dict[str, Any], streamed: bool = True) -> None:
        """Log ``msg`` to the scheduler without waiting for it: on the stream of the job's
        tasks where ``streamed`` and the scheduler takes it there, else as a call of its own."""
        client = self.engine.client
        assert client.loop is not None and client.scheduler is not None, "the client is closed"
        if streamed and self.engine.streams_events:
            client.loop.add_callback(_send_event, client, topic, msg)
        else:
            client.loop.add_callback(client.scheduler.log_event, topic=topic, msg=msg)


def _send_event(client: Any, topic: str, msg: dict[str, Any]) -> None:
    """On the client's event loop: ``msg`` on the client's stream to the scheduler (lost, as
    diagnostics may be, while the client reconnects)."""
    stream = client.scheduler_comm
    if stream is not None and not stream.closed():
        stream.send({"op": CLIENT_EVENT_OP, "topic": topic, "msg": msg})


class _Fetch(threading.Thread):
    """``client.gather(futures)`` in a thread of its own, which its caller may stop waiting
    for: ``results`` or ``error`` once ``done`` is set."""

    def __init__(self, client: Any, futures: list[Future], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.client, self.futures = client, futures
        self.done = threading.Event()
        self.results: list[Any] = []
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.results = self.client.gather(self.futures)
        except BaseException as exc:  # noqa: BLE001 (the caller raises it, or the job's)
            self.error = exc
        finally:
            self.done.set()


@dataclass(frozen=True)
class OutputReport:
    """Where a task's output partition belongs in the plan, for the rows-and-bytes event."""

    job: str
    node: int
    partition: int


class Stage:
    """One stage of a job: tasks under one name, each placed on its owner."""

    def __init__(self, job: Job, name: str, step: int) -> None:
        self.job = job
        self.name = name
        self.step = step

    def key(self, *index: int | str) -> str:
        """The key of this stage's task at ``index``: a task may need its own (to file what it
        did under it)."""
        return task_key(self.name, self.job.id, self.step, *index)

    def submit(self, fn: Callable[..., Any], *args: Any, index: Sequence[int | str],
               owner: str | None = None, strict: bool = True, node: int | None = None,
               priority: int = 0) -> Future:
        """``fn(*args)`` as a task of this stage, on ``owner`` (any worker if None; another
        one too where ``strict`` is off). ``index[0]`` is the partition it works for. With
        ``node``, its result is that plan node's output partition ``index[0]``, and its rows
        and bytes are reported. Of a worker's tasks ready at once, those of higher ``priority``
        run first (Dask's task priority)."""
        key = self.key(*index)
        partition = int(index[0]) if index and str(index[0]).isdigit() else -1
        info = _TaskInfo(self.name, partition, owner)
        if node is not None:
            args = (fn, OutputReport(self.job.id, node, partition), *args)
            fn = run_reporting
        return self.job._submit(key, info, fn, args, strict, priority)

    def map(self, fn: Callable[..., Any], inputs: Partitions, *args: Any,
            node: int | None = None, strict: bool = True) -> list[Future]:
        """``fn(partition, *args)`` on every partition of ``inputs``, on its owner."""
        return [self.submit(fn, future, *args, index=(i,), owner=owner, node=node,
                            strict=strict)
                for i, (future, owner) in enumerate(zip(inputs.futures, inputs.owners))]


def runs_tasks_of(job: str, dask_worker: Worker) -> bool:
    """On a worker: whether it is running a task of ``job``."""
    return any(job_of(task.key) == job for task in (*dask_worker.state.executing,
                                                     *dask_worker.state.long_running))


def stalled(dask_scheduler: Scheduler, keys: Sequence[Key], silence: float
            ) -> tuple[str, Key, str] | None:
    """On the scheduler: what stops the tasks of ``keys`` from finishing, from their own tasks
    and those they depend on, as (worker, task, why); None where nothing does."""
    now = time()
    seen: set[Key] = set()
    todo = [dask_scheduler.tasks[k] for k in keys if k in dask_scheduler.tasks]
    while todo:
        task = todo.pop()
        if task.key in seen:
            continue
        seen.add(task.key)
        if task.state == "memory":
            holders = task.who_has or set()
            if holders and all(now - w.last_seen > silence for w in holders):
                quiet = min(holders, key=lambda w: now - w.last_seen)
                return (quiet.address, task.key, f"alone holds {task.key} and has not been "
                        f"heard from for {now - quiet.last_seen:.0f} s")
            continue
        pinned = [dask_scheduler.workers[a] for a in task.worker_restrictions or ()
                  if a in dask_scheduler.workers]
        if pinned and all(now - w.last_seen > silence for w in pinned):
            # a task bound to a silent worker (a bucket's consumer, whose senders wait on it)
            quiet = min(pinned, key=lambda w: now - w.last_seen)
            return (quiet.address, task.key, f"has not been heard from for "
                    f"{now - quiet.last_seen:.0f} s")
        if task.state == "no-worker" and task.worker_restrictions:
            gone = sorted(task.worker_restrictions)
            why = _memory_restart(dask_scheduler.get_events(MEMORY_RESTART_TOPIC), gone)
            return (", ".join(gone), task.key,
                    f"left the cluster{why}, and the partitions it held with it")
        worker = task.processing_on
        if task.state == "processing" and worker is not None \
                and now - worker.last_seen > silence:
            return (worker.address, task.key, f"has not been heard from for "
                    f"{now - worker.last_seen:.0f} s")
        todo.extend(task.dependencies)
    return None


def _memory_restart(restarts: Sequence[tuple[float, Any]], workers: Sequence[str]) -> str:
    """Why a nanny restarted one of ``workers``, where ``restarts`` (the scheduler's events of
    :data:`MEMORY_RESTART_TOPIC`) say it did for its memory, and what to do; else ''."""
    for _, event in reversed(restarts):
        if isinstance(event, dict) and event.get("worker") in workers:
            return (f" (restarted by its nanny: its process held {byte_text(event['rss'])}, "
                    "more than its memory limit allows; give the workers more memory, or "
                    "split the work into more partitions: partition_bytes=, "
                    "partitions_per_worker=)")
    return ""


def _spans(numbers: Sequence[int]) -> str:
    """``numbers`` as runs, '0-19, 24': a stage may have thousands of partitions."""
    ordered = sorted(set(numbers))
    runs: list[list[int]] = []
    for n in ordered:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def blamed_task(dask_scheduler: Scheduler, key: Key) -> Key | None:
    """On the scheduler: the task whose exception ``key``'s task carries."""
    task = dask_scheduler.tasks.get(key)
    blame = task.exception_blame if task is not None else None
    return blame.key if blame is not None else None


def run_reporting(fn: Callable[..., Any], report: OutputReport, *args: Any) -> Any:
    """On a worker: ``fn(*args)``, then its rows and bytes logged for the plan node."""
    result = fn(*args)
    try:
        worker = get_worker()
    except ValueError:  # run outside a worker
        return result
    worker.log_event(OUTPUT_EVENT_TOPIC, {
        "job": report.job, "node": report.node, "partition": report.partition,
        "rows": len(result), "bytes": int(sizeof(result))})
    return result

