"""Jobs as the engine's stage runner makes them: keys from task_key, job events from the client,
output events from the workers; each job's figures are its own."""

from __future__ import annotations

import threading
import time

import pytest
from distributed import get_worker, wait

import gpuframe
from gpuframe.diagnostics.jobs import job_metrics, mark, metrics_since, operator_stats
from gpuframe.diagnostics.metrics import EngineMetrics
from gpuframe.diagnostics.stages import (
    JOB_EVENT_TOPIC,
    OUTPUT_EVENT_TOPIC,
    STAGE_EVENT_TOPIC,
    new_job,
    task_key,
)
from gpuframe.errors import OptionError

PAUSE = 0.05  # seconds each simulated task works


def work(i: int) -> int:
    time.sleep(PAUSE)
    return i


def put_out(job: str, node: int, partition: int, rows: int) -> int:
    """A task that ends an operator's partition: it logs the partition's output."""
    get_worker().log_event(OUTPUT_EVENT_TOPIC, {"job": job, "node": node, "partition": partition,
                                                "rows": rows, "bytes": 8 * rows})
    return rows


def worker_clock_offset(dask_worker) -> float:
    """The shift Dask adds to this worker's task times: its estimate of its clock's offset."""
    return dask_worker.scheduler_delay


def start(client, job: str, name: str = "test") -> None:
    client.log_event(JOB_EVENT_TOPIC, {"job": job, "phase": "start", "name": name,
                                       "time": time.time()})


def end(client, job: str, name: str = "test") -> None:
    client.log_event(JOB_EVENT_TOPIC, {"job": job, "phase": "end", "name": name,
                                       "time": time.time()})


def run_steps(client, job: str, steps: list[tuple[str, int]]) -> None:
    """Each step's tasks, one step after the other, as a runner submits a plan's stages."""
    for number, (stage, tasks) in enumerate(steps):
        wait([client.submit(work, i, key=task_key(stage, job, number, i))
              for i in range(tasks)])


def run_job(client, steps: list[tuple[str, int]], name: str = "test") -> str:
    job = new_job()
    start(client, job, name)
    run_steps(client, job, steps)
    end(client, job, name)
    return job


def test_three_jobs_in_a_row_each_report_their_own_tasks(engine):
    jobs = []
    for _ in range(3):
        jobs.append(run_job(engine.client, [("read-parquet", 4)], name="read"))
        current = job_metrics()
        assert current.job == jobs[-1] and current.name == "read"
        assert current.stages["read"]["tasks"] == 4
        # the seconds are this job's: four tasks' worth, not those of the jobs before
        assert 4 * PAUSE <= current.stages["read"]["task_seconds"] < 8 * PAUSE
        assert current.start <= current.stop and not current.running
        if len(jobs) > 1:
            assert job_metrics("previous").job == jobs[-2]
    assert [job_metrics(job=j).stages["read"]["tasks"] for j in jobs] == [4, 4, 4]


def test_stages_come_in_the_order_they_started(engine):
    job = run_job(engine.client, [("sort", 2), ("filter", 3), ("aggregate", 1)])
    metrics = job_metrics(job=job)
    assert list(metrics.stages) == ["sort", "filter", "aggregate"]
    assert [s["tasks"] for s in metrics.stages.values()] == [2, 3, 1]


