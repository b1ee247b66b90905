"""Parquet behind the format seam: footers, row groups and page reads of real files."""

from __future__ import annotations

import datetime
import pickle

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpuframe.errors import GpuframeError
from gpuframe.io.errors import CorruptFileError, SchemaMismatchError, TruncatedFileError
from gpuframe.io.formats import parquet
from gpuframe.io.formats.base import FOOTER_PROBE
from gpuframe.io.formats.parquet import column_chunk_ranges
from gpuframe.io.planning.plan import plan_fragments

FIXED = {"requests_in_flight": 3}
WORKERS = ["tcp://w0", "tcp://w1"]


def test_parquet_page_reads_decode_a_file_s_footer_once(tmp_path, sample_table, monkeypatch,
                                                        read_all, expected):
    """The fragments of one file share its decoded footer, and read pandas' rows."""
    path = tmp_path / "paged.parquet"
    table = sample_table(0, 8000)
    pq.write_table(table, path, row_group_size=1000, data_page_size=1024, write_page_index=True)
    decoded = []

    class CountedFooter(parquet.ParquetFooter):
        def __init__(self, raw: bytes, path: str):
            decoded.append(path)
            super().__init__(raw, path)

    monkeypatch.setattr(parquet, "ParquetFooter", CountedFooter)
    parquet.page_footer.cache_clear()
    filters = [("id", "in", [5, 2500, 7999])]
    plan = plan_fragments(str(path), ["x", "name"], filters, partition_bytes=1, storage=FIXED)
    result, _ = read_all(plan)
    assert len(plan.fragments) == 3 and decoded == [str(path)]  # row groups 0, 2 and 7
    pd.testing.assert_frame_equal(result, expected(table, ["x", "name"], filters))


def test_bad_files_raise_specific_errors(dataset_dir):
    bad = dataset_dir / "bad"
    cases = [("truncated", TruncatedFileError, "is truncated"),
             ("corrupt_footer", CorruptFileError, "corrupt footer in"),
             ("not_parquet", CorruptFileError, "is not a Parquet file"),
             ("empty", CorruptFileError, "is empty")]
    for name, error, text in cases:
        path = str(bad / f"{name}.parquet")
        with pytest.raises(error, match=f"{text}.*|.*{name}.parquet") as info:
            plan_fragments(path)
        assert path in str(info.value) and isinstance(info.value, GpuframeError)
    mismatch = bad / "mismatch"
    with pytest.raises(SchemaMismatchError,
                       match=f"{mismatch}/a.parquet and {mismatch}/b.parquet disagree on column "
                             "'x': double vs string"):
        plan_fragments(str(mismatch))


def test_footers_are_cached_and_picklable(dataset_dir, compressed):
    plan = plan_fragments(str(dataset_dir / "flat"), columns=["id"], storage=FIXED)
    assert set(plan.footers) == set(plan.files)
    restored = pickle.loads(pickle.dumps(plan.footers[plan.files[0]]))
    assert restored.equals(pq.ParquetFile(plan.files[0]).metadata)
    ranges = column_chunk_ranges(restored, [0, 1], ["id"])
    assert sum(n for _, n in ranges) == compressed(plan.files[0], {"id"}, [0, 1])


def test_footer_bytes_decode_each_footer_once_within_their_budget(dataset_dir):
    plan = plan_fragments(str(dataset_dir / "flat"), columns=["id"], storage=FIXED)
    first, second = (plan.footers[path] for path in plan.files[:2])
    here = parquet.FooterBytes(2**20)
    data = here.bytes_of(first)
    assert here.bytes_of(first) is data and here.footer_of(bytes(data)) is first
    elsewhere = parquet.FooterBytes(2**20)  # a worker's: the bytes decoded, once
    decoded = elsewhere.footer_of(bytes(data))
    assert decoded is not first and decoded.equals(first)
    assert elsewhere.footer_of(bytes(data)) is decoded
    assert elsewhere.bytes_of(decoded) == data
    assert elsewhere.bytes_of(first) == data  # the planner's object, written: kept instead
    assert elsewhere.footer_of(bytes(data)) is first

    small = parquet.FooterBytes(len(data))  # room for one footer: the newest stays
    old = small.footer_of(data)
    newer = small.footer_of(here.bytes_of(second))
    assert small.footer_of(here.bytes_of(second)) is newer
    again = small.footer_of(data)
    assert again is not old and again.equals(first)

    with pytest.raises(CorruptFileError, match="does not decode"):
        parquet.FooterBytes(2**20).footer_of(b"not a footer")
    with pytest.raises(TypeError, match="as bytes, not str"):
        parquet.ParquetFormat().received_metadata("not a footer")


