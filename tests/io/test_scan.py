"""The readers (gpuframe.readers) and the read operator (gpuframe.operators.scan) on a real
two-worker CPU cluster, against pandas reading the same files: tasks on their owners, reports,
errors reaching the caller as themselves, plans made again."""

from __future__ import annotations

import re
import shutil
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dask.utils import key_split
from distributed import get_task_stream

import gpuframe
from gpuframe.io.errors import (
    FileChangedError,
    SchemaMismatchError,
    SourceNotFoundError,
    TruncatedFileError,
)
from gpuframe.io.planning.plan import plan_fragments
from gpuframe.io.storage.base import storage_options
from gpuframe.operators import scan
from gpuframe.operators.scan import measure_on_workers, worker_memory
from gpuframe.readers import (
    read_csv,
    read_orc,
    read_parquet,
    read_parquet_with_report,
    read_with_report,
)
from gpuframe.runtime.runner import Job


def _rewritable(dataset_dir, http_server, name: str) -> tuple:
    """(path, its URL) of a file of ids 0-99 in row groups of 25, in a folder of its own."""
    path = dataset_dir / name / "one.parquet"
    path.parent.mkdir(exist_ok=True)
    pq.write_table(pa.table({"id": list(range(100))}), path, row_group_size=25)
    return path, f"{http_server.url}/{name}/one.parquet"


def test_local_read_matches_pandas_and_places_partitions(engine, dataset_dir, check_same):
    flat = dataset_dir / "flat"
    frame = read_parquet(str(flat), partition_bytes=1, requests_in_flight=2)
    check_same(frame, pd.read_parquet(flat))
    assert frame.npartitions == 8
    assert all(f.key.startswith("gpuframe-read-parquet-") for f in frame.futures)
    assert set(frame.owners) == set(engine.workers)
    where = engine.client.who_has(frame.futures)
    assert all(where[f.key] == (owner,) for f, owner in zip(frame.futures, frame.owners))
    assert list(frame.meta.columns) == ["id", "x", "name"]


@pytest.mark.parametrize("columns, filters", [
    (["name", "id"], [("id", ">=", 2500), ("id", "<", 5200)]),
    (None, [[("id", "<", 10)], [("name", "==", "name-3"), ("x", ">", 3900.0)]]),
    (["x"], [("name", "in", ["name-1", "name-2"])]),
    (["id"], [("name", "!=", "name-1")]),
])
def test_columns_and_filters_match_pandas(engine, dataset_dir, columns, filters, check_same):
    flat = dataset_dir / "flat"
    frame, report = read_parquet_with_report(str(flat), columns, filters, partition_bytes=1)
    check_same(frame, pd.read_parquet(flat, columns=columns, filters=filters))
    assert report.rows == len(frame)
    assert report.bytes_read <= report.planned_bytes


def test_a_report_counts_every_task_of_a_read_larger_than_the_schedulers_event_log(
        dataset_dir):
    """The scheduler keeps the last ``low-level-log-length`` events of a topic (1000 by
    default): a report made from them counted only the read's last tasks."""
    import dask

    flat = dataset_dir / "flat"
    expected = pd.read_parquet(flat)
    with (dask.config.set({"distributed.admin.low-level-log-length": 2}),
          gpuframe.start_cluster(backend="pandas", protocol="tcp", n_workers=1) as engine):
        frame, report = read_parquet_with_report(str(flat), partition_bytes=1, engine=engine)
        assert frame.npartitions > 2
        assert report.rows == len(expected)
        assert report.bytes_read == report.planned_bytes
        assert read_parquet_with_report(str(flat), partition_bytes=1, engine=engine)[
            1].rows == len(expected)  # nothing of the first read counted again


def test_a_report_missing_some_tasks_stats_says_so(engine, dataset_dir, monkeypatch, caplog):
    """A worker restarted between its read task and the report has lost the task's stats."""
    assert len(engine.workers) == 2
    run = engine.client.run
    monkeypatch.setattr(engine.client, "run", lambda *args, **kwargs: dict(
        list(run(*args, **kwargs).items())[1:]))  # the first worker's stats are gone
    frame, report = read_parquet_with_report(str(dataset_dir / "flat"), partition_bytes=1)
    assert 0 < report.rows < len(frame)
    assert re.search(rf"counts \d+ of its {frame.npartitions} tasks", caplog.text)


