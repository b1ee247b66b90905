"""read_parquet on a real two-worker CPU cluster, against pandas.read_parquet on the same files."""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dask.utils import key_split
from distributed import get_task_stream, wait
from pyarrow import orc

import gpuframe
from gpuframe.io import device
from gpuframe.io.device import (
    COPY_SLACK,
    copy_batches,
    fetch_device_copies,
    fetch_staged,
)
from gpuframe.io.errors import (
    CorruptFileError,
    DatasetError,
    FileChangedError,
    RemoteError,
    SchemaMismatchError,
    SourceNotFoundError,
    TruncatedFileError,
)
from gpuframe.io.planning.plan import plan_fragments
from gpuframe.io.read import (
    READERS,
    Fetcher,
    _file_at_fault,
    copy_layouts,
    fetch_sparse_copies,
    fragment_tasks,
    raise_dataset_error,
    read_csv,
    read_orc,
    read_parquet,
    read_parquet_with_report,
    read_plan,
    read_with_report,
    worker_device_memory,
)
from gpuframe.io.storage import open_source
from gpuframe.io.storage.base import storage_options
from gpuframe.io.tuning.model import Concurrency


def plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical hive columns (as pandas reads them) as their categories' dtype; fresh index."""
    frame = frame.reset_index(drop=True)
    for name, dtype in frame.dtypes.items():
        if isinstance(dtype, pd.CategoricalDtype):
            frame[name] = frame[name].astype(dtype.categories.dtype)
    return frame


