"""Memory, end to end, on two workers of 1 GiB each: a join whose output is more than a
worker's memory completes; one that cannot fit anywhere fails before it runs, saying why; a
frame too large for the client is refused before it is gathered; and after each failure the
next job runs on the same engine. On GPUs the same joins run with 1 GiB of device memory a
worker, which dask-cuda spills to host memory."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

import gpuframe
from gpuframe.cluster import memory
from gpuframe.errors import MemoryLimitError

WORKER_MEMORY = "1GiB"


@pytest.fixture(scope="module")
def small_engine():
    engine = gpuframe.start_cluster(backend="pandas", protocol="tcp", n_workers=2,
                                    memory_limit=WORKER_MEMORY, dashboard_address="127.0.0.1:0")
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def small_gpu_engine():
    """A cuDF worker per GPU whose device memory is limited to 1 GiB."""
    with gpuframe.start_cluster(backend="cudf", protocol="tcp", device_memory_limit=WORKER_MEMORY,
                                dashboard_address="127.0.0.1:0") as engine:
        yield engine


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def limited_engine(request):
    return request.getfixturevalue("small_gpu_engine" if request.param == "gpu"
                                   else "small_engine")


def fan_out(rows: int, keys: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"k": rng.integers(0, keys, rows), "v": rng.random(rows)})


def joined_rows(left: pd.DataFrame, right: pd.DataFrame) -> int:
    """An inner join's rows on ``k``, without making them."""
    return int((left.k.value_counts() * right.k.value_counts()).fillna(0).sum())


def assert_next_job_runs(engine) -> None:
    left, right = fan_out(2000, 50, 7), fan_out(2000, 50, 8).rename(columns={"v": "w"})
    got = gpuframe.from_pandas(left, engine=engine).merge(
        gpuframe.from_pandas(right, engine=engine), on="k").to_pandas()
    assert len(got) == joined_rows(left, right)
    assert got.w.sum() == pytest.approx(left.merge(right, on="k").w.sum())


@pytest.mark.timeout(120)
def test_a_many_to_many_join_larger_than_a_workers_memory_completes(limited_engine):
    left, right = fan_out(40_000, 20, 1), fan_out(40_000, 20, 2).rename(columns={"v": "w"})
    rows = joined_rows(left, right)  # about 80 million rows, 1.8 GiB: 1.8 workers' memory
    start = time.monotonic()
    result = gpuframe.from_pandas(left, engine=limited_engine).merge(
        gpuframe.from_pandas(right, engine=limited_engine), on="k")
    assert len(result) == rows
    assert time.monotonic() - start < 60
    assert result.npartitions > 2 * len(limited_engine.workers)  # split into more tasks
    del result
    assert_next_job_runs(limited_engine)


def assert_refused_up_front(engine, rows: int, message: str, **options) -> None:
    """A join of ``rows`` rows of one key on each side is a ``MemoryLimitError`` matching
    ``message`` before any task runs, and the next job runs."""
    side = pd.DataFrame({"k": np.zeros(rows, dtype="int64"), "v": np.arange(float(rows))})
    left = gpuframe.from_pandas(side, engine=engine)
    right = gpuframe.from_pandas(side.rename(columns={"v": "w"}), engine=engine)
    start = time.monotonic()
    with pytest.raises(MemoryLimitError, match=message):
        len(left.merge(right, on="k", **options))
    assert time.monotonic() - start < 15
    assert_next_job_runs(engine)


@pytest.mark.timeout(60)
def test_a_join_that_cannot_fit_anywhere_fails_up_front(limited_engine):
    """A million rows of one key on each side: 10**12 output rows, beyond any disk."""
    if len(limited_engine.workers) < 2:  # one GPU: the heavy key's own refusal comes first
        pytest.skip("the refusal weighs two workers' memory: needs two GPUs")
    assert_refused_up_front(limited_engine, 1_000_000,
                            r"the inner join on k = k: its output is estimated at [\d.]+ GiB "
                            r".*, more than the workers can hold, [\d.]+ GiB in all: 2 workers "
                            r"with memory limits of 1\.0 GiB, 1\.0 GiB")


@pytest.mark.timeout(60)
def test_a_key_too_large_for_one_task_fails_up_front(limited_engine):
    """sort=True joins each key in one task: 36 million rows of one key cannot be split."""
    assert_refused_up_front(limited_engine, 6000,
                            r"one key's output is estimated at 1\.1 GiB or more, larger than "
                            r"the smallest worker memory limit, 1\.0 GiB", sort=True)


@pytest.mark.timeout(60)
def test_to_pandas_of_a_frame_larger_than_the_client_can_hold_fails_before_gathering(
        small_engine, monkeypatch):
    frame = gpuframe.from_pandas(fan_out(500_000, 1000, 3), npartitions=4,
                                 engine=small_engine).persist()
    monkeypatch.setattr(memory, "available_here", lambda: 2**20)
    gathered = []
    monkeypatch.setattr(small_engine.client, "gather",
                        lambda *args, **kwargs: gathered.append(args))
    start = time.monotonic()
    with pytest.raises(MemoryLimitError, match=r"to_pandas\(\): the frame's 4 partitions hold "
                                               r"7\.\d MiB on the workers; gathering and "
                                               r"concatenating them here needs about 15\.\d "
                                               r"MiB, and this process has 1\.0 MiB of memory "
                                               r"available"):
        frame.to_pandas()
    assert not gathered
    assert time.monotonic() - start < 10
    monkeypatch.undo()
    assert len(frame.to_pandas()) == 500_000
