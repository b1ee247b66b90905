import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import gpuframe
from gpuframe.errors import OptionError, PartitionError


@pytest.fixture
def frame_data():
    rng = np.random.default_rng(7)
    n = 1_003
    data = pd.DataFrame({
        "key": rng.integers(0, 50, n),
        "value": rng.random(n),
        "name": pd.array(rng.choice(["ab", "cde", None], n), dtype="str"),
        "when": pd.to_datetime(rng.integers(0, 10**9, n), unit="s"),
        "maybe": pd.array(rng.choice([1, 2, None], n), dtype="Int64"),
    })
    return data


def test_from_pandas_round_trips_and_places_partitions_on_every_worker(engine, frame_data):
    frame = gpuframe.from_pandas(frame_data, npartitions=4)
    assert frame.npartitions == 4
    assert set(frame.owners) == set(engine.workers)
    assert list(frame.columns) == list(frame_data.columns)
    assert len(frame) == len(frame_data)
    assert frame.partition_lengths() == [251, 251, 251, 250]
    pd.testing.assert_frame_equal(frame.to_pandas(), frame_data)


def test_owners_are_where_the_data_is(engine, frame_data):
    frame = gpuframe.from_pandas(frame_data, npartitions=3)
    where = engine.client.who_has(frame.futures)
    assert [sorted(where[f.key]) for f in frame.futures] == [[o] for o in frame.owners]


def test_head_reads_across_partitions(engine, frame_data):
    frame = gpuframe.from_pandas(frame_data, npartitions=8)
    pd.testing.assert_frame_equal(frame.head(300), frame_data.head(300))
    pd.testing.assert_frame_equal(frame.head(), frame_data.head())


@pytest.mark.parametrize("rows, npartitions", [(0, 2), (1, 4), (3, 8)])
def test_tiny_and_empty_frames(engine, rows, npartitions):
    data = pd.DataFrame({"a": np.arange(rows), "b": np.arange(rows) * 0.5})
    frame = gpuframe.from_pandas(data, npartitions=npartitions)
    assert len(frame) == rows
    assert frame.npartitions == max(1, min(rows, npartitions))
    pd.testing.assert_frame_equal(frame.to_pandas(), data)
    pd.testing.assert_frame_equal(frame.head(2), data.head(2))


def test_npartitions_must_be_positive(engine):
    with pytest.raises(OptionError, match="npartitions=0"):
        gpuframe.from_pandas(pd.DataFrame({"a": [1]}), npartitions=0)


def test_to_dask_and_back(engine, frame_data):
    frame = gpuframe.from_pandas(frame_data, npartitions=3)
    collection = frame.to_dask()
    assert collection.npartitions == 3
    filtered = collection[collection.key < 10]
    again = gpuframe.from_dask(filtered)
    expected = frame_data[frame_data.key < 10]
    pd.testing.assert_frame_equal(again.to_pandas(), expected.reset_index(drop=True))
    assert set(again.owners) <= set(engine.workers)
    assert collection.value.sum().compute() == pytest.approx(frame_data.value.sum())


def test_from_dask_of_a_dask_collection(engine, frame_data):
    collection = dd.from_pandas(frame_data, npartitions=5)
    frame = gpuframe.from_dask(collection)
    assert frame.npartitions == 5
    expected = collection.compute()
    pd.testing.assert_frame_equal(frame.to_pandas(), expected)
    assert frame.dtypes.equals(expected.dtypes)


def _explode(partition):
    raise ValueError("bad partition on purpose")


def test_a_failed_partition_is_never_returned_silently(engine, frame_data):
    collection = dd.from_pandas(frame_data, npartitions=2).map_partitions(
        _explode, meta=frame_data.head(0))
    frame = gpuframe.from_dask(collection)  # lazy: nothing has run yet
    with pytest.raises(PartitionError, match=r"partition \d .* error.*bad partition on purpose"):
        frame.persist()


def test_repr_names_backend_and_schema(engine, frame_data):
    frame = gpuframe.from_pandas(frame_data, npartitions=2)
    lazy = repr(frame)
    assert "lazy" in lazy and "backend=pandas" in lazy and "key: int64" in lazy
    ran = repr(frame.persist())
    assert "npartitions=2" in ran and "backend=pandas" in ran and "key: int64" in ran


@pytest.mark.gpu
def test_partitions_are_cudf_on_a_gpu_cluster(frame_data):
    import gpuframe

    with gpuframe.start_cluster(protocol="tcp") as gpu_engine:
        frame = gpuframe.from_pandas(frame_data)
        kinds = gpu_engine.client.gather(
            [gpu_engine.client.submit(lambda p: type(p).__module__, f) for f in frame.futures])
        assert all(kind.startswith("cudf") for kind in kinds)
        pd.testing.assert_frame_equal(frame.to_pandas(), frame_data, check_dtype=False)
        round_trip = gpuframe.from_dask(frame.to_dask())
        assert len(round_trip) == len(frame_data)


def test_to_pandas_and_head_give_a_range_index_as_pandas(engine):
    """Each partition counts its rows from 0; the gathered frame counts them once."""
    left = pd.DataFrame({"k": np.arange(40) % 7, "a": np.arange(40)})
    right = pd.DataFrame({"k": np.arange(7), "b": np.arange(7) * 2.0})
    joined = gpuframe.from_pandas(left, npartitions=4).merge(gpuframe.from_pandas(right),
                                                             on="k", broadcast_bytes=0)
    assert joined.to_pandas().index.equals(pd.RangeIndex(40))
    assert joined.head(25).index.equals(pd.RangeIndex(25))


def test_to_pandas_waits_once_and_asks_sizes_only_where_the_plan_bounds_none(
        engine, frame_data, monkeypatch):
    """The conversions are submitted with the plan's tasks and waited for alone (a round trip
    to the client fewer); the scheduler is asked what the partitions hold only where the plan
    cannot bound the rows (a join's); an aggregate's partials are gathered at once, as
    pandas, and finished on the client (no conversion task)."""
    from gpuframe.runtime.runner import Job

    waits, sized = [], []
    wait, held_bytes = Job.wait, Job.held_bytes
    monkeypatch.setattr(Job, "wait", lambda job, futures: (
        waits.append([f.key for f in futures]), wait(job, futures))[1])
    monkeypatch.setattr(Job, "held_bytes", lambda job, futures: (
        sized.append(len(futures)), held_bytes(job, futures))[1])
    frame = gpuframe.from_pandas(frame_data, npartitions=3)
    total = frame.agg(rows=("key", "count"), value=("value", "sum")).to_pandas()
    assert total["rows"].tolist() == [len(frame_data)]
    assert total["value"].iloc[0] == pytest.approx(frame_data["value"].sum())
    assert sized == []
    assert waits and all(key.startswith("gpuframe-partial-") for key in waits[0])
    joined = frame.merge(frame[["key"]].drop_duplicates(), on="key")
    assert len(joined.to_pandas()) == len(frame_data)
    assert len(sized) == 1
