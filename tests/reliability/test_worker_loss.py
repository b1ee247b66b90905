"""Losing a worker in the middle of any stage of a job (issue #30, "Worker loss") ends within a
bound in one of two ways: the right result, or a :class:`~gpuframe.errors.WorkerLostError` that
names the worker and the stage the job could not finish. It never hangs, and the next job on
the same engine, once the worker is back, is right.

Each stage's case starts a job in a thread, waits until a task of its stage runs on a worker,
and SIGKILLs that worker's process (not its nanny, which starts a new one at a new address),
over and over on one cluster per module. The watchdog's allowed silence is lowered, so that a
case takes seconds; a job is still failed by the scheduler's own news of the departure, not by
the silence. Then the other ways to lose a worker: its frame's holder killed between jobs, a
worker silent (SIGSTOP) that Dask would keep for its worker-ttl (5 minutes) and a task pinned
to it would wait on forever, and a worker restarted by its nanny for its memory; those that
break a worker for good run on a cluster of their own.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dask
import numpy as np
import pandas as pd
import pytest

import gpuframe
from gpuframe.errors import WorkerLostError

if TYPE_CHECKING:
    from distributed import Scheduler

    from gpuframe.cluster.engine import Engine

CPU_KILLS = 10
"""Kills per stage on the CPU cluster."""
GPU_KILLS = 2
"""Kills per stage on the GPU cluster, whose worker takes longer to come back."""
SILENCE_S = 5.0
"""The watchdog's allowed silence (GPUFRAME_WORKER_SILENCE) here."""
BOUND_S = 5 * SILENCE_S
"""Longest a job may take to end once its worker is killed."""
RETURN_S = 60.0
"""Longest a nanny may take to start the killed worker's replacement."""
FILES = 32
"""Small Parquet files, one partition each: stages of many short tasks, which a kill hits
while they run."""


@dataclass(frozen=True)
class Inputs:
    """The files every case reads, and the pandas frames they hold."""

    left: Path
    right: Path
    left_rows: pd.DataFrame
    right_rows: pd.DataFrame


@dataclass(frozen=True)
class Case:
    """A job, what pandas makes of the same inputs, and the stage to kill a worker in."""

    stage: str
    """The stage's name, as the prefix of its task keys (``gpuframe-<stage>-...``)."""
    run: Callable[[Engine, Inputs], pd.DataFrame]
    expected: Callable[[Inputs], pd.DataFrame]


def _read(engine: Engine, inputs: Inputs) -> pd.DataFrame:
    return gpuframe.read_parquet(inputs.left, partition_bytes=1, engine=engine).to_pandas()


def _join(engine: Engine, inputs: Inputs) -> pd.DataFrame:
    left = gpuframe.read_parquet(inputs.left, partition_bytes=1, engine=engine)
    right = gpuframe.read_parquet(inputs.right, partition_bytes=1, engine=engine)
    return gpuframe.merge(left, right, on="k", broadcast_bytes=0, broadcast_rows=0,
                          partitions_per_worker=8).to_pandas()


def _groupby(engine: Engine, inputs: Inputs) -> pd.DataFrame:
    """An aggregate over a join: its partials a stage of their own (over a read, the read's
    tasks make them)."""
    left = gpuframe.read_parquet(inputs.left, partition_bytes=1, engine=engine)
    right = gpuframe.read_parquet(inputs.right, partition_bytes=1, engine=engine)
    joined = gpuframe.merge(left, right, on="k")
    return joined.groupby("k").agg(total=("v", "sum")).to_pandas()


CASES = [
    Case("read-parquet", _read, lambda inputs: inputs.left_rows),
    Case("send-left", _join, lambda inputs: inputs.left_rows.merge(inputs.right_rows, on="k")),
    Case("join", _join, lambda inputs: inputs.left_rows.merge(inputs.right_rows, on="k")),
    Case("partial", _groupby, lambda inputs: inputs.left_rows.merge(inputs.right_rows, on="k")
         .groupby("k", as_index=False).agg(total=("v", "sum"))),
    Case("gather", _read, lambda inputs: inputs.left_rows),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Inputs:
    folder = tmp_path_factory.mktemp("worker-loss")
    rng = np.random.default_rng(30)
    left, right = folder / "left", folder / "right"
    left.mkdir()
    right.mkdir()
    for i in range(FILES):
        pd.DataFrame({"k": rng.integers(0, 64, 64), "v": rng.random(64)}).to_parquet(
            left / f"part-{i:03d}.parquet")
    for i in range(FILES // 4):
        pd.DataFrame({"k": np.arange(i * 8, i * 8 + 8), "w": rng.random(8)}).to_parquet(
            right / f"part-{i:03d}.parquet")
    return Inputs(left, right, pd.read_parquet(left), pd.read_parquet(right))


@pytest.fixture(scope="module")
def cpu_nanny_engine():
    """Two pandas workers, each under a nanny that restarts it when it dies; the module's
    own, since its tests kill them."""
    with gpuframe.start_cluster(backend="pandas", protocol="tcp", n_workers=2,
                                dashboard_address="127.0.0.1:0") as engine:
        yield engine


@pytest.fixture
def kill_settings(monkeypatch):
    """The watchdog's short silence; and a local cluster that keeps a killed worker's nanny:
    it closes one whose worker is not back within its lost-worker-timeout of the worker's
    departure, which a worker killed again soon after its return can miss."""
    monkeypatch.setenv("GPUFRAME_WORKER_SILENCE", str(SILENCE_S))
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "1h"}):
        yield


