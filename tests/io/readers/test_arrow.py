"""The pandas backend's reader: fragments of real files, local, over the Range HTTP server
and over moto S3, against pyarrow and pandas reading the same files."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpuframe.io.errors import (
    UnreachableError,
)
from gpuframe.io.planning.plan import plan_fragments
from gpuframe.readers import read_parquet, read_parquet_with_report

FIXED = {"requests_in_flight": 3}


@pytest.mark.parametrize("kind", ["orc", "csv"])
def test_http_reads_ranges_like_local(dataset_dir, http_server, kind, read_all):
    names = [f"{kind}/part-{i}.{kind}" for i in range(2)]
    budget = 1 if kind == "orc" else 30_000
    local = plan_fragments([str(dataset_dir / n) for n in names], ["id", "name"],
                           [("id", ">", 3500)], budget, FIXED, format=kind)
    http_server.reset()
    remote = plan_fragments([f"{http_server.url}/{n}" for n in names], ["id", "name"],
                            [("id", ">", 3500)], budget, FIXED, format=kind)
    assert [(f.units, f.bytes) for f in remote.fragments] == [
        (f.units, f.bytes) for f in local.fragments]
    assert http_server.whole_file_gets() == 0
    http_server.reset()
    got, stats = read_all(remote)
    pd.testing.assert_frame_equal(got, read_all(local)[0])
    assert http_server.whole_file_gets() == 0
    # the read fetches exactly the planned units (the ORC tail came with the plan)
    assert http_server.bytes_served() == sum(s.bytes_read for s in stats)
    assert sum(s.bytes_read for s in stats) == remote.total_bytes


def test_s3_csv_and_orc(dataset_dir, s3_server, closed_port, read_all):
    options = s3_server.options(requests_in_flight=2)
    for kind in ("csv", "orc"):
        plan = plan_fragments(s3_server.url(kind), format=kind, storage=options,
                              partition_bytes=40_000)
        local = plan_fragments(str(dataset_dir / kind), format=kind, storage=FIXED,
                               partition_bytes=40_000)
        pd.testing.assert_frame_equal(read_all(plan)[0], read_all(local)[0])
    with pytest.raises(UnreachableError, match=f"127.0.0.1:{closed_port}"):
        plan_fragments(f"http://127.0.0.1:{closed_port}/csv/part-0.csv", format="csv")


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


def test_selective_read_fetches_other_columns_only_where_rows_survive(engine, tmp_path, check_same):
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

    def chunk(g: int, c: int) -> int:
        return metadata.row_group(g).column(c).total_compressed_size

    expected = sum(chunk(g, 0) for g in range(4)) + chunk(2, 1) + chunk(2, 2)
    assert report.bytes_read == expected < report.planned_bytes
    assert report.result_column_bytes == sum(chunk(g, c) for g in range(4) for c in (1, 2))
    assert "MiB of result columns" in repr(report)


@pytest.mark.parametrize("store", ["local", "http"])
def test_selective_read_fetches_only_the_pages_holding_surviving_rows(engine, dataset_dir,
                                                                      http_server, store,
                                                                      check_same):
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


def test_remote_fragments_of_a_task_read_at_once_asking_no_size(engine, dataset_dir, http_server,
                                                                check_same):
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


def test_http_read_matches_local_without_whole_file_downloads(engine, dataset_dir, http_server,
                                                              check_same):
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