def test_http_footers_one_suffix_request_per_file(dataset_dir, http_server):
    names = ["flat/part-0.parquet", "flat/part-1.parquet"]
    http_server.reset()
    plan = plan_fragments([f"{http_server.url}/{n}" for n in names], storage=FIXED,
                          workers=WORKERS)
    local = plan_fragments(str(dataset_dir / "flat"), storage=FIXED, workers=WORKERS)
    assert [(f.units, f.bytes, f.owner) for f in plan.fragments] == [
        (f.units, f.bytes, f.owner) for f in local.fragments]
    assert sorted((r.method, r.range) for r in http_server.log) == [
        ("GET", f"bytes=-{FOOTER_PROBE}")] * 2
    assert http_server.whole_file_gets() == 0
    assert str(plan.concurrency).startswith("<Concurrency configured: ")


def test_http_large_footer_takes_a_second_request(tmp_path, http_server):
    wide = pa.table({f"column_with_a_long_name_{i:04d}": pa.array(range(4)) for i in range(400)})
    path = http_server.root / "wide.parquet"
    pq.write_table(wide, path, row_group_size=2)
    footer = int.from_bytes(path.read_bytes()[-8:-4], "little")
    assert footer + 8 > FOOTER_PROBE
    http_server.reset()
    plan = plan_fragments(f"{http_server.url}/wide.parquet", storage=FIXED)
    assert plan.units_total == 2 and len(plan.schema) == 400
    assert len(http_server.log) == 2
    assert http_server.bytes_served() == footer + 8


def test_a_footer_s_layout_says_what_pyarrow_says_and_is_made_once(tmp_path):
    table = pa.table({"id": pa.array(range(5000), pa.int64()),
                      "point": pa.array([{"x": i, "y": -i} for i in range(5000)]),
                      "name": pa.array([f"n{i % 7}" for i in range(5000)])})
    path = tmp_path / "layout.parquet"
    pq.write_table(table, path, row_group_size=700)
    metadata = pq.ParquetFile(path).metadata
    layout = parquet.footer_layout(metadata)
    assert parquet.footer_layout(metadata) is layout
    assert layout.indices(["point"]) == [1, 2] and layout.indices(["name", "id"]) == [0, 3]
    units = parquet.ParquetFormat().units(metadata, ["id", "point"], ["name"])
    for group, unit in enumerate(units):
        chunks = metadata.row_group(group)
        assert unit.rows == chunks.num_rows
        assert unit.bytes == sum(chunks.column(i).total_compressed_size for i in (0, 1, 2))
        assert unit.result_bytes == chunks.column(3).total_compressed_size
        stats = chunks.column(0).statistics
        assert layout.statistics(group, "id") == (stats.min, stats.max, stats.null_count)
        assert layout.statistics(group, "point") is None  # nested: no one chunk says
        assert [layout.starts[group, i] for i in range(4)] == [
            parquet.chunk_range(chunks.column(i))[0] for i in range(4)]
    spans = [parquet.chunk_range(metadata.row_group(g).column(i)) for g in (0, 2, 5)
             for i in (1, 2, 3)]
    assert column_chunk_ranges(metadata, [5, 0, 2], ["name", "point"]) == [
        (start, end - start) for start, end in parquet.coalesce(spans)]
    assert column_chunk_ranges(metadata, [], ["id"]) == []
    for groups, names in (([5, 0, 2], ["name", "point"]), ([1], ["id"]), ([], ["id"])):
        assert parquet.ParquetFormat().fetched_bytes(metadata, groups, names) == sum(
            length for _, length in column_chunk_ranges(metadata, groups, names))


def test_a_column_s_range_spans_every_row_group_s_statistics(tmp_path):
    table = pa.table({"id": pa.array(range(100, 5100), pa.int64()),
                      "day": pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=i % 900)
                                       for i in range(5000)]),
                      "point": pa.array([{"x": i, "y": -i} for i in range(5000)])})
    path = tmp_path / "ranges.parquet"
    pq.write_table(table, path, row_group_size=700)
    metadata = pq.ParquetFile(path).metadata
    fmt = parquet.ParquetFormat()
    assert fmt.column_range(metadata, "id") == (100, 5099)
    assert fmt.column_range(metadata, "day") == (datetime.date(2020, 1, 1),
                                                 datetime.date(2022, 6, 18))
    assert fmt.column_range(metadata, "point") is None  # nested: no chunk says
    assert fmt.column_range(metadata, "absent") is None
    bare = tmp_path / "bare.parquet"
    pq.write_table(table, bare, row_group_size=700, write_statistics=["day"])
    bare_metadata = pq.ParquetFile(bare).metadata
    assert fmt.column_range(bare_metadata, "id") is None  # no row group says
    assert fmt.column_range(bare_metadata, "day") == fmt.column_range(metadata, "day")


@pytest.mark.parametrize("filters", [None, [("id", "<", 10)]])
def test_pages_written_with_a_checksum_are_checked(tmp_path, read_all, filters):
    """An uncompressed page decodes whatever its bytes hold: a corrupt one is found by its CRC,
    in whole row groups and in the pages a selective read fetches (filters)."""
    table = pa.table({"id": pa.array(range(4000), pa.int64()),
                      "x": pa.array([i * 0.5 for i in range(4000)])})
    path = tmp_path / "crc.parquet"
    pq.write_table(table, path, compression="none", use_dictionary=False,
                   write_page_checksum=True, write_page_index=True, data_page_size=4096)
    start = pq.ParquetFile(path).metadata.row_group(0).column(1).data_page_offset
    data = bytearray(path.read_bytes())
    data[start + 100:start + 160] = bytes(60)  # values of x's first page
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=f"{path} \\(row group 0\\) cannot be decoded: "
                                               ".*CRC checksum verification failed"):
        read_all(plan_fragments(str(path), filters=filters, storage=FIXED))