def test_hive_read_matches_pandas(engine, dataset_dir, check_same):
    hive = dataset_dir / "hive"
    check_same(read_parquet(str(hive)), pd.read_parquet(hive))
    filters = [("year", "==", 2023), ("id", ">", 1500)]
    frame = read_parquet(str(hive), columns=["id", "city"], filters=filters)
    check_same(frame, pd.read_parquet(hive, columns=["id", "city"], filters=filters))
    assert frame.meta.dtypes["city"] == frame.to_pandas().dtypes["city"]


def test_a_remote_file_rewritten_after_its_metadata_was_kept_is_planned_again(engine, dataset_dir,
                                                                              http_server,
                                                                              check_same):
    """The second read plans with the kept footer, whose statistics would now prune the row
    groups that hold matches; the read finds the file changed and plans once more."""
    path, url = _rewritable(dataset_dir, http_server, "rewritten")
    filters = [("id", ">=", 50)]
    check_same(read_parquet(url, filters=filters), pd.read_parquet(path, filters=filters))
    pq.write_table(pa.table({"id": list(range(1000, 1100))}), path, row_group_size=25)
    http_server.reset()
    frame = read_parquet(url, filters=filters)
    check_same(frame, pd.read_parquet(path, filters=filters))
    assert len(frame) == 100
    footers = [r for r in http_server.log if r.range and r.range.startswith("bytes=-")]
    assert len(footers) == 1  # planned again once, the footer read anew


def rewritten_before_each_read(monkeypatch, change):
    """Have every run of a scan call ``change()`` between planning and reading."""
    read = scan._read

    def changed_then_read(*args):
        change()
        return read(*args)

    monkeypatch.setattr(scan, "_read", changed_then_read)


def test_a_remote_file_changed_between_planning_and_reading_is_named(engine, dataset_dir,
                                                                        http_server,
                                                                        monkeypatch):
    path, url = _rewritable(dataset_dir, http_server, "changed")
    frame = read_parquet(url)
    versions = iter(range(1, 10))

    def rewrite():
        start = 1000 * next(versions)
        pq.write_table(pa.table({"id": list(range(start, start + 100))}), path,
                       row_group_size=25)

    rewritten_before_each_read(monkeypatch, rewrite)
    with pytest.raises(FileChangedError, match=r"changed/one\.parquet changed since it was "
                                               r"planned \(.*etag"):
        frame.persist()


def test_check_version_off_reads_a_server_whose_etag_moves(engine, dataset_dir, http_server,
                                                           check_same):
    url = f"{http_server.url}/unstable-etag/flat/part-0.parquet"
    with pytest.raises(FileChangedError, match="part-0.parquet changed since it was planned"):
        read_parquet(url).persist()
    expected = pd.read_parquet(dataset_dir / "flat" / "part-0.parquet")
    for _ in range(2):  # nothing kept either: every plan reads the footer
        http_server.reset()
        check_same(read_parquet(url, check_version=False), expected)
        assert any(r.range and r.range.startswith("bytes=-") for r in http_server.log)


def test_s3_read_matches_local(engine, dataset_dir, s3_server, check_same):
    frame = read_parquet(s3_server.url("hive"), columns=["id", "x", "year"],
                         filters=[("city", "==", "ams")], **s3_server.options())
    check_same(frame, pd.read_parquet(dataset_dir / "hive", columns=["id", "x", "year"],
                                      filters=[("city", "==", "ams")]))


def test_empty_result_keeps_the_schema(engine, dataset_dir):
    frame = read_parquet(str(dataset_dir / "flat"), columns=["id", "name"],
                         filters=[("id", "<", -5)])
    assert frame.npartitions == 0
    result = frame.to_pandas()
    assert list(result.columns) == ["id", "name"] and len(result) == 0


def test_failed_fragment_fails_the_read(engine, dataset_dir, tmp_path, monkeypatch):
    copy = shutil.copytree(dataset_dir / "flat", tmp_path / "flat")
    frame = read_parquet(str(copy), requests_in_flight=1)
    rewritten_before_each_read(monkeypatch, (copy / "part-1.parquet").unlink)
    with pytest.raises(FileNotFoundError, match="no such file: .*part-1.parquet") as caught:
        frame.to_pandas()
    assert isinstance(caught.value, SourceNotFoundError)
    assert any("raised by the read-parquet task gpuframe-read-parquet-" in note
               for note in caught.value.__notes__)