def test_two_concurrent_jobs_stay_apart(engine):
    client = engine.client
    first, second = new_job(), new_job()
    start(client, first, "first")
    start(client, second, "second")
    together = threading.Barrier(2)

    def run(job: str, tasks: int) -> None:
        together.wait()
        run_steps(client, job, [("join", tasks)])

    threads = [threading.Thread(target=run, args=(first, 3)),
               threading.Thread(target=run, args=(second, 5))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    end(client, second, "second")
    end(client, first, "first")
    current, previous = job_metrics(), job_metrics("previous")
    assert (current.job, current.name) == (second, "second")  # the latest started
    assert (previous.job, previous.name) == (first, "first")
    assert current.stages["join"]["tasks"] == 5
    assert previous.stages["join"]["tasks"] == 3
    assert previous.start <= current.start and current.stop <= previous.stop


def test_tasks_that_finish_before_their_jobs_start_event_count_in_it(engine):
    """The runner does not wait for its start event to reach the scheduler: a job's first tasks
    may finish before it arrives, and still count in the job, which starts when the client
    started it and is named by the event."""
    client = engine.client
    job = new_job()
    began = time.time()
    run_steps(client, job, [("read", 3)])
    early = job_metrics(job=job)
    assert early.stages["read"]["tasks"] == 3 and early.running
    client.log_event(JOB_EVENT_TOPIC, {"job": job, "phase": "start", "name": "early",
                                       "time": began})
    end(client, job, "early")
    metrics = job_metrics(job=job)
    assert metrics.name == "early" and metrics.start == began and not metrics.running
    assert metrics.stages["read"]["tasks"] == 3


def test_a_job_runs_from_its_start_to_its_end(engine):
    client = engine.client
    job = new_job()
    start(client, job, "persist")
    run_steps(client, job, [("read", 2)])
    running = job_metrics()
    assert running.job == job and running.running and running.stop is None
    assert running.stages["read"]["tasks"] == 2
    end(client, job, "persist")
    finished = job_metrics()
    assert not finished.running and finished.start < finished.stop


def test_client_side_stages_count_in_their_job(engine):
    client = engine.client
    delays = list(client.run(worker_clock_offset).values())
    job = new_job()
    start(client, job)
    client.log_event(STAGE_EVENT_TOPIC, {"job": job, "stage": "plan", "seconds": 0.25})
    run_steps(client, job, [("read", 2)])
    end(client, job)
    metrics = job_metrics()
    assert list(metrics.stages) == ["plan", "read"]
    assert metrics.stages["plan"]["tasks"] == 1
    assert metrics.stages["plan"]["wall_seconds"] == pytest.approx(0.25)
    plan, read = metrics.stages["plan"], metrics.stages["read"]
    assert plan["last_stop"] - plan["first_start"] == pytest.approx(0.25)
    # Dask shifts a worker's times by its estimate of the worker's clock offset, which a loaded
    # machine can put a tenth of a second or more off; the client's times are as they were. The
    # room is the largest estimate the workers held before and after the job.
    delays += client.run(worker_clock_offset).values()
    offset = 0.05 + max(abs(delay) for delay in delays)
    assert plan["last_stop"] <= read["first_start"] + offset
    assert read["first_start"] <= read["last_stop"] <= metrics.stop + offset


def test_operator_stats_sum_each_nodes_partitions(engine):
    client = engine.client
    job, other = new_job(), new_job()
    start(client, job)
    start(client, other)
    outputs = [(0, 0, 10), (0, 1, 20), (0, 2, 30), (1, 0, 5), (1, 1, 7)]
    futures = [client.submit(put_out, job, node, part, rows, key=task_key("join", job, node, part))
               for node, part, rows in outputs]
    futures.append(client.submit(put_out, other, 0, 0, 99, key=task_key("join", other, 0, 0)))
    futures.append(client.submit(put_out, new_job(), 0, 0, 1000, pure=False))  # never started
    wait(futures)
    end(client, other)
    end(client, job)
    assert operator_stats(job) == {0: {"rows": 60, "bytes": 480, "partitions": 3},
                                   1: {"rows": 12, "bytes": 96, "partitions": 2}}
    assert operator_stats(other) == {0: {"rows": 99, "bytes": 792, "partitions": 1}}
    assert operator_stats(new_job()) == {}


def test_a_recomputed_partition_counts_once(engine):
    client = engine.client
    job = new_job()
    start(client, job)
    for _ in range(2):  # the same partition's output logged twice, as after a lost worker
        wait(client.submit(put_out, job, 3, 0, 10, pure=False))
    end(client, job)
    assert operator_stats(job) == {3: {"rows": 10, "bytes": 80, "partitions": 1}}


def test_a_report_block_spans_its_jobs(engine):
    bookmark = mark(engine)
    run_job(engine.client, [("read", 2)])
    run_job(engine.client, [("read", 3)])
    block = metrics_since(engine, bookmark)
    assert block.job is None and block.stages["read"]["tasks"] == 5


def test_which_job_is_checked(engine):
    with pytest.raises(OptionError, match="which='last'"):
        job_metrics("last")
    assert job_metrics(job=new_job()) is None


def held(plugin: str):
    """The jobs a plugin holds, with their record counts, and the length of its log."""

    def read(dask_scheduler):
        metrics = dask_scheduler.plugins[plugin]
        return ({job.id: len(job.records) for job in metrics.jobs.values()},
                metrics.job_records, len(metrics.records))

    return read


@pytest.fixture
def small_metrics(engine):
    """A second metrics plugin on the session's scheduler, holding little."""
    name = "gpuframe-metrics-small"
    engine.client.register_plugin(EngineMetrics(max_jobs=3, max_records=20), name=name)
    yield name
    engine.client.unregister_scheduler_plugin(name)


def test_memory_stays_bounded(engine, small_metrics):
    client = engine.client
    jobs = [run_job(client, [("read", 2)]) for _ in range(5)]
    holding, job_records, log = client.run_on_scheduler(held(small_metrics))
    assert holding == {job: 2 for job in jobs[-3:]}  # the oldest jobs are dropped
    assert job_records == 6 and log == 10
    big = [run_job(client, [("read", 8)]) for _ in range(2)]
    holding, job_records, log = client.run_on_scheduler(held(small_metrics))
    assert holding == {jobs[-1]: 2, big[0]: 8, big[1]: 8} and job_records == 18
    assert log == 20  # the log keeps the latest records
    huge = run_job(client, [("read", 25)])
    holding, job_records, log = client.run_on_scheduler(held(small_metrics))
    assert holding == {huge: 20} and job_records == 20 and log == 20


def test_the_progress_bars_group_a_jobs_tasks_by_stage(engine):
    client = engine.client
    job = new_job()
    with gpuframe.progress(notebook=False) as bars:
        start(client, job)
        run_steps(client, job, [("split-left", 2), ("split-right", 3), ("join", 2)])
        end(client, job)
    assert bars.totals == {"split": 5, "join": 2}
