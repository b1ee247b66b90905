import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dask.utils import key_split
from distributed import get_task_stream

import gpuframe
from gpuframe.cluster.hardware import list_gpus
from gpuframe.diagnostics.jobs import mark, metrics_since
from gpuframe.diagnostics.metrics import EngineMetrics, union_seconds
from gpuframe.diagnostics.stages import SEND_EVENT_TOPIC


def test_wall_time_counts_overlapping_tasks_once():
    assert union_seconds([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == pytest.approx(4.0)
    assert union_seconds([]) == 0


def test_deliveries_count_as_transfers_over_the_time_the_link_was_busy():
    metrics = EngineMetrics()
    for start, stop, nbytes in ((0.0, 2.0, 100), (1.0, 3.0, 300), (10.0, 11.0, 0)):
        metrics.log_event(SEND_EVENT_TOPIC, {"job": None, "source": "a", "destination": "b",
                                             "start": start, "stop": stop, "bytes": nbytes})
    (pair,) = metrics.summary(metrics.records, 0.0, 11.0)["pairs"]
    assert (pair["source"], pair["destination"], pair["bytes"]) == ("a", "b", 400)
    assert pair["seconds"] == pytest.approx(4.0)  # overlapping deliveries count once
    assert pair["rate"] == pytest.approx(100.0)


def test_task_stream_lists_the_stage_names_after_a_join(engine):
    orders = pd.DataFrame({"k": np.arange(20_000) % 500, "v": np.arange(20_000)})
    people = pd.DataFrame({"k": np.arange(500), "w": np.arange(500) * 2})
    left, right = gpuframe.from_pandas(orders), gpuframe.from_pandas(people)
    with get_task_stream(client=engine.client) as stream:
        joined = left.merge(right, on="k", broadcast_bytes=0)
        assert len(joined) == 20_000
    names = {key_split(task["key"]) for task in stream.data}
    assert {"gpuframe-send-left", "gpuframe-send-right", "gpuframe-join"} <= names
    sources = {startstop.get("source") for task in stream.data
               for startstop in task["startstops"] if startstop["action"] == "transfer"}
    assert sources & set(engine.workers)  # buckets travelled between the workers


def test_join_metrics_hold_its_stages_and_worker_pairs(shuffle_join, cpu_engine):
    metrics = shuffle_join["report"].metrics
    expected = shuffle_join["orders"].merge(shuffle_join["people"], on="customer_id")
    assert len(shuffle_join["result"]) == len(expected)
    assert {"load", "send", "transfer", "join", "gather"} <= set(metrics.stages)
    workers = cpu_engine.workers
    assert metrics.stages["send"]["tasks"] == 2 * len(workers)  # one per worker and side
    assert metrics.stages["join"]["tasks"] == len(workers)
    pairs = {(p["source"], p["destination"]): p for p in metrics.pairs}
    assert set(pairs) == {(a, b) for a in workers for b in workers if a != b}
    moved = sum(p["bytes"] for p in pairs.values())
    assert moved == metrics.stages["transfer"]["bytes"]
    # uniform keys over two workers: about half of every side's rows cross to the other
    assert 0.3 < moved / metrics.stages["load"]["bytes"] < 0.7
    assert all(p["rate"] > 0 for p in pairs.values())
    assert metrics.protocol == "tcp" and metrics.workers == workers
    for limits in metrics.limits.values():
        assert limits["memcpy"] > 0 and limits["disk_read"] > 0
        if not list_gpus():
            assert limits["device_copy"] is None


def test_ingest_per_worker_is_the_bytes_the_reads_fetched(engine, tmp_path):
    from gpuframe.readers import read_parquet_with_report

    for i in range(4):
        table = pa.table({"id": np.arange(i * 50_000, (i + 1) * 50_000),
                          "x": np.random.default_rng(i).random(50_000)})
        pq.write_table(table, tmp_path / f"part-{i}.parquet", row_group_size=10_000)
    bookmark = mark(engine)
    frame, read = read_parquet_with_report(str(tmp_path))
    metrics = metrics_since(engine, bookmark)
    assert len(frame) == 200_000
    assert metrics.stages["read"]["bytes"] == read.bytes_read > 0
    assert sum(w["bytes"] for w in metrics.ingest.values()) == read.bytes_read
    assert set(metrics.ingest) <= set(engine.workers)
    assert all(w["rate"] > 0 for w in metrics.ingest.values())


def test_planning_a_read_is_a_stage_of_its_jobs(engine, tmp_path):
    pq.write_table(pa.table({"id": np.arange(40_000)}), tmp_path / "one.parquet",
                   row_group_size=10_000)
    pq.write_table(pa.table({"id": np.arange(10)}), tmp_path / "two.parquet")
    with get_task_stream(client=engine.client) as stream:
        assert len(gpuframe.read_parquet(str(tmp_path))) == 40_010
    # the files' metadata is read on the workers: the plan shows on the task stream
    assert {"gpuframe-plan-metadata", "gpuframe-read-parquet"} <= {
        key_split(task["key"]) for task in stream.data}
    # read_parquet plans when called, to learn the schema: the first file's metadata, the
    # other's, and the client's own planning
    planned = gpuframe.job_metrics("previous")
    assert planned.name == "plan parquet read" and set(planned.stages) == {"plan"}
    assert planned.stages["plan"]["tasks"] == 3
    # len() plans again with the metadata kept, then reads
    current = gpuframe.job_metrics()
    assert current.name == "count" and {"plan", "read"} <= set(current.stages)
    assert current.stages["plan"]["tasks"] == 1
    assert current.stages["plan"]["wall_seconds"] > 0
    assert current.start <= current.stop


@pytest.mark.gpu
def test_gpu_join_records_the_bytes_each_pair_moved():
    """Bucket sizes come from dask.sizeof of cuDF frames on the workers: without a rule for
    them every pair logged ~0 bytes."""
    if len(list_gpus()) < 2:
        pytest.skip("needs two GPUs")
    rng = np.random.default_rng(3)
    orders = pd.DataFrame({"customer_id": rng.integers(0, 5_000, 2_000_000),
                           "amount": rng.random(2_000_000)})
    people = pd.DataFrame({"customer_id": np.arange(5_000), "segment": np.arange(5_000) % 5})
    with gpuframe.start_cluster(backend="cudf", protocol="tcp") as gpu_engine:
        left = gpuframe.from_pandas(orders, engine=gpu_engine)
        right = gpuframe.from_pandas(people, engine=gpu_engine)
        bookmark = mark(gpu_engine)
        assert len(left.merge(right, on="customer_id", broadcast_bytes=0)) == len(orders)
        metrics = metrics_since(gpu_engine, bookmark)
    moved = sum(p["bytes"] for p in metrics.pairs)
    # about half of each side's rows cross to the other GPU
    assert 0.3 < moved / metrics.stages["load"]["bytes"] < 0.7
    assert 0.3 < moved / orders.memory_usage(index=False).sum() < 0.8