def test_orc_and_csv_reads_on_the_cluster(engine, dataset_dir, check_same):
    columns, filters = ["name", "id"], [("id", ">=", 2500), ("name", "!=", "name-1")]
    want = pd.read_parquet(dataset_dir / "flat", columns=columns, filters=filters)
    orc_frame = gpuframe.read_orc(str(dataset_dir / "orc"), columns, filters, partition_bytes=1)
    check_same(orc_frame, want)
    # 8 stripes of 1000 ids: the 2 below id 2000 are skipped by their statistics
    assert orc_frame.npartitions == 6 and set(orc_frame.owners) == set(engine.workers)
    assert all(f.key.startswith("gpuframe-read-orc-") for f in orc_frame.futures)
    csv_frame, report = read_with_report(str(dataset_dir / "csv"), "csv", columns, filters,
                                         partition_bytes=40_000)
    check_same(csv_frame, want)
    assert all(f.key.startswith("gpuframe-read-csv-") for f in csv_frame.futures)
    assert report.bytes_read == report.planned_bytes and report.format == "csv"
    where = engine.client.who_has(csv_frame.futures)
    assert all(where[f.key] == (o,) for f, o in zip(csv_frame.futures, csv_frame.owners))
    typed = read_csv(str(dataset_dir / "csv" / "part-0.csv"), ["id"], schema={"id": "int32"})
    assert typed.to_pandas()["id"].dtype == "int32"


def test_budget_comes_from_the_workers_memory(engine, dataset_dir):
    """CPU workers: their memory limits, as the scheduler knows them."""
    limits = [info["memory_limit"] for info in engine.client.scheduler_info(
        n_workers=-1)["workers"].values()]
    assert worker_memory(engine, engine.workers) == sorted(limits)
    frame = read_orc(str(dataset_dir / "orc"))
    assert frame.npartitions == 2  # one fragment per file under the default budget