def check_same(ours, expected: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(plain(ours.to_pandas()), plain(expected))


def test_local_read_matches_pandas_and_places_partitions(engine, dataset_dir):
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
def test_columns_and_filters_match_pandas(engine, dataset_dir, columns, filters):
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
    with dask.config.set({"distributed.admin.low-level-log-length": 2}):
        with gpuframe.start_cluster(backend="pandas", protocol="tcp", n_workers=1) as engine:
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


def test_hive_read_matches_pandas(engine, dataset_dir):
    hive = dataset_dir / "hive"
    check_same(read_parquet(str(hive)), pd.read_parquet(hive))
    filters = [("year", "==", 2023), ("id", ">", 1500)]
    frame = read_parquet(str(hive), columns=["id", "city"], filters=filters)
    check_same(frame, pd.read_parquet(hive, columns=["id", "city"], filters=filters))
    assert frame.meta.dtypes["city"] == frame.to_pandas().dtypes["city"]


def test_selective_read_fetches_other_columns_only_where_rows_survive(engine, tmp_path):
    rng = np.random.default_rng(0)
    rows = 4000
    key = rng.integers(0, 100, rows)  # every row group's statistics span 0..99
    key[key == 50] = 51
    key[2500] = 50  # the only match, in row group 2 of 4
    table = pa.table({"key": key, "payload": rng.random(rows), "text": [f"t{i}" for i in
                                                                       range(rows)]})
    path = tmp_path / "selective.parquet"
    pq.write_table(table, path, row_group_size=1000)
    filters = [("key", "==", 50)]
    frame, report = read_parquet_with_report(str(path), ["payload", "text"], filters,
                                             requests_in_flight=2)
    check_same(frame, pd.read_parquet(path, columns=["payload", "text"], filters=filters))
    assert len(frame) == 1
    assert (report.units_kept, report.units_total) == (4, 4)
    metadata = pq.ParquetFile(path).metadata
    chunk = lambda g, c: metadata.row_group(g).column(c).total_compressed_size
    expected = sum(chunk(g, 0) for g in range(4)) + chunk(2, 1) + chunk(2, 2)
    assert report.bytes_read == expected < report.planned_bytes
    assert report.result_column_bytes == sum(chunk(g, c) for g in range(4) for c in (1, 2))
    assert "MiB of result columns" in repr(report)


def _paged_file(path, rows: int = 20_000) -> None:
    """One row group whose columns span many 4 KiB pages, with a page index; key 500 at rows
    3000, 3001 and 15000 only."""
    rng = np.random.default_rng(3)
    key = rng.integers(0, 1000, rows)
    key[key == 500] = 501
    key[[3000, 3001, 15000]] = 500
    table = pa.table({"key": key, "payload": rng.random(rows),
                      "text": [f"row {i} {'x' * (i % 13)}" for i in range(rows)],
                      "tags": [[i, i + 1] for i in range(rows)]})
    # plain pages: a dictionary page (needed whole by any of its pages) would dwarf them here
    pq.write_table(table, path, row_group_size=rows, data_page_size=4096,
                   write_page_index=True, use_dictionary=False)


@pytest.mark.parametrize("store", ["local", "http"])
def test_selective_read_fetches_only_the_pages_holding_surviving_rows(engine, dataset_dir,
                                                                      http_server, store):
    path = dataset_dir / "paged" / "one.parquet"
    path.parent.mkdir(exist_ok=True)
    _paged_file(path)
    source = str(path) if store == "local" else f"{http_server.url}/paged/one.parquet"
    filters = [("key", "==", 500)]
    frame, report = read_parquet_with_report(source, ["payload", "text"], filters,
                                             requests_in_flight=2)
    check_same(frame, pd.read_parquet(path, columns=["payload", "text"], filters=filters))
    assert len(frame) == 3
    metadata = pq.ParquetFile(path).metadata.row_group(0)
    key, payload, text = (metadata.column(c).total_compressed_size for c in range(3))
    # the key column whole; of the others, a few pages (and their dictionaries, page indexes)
    assert key < report.bytes_read < key + (payload + text) / 4, report


def _rewritable(dataset_dir, http_server, name: str) -> tuple:
    """(path, its URL) of a file of ids 0-99 in row groups of 25, in a folder of its own."""
    path = dataset_dir / name / "one.parquet"
    path.parent.mkdir(exist_ok=True)
    pq.write_table(pa.table({"id": list(range(100))}), path, row_group_size=25)
    return path, f"{http_server.url}/{name}/one.parquet"


def test_a_remote_file_rewritten_after_its_metadata_was_kept_is_planned_again(
        engine, dataset_dir, http_server):
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


def test_a_remote_file_changed_between_planning_and_reading_is_named(engine, dataset_dir,
                                                                        http_server):
    path, url = _rewritable(dataset_dir, http_server, "changed")
    plan = plan_fragments(url, workers=engine.workers)
    pq.write_table(pa.table({"id": list(range(1000, 1100))}), path, row_group_size=25)
    with pytest.raises(FileChangedError, match=r"changed/one\.parquet changed since it was "
                                               r"planned \(.*etag"):
        read_plan(plan, engine)


def test_check_version_off_reads_a_server_whose_etag_moves(engine, dataset_dir, http_server):
    url = f"{http_server.url}/unstable-etag/flat/part-0.parquet"
    with pytest.raises(FileChangedError, match="part-0.parquet changed since it was planned"):
        read_parquet(url)
    expected = pd.read_parquet(dataset_dir / "flat" / "part-0.parquet")
    for _ in range(2):  # nothing kept either: every plan reads the footer
        http_server.reset()
        check_same(read_parquet(url, check_version=False), expected)
        assert any(r.range and r.range.startswith("bytes=-") for r in http_server.log)


def test_remote_fragments_of_a_task_read_at_once_asking_no_size(engine, dataset_dir,
                                                                 http_server):
    """Tasks of several remote fragments, read at once sharing the requests in flight, give
    pandas' rows without asking any file's size (a HEAD request each): sparse copies end at
    the last byte read."""
    folder = dataset_dir / "paged-many"
    folder.mkdir(exist_ok=True)
    urls = []
    for i in range(4):
        _paged_file(folder / f"part-{i}.parquet")
        urls.append(f"{http_server.url}/paged-many/part-{i}.parquet")
    filters = [("key", "==", 500)]
    http_server.reset()
    frame = read_parquet(urls, ["payload", "text"], filters, partition_bytes=2**30,
                         requests_in_flight=4)
    check_same(frame, pd.read_parquet(folder, columns=["payload", "text"], filters=filters))
    assert frame.npartitions < len(urls)
    assert [r.method for r in http_server.log if r.method != "GET"] == []


def test_fetcher_keeps_more_short_requests_in_flight(dataset_dir):
    """Little's law for the ranges at hand: pages far shorter than the plan's requests need
    more of them in flight to keep as many bytes in flight; fragments read at once share
    them; configured requests in flight stay as set."""
    [task, *_] = fragment_tasks(plan_fragments(str(dataset_dir / "flat"),
                                               storage={"requests_in_flight": 2}))
    measured = replace(task, concurrency=Concurrency(latency_s=0.001, bandwidth=1e9,
                                                     requests_in_flight=2,
                                                     request_size=16 * 2**20))
    pages = [(i * 2**16, 2**16) for i in range(100)]
    with (Fetcher(measured) as alone, Fetcher(measured, sharing=4) as shared,
          Fetcher(task) as configured):
        assert alone.requests_in_flight([(0, 16 * 2**20)]) == 2
        assert alone.requests_in_flight(pages) == 17  # 1 stream + 1 MB in flight / 64 KiB
        assert shared.requests_in_flight(pages) == 4
        assert configured.requests_in_flight(pages) == 2


def test_selective_read_of_a_nested_column_reads_its_row_groups(engine, tmp_path):
    path = tmp_path / "paged.parquet"
    _paged_file(path)
    filters = [("key", "==", 500)]
    frame, report = read_parquet_with_report(str(path), ["payload", "tags"], filters)
    expected = pd.read_parquet(path, columns=["payload", "tags"], filters=filters)
    got = frame.to_pandas().reset_index(drop=True)
    assert got["payload"].tolist() == expected["payload"].tolist()
    assert [list(t) for t in got["tags"]] == [list(t) for t in expected["tags"]]
    metadata = pq.ParquetFile(path).metadata.row_group(0)
    # key, payload and tags (leaf 3; text is leaf 2) whole
    assert report.bytes_read == sum(metadata.column(c).total_compressed_size for c in (0, 1, 3))


def test_http_read_matches_local_without_whole_file_downloads(engine, dataset_dir, http_server):
    names = ["flat/part-0.parquet", "flat/part-1.parquet"]
    http_server.reset()
    frame, report = read_parquet_with_report(
        [f"{http_server.url}/{n}" for n in names], columns=["id", "name"],
        filters=[("id", ">", 3500)], partition_bytes=1, requests_in_flight=3)
    check_same(frame, pd.read_parquet(dataset_dir / "flat", columns=["id", "name"],
                                      filters=[("id", ">", 3500)]))
    assert http_server.whole_file_gets() == 0
    footers = sum(min(65536, (dataset_dir / n).stat().st_size) for n in names)
    assert http_server.bytes_served() == footers + report.bytes_read
    assert report.bytes_read == report.planned_bytes
    assert report.requests >= report.fragments


def test_s3_read_matches_local(engine, dataset_dir, s3_server):
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


def test_failed_fragment_fails_the_read(engine, dataset_dir, tmp_path):
    copy = shutil.copytree(dataset_dir / "flat", tmp_path / "flat")
    plan = plan_fragments(str(copy), workers=engine.workers, storage={"requests_in_flight": 1})
    (copy / "part-1.parquet").unlink()
    with pytest.raises(FileNotFoundError, match="no such file: .*part-1.parquet") as caught:
        read_plan(plan, engine)
    assert isinstance(caught.value, SourceNotFoundError)
    assert any("raised by read task gpuframe-read-parquet-" in note
               for note in caught.value.__notes__)


def _write_rows(path, kind: str, rows: int = 20_000) -> None:
    """Sorted ids in several snappy row groups or stripes."""
    table = pa.table({"id": np.arange(rows), "x": np.random.default_rng(1).random(rows),
                      "s": [f"s{i % 7}" for i in range(rows)]})
    if kind == "parquet":
        pq.write_table(table, path, compression="snappy", row_group_size=rows // 4)
    else:
        orc.write_table(table, path, compression="snappy", stripe_size=4096)


def _zero(path, start: int, end: int) -> None:
    data = bytearray(path.read_bytes())
    data[start:end] = bytes(end - start)
    path.write_bytes(bytes(data))


def _truncate(path) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(3000)


CHANGED = "{source} changed since it was planned \\({what}"


@pytest.mark.parametrize("store", ["local", "http", "http-bare"])
@pytest.mark.parametrize("kind, unit", [("parquet", "row group 0"), ("orc", "stripe 0")])
@pytest.mark.parametrize("change, errors", [
    pytest.param(lambda path: _zero(path, 100, 400), {
        "local": (CorruptFileError, "{source} \\({unit}\\) cannot be decoded"),
        "http": (FileChangedError, CHANGED.format(source="{source}", what="etag")),
        "http-bare": (CorruptFileError, "{source} \\({unit}\\) cannot be decoded")},
        id="zeroed"),
    pytest.param(_truncate, {
        "local": (TruncatedFileError, "{source} .*ends at byte 3000"),
        "http": (FileChangedError, CHANGED.format(source="{source}", what="size .* -> 3000")),
        "http-bare": (FileChangedError, CHANGED.format(source="{source}", what="size"))},
        id="truncated"),
    pytest.param(os.unlink, dict.fromkeys(["local", "http", "http-bare"], (
        FileNotFoundError, "no such file: {source}")), id="deleted"),
])
def test_a_file_changed_after_planning_fails_the_read_naming_it(engine, http_server, tmp_path,
                                                                 store, kind, unit, change,
                                                                 errors):
    """A remote file's store that says its version (ETag, Last-Modified) has any change named as
    one; a store that says only its size, a change of the same size as what it does to the
    read."""
    folder = http_server.root / tmp_path.name  # served over HTTP too
    folder.mkdir()
    path = folder / f"changing.{kind}"
    _write_rows(path, kind)
    prefix = {"local": None, "http": "", "http-bare": "/novalidator"}[store]
    source = (str(path) if prefix is None
              else f"{http_server.url}{prefix}/{tmp_path.name}/{path.name}")
    plan = plan_fragments(source, format=kind, workers=engine.workers, partition_bytes=1,
                          storage={"requests_in_flight": 2})
    assert len(plan.fragments) > 1
    change(path)
    error, message = errors[store]
    with pytest.raises(error, match=message.format(source=source, unit=unit)) as caught:
        read_plan(plan, engine)
    assert isinstance(caught.value, DatasetError)


@pytest.mark.parametrize("kind, unit", [("parquet", "row group 1"), ("orc", "stripe 1")])
def test_a_corrupt_unit_among_many_read_together_is_named(engine, tmp_path, kind, unit):
    path = tmp_path / f"late.{kind}"
    _write_rows(path, kind)
    plan = plan_fragments(str(path), format=kind, workers=engine.workers)
    [task] = fragment_tasks(plan)
    assert len(task.units) > 2
    offset, length = task.format.ranges(task.metadata, [1], task.file_columns)[0]
    _zero(path, offset + 40, offset + length - 40)
    with pytest.raises(CorruptFileError, match=f"{path} \\({unit}\\) cannot be decoded"):
        read_plan(plan, engine)


def test_files_read_together_are_all_named_when_reading_one_alone_runs_out_of_memory(
        dataset_dir):
    """cuDF failed on files that pyarrow reads, and trying them one by one on the GPU found no
    room: no file can be blamed, so the error names them all and says why."""
    tasks = fragment_tasks(plan_fragments([str(dataset_dir / "flat" / f"part-{i}.parquet")
                                           for i in range(2)]))

    def out_of_memory(i: int) -> None:
        raise MemoryError("std::bad_alloc: out_of_memory")

    error = _file_at_fault(tasks, RuntimeError("cudf decode failed"), out_of_memory)
    assert isinstance(error, CorruptFileError)
    assert all(task.path in str(error) for task in tasks)
    assert "cudf decode failed" in str(error) and "ran out of device memory" in str(error)


@pytest.mark.gpu
@pytest.mark.parametrize("kind, unit", [("parquet", "row group"), ("orc", "stripe")])
def test_cudf_reader_names_the_corrupt_file_among_those_read_in_one_call(tmp_path, kind, unit):
    """Zeroed pages made cuDF 26.10 touch memory out of bounds on an H200, which lost the
    worker's CUDA context: the file at fault is still named, and the worker is restarted, so the
    cluster reads again (in a worker, not in this process, whose context would be lost too)."""
    good, bad = tmp_path / f"good.{kind}", tmp_path / f"bad.{kind}"
    _write_rows(good, kind)
    _write_rows(bad, kind)
    with gpuframe.start_cluster(backend="cudf", protocol="tcp", n_workers=1) as gpu_engine:
        plan = plan_fragments([str(good), str(bad)], format=kind, workers=gpu_engine.workers)
        assert len(plan.read_groups()) == 1  # one cuDF call for both files
        _zero(bad, 100, 400)
        with pytest.raises(CorruptFileError,
                           match=f"{bad} \\({unit}s? [0-9].*cannot be decoded"):
            read_plan(plan, gpu_engine)
        again = read_plan(plan_fragments(str(good), format=kind, workers=gpu_engine.workers),
                          gpu_engine)[0]
        check_same(again, pd.read_parquet(good) if kind == "parquet"
                   else orc.read_table(good).to_pandas())


def test_a_worker_whose_read_lost_its_gpu_is_restarted():
    """A read error marked ``gpu_context_lost`` (which only cuDF's kernels cause) has the client
    restart the worker that raised it: a new process, which runs tasks again."""
    with gpuframe.start_cluster(backend="pandas", protocol="tcp", n_workers=1,
                                dashboard_address="127.0.0.1:0") as own:
        [worker] = own.workers
        before = own.client.run(os.getpid)

        def lose_the_context():
            error = CorruptFileError("data.parquet (row group 0) cannot be decoded")
            error.gpu_context_lost = True
            raise error

        failed = own.client.submit(lose_the_context, workers=[worker], pure=False)
        wait([failed])
        with pytest.raises(CorruptFileError, match="data.parquet") as caught:
            raise_dataset_error(own.client, [failed], [worker])
        assert any(note.startswith(f"{worker} was restarted") for note in caught.value.__notes__)
        assert own.client.submit(os.getpid, pure=False).result() not in before.values()


def test_a_csv_file_cut_after_planning_fails_the_read(engine, tmp_path):
    path = tmp_path / "cut.csv"
    path.write_text("a,b\n" + "1,x\n" * 1000)
    plan = plan_fragments(str(path), format="csv", workers=engine.workers)
    with open(path, "r+b") as handle:
        handle.truncate(2000)  # on a line boundary: parsed, the rest would be fewer rows
    with pytest.raises(TruncatedFileError, match=f"{path} \\(bytes 4-4004\\).*ends at byte 2000"):
        read_plan(plan, engine)


def test_orc_and_csv_reads_on_the_cluster(engine, dataset_dir):
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


def test_budget_comes_from_the_workers_device_memory(engine, dataset_dir):
    assert worker_device_memory(engine) == []  # a CPU cluster: the 128 MiB default
    frame = read_orc(str(dataset_dir / "orc"))
    assert frame.npartitions == 2  # one fragment per file under the default budget


def test_failed_csv_fragment_fails_the_read(engine, tmp_path):
    path = tmp_path / "late.csv"
    path.write_text("a,b\n" + "1,x\n" * 300_000 + "oops,x\n")
    with pytest.raises(CorruptFileError, match=r"late.csv bytes"):
        read_csv(str(path), partition_bytes=2**19)


def test_csv_split_inside_a_quoted_newline_names_the_option_that_reads_it(engine, tmp_path):
    path = tmp_path / "quoted.csv"
    path.write_text("a,b,c\n" + "".join(f'{i},"note {i}\nx,y",{i}\n' for i in range(2000)))
    with pytest.raises(CorruptFileError, match=r"(?s)quoted.csv bytes .*newlines_in_values=True"):
        read_csv(str(path), partition_bytes=4096)
    frame = read_csv(str(path), partition_bytes=4096, newlines_in_values=True)
    assert frame.npartitions == 1
    check_same(frame, pd.read_csv(path))


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
@pytest.mark.parametrize("filters", [None, [("year", "==", 2023), ("id", ">", 1500)]])
def test_cudf_reader_matches_arrow_reader(dataset_dir, filters):
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
def test_a_file_rewritten_under_kvikios_reads_is_named(http_server):
    """KvikIO checks no answer's ETag: the version asked once its bytes are in does."""
    tasks = fragment_tasks(plan_fragments(f"{http_server.url}/unstable-etag/flat/part-0.parquet",
                                          storage={"requests_in_flight": 2}))
    with pytest.raises(FileChangedError, match="unstable-etag/flat/part-0.parquet changed"):
        READERS["cudf"]().read("k", tasks)


@pytest.mark.gpu
def test_remote_reads_kvikio_cannot_make_or_fails_go_through_gpuframes_requests(
        dataset_dir, http_server, monkeypatch, caplog):
    import kvikio

    name = "flat/part-0.parquet"
    expected, _ = READERS["pandas"]().read("k", fragment_tasks(plan_fragments(
        str(dataset_dir / name))))

    def refused(*args: object, **kwargs: object) -> None:
        raise RuntimeError("curl: (7) refused")

    monkeypatch.setattr(kvikio.RemoteFile, "open_http", refused)
    tasks = fragment_tasks(plan_fragments(f"{http_server.url}/{name}"))
    got, _ = READERS["cudf"]().read("k", tasks)
    pd.testing.assert_frame_equal(got.to_pandas(), expected.to_pandas())
    assert f"KvikIO could not read {http_server.url}/{name} (curl: (7) refused)" in caplog.text

    def not_for_these(*args: object, **kwargs: object) -> None:
        raise AssertionError("KvikIO would send no Authorization header")

    monkeypatch.setattr(kvikio.RemoteFile, "open_http", not_for_these)
    bearer = {"http_headers": {"Authorization": f"Bearer {http_server.token}"}}
    tasks = fragment_tasks(plan_fragments(f"{http_server.url}/bearer/{name}", storage=bearer))
    got, _ = READERS["cudf"]().read("k", tasks)
    pd.testing.assert_frame_equal(got.to_pandas(), expected.to_pandas())


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
def test_gpu_workers_report_their_device_memory_for_the_budget(dataset_dir):
    with gpuframe.start_cluster(backend="cudf", protocol="tcp") as gpu_engine:
        memory = worker_device_memory(gpu_engine)
        assert len(memory) == len(gpu_engine.workers) and min(memory) > 2**30
        plan = plan_fragments(str(dataset_dir / "flat"), workers=gpu_engine.workers,
                              device_memory=memory)
        assert plan.partition_bytes == min(memory) // 32


@pytest.mark.parametrize("name", ["flat/part-0.parquet", "orc/part-0.orc"])
def test_sparse_copy_of_a_remote_file_reads_like_the_file(dataset_dir, http_server, name):
    """The layout of the copies the GPU reader hands cuDF (:func:`copy_layouts`), built here
    in host memory: only the planned ranges are fetched, and a reader opening the copy gets
    the units' rows as from the file itself."""
    kind = name.split("/")[0].replace("flat", "parquet")
    columns = ["name", "id"]
    local = plan_fragments(str(dataset_dir / name), columns, format=kind, partition_bytes=1)
    remote = plan_fragments(f"{http_server.url}/{name}", columns, format=kind,
                            partition_bytes=1, storage={"requests_in_flight": 2})
    http_server.reset()
    remote_tasks = fragment_tasks(remote)
    fetchers = [Fetcher(task) for task in remote_tasks]
    copies = fetch_sparse_copies(copy_layouts(remote_tasks, fetchers), 2, None)  # all at once
    for fetcher, task in zip(fetchers, remote_tasks):
        planned = task.format.ranges(task.metadata, task.units, task.file_columns)
        assert fetcher.bytes_read == sum(n for _, n in planned)
        fetcher.source.close()
    for task, copy in zip(fragment_tasks(local), copies, strict=True):
        expected, _ = READERS["pandas"]().read("k", [task])
        if kind == "parquet":
            got = pq.ParquetFile(copy).read_row_groups(list(task.units), columns=columns)
        else:
            opened = orc.ORCFile(copy)
            got = pa.Table.from_batches([opened.read_stripe(i, columns=columns)
                                         for i in task.units])
        pd.testing.assert_frame_equal(got.to_pandas()[columns], expected.to_pandas())
    assert http_server.whole_file_gets() == 0
    assert all(r.method == "GET" for r in http_server.log)  # the planned size: no HEAD


@pytest.mark.parametrize("name", ["flat/part-0.parquet", "orc/part-0.orc"])
def test_sparse_copies_hold_the_planned_bytes_and_zeros_elsewhere(dataset_dir, http_server,
                                                                   name):
    """Byte for byte: the file's bytes in the planned ranges, the format's known pieces at
    their offsets, zeros everywhere else."""
    kind = name.split("/")[0].replace("flat", "parquet")
    remote = plan_fragments(f"{http_server.url}/{name}", ["id"], format=kind,
                            partition_bytes=1, storage={"requests_in_flight": 3})
    tasks = fragment_tasks(remote)
    fetchers = [Fetcher(task) for task in tasks]
    copies = fetch_sparse_copies(copy_layouts(tasks, fetchers), 3, None)
    data = (dataset_dir / name).read_bytes()
    for task, fetcher, copy in zip(tasks, fetchers, copies, strict=True):
        length, known = task.format.sparse_layout(task.metadata, len(data))
        expected = bytearray(length)
        for offset, size in task.format.ranges(task.metadata, task.units, task.file_columns):
            expected[offset:offset + size] = data[offset:offset + size]
        for offset, piece in known.items():
            expected[offset:offset + len(piece)] = piece
        assert copy.getvalue() == expected
        assert copy.tell() == 0
        fetcher.source.close()


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_sparse_copies_cost_memory_only_where_written(tmp_path):
    """A copy's untouched bytes are neither zeroed nor copied up front: building a 256 MiB
    copy of which 2 MiB is written takes about that much memory, not 256 MiB."""
    size = 256 * 2**20
    path = tmp_path / "sparse.bin"
    rng = np.random.default_rng(1)
    ranges = [(4096, 2**20), (size - 2**20 - 8, 2**20)]
    with open(path, "wb") as file:
        file.truncate(size)  # holes on disk as well
        for offset, length in ranges:
            file.seek(offset)
            file.write(rng.bytes(length))
    known = {size: b"footer"}
    with open_source(str(path)) as source:
        before = _resident_bytes()
        [copy] = fetch_sparse_copies([(source, ranges, size + 6, known)], 2, 2**18)
        grown = _resident_bytes() - before
    assert grown < 32 * 2**20, f"building the copy took {grown / 2**20:.0f} MiB"
    view = np.frombuffer(copy.getbuffer(), np.uint8)
    data = np.fromfile(path, np.uint8)
    for offset, length in ranges:
        assert np.array_equal(view[offset:offset + length], data[offset:offset + length])
    assert bytes(view[size:]) == b"footer"
    assert np.count_nonzero(view) == np.count_nonzero(data) + 6  # the rest reads as zeros


def test_a_failed_fetch_into_sparse_copies_names_the_file(dataset_dir, http_server):
    size = (dataset_dir / "flat" / "part-0.parquet").stat().st_size
    with open_source(f"{http_server.url}/flat/part-1.parquet") as good, \
            open_source(f"{http_server.url}/brokenoff/flat/part-0.parquet") as broken:
        with pytest.raises(RemoteError, match=r"brokenoff/flat/part-0.parquet: the response "
                                              r"to 'Range: bytes=0-\d+' broke off"):
            fetch_sparse_copies([(good, [(0, 4096)], size, {}),
                                 (broken, [(0, size)], size, {})], 2, None)


@pytest.mark.parametrize("name", ["flat/part-0.parquet", "orc/part-0.orc"])
def test_staged_fetch_builds_what_fetching_in_place_builds(dataset_dir, http_server, name):
    """The GPU copies' fetch (:func:`fetch_staged`) with host buffers standing in for pinned
    staging and device memory: requests of at most 4 KiB, through two reused staging buffers,
    place byte for byte the copies that :func:`fetch_sparse_copies` builds."""
    kind = name.split("/")[0].replace("flat", "parquet")
    remote = plan_fragments(f"{http_server.url}/{name}", ["name", "id"], format=kind,
                            partition_bytes=1, storage={"requests_in_flight": 2})
    fetchers = [Fetcher(task) for task in fragment_tasks(remote)]
    jobs = copy_layouts(fragment_tasks(remote), fetchers)
    expected = [copy.getvalue() for copy in fetch_sparse_copies(jobs, 2, None)]
    staging: list[memoryview] = []
    copies = [bytearray(length) for _, _, length, _ in jobs]
    fetched = []  # lengths of what came through the staging buffers (not the known bytes)

    def two_buffers(pieces: int, size: int) -> list[memoryview]:
        assert pieces > 4 and size <= 4096
        staging.extend(memoryview(bytearray(size)) for _ in range(2))
        return staging

    def place(job: int, offset: int, data: memoryview) -> None:
        copies[job][offset:offset + len(data)] = data
        if any(data.obj is buffer.obj for buffer in staging):
            fetched.append(len(data))

    fetch_staged(jobs, 2, 4096, two_buffers, place)
    assert copies == expected
    assert len(fetched) > 4 * len(staging) and max(fetched) <= 4096
    for fetcher in fetchers:
        fetcher.source.close()


def test_copy_batches_bound_the_device_memory_of_one_cudf_call():
    def jobs(*shapes: tuple[int, int]) -> list:  # (bytes fetched, copy length) per file
        return [(None, [(0, fetched)], length, {}) for fetched, length in shapes]

    gib = 2**30
    # every column read: the copies are about what is fetched, one call for every file
    assert copy_batches(jobs(*[(gib, gib + 100)] * 8)) == [list(range(8))]
    # one column of four: runs whose copies stay within twice all the fetched bytes
    few = copy_batches(jobs(*[(gib, 4 * gib)] * 8))
    assert few == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # a copy larger than the budget alone; small reads always one call
    assert copy_batches(jobs((gib, 5 * gib), (gib // 2, gib))) == [[0], [1]]
    assert copy_batches(jobs(*[(100, COPY_SLACK // 8)] * 8)) == [list(range(8))]


def test_a_short_answer_to_a_staged_fetch_names_the_file(tmp_path):
    path = tmp_path / "short.bin"
    path.write_bytes(b"x" * 10_000)
    with open_source(str(path)) as source:
        with pytest.raises(RemoteError, match=r"short.bin: bytes 8192-12288 ended after 1808"):
            fetch_staged([(source, [(0, 12_288)], 12_288, {})], 2, 4096,
                         lambda pieces, size: [memoryview(bytearray(size)) for _ in range(2)],
                         lambda job, offset, data: None)


@pytest.mark.gpu
@pytest.mark.parametrize("kvikio", [True, False], ids=["kvikio", "staged"])
@pytest.mark.parametrize("name", ["flat/part-0.parquet", "orc/part-0.orc"])
def test_device_copies_hold_the_planned_and_known_bytes(dataset_dir, http_server, name, kvikio,
                                                        monkeypatch):
    """What cuDF decodes on the GPU: every planned range and every known piece at its offset
    of the file's device buffer, read by KvikIO in tasks shorter than the ranges, or through
    staging smaller than them."""
    if not kvikio:
        monkeypatch.setattr(device, "fetch_by_kvikio", lambda *args: False)
    kind = name.split("/")[0].replace("flat", "parquet")
    remote = plan_fragments(f"{http_server.url}/{name}", ["id"], format=kind,
                            partition_bytes=1,
                            storage={"requests_in_flight": 3, "task_size": 3000})
    tasks = fragment_tasks(remote)
    fetchers = [Fetcher(task) for task in tasks]
    copies = fetch_device_copies(copy_layouts(tasks, fetchers), 3, 3000)
    data = (dataset_dir / name).read_bytes()
    for task, fetcher, copy in zip(tasks, fetchers, copies, strict=True):
        length, known = task.format.sparse_layout(task.metadata, len(data))
        held = copy.copy_to_host()
        assert len(held) == length
        for offset, size in task.format.ranges(task.metadata, task.units, task.file_columns):
            assert bytes(held[offset:offset + size]) == data[offset:offset + size]
        for offset, piece in known.items():
            assert bytes(held[offset:offset + len(piece)]) == piece
        fetcher.source.close()


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
        name = "cudf"

    class Engine:  # the parts of gpuframe's Engine that the function uses
        backend = Backend()
        client = Client()
        workers = ["tcp://a:1", "tcp://b:2"]

    engine = Engine()
    assert worker_device_memory(engine) == [80 * 2**30] * 2
    assert worker_device_memory(engine) == [80 * 2**30] * 2
    assert worker_device_memory(engine, ["tcp://b:2", "tcp://c:3"]) == [80 * 2**30] * 2
    assert asked == [["tcp://a:1", "tcp://b:2"], ["tcp://c:3"]]


def test_read_measures_on_every_worker_at_once(engine, http_server):
    from distributed import get_task_stream

    from gpuframe.io.read import measure_on_workers

    url = f"{http_server.url}/blob/2mib.bin"
    with get_task_stream(engine.client) as stream:
        chosen = measure_on_workers(engine, url, storage_options())
    keys = [task["key"] for task in stream.data]
    assert len([k for k in keys if k.startswith("gpuframe-plan-measure-")]) == len(engine.workers)
    readers = sum(engine.client.nthreads().values())
    assert chosen.readers == readers and chosen.source == "measured"
    assert (readers == 1) or f"over {readers} readers" in repr(chosen)
    with get_task_stream(engine.client) as stream:
        again = measure_on_workers(engine, url, storage_options())
    assert again == chosen and not stream.data, "the store's probes are remembered"


def test_a_dataset_read_again_is_planned_without_tasks_until_a_file_changes(engine, tmp_path):
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


def test_a_small_remote_read_fetches_about_its_own_bytes(engine, dataset_dir, http_server):
    """No probe of the store (a 0.74 MiB file's first read over loopback HTTP fetched 311 MB
    with one)."""
    path = dataset_dir / "flat" / "part-0.parquet"
    http_server.reset()
    frame = read_parquet(f"{http_server.url}/flat/part-0.parquet")
    check_same(frame, pd.read_parquet(path))
    assert http_server.bytes_served() <= 2 * path.stat().st_size
