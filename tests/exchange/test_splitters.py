"""Splitters cut a partition into an exchange's buckets by hash, by range or by given
destinations; owner policies map buckets to workers; the exchange moves them."""

import numpy as np
import pandas as pd
import pytest

from gpuframe.exchange.exchange import exchange
from gpuframe.exchange.mailbox import arrivals
from gpuframe.exchange.placement import Contiguous, HashPartitioning, RoundRobin
from gpuframe.exchange.splitters import DestinationSplitter, HashSplitter, RangeSplitter
from gpuframe.runtime.runner import Job, Partitions


@pytest.fixture
def part():
    rng = np.random.default_rng(2)
    return pd.DataFrame({"k": rng.integers(0, 1000, 5000), "s": rng.choice(list("abcdef"), 5000),
                         "v": rng.random(5000)})


def test_hash_buckets_hold_each_key_once_and_every_row(part):
    buckets = HashSplitter(("k",), 4).split(part, 0)
    assert sum(len(b) for b in buckets) == len(part)
    seen = [set(b.k) for b in buckets]
    assert all(not (seen[i] & seen[j]) for i in range(4) for j in range(i + 1, 4))
    cast = HashSplitter(("k",), 4, {"k": "int32"}).split(part, 0)
    assert all(b.k.dtype == "int32" for b in cast)


def test_range_buckets_are_ordered_and_keep_equal_keys_together(part):
    boundaries = pd.DataFrame({"k": [100, 500, 500, 900]})
    splitter = RangeSplitter(("k",), boundaries, (True,))
    buckets = splitter.split(part, 0)
    assert splitter.n == 5 and len(buckets) == 5
    assert sum(len(b) for b in buckets) == len(part)
    for lower, upper in zip(buckets, buckets[1:]):
        if len(lower) and len(upper):
            assert lower.k.max() <= upper.k.min()
    assert len(buckets[2]) == 0  # between two equal boundaries
    descending = RangeSplitter(("s", "k"), pd.DataFrame({"s": ["d", "b"], "k": [10, 10]}),
                               (False, True)).split(part, 0)
    assert set(descending[0].s) <= {"d", "e", "f"} and set(descending[2].s) <= {"a", "b"}


def test_given_destinations_come_from_a_column_that_is_dropped(part):
    frame = part.assign(dest=(part.k % 3).astype("int32"))
    buckets = DestinationSplitter("dest", 3).split(frame, 0)
    assert [list(b.columns) for b in buckets] == [["k", "s", "v"]] * 3
    for d, bucket in enumerate(buckets):
        assert (bucket.k % 3 == d).all()
        pd.testing.assert_frame_equal(bucket.reset_index(drop=True),
                                      part[part.k % 3 == d].reset_index(drop=True))


def test_owner_policies():
    workers = ["a", "b", "c"]
    assert RoundRobin().owners(workers, 7) == ["a", "b", "c", "a", "b", "c", "a"]
    assert Contiguous().owners(workers, 6) == ["a", "a", "b", "b", "c", "c"]
    placed = HashPartitioning(("k",), ("int64",), 2, ("a", "b"))
    assert placed.serves(["k"], ["int64"]) and not placed.serves(["k"], ["int32"])
    assert placed.renamed({"k": "key"}).keys == ("key",)


def collect(parts):
    return pd.concat(arrivals(parts))


@pytest.mark.parametrize("way", ["direct", "tasks"])
def test_the_exchange_moves_every_bucket_to_its_consumer(engine, part, way, monkeypatch):
    from gpuframe.frame import from_pandas

    monkeypatch.setenv("GPUFRAME_EXCHANGE", way)
    frame = from_pandas(part, npartitions=3).persist()
    splitter = HashSplitter(("k",), 4)
    with Job(engine, "test") as job:
        buckets = exchange(job, frame.partitions, splitter, RoundRobin(), "left")
        assert len(buckets.parts) == 4
        assert buckets.owners == RoundRobin().owners(job.workers, 4)
        stage = job.stage("collect")
        futures = [stage.submit(collect, bucket, index=(b,), owner=owner)
                   for b, (bucket, owner) in enumerate(zip(buckets.parts, buckets.owners))]
        collected = job.gather(futures)
    assert sum(len(c) for c in collected) == len(part)
    for b, rows in enumerate(collected):  # each bucket holds its keys, and only those
        pd.testing.assert_frame_equal(rows.reset_index(drop=True),
                                      splitter.split(part, 0)[b].reset_index(drop=True))
    pd.testing.assert_frame_equal(pd.concat(collected).sort_values(["k", "v"])
                                  .reset_index(drop=True),
                                  part.sort_values(["k", "v"]).reset_index(drop=True))
    assert isinstance(frame.partitions, Partitions)