def test_workers_of_little_memory_get_small_partitions(engine, tmp_path):
    """A worker limited to 1 GiB reads 32 MiB fragments (not 128 MiB), which it can spill one
    by one."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from distributed import LocalCluster

    rows = 6 * 2**20  # 96 MiB of random doubles in one file, row groups of 16 MiB
    rng = np.random.default_rng(5)
    pq.write_table(pa.table({"x": rng.random(rows), "y": rng.random(rows)}),
                   tmp_path / "a.parquet", row_group_size=2**20, compression="none")
    with LocalCluster(n_workers=1, threads_per_worker=1, memory_limit="1GiB",
                      host="127.0.0.1", dashboard_address=None) as cluster:
        with gpuframe.connect(cluster.scheduler_address) as small:
            assert worker_memory(small, small.workers) == [2**30]
            frame = read_parquet(str(tmp_path), engine=small).persist()
            assert frame.npartitions >= 3  # 96 MiB in fragments of at most 32 MiB
            assert sum(frame.partition_lengths()) == rows
    roomy = read_parquet(str(tmp_path), engine=engine)
    assert roomy.npartitions == 1  # the test cluster's roomy workers: one 128 MiB fragment


@pytest.mark.gpu
def test_gpu_workers_report_their_device_memory_for_the_budget(dataset_dir):
    with gpuframe.start_cluster(backend="cudf", protocol="tcp") as gpu_engine:
        memory = worker_memory(gpu_engine, gpu_engine.workers)
        assert len(memory) == len(gpu_engine.workers) and min(memory) > 2**30
        plan = plan_fragments(str(dataset_dir / "flat"), workers=gpu_engine.workers,
                              worker_memory=memory, on_device=True)
        assert plan.partition_bytes == min(memory) // 32


def test_a_bad_file_among_many_is_named_when_workers_read_the_metadata(engine, dataset_dir):
    good, bad = str(dataset_dir / "flat" / "part-0.parquet"), dataset_dir / "bad"
    # two workers: the corrupt file is the first worker's, the truncated one the second's
    sources = [good, str(bad / "truncated.parquet"), str(bad / "corrupt_footer.parquet")]
    with pytest.raises(TruncatedFileError, match="truncated.parquet"):
        read_parquet(sources)  # the first bad file in the list's order, whichever worker
    with pytest.raises(SchemaMismatchError, match="a.parquet and .*b.parquet"):
        read_parquet(str(bad / "mismatch"))


def test_each_workers_gpu_memory_is_asked_once_per_engine():
    asked = []

    class Client:
        def run(self, function, workers):
            asked.append(list(workers))
            return {worker: 80 * 2**30 for worker in workers}

    class Backend:
        on_device = True

    class Engine:  # the parts of gpuframe's Engine that the function uses
        backend = Backend()
        client = Client()
        workers = ("tcp://a:1", "tcp://b:2")

    engine = Engine()
    assert worker_memory(engine, engine.workers) == [80 * 2**30] * 2
    assert worker_memory(engine, engine.workers) == [80 * 2**30] * 2
    assert worker_memory(engine, ["tcp://b:2", "tcp://c:3"]) == [80 * 2**30] * 2
    assert asked == [["tcp://a:1", "tcp://b:2"], ["tcp://c:3"]]


def test_read_measures_on_every_worker_at_once(engine, http_server):
    url = f"{http_server.url}/blob/2mib.bin"
    with get_task_stream(engine.client) as stream, Job(engine, "test") as job:
        chosen = measure_on_workers(job, url, storage_options(), 2**20)
    keys = [task["key"] for task in stream.data]
    assert len([k for k in keys if k.startswith("gpuframe-plan-measure-")]) == len(engine.workers)
    readers = sum(engine.client.nthreads().values())
    assert chosen.readers == readers and chosen.source == "measured"
    assert chosen.node_readers == readers, "every worker of this cluster is on this host"
    assert (readers == 1) or f"over {readers} readers" in repr(chosen)
    with get_task_stream(engine.client) as stream, Job(engine, "test") as job:
        again = measure_on_workers(job, url, storage_options(), 2**20)
    assert again == chosen and not stream.data, "the store's probes are remembered"


def test_a_dataset_read_again_is_planned_without_tasks_until_a_file_changes(engine, tmp_path,
                                                                            check_same):
    for i in range(2):
        pq.write_table(pa.table({"id": np.arange(i * 1000, i * 1000 + 1000)}),
                       tmp_path / f"part-{i}.parquet", row_group_size=250)

    def read_and_list_tasks(filters=None):
        with get_task_stream(client=engine.client) as stream:
            frame = read_parquet(str(tmp_path), filters=filters)
            check_same(frame, pd.read_parquet(tmp_path, filters=filters))
        return {key_split(task["key"]) for task in stream.data}

    assert "gpuframe-plan-metadata" in read_and_list_tasks()
    again = read_and_list_tasks([("id", ">=", 1500)])
    assert "gpuframe-read-parquet" in again and "gpuframe-plan-metadata" not in again
    time.sleep(0.05)  # past a tick of a coarse file system clock
    pq.write_table(pa.table({"id": np.arange(5000, 5100)}), tmp_path / "part-0.parquet")
    assert "gpuframe-plan-metadata" in read_and_list_tasks([("id", ">=", 1500)])


def test_a_small_remote_read_fetches_about_its_own_bytes(engine, dataset_dir, http_server,
                                                         check_same):
    """No probe of the store, which fetches far more than a small read
    (benchmarks/results/2026-11-25-figures-from-io-comments.md)."""
    path = dataset_dir / "flat" / "part-0.parquet"
    http_server.reset()
    frame = read_parquet(f"{http_server.url}/flat/part-0.parquet")
    check_same(frame, pd.read_parquet(path))
    assert http_server.bytes_served() <= 2 * path.stat().st_size


def test_a_read_s_schema_is_remembered_by_its_metadata_too(tmp_path):
    """Two files whose Arrow schemas differ only in pandas' metadata (one names an index)
    give pandas' two different frames, though Arrow calls the schemas equal."""
    frame = pd.DataFrame({"x": [1, 2]}, index=pd.Index([5, 6], name="key"))
    indexed = tmp_path / "indexed.parquet"
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.Table.from_pandas(frame), indexed)
    pq.write_table(pa.Table.from_pandas(frame).replace_schema_metadata(None), plain)
    backend = gpuframe.backend.get_backend("pandas")
    metas = [scan.frame_meta(plan_fragments(str(path)), backend) for path in (plain, indexed)]
    assert plan_fragments(str(plain)).schema == plan_fragments(str(indexed)).schema
    assert list(metas[0].columns) == ["x", "key"] and list(metas[1].columns) == ["x"]
    metas[0]["y"] = 1  # each caller's own copy
    assert list(scan.frame_meta(plan_fragments(str(plain)), backend).columns) == ["x", "key"]