@pytest.mark.timeout(180)
@pytest.mark.parametrize("case", CASES, ids=[case.stage for case in CASES])
def test_a_worker_killed_mid_stage_gives_the_result_or_names_itself(
        cpu_nanny_engine, inputs, case, kill_settings):
    kill_repeatedly(cpu_nanny_engine, inputs, case, CPU_KILLS)


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", CASES, ids=[case.stage for case in CASES])
def test_a_gpu_worker_killed_mid_stage_gives_the_result_or_names_itself(
        gpu_engine, inputs, case, kill_settings):
    if len(gpu_engine.workers) < 2:
        pytest.skip("a worker killed while another finishes the job: needs two GPUs")
    kill_repeatedly(gpu_engine, inputs, case, GPU_KILLS)


@pytest.mark.timeout(90)
def test_a_frame_whose_worker_was_killed_fails_the_jobs_that_need_it(cpu_nanny_engine,
                                                                     kill_settings):
    """Its partitions went with the worker, and a frame keeps no lineage to remake them."""
    frame = _frame(cpu_nanny_engine)
    lost = frame.owners[0]
    os.kill(_pid_of(cpu_nanny_engine, lost), signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerLostError, match="left the cluster") as raised:
        frame.to_pandas()
    assert lost in str(raised.value) and "the worker's partitions, by stage: gather" \
        in str(raised.value)
    assert time.monotonic() - start < BOUND_S
    _wait_for_replacement(cpu_nanny_engine, lost)