def _mixed_table(rows: int) -> pa.Table:
    """A column of each kind the host decode takes or leaves, nulls among the strings."""
    return pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "name": pa.array([None if i % 11 == 0 else f"name-{i}" for i in range(rows)]),
        "price": pa.array([i / 4 for i in range(rows)], pa.float64()),
        "flag": pa.array([i % 3 == 0 for i in range(rows)]),
        "small": pa.array([i % 100 for i in range(rows)], pa.int8()),
        "amount": pa.array([i for i in range(rows)], pa.decimal128(15, 2)),
        "when": pa.array([i for i in range(rows)], pa.timestamp("ms")),
        "tags": pa.array([[i, i + 1] for i in range(rows)]),
    })


def test_reads_of_few_chunks_decode_their_plain_columns_on_the_host(tmp_path, monkeypatch):
    """Few row groups times columns: the columns both readers give alike and that have no
    dictionary go to the host (not decimals, times, lists or dictionaries), where a string is
    among them; many chunks, no plain string, or more bytes than the cap: none."""
    from gpuframe.io.tasks import fragment_tasks

    for name, row_group_size in (("few", 1000), ("many", 100)):
        pq.write_table(_mixed_table(4000), tmp_path / f"{name}.parquet",
                       row_group_size=row_group_size, use_dictionary=["small"])
    few = fragment_tasks(plan_fragments(str(tmp_path / "few.parquet")))
    assert sum(len(task.units) for task in few) * 8 < parquet.HOST_DECODE_CHUNKS
    assert parquet.host_decoded_columns(few) == ["id", "name", "price", "flag"]
    only = fragment_tasks(plan_fragments(str(tmp_path / "few.parquet"),
                                         columns=["amount", "name", "small"]))
    assert parquet.host_decoded_columns(only) == ["name"]
    numbers = fragment_tasks(plan_fragments(str(tmp_path / "few.parquet"),
                                            columns=["id", "price", "small"]))
    assert parquet.host_decoded_columns(numbers) == []
    many = fragment_tasks(plan_fragments(str(tmp_path / "many.parquet")))
    assert sum(len(task.units) for task in many) * 8 >= parquet.HOST_DECODE_CHUNKS
    assert parquet.host_decoded_columns(many) == []
    size = sum(pq.ParquetFile(tmp_path / "few.parquet").metadata.row_group(g).column(i)
               .total_compressed_size for g in range(4) for i in (0, 1, 2, 3))
    monkeypatch.setattr(parquet, "HOST_DECODE_BYTES", size)
    assert parquet.host_decoded_columns(few) == ["id", "name", "price", "flag"]
    monkeypatch.setattr(parquet, "HOST_DECODE_BYTES", size - 1)
    assert parquet.host_decoded_columns(few) == []


def test_a_host_decode_gives_the_pandas_reader_s_rows_in_order(tmp_path):
    """Row groups of several files, decoded on threads of their own, come back in the tasks'
    order, as the pandas backend reads them."""
    from gpuframe.io.readers.task import READERS
    from gpuframe.io.tasks import fragment_tasks

    for i in range(3):
        pq.write_table(_mixed_table(3000).slice(i * 500), tmp_path / f"part-{i}.parquet",
                       row_group_size=400)
    plan = plan_fragments(str(tmp_path), columns=["name", "id", "flag"],
                          filters=[("id", ">", 1200)], partition_bytes=20_000)
    tasks = fragment_tasks(plan)
    assert len(tasks) > 3 and any(len(task.units) > 1 for task in tasks)
    got = parquet.read_on_host(tasks, ["name", "id", "flag"])
    expected = pa.concat_tables([READERS["pandas"]().read("k", [task])[0] for task in tasks])
    assert got.num_rows == sum(parquet.ParquetFormat().task_rows(tasks)) > expected.num_rows
    assert got.filter(pa.compute.greater(got["id"], 1200)).equals(expected)


def test_a_host_decode_checks_page_checksums(tmp_path):
    """A page whose CRC disagrees fails the host decode, as it fails the pandas reader."""
    from gpuframe.io.tasks import fragment_tasks

    path = tmp_path / "crc.parquet"
    pq.write_table(_mixed_table(2000), path, row_group_size=1000, write_page_checksum=True)
    tasks = fragment_tasks(plan_fragments(str(path), columns=["id"]))
    metadata = pq.ParquetFile(path).metadata
    data = bytearray(path.read_bytes())
    start, length = parquet.chunk_range(metadata.row_group(1).column(0))
    data[start + length - 3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(OSError, match="CRC"):
        parquet.read_on_host(tasks, ["id"])
