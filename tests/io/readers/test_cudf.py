"""The cudf backend's reader against the pandas backend's on the same files, local and remote."""

from __future__ import annotations

import pandas as pd
import pytest

from gpuframe.io.formats import parquet
from gpuframe.io.planning.plan import plan_fragments
from gpuframe.io.readers import device
from gpuframe.io.readers.device import (
    copy_batches,
)
from gpuframe.io.readers.task import READERS
from gpuframe.io.tasks import fragment_tasks


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["orc", "csv"])
def test_cudf_reader_matches_arrow_reader_for_orc_and_csv(dataset_dir, kind):
    plan = plan_fragments(str(dataset_dir / kind), columns=["id", "name"],
                          filters=[("id", ">", 1500)], format=kind, partition_bytes=30_000)
    tasks = fragment_tasks(plan)
    assert len(tasks) > 2
    for group in ([tasks[0]], tasks):  # one fragment; every file's fragments in one read
        expected, _ = READERS["pandas"]().read("k", group)
        got, stats = READERS["cudf"]().read("k", group)
        pd.testing.assert_frame_equal(got.to_pandas().reset_index(drop=True),
                                      expected.to_pandas(), check_dtype=False)
        assert stats.rows == expected.num_rows


@pytest.mark.gpu
@pytest.mark.parametrize("host_decode", [True, False])
@pytest.mark.parametrize("filters", [None, [("year", "==", 2023), ("id", ">", 1500)]])
def test_cudf_reader_matches_arrow_reader(dataset_dir, filters, host_decode, monkeypatch):
    """Columns decoded on the host (the test's files have few row groups) or by cuDF alike."""
    monkeypatch.setattr(parquet, "HOST_DECODE_CHUNKS", 10**9 if host_decode else 0)
    plan = plan_fragments(str(dataset_dir / "hive"), filters=filters)
    tasks = fragment_tasks(plan)
    for group in ([tasks[0]], tasks):  # every file in one read: hive values per file
        expected, _ = READERS["pandas"]().read("k", group)
        got, stats = READERS["cudf"]().read("k", group)
        pd.testing.assert_frame_equal(got.to_pandas().reset_index(drop=True),
                                      expected.to_pandas())
        assert stats.rows == expected.num_rows


@pytest.mark.gpu
def test_cudf_reader_reads_remote_files_by_ranges(dataset_dir, http_server):
    name = "flat/part-0.parquet"
    local = plan_fragments(str(dataset_dir / name), storage={"requests_in_flight": 2})
    http_server.reset()
    remote = plan_fragments(f"{http_server.url}/{name}", storage={"requests_in_flight": 2})
    for task, remote_task in zip(fragment_tasks(local), fragment_tasks(remote)):
        expected, _ = READERS["pandas"]().read("k", [task])
        got, _ = READERS["cudf"]().read("k", [remote_task])
        pd.testing.assert_frame_equal(got.to_pandas(), expected.to_pandas())
    assert http_server.whole_file_gets() == 0
    # the planned size: no HEAD before the reads; one after KvikIO's, for the file's version
    assert [r.method for r in http_server.log if r.method != "GET"] == ["HEAD"] * len(
        fragment_tasks(remote))
    assert http_server.bytes_served() < 2 * (dataset_dir / name).stat().st_size


@pytest.mark.gpu
@pytest.mark.parametrize("store", ["http", "s3"])
def test_cudf_reader_fetches_plain_http_and_signed_s3_through_kvikio(
        dataset_dir, http_server, store, request, monkeypatch):
    """KvikIO's range reads alone (gpuframe's staged fetch would fail), in requests of the
    plan's size; the frame is the one the Arrow reader gives of the local files."""
    def no_staging(*args: object) -> None:
        raise AssertionError("fetched by gpuframe's staged requests, not KvikIO")

    monkeypatch.setattr(device, "fetch_staged", no_staging)
    names = [f"flat/part-{i}.parquet" for i in range(2)]
    options = {"requests_in_flight": 3, "task_size": 3000}
    expected, _ = READERS["pandas"]().read("k", fragment_tasks(plan_fragments(
        [str(dataset_dir / name) for name in names], storage=options)))
    if store == "http":
        urls, storage = [f"{http_server.url}/{name}" for name in names], {}
    else:
        s3_server = request.getfixturevalue("s3_server")
        urls, storage = [s3_server.url(name) for name in names], s3_server.options()
    tasks = fragment_tasks(plan_fragments(urls, storage={**storage, **options}))
    http_server.reset()
    got, stats = READERS["cudf"]().read("k", tasks)
    pd.testing.assert_frame_equal(got.to_pandas(), expected.to_pandas())
    planned = sum(n for task in tasks
                  for _, n in task.format.ranges(task.metadata, task.units, task.file_columns))
    assert stats.bytes_read == planned and stats.requests >= planned / 3000
    if store == "http":  # the server's log: ranges of the plan's size, then a HEAD per file
        gets = [r for r in http_server.log if r.method == "GET"]
        assert all(r.status == 206 and r.nbytes <= 3000 for r in gets)
        assert sum(r.nbytes for r in gets) == planned
        assert [r.method for r in http_server.log].count("HEAD") == len(urls)