@pytest.mark.timeout(90)
def test_a_silent_worker_fails_the_job_after_the_allowed_silence(fresh_engine, monkeypatch):
    monkeypatch.setenv("GPUFRAME_WORKER_SILENCE", "3")
    frame = _frame(fresh_engine)
    other = _frame(fresh_engine)
    stopped = frame.owners[0]
    pid = _pid_of(fresh_engine, stopped)
    os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        with pytest.raises(WorkerLostError, match="not been heard from|unheard") as raised:
            gpuframe.merge(frame, other, on="k", broadcast_bytes=0).to_pandas()
        message = str(raised.value)
        assert stopped in message and "the worker's partitions, by stage" in message
        assert time.monotonic() - start < 30
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.mark.timeout(90)
def test_a_silent_worker_that_only_receives_buckets_fails_the_join(monkeypatch):
    """The stopped worker holds no input: the senders wait on it, and its bucket's consumer,
    pinned to it, waits on them. The job still fails naming it, not at Dask's worker-ttl."""
    monkeypatch.setenv("GPUFRAME_WORKER_SILENCE", "3")
    with gpuframe.start_cluster(backend="pandas", protocol="tcp", n_workers=3,
                                dashboard_address="127.0.0.1:0") as engine:
        rng = np.random.default_rng(4)
        data = pd.DataFrame({"k": rng.integers(0, 100, 4000), "v": rng.random(4000)})
        frame = gpuframe.from_pandas(data, npartitions=2, engine=engine).persist()
        other = gpuframe.from_pandas(data, npartitions=2, engine=engine).persist()
        idle = sorted(set(engine.workers) - set(frame.owners) - set(other.owners))
        assert idle, "every worker holds an input partition"
        pid = _pid_of(engine, idle[0])
        os.kill(pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            with pytest.raises(WorkerLostError, match="not been heard from") as raised:
                gpuframe.merge(frame, other, on="k", broadcast_bytes=0).to_pandas()
            assert idle[0] in str(raised.value)
            assert time.monotonic() - start < 30
        finally:
            os.kill(pid, signal.SIGCONT)


def outgrow_memory(part: pd.DataFrame) -> pd.DataFrame:
    """Take memory by 50 MiB steps, up to 2 GiB: the nanny restarts a worker of less first."""
    held = []
    for _ in range(40):
        held.append(np.ones(50 * 2**20 // 8))
        time.sleep(0.05)
    return part


@pytest.mark.timeout(120)
def test_a_worker_restarted_for_its_memory_is_named_with_the_reason_and_the_task():
    """A task outgrows its worker's memory limit on both workers: the nannies restart them,
    and the job fails at once, saying so, what to change and which task, not with a cancelled
    future. The next job runs on the restarted workers, naming neither."""
    from distributed import LocalCluster

    keys = pd.DataFrame({"k": np.arange(6000), "v": np.arange(6000.0)})
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="400MiB",
                      host="127.0.0.1", dashboard_address=None) as cluster, \
            gpuframe.connect(cluster.scheduler_address) as engine:
        frame = gpuframe.from_pandas(keys, npartitions=2, engine=engine)
        start = time.monotonic()
        with pytest.raises(WorkerLostError, match=r"restarted by its nanny: its process held "
                                                  r".*, more than its memory limit allows; "
                                                  r"give the workers more memory.*held up at "
                                                  r"task gpuframe-map-\S+\).*map"):
            len(frame.map_partitions(outgrow_memory, meta=keys.head(0)))
        assert time.monotonic() - start < 45
        assert len(gpuframe.from_pandas(keys, npartitions=2, engine=engine)
                   .merge(gpuframe.from_pandas(keys, npartitions=2, engine=engine),
                          on="k")) == 6000


@pytest.fixture
def fresh_engine():
    """A cluster of its own, for a test that stops one of its workers."""
    engine = gpuframe.start_cluster(backend="pandas", protocol="tcp", n_workers=2,
                                    dashboard_address="127.0.0.1:0")
    yield engine
    engine.close()


def _frame(engine) -> gpuframe.DistributedFrame:
    rng = np.random.default_rng(3)
    data = pd.DataFrame({"k": rng.integers(0, 100, 4000), "v": rng.random(4000)})
    return gpuframe.from_pandas(data, npartitions=4, engine=engine).persist()


def _pid_of(engine, worker: str) -> int:
    return engine.client.run(os.getpid, workers=[worker])[worker]


def kill_repeatedly(engine: Engine, inputs: Inputs, case: Case, kills: int) -> None:
    """``kills`` times: kill a worker while ``case``'s stage runs, check how the job ended,
    wait for the worker's replacement, and check that the next job is right."""
    expected = _canonical(case.expected(inputs))
    outcomes: Counter[str] = Counter()
    for _ in range(kills):
        victim, outcome = _kill_mid_stage(engine, inputs, case, expected)
        outcomes[outcome] += 1
        _wait_for_replacement(engine, victim)
        pd.testing.assert_frame_equal(_canonical(case.run(engine, inputs)), expected)
    # Shown with -rP: how often the kill was survived, and where the job failed.
    print(f"{case.stage}: {dict(outcomes)}")
    assert outcomes["missed"] < kills, f"no kill landed while {case.stage} ran"


def _kill_mid_stage(engine: Engine, inputs: Inputs, case: Case, expected: pd.DataFrame
                    ) -> tuple[str | None, str]:
    """Run ``case``'s job, SIGKILL the first worker seen running a task of its stage, and
    check the job's end. The worker killed (None: none), and how the job ended: 'result',
    'lost in <stage waited for>, held up in <stage>', or 'missed' (it ended before its stage
    was seen running)."""
    pids = engine.client.run(os.getpid)
    ended: dict[str, Any] = {}

    def job() -> None:
        try:
            ended["result"] = case.run(engine, inputs)
        except BaseException as exc:  # noqa: BLE001 (judged below, whatever it is)
            ended["error"] = exc

    runner = threading.Thread(target=job, name=f"worker-loss-{case.stage}", daemon=True)
    runner.start()
    victim = None
    while victim is None and runner.is_alive():
        victim = engine.client.run_on_scheduler(running_on, prefix=f"gpuframe-{case.stage}-")
    killed = time.monotonic()
    if victim is not None:
        os.kill(pids[victim], signal.SIGKILL)
    runner.join(BOUND_S + 10)
    assert not runner.is_alive(), f"the job still runs {BOUND_S + 10} s after {victim} died"
    assert time.monotonic() - killed < BOUND_S
    if "result" in ended:
        pd.testing.assert_frame_equal(_canonical(ended["result"]), expected)
        return victim, "result" if victim is not None else "missed"
    error = ended["error"]
    if not isinstance(error, WorkerLostError):
        raise AssertionError(f"{victim} killed in {case.stage}: {error!r}") from error
    message = str(error)
    stages = re.search(r"cannot finish its ([a-z-]+) stage \(held up at task gpuframe-([a-z-]+)-",
                       message)
    assert victim in message and stages is not None, message
    return victim, f"lost in {stages.group(1)}, held up in {stages.group(2)}"


def running_on(dask_scheduler: Scheduler, prefix: str) -> str | None:
    """On the scheduler: the worker running a task whose key starts with ``prefix``."""
    for key, task in dask_scheduler.tasks.items():
        if str(key).startswith(prefix) and task.state == "processing" and task.processing_on:
            return task.processing_on.address
    return None


def _wait_for_replacement(engine: Engine, victim: str | None) -> None:
    """Until the cluster has two workers again, ``victim`` not among them."""
    deadline = time.monotonic() + RETURN_S
    while True:
        pids = engine.client.run(os.getpid, on_error="ignore")
        if len(pids) == 2 and victim not in pids:
            return
        assert time.monotonic() < deadline, f"no replacement worker in {RETURN_S} s: {pids}"
        time.sleep(0.1)


def _canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` in one row order, to compare results whose order the engine does not fix."""
    ordered = frame[sorted(frame.columns)]
    return ordered.sort_values(list(ordered.columns)).reset_index(drop=True)
