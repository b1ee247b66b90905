"""A join's output estimated from the key sample, and the joins refused before they run."""

import math

import numpy as np
import pandas as pd
import pytest

from gpuframe.cluster.memory import WorkerMemory
from gpuframe.errors import MemoryLimitError
from gpuframe.operators.join_decision import tasks_per_worker
from gpuframe.operators.join_size import check_fits, estimate_output, split_hashes
from gpuframe.operators.skew import SideProfile, SideSkew, plan_skew

MiB = 2**20


def profile(frame: pd.DataFrame, parts: int, sample_rows: int, seed: int = 0) -> SideProfile:
    """What the sampling tasks would learn of ``frame`` cut into ``parts`` partitions."""
    rng = np.random.default_rng(seed)
    samples, lengths = [], []
    for rows in np.array_split(np.arange(len(frame)), parts):
        part = frame.iloc[rows]
        picked = part if len(part) <= sample_rows else part.iloc[
            np.sort(rng.choice(len(part), sample_rows, replace=False))]
        samples.append(picked[["k"]].reset_index(drop=True))
        lengths.append(len(part))
    return SideProfile.of_samples(samples, lengths, int(frame.memory_usage(index=False).sum()),
                                  {}, ["k"])


def fan_out_sides(rows: int, keys: int, seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    return (pd.DataFrame({"k": rng.integers(0, keys, rows), "a": rng.random(rows)}),
            pd.DataFrame({"k": rng.integers(keys // 2, keys + keys // 2, rows),
                          "b": rng.random(rows)}))


@pytest.mark.parametrize("how", ["inner", "left", "right", "outer"])
def test_a_fully_sampled_join_is_estimated_exactly(how):
    left, right = fan_out_sides(3000, 40)
    estimate = estimate_output(profile(left, 3, 5000), profile(right, 2, 5000), how)
    rows = len(left.merge(right, on="k", how=how))
    assert estimate.rows.sum() == pytest.approx(rows)
    assert estimate.at_least.sum() == pytest.approx(rows)
    assert estimate.row_bytes == 32  # 16 bytes a row on each side


def test_a_sampled_many_to_many_join_is_estimated_closely_and_bounded_from_below():
    left, right = fan_out_sides(200_000, 1000)
    rows = int((left.k.value_counts() * right.k.value_counts()).sum())
    estimate = estimate_output(profile(left, 4, 5000), profile(right, 4, 5000), "inner")
    assert estimate.rows.sum() == pytest.approx(rows, rel=0.1)
    assert estimate.at_least.sum() < rows


def test_semi_and_anti_joins_are_never_refused():
    left, right = fan_out_sides(3000, 2)
    for how in ("leftsemi", "leftanti", "left_anti", "right_anti"):
        estimate = estimate_output(profile(left, 1, 5000), profile(right, 1, 5000), how)
        assert estimate.at_least.sum() == 0
        assert estimate.rows.sum() == 3000


def one_key_join(rows: int):
    side = pd.DataFrame({"k": np.zeros(rows, dtype="int64"), "v": np.arange(rows, dtype="f8")})
    return profile(side, 2, 10_000), estimate_output(profile(side, 2, 10_000),
                                                     profile(side, 2, 10_000), "inner")


def test_a_key_whose_output_outgrows_a_worker_is_refused_unless_it_is_split():
    sampled, output = one_key_join(6000)  # 36 million rows of 32 bytes
    workers = [WorkerMemory(f"w{i}", 300 * MiB, 10_000 * MiB) for i in range(2)]
    with pytest.raises(MemoryLimitError, match=r"one key's output is estimated at 1\.1 GiB or "
                                               r"more, .* smallest worker memory limit, "
                                               r"300\.0 MiB"):
        check_fits(output, workers, np.empty(0, dtype=np.uint64), "the inner join on k = k")
    heavy = SideSkew(pd.DataFrame({"k": [0]}), pd.DataFrame({"k": []}, dtype="int64"))
    check_fits(output, workers, split_hashes(heavy, sampled.samples), "the inner join")


def test_an_output_beyond_the_workers_memory_and_disk_is_refused():
    _, output = one_key_join(6000)
    split = output.hashes
    roomy = [WorkerMemory(f"w{i}", 300 * MiB, 1000 * MiB) for i in range(2)]
    check_fits(output, roomy, split, "the inner join")
    cramped = [WorkerMemory(f"w{i}", 300 * MiB, 500 * MiB) for i in range(2)]
    with pytest.raises(MemoryLimitError, match=r"estimated at 1\.1 GiB \(3\.6e\+07 rows; at "
                                               r"least 1\.1 GiB\), more than the workers can "
                                               r"hold, 1000\.0 MiB in all: 2 workers with "
                                               r"memory limits of 300\.0 MiB, 300\.0 MiB"):
        check_fits(output, cramped, split, "the inner join")
    unlimited = [WorkerMemory("w0", None, None), *cramped]
    check_fits(output, unlimited, split, "the inner join")


def test_tasks_per_worker_keeps_each_join_task_within_its_share_of_memory():
    assert tasks_per_worker(100, 2, 25) == 2
    assert tasks_per_worker(100, 1, 25) == 4
    assert tasks_per_worker(20, 2, None) == 1
    assert tasks_per_worker(0, 2, 25) == 1


@pytest.mark.parametrize("keys", [["k"], ["k", "s"]], ids=["one", "two"])
def test_split_keys_are_known_by_the_hashes_of_the_sample(keys):
    """The heavy keys the skew plan names (a text key, a null one) hash as they do in the
    sample: a split key taken for an unsplit one would be refused for nothing."""
    rows = 3000
    side = pd.DataFrame({"k": ["heavy"] * (rows // 2) + [None] * (rows // 4)
                         + [f"light{i}" for i in range(rows // 4)],
                         "s": [1.5] * (rows // 2) + [np.nan] * (rows // 2)})
    sampled = SideProfile.of_samples([side[keys]], [rows], 16 * rows, {}, keys)
    output = estimate_output(sampled, sampled, "inner")
    skew = plan_skew(sampled, sampled, "inner", keys, keys, 2, 0.25)
    assert skew is not None
    split = split_hashes(skew.left, sampled.samples)
    assert len(split) == 2 and np.isin(split, output.hashes).all()
    assert output.largest_unsplit(split) == output.row_bytes  # a light key: one row each side


def test_a_side_larger_than_a_send_tasks_share_is_sent_in_batches():
    """A send task holds its partitions at once: a worker's share of a side beyond half a join
    task's bytes goes in batches that fit it; one that fits, or no limit, in one task."""
    from gpuframe.operators.join_decision import send_batch

    side = SideProfile(samples=[], lengths=[], nbytes=48 * 30 * 2**20, memory={}, hashes=[])
    assert send_batch(side, 48, 2, task_bytes=256 * 2**20) == 4  # 30 MiB partitions, 128 MiB
    assert send_batch(side, 48, 2, task_bytes=2 * 2**30) is None  # 720 MiB a worker fits 1 GiB
    assert send_batch(side, 48, 2, task_bytes=None) is None
    assert send_batch(side, 48, 2, task_bytes=32 * 2**20) == 1  # never below one partition


def test_only_keys_sampled_more_than_once_on_a_side_ask_for_a_split():
    """A key that both samples of distinct keys draw once is estimated at the sampling ratio
    squared (10**8 rows here): no evidence that it fans out, so no split is asked for; drawn
    twice on one side, it is."""
    def side(keys):
        return SideProfile.of_samples([pd.DataFrame({"k": keys})], [10**8], 16 * 10**8, {},
                                      ["k"])

    left = side(np.arange(10_000))
    once = estimate_output(left, side(np.arange(9_999, 19_999)), "inner")
    assert once.rows.max() == pytest.approx(10**8)
    assert once.most_rows_of_a_key(key_bytes=2**30) == math.inf
    twice = estimate_output(left, side(np.array([*range(9_999, 19_998), 9_999])), "inner")
    assert twice.most_rows_of_a_key(key_bytes=2**30) == pytest.approx(2**30 / 32)