@pytest.mark.gpu
def test_cudf_reader_decodes_remote_files_in_batches_when_gaps_would_take_memory(
        dataset_dir, http_server, monkeypatch):
    """One column of several files, with no slack: the copies' gaps exceed the budget, so the
    files are decoded in several cuDF calls, and the frame is the one a single call gives."""
    monkeypatch.setattr(device, "COPY_SLACK", 1)
    urls = [f"{http_server.url}/flat/part-{i}.parquet" for i in range(2)]
    plan = plan_fragments(urls, ["id"], storage={"requests_in_flight": 2})
    tasks = fragment_tasks(plan)
    jobs = [(None, task.format.ranges(task.metadata, task.units, task.file_columns),
             len((dataset_dir / "flat" / f"part-{i}.parquet").read_bytes()), {})
            for i, task in enumerate(tasks)]
    assert len(copy_batches(jobs)) == len(tasks) > 1
    expected, _ = READERS["pandas"]().read("k", tasks)
    got, stats = READERS["cudf"]().read("k", tasks)
    pd.testing.assert_frame_equal(got.to_pandas(), expected.to_pandas())
    assert stats.rows == expected.num_rows


@pytest.mark.gpu
def test_reads_on_several_threads_each_decode_on_a_stream_of_their_own(dataset_dir):
    """Reads on several worker threads overlap on the GPU, each decoding on its thread's stream
    (the legacy default stream would put them in line): every thread gets its own rows, as the
    pandas reader reads them, and no two threads share a stream."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from gpuframe.io.device_streams import thread_stream

    tasks = fragment_tasks(plan_fragments(str(dataset_dir / "hive"), partition_bytes=30_000))
    assert len(tasks) > 1
    expected = [READERS["pandas"]().read("k", [task])[0].to_pandas() for task in tasks]

    used: set[tuple[int, int]] = set()

    def read(task: object) -> pd.DataFrame:
        frame, _ = READERS["cudf"]().read("k", [task])
        used.add((threading.get_ident(), id(thread_stream())))
        return frame.to_pandas()

    with ThreadPoolExecutor(3) as pool:
        for _ in range(3):
            for got, want in zip(pool.map(read, tasks), expected):
                pd.testing.assert_frame_equal(got.reset_index(drop=True), want)
    threads = {thread for thread, _ in used}
    assert len(threads) > 1 and len(used) == len(threads) == len({s for _, s in used})


@pytest.mark.gpu
def test_columns_decoded_on_the_host_are_those_cudf_decodes(tmp_path, monkeypatch):
    """A read of few row groups: the flat columns decoded on the host, the rest by cuDF, give
    the frame cuDF alone gives, dtypes and nulls included, in the read's column order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 5000
    table = pa.table({
        "amount": pa.array(range(rows), pa.decimal128(15, 2)),
        "name": pa.array([None if i % 7 == 0 else f"name-{i}" for i in range(rows)]),
        "id": pa.array(range(rows), pa.int64()),
        "when": pa.array(range(rows), pa.timestamp("ms")),
        "price": pa.array([i / 8 for i in range(rows)], pa.float32()),
        "flag": pa.array([None if i % 5 == 0 else i % 2 == 0 for i in range(rows)]),
    })
    for i in range(2):
        pq.write_table(table.slice(i * 2500, 2500), tmp_path / f"part-{i}.parquet",
                       row_group_size=1000, use_dictionary=False)
    tasks = fragment_tasks(plan_fragments(str(tmp_path), partition_bytes=10**9))
    hosted: list[list[str]] = []
    original = parquet.read_on_host
    monkeypatch.setattr(parquet, "read_on_host",
                        lambda t, columns: hosted.append(columns) or original(t, columns))
    got, _ = READERS["cudf"]().read("k", tasks)
    assert hosted == [["name", "id", "price", "flag"]]
    monkeypatch.setattr(parquet, "HOST_DECODE_CHUNKS", 0)
    alone, _ = READERS["cudf"]().read("k", tasks)
    assert hosted == [["name", "id", "price", "flag"]]
    assert list(got.columns) == table.column_names
    pd.testing.assert_frame_equal(got.to_pandas(), alone.to_pandas())
    assert got["name"].null_count == table["name"].null_count
