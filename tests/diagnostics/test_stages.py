import pytest
from dask.utils import key_split

from gpuframe.diagnostics.stages import (
    TaskKeyError,
    job_of,
    new_job,
    stage_name_of,
    stage_of,
    task_key,
)

TOKEN = "0123456789abcdef0123456789abcdef"


def test_new_jobs_are_fresh_hex_ids():
    jobs = {new_job() for _ in range(100)}
    assert len(jobs) == 100
    assert all(len(job) == 32 and int(job, 16) >= 0 for job in jobs)


@pytest.mark.parametrize(("stage", "index", "first"), [
    ("read-parquet", (3,), "read"),
    ("split-left", (1,), "split"),
    ("send-right", (1, 0), "send"),
    ("join", (0,), "join"),
    ("filter", (), "filter"),
    ("group-by-sum", ("left", 7), "group"),
])
def test_keys_round_trip_their_stage_and_job(stage, index, first):
    job = new_job()
    key = task_key(stage, job, 4, *index)
    assert key == f"gpuframe-{stage}-{job}.4" + "".join(f"-{i}" for i in index)
    assert stage_of(key) == stage_of((key, 0)) == first
    assert stage_name_of(key) == stage_name_of((key, 0)) == stage
    assert job_of(key) == job_of((key, 0)) == job
    assert key_split(key) == f"gpuframe-{stage}"  # what the task stream shows


def test_a_key_without_an_index_has_no_trailing_dash():
    assert task_key("join", "abc123", 0) == "gpuframe-join-abc123.0"
    assert job_of("gpuframe-join-abc123.0") == "abc123"


def test_a_job_id_of_letters_only_still_ends_the_stage():
    key = task_key("read", "deadbeef", 2, 0)
    assert key_split(key) == "gpuframe-read"
    assert (stage_of(key), job_of(key)) == ("read", "deadbeef")
    assert stage_name_of(key) == "read" and stage_name_of("inc-1234") is None


@pytest.mark.parametrize("stage", [
    "", "Read", "read_parquet", "read-", "-read", "read--parquet", "read2", "read parquet",
    "read.parquet", "read-cafebabe",
])
def test_stage_names_keys_cannot_carry_are_refused(stage):
    with pytest.raises(TaskKeyError, match=f"stage={stage!r}"):
        task_key(stage, new_job(), 0, 1)


@pytest.mark.parametrize("job", ["", "a-b", "a.b", "a b"])
def test_job_ids_keys_cannot_carry_are_refused(job):
    with pytest.raises(TaskKeyError, match="job="):
        task_key("read", job, 0, 1)


@pytest.mark.parametrize("step", [-1, 1.5, "1", True])
def test_steps_are_ints_from_zero(step):
    with pytest.raises(TaskKeyError, match="step="):
        task_key("read", new_job(), step)


def test_keys_without_a_job_have_a_stage_but_no_job():
    assert stage_of(f"gpuframe-join-{TOKEN}-0") == "join"
    assert job_of(f"gpuframe-join-{TOKEN}-0") is None
    assert stage_of(f"gpuframe-from-pandas-{TOKEN}-0") == "from"
    assert job_of("gpuframe-join") is None


def test_keys_of_others_have_neither():
    for key in (f"getitem-{TOKEN}", ("getitem-x", 0), f"read-{TOKEN}.0-1", 42, (), None,
                f"gpuframe-{TOKEN}.0-1"):
        assert stage_of(key) is None
        assert job_of(key) is None
