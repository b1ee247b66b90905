"""The stage runner: task names, pinning, one failure failing (and cancelling) the whole job."""

import os
import time

import pandas as pd
import pytest
from scheduler_calls import calls_answered

import gpuframe
from gpuframe.diagnostics.stages import task_key
from gpuframe.errors import PartitionError, UnknownColumnError, WorkerLostError
from gpuframe.io.errors import CorruptFileError
from gpuframe.runtime.runner import Job, Partitions


def slow(x):
    """Sleeps until its task is cancelled (30 s at most): a plain sleep would hold its worker's
    thread from the tests after."""
    from distributed import get_worker
    from distributed.worker import thread_state

    worker, key = get_worker(), thread_state.key
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and getattr(worker.state.tasks.get(key), "state",
                                                  "cancelled") != "cancelled":
        time.sleep(0.05)
    return x


def explode(x):
    raise ValueError(f"no good: {x}")


def missing_column(x):
    raise UnknownColumnError("column 'z' is not among the frame's columns")


def unreachable(x):
    raise WorkerLostError("worker tcp://127.0.0.1:9 could not be reached from here",
                          "tcp://127.0.0.1:9")


def test_tasks_are_named_by_stage_and_job_and_run_on_their_owner(engine):
    with Job(engine, "test") as job:
        stage = job.stage("probe")
        futures = [stage.submit(lambda: __import__("distributed").get_worker().address,
                                index=(i,), owner=w) for i, w in enumerate(engine.workers)]
        assert job.gather(futures) == engine.workers
    assert [f.key for f in futures] == [task_key("probe", job.id, 1, i)
                                        for i in range(len(engine.workers))]


def test_one_failed_task_fails_the_job_and_cancels_the_rest(engine):
    with pytest.raises(PartitionError, match=r"partition 1 \(boom, owner .*\) is error: "
                                             r"ValueError\('no good: 1'\)"):
        with Job(engine, "test") as job:
            slow_futures = [job.stage("slow").submit(slow, 0, index=(0,),
                                                     owner=engine.workers[1])]
            bad = job.stage("boom").submit(explode, 1, index=(1,), owner=engine.workers[0])
            started = time.perf_counter()
            job.wait(slow_futures + [bad])
    assert time.perf_counter() - started < 10
    assert all(f.status == "cancelled" for f in slow_futures)


def test_the_engines_own_errors_reach_the_caller_as_themselves(engine):
    with pytest.raises(UnknownColumnError, match="column 'z'") as caught:
        with Job(engine, "test") as job:
            job.wait([job.stage("check").submit(missing_column, 0, index=(0,))])
    assert any("raised by the check task" in note for note in caught.value.__notes__)


def test_stage_names_must_be_words(engine):
    with Job(engine, "test") as job:
        with pytest.raises(ValueError):
            job.stage("bad name 2").submit(len, [], index=(0,))


def test_partitions_need_one_owner_each():
    with pytest.raises(ValueError, match="2 partitions but 1 owners"):
        Partitions([None, None], ["w"], pd.DataFrame())  # type: ignore[list-item]


def lose_the_context():
    error = CorruptFileError("data.parquet (row group 0) cannot be decoded")
    error.gpu_context_lost = True
    raise error


def test_a_worker_whose_task_lost_its_gpu_is_restarted():
    """An error marked ``gpu_context_lost`` (which only cuDF's kernels cause) has the job
    restart the worker that raised it: a new process, which runs tasks again."""
    with gpuframe.start_cluster(backend="pandas", protocol="tcp", n_workers=1,
                                dashboard_address="127.0.0.1:0") as own:
        [worker] = own.workers
        before = own.client.run(os.getpid)
        with pytest.raises(CorruptFileError, match="data.parquet") as caught:
            with Job(own, "test") as job:
                job.wait([job.stage("read").submit(lose_the_context, index=(0,),
                                                   owner=worker)])
        assert any(f"{worker} was restarted" in note for note in caught.value.__notes__)
        assert own.client.submit(os.getpid, pure=False).result() not in before.values()


def test_a_failure_is_named_where_it_started_not_where_it_surfaced(engine):
    import gpuframe

    left = gpuframe.from_pandas(pd.DataFrame({"k": range(100), "a": 1.0}), npartitions=2)
    broken = left.map_partitions(explode_frame, meta=left.meta)
    right = gpuframe.from_pandas(pd.DataFrame({"k": range(50), "b": 2}))
    joined = broken.merge(right, on="k", broadcast_bytes=0)
    with pytest.raises(PartitionError, match=r"\(map, owner .*no good.*raised by the map task "
                                             r"gpuframe-map-"):
        joined.to_pandas()


def explode_frame(frame):
    raise ValueError(f"no good: {len(frame)} rows")


def test_a_cluster_without_workers_is_a_clear_error_not_a_hang(tmp_path):
    """A scheduler no worker joins, or whose workers all left: connect() and every action say
    so, naming the scheduler."""
    from distributed import LocalCluster

    from gpuframe.errors import ClusterError

    pd.DataFrame({"a": [1, 2]}).to_parquet(tmp_path / "a.parquet")
    with LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=None) as cluster:
        with pytest.raises(ClusterError, match="no worker joined the scheduler"):
            gpuframe.connect(cluster.scheduler_address, timeout=2)
    with LocalCluster(n_workers=1, host="127.0.0.1", dashboard_address=None) as cluster:
        with gpuframe.connect(cluster.scheduler_address) as engine:
            cluster.scale(0)
            deadline = time.monotonic() + 30
            while engine.workers and time.monotonic() < deadline:
                time.sleep(0.1)
            for action in (lambda: gpuframe.read_parquet(str(tmp_path), engine=engine).to_pandas(),
                           lambda: len(gpuframe.from_pandas(pd.DataFrame({"a": [1]}),
                                                            engine=engine))):
                with pytest.raises(ClusterError, match=f"{cluster.scheduler_address} has no "
                                                       "workers"):
                    action()


def test_a_task_that_cannot_reach_a_peer_fails_the_job_naming_the_peer_and_the_stage(engine):
    """The peer's address travels with the task's error, so the job's own WorkerLostError
    names it with the stage, as for a worker the scheduler saw leave."""
    with pytest.raises(WorkerLostError, match=r"worker tcp://127.0.0.1:9 could not be reached "
                                              r"by a peer: job \w+ \(test\) cannot finish its "
                                              r"send stage") as raised:
        with Job(engine, "test") as job:
            job.wait([job.stage("send").submit(unreachable, 1, index=(0,),
                                               owner=engine.workers[0])])
    assert raised.value.worker == "tcp://127.0.0.1:9"


def test_a_jobs_events_travel_on_the_stream_of_its_tasks(engine):
    """The start and client-side stages of a job reach the scheduler on the client's stream:
    the scheduler answers a call only for its end (which reads of the metrics must not
    overtake), and its metrics hold the job."""
    from gpuframe.diagnostics.jobs import job_metrics

    assert engine.streams_events
    with calls_answered(engine.cluster.scheduler, "log_event") as calls:
        with Job(engine, "streamed") as job:
            job.client_stage("plan", 0.01)
            stage = job.stage("read")
            job.gather([stage.submit(abs, -i, index=(i,), owner=w)
                        for i, w in enumerate(engine.workers)])
        deadline = time.monotonic() + 10
        while (metrics := job_metrics(job=job.id)).running:  # its end not sent and waited for
            assert time.monotonic() < deadline, "the job's end never reached the scheduler"
            time.sleep(0.01)
    # (An earlier job's end, not waited for either, may arrive in the while.)
    assert [call["msg"]["phase"] for call in calls if call["msg"]["job"] == job.id] == ["end"]
    assert metrics.name == "streamed"
    assert list(metrics.stages) == ["plan", "read"]
