"""ORC and CSV behind the format seam: planning and reading fragments of real files, local and
over the Range HTTP and moto S3 servers, against pyarrow and pandas reading the same files."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from gpuframe.errors import OptionError
from gpuframe.io.errors import (
    ColumnNotFoundError,
    CorruptFileError,
    FilterError,
    SchemaMismatchError,
    SourceNotFoundError,
    TruncatedFileError,
    UnreachableError,
)
from gpuframe.io.formats import CSV_PROBE, CSV_SAMPLE, CsvFormat, format_for
from gpuframe.io.plan import plan_fragments
from gpuframe.io.read import READERS, fragment_tasks

FIXED = {"requests_in_flight": 3}


def read_all(plan) -> tuple[pd.DataFrame, list]:
    """Every fragment of ``plan`` read by the pandas backend's reader, in plan order."""
    results = [READERS["pandas"]().read("test", [task]) for task in fragment_tasks(plan)]
    tables = [table for table, _ in results] or [plan.schema.empty_table()]
    return pa.concat_tables(tables).to_pandas(), [stats for _, stats in results]


def expected(table: pa.Table, columns=None, filters=None) -> pd.DataFrame:
    if filters is not None:
        table = table.filter(pq.filters_to_expression(filters))
    return table.select(columns or table.column_names).to_pandas()


def orc_table(folder) -> pa.Table:
    return pa.concat_tables(orc.read_table(folder / f"part-{i}.orc") for i in range(2))


def test_orc_units_are_stripes(dataset_dir):
    path = dataset_dir / "orc" / "part-0.orc"
    plan = plan_fragments(str(path), format="orc", partition_bytes=1, storage=FIXED)
    reader = orc.ORCFile(str(path))
    assert reader.nstripes == 4
    assert [f.units for f in plan.fragments] == [(0,), (1,), (2,), (3,)]
    assert [f.rows for f in plan.fragments] == [reader.read_stripe(i).num_rows
                                                for i in range(4)] == [1000] * 4
    metadata = plan.footers[str(path)]
    data = path.read_bytes()
    for offset, length, _ in metadata.stripes:  # each stripe ends where the next begins
        assert 0 < offset and offset + length <= len(data) - metadata.tail_length
    assert [s[0] + s[1] for s in metadata.stripes[:-1]] == [s[0] for s in metadata.stripes[1:]]
    both = plan_fragments(str(path), format="orc", storage=FIXED,
                          partition_bytes=metadata.stripes[0][1] + metadata.stripes[1][1])
    assert [f.units for f in both.fragments] == [(0, 1), (2, 3)]
    assert "stripes 4/4 kept" in repr(plan)


@pytest.mark.parametrize("columns, filters, kept", [
    (None, None, 8),
    (["name", "id"], [("id", ">=", 2500), ("id", "<", 5200)], 4),  # ids 2000-5999
    (["x"], [[("name", "==", "name-3")], [("id", "<", 10)]], 8),  # every stripe has name-3
    (["id"], [[("x", ">", 3999.5)], [("name", "in", ["zz"])]], 0),
])
def test_orc_fragments_read_like_pyarrow(dataset_dir, columns, filters, kept):
    plan = plan_fragments(str(dataset_dir / "orc"), columns, filters, partition_bytes=1,
                          format="orc", storage=FIXED)
    got, _ = read_all(plan)
    pd.testing.assert_frame_equal(got, expected(orc_table(dataset_dir / "orc"), columns,
                                                filters))
    assert (plan.units_kept, plan.units_total) == (kept, 8)


def test_orc_reads_each_stripe_once(dataset_dir):
    plan = plan_fragments(str(dataset_dir / "orc" / "part-0.orc"), ["id"],
                          [("name", "==", "name-4")], format="orc", storage=FIXED)
    got, stats = read_all(plan)
    assert got["id"].tolist() == [i for i in range(4000) if i % 13 == 4 and i % 97]
    assert stats[0].units_read == 4
    metadata = next(iter(plan.footers.values()))
    assert stats[0].bytes_read == plan.total_bytes == sum(s[1] for s in metadata.stripes)


@pytest.mark.parametrize("compression, prunes", [
    ("uncompressed", True), ("zlib", True), ("snappy", True),
    ("zstd", False),  # chunks that do not say their decompressed size: no statistics
])
def test_orc_stripe_statistics_skip_stripes_like_parquet_row_groups(tmp_path, compression,
                                                                    prunes):
    rows = 60_000
    ids = np.arange(rows)
    table = pa.table({
        "id": ids, "x": ids / 4, "s": [f"s{i:06d}" for i in ids],
        "day": pa.array([datetime.date(2024, 1, 1) + datetime.timedelta(days=int(i) // 1500)
                         for i in ids]),
        "late": pa.array([None if i < 36_000 else int(i) for i in ids], pa.int32()),
        "flag": ids % 2 == 0,
    })
    path = tmp_path / "sorted.orc"
    orc.write_table(table, path, compression=compression, stripe_size=4096, batch_size=1000)
    stripes = orc.ORCFile(str(path)).nstripes
    assert stripes >= 4
    for filters in ([("id", ">=", 57_000)], [("x", "<", 100.0)], [("s", "==", "s000042")],
                    [("day", ">", datetime.date(2024, 1, 30))], [("late", "<", 100)],
                    [[("id", "<", 3)], [("s", ">", "s059990")]], [("flag", "==", True)]):
        plan = plan_fragments(str(path), filters=filters, format="orc", storage=FIXED)
        got, _ = read_all(plan)
        pd.testing.assert_frame_equal(got, expected(table, filters=filters))
        assert plan.units_total == stripes
        if prunes and filters[0][0] != "flag":  # booleans have no min/max
            assert plan.units_kept < stripes, filters
        else:
            assert plan.units_kept == stripes, filters


def test_orc_errors_name_the_file(dataset_dir):
    bad = dataset_dir / "bad_orc"
    with pytest.raises(TruncatedFileError, match=f"{bad}/truncated.orc is truncated"):
        plan_fragments(str(bad / "truncated.orc"), format="orc")
    with pytest.raises(CorruptFileError, match=f"{bad}/not_orc.orc is not an ORC file"):
        plan_fragments(str(bad / "not_orc.orc"), format="orc")
    with pytest.raises(SourceNotFoundError, match="no such file: .*missing.orc"):
        plan_fragments(str(bad / "missing.orc"), format="orc")
    good = str(dataset_dir / "orc" / "part-0.orc")
    with pytest.raises(SchemaMismatchError, match="disagree on column 'x': double vs string"):
        plan_fragments([good, str(bad / "other_types.orc")], format="orc")
    with pytest.raises(ColumnNotFoundError, match=f"'nope' is not in {good}"):
        plan_fragments(good, columns=["nope"], format="orc")
    with pytest.raises(FilterError, match="names column 'nope'"):
        plan_fragments(good, filters=[("nope", "==", 1)], format="orc")


def test_csv_ranges_start_on_lines_and_cover_the_file(dataset_dir):
    path = dataset_dir / "csv" / "part-0.csv"
    data = path.read_bytes()
    plan = plan_fragments(str(path), format="csv", partition_bytes=20_000, storage=FIXED)
    ranges = plan.footers[str(path)].ranges
    header_end = data.index(b"\n") + 1
    assert ranges[0][0] == header_end and ranges[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert all(data[start - 1:start] == b"\n" for start, _ in ranges)
    assert all(end - start < 20_000 + 100 for start, end in ranges)  # budget plus one line
    assert len(plan.fragments) == len(ranges) > 3 and plan.rows is None
    assert plan.total_bytes == len(data) - header_end
    got, _ = read_all(plan)
    pd.testing.assert_frame_equal(got, pd.read_csv(path))
    assert "byte ranges" in repr(plan)


@pytest.mark.parametrize("columns, filters", [
    (["name", "id"], [("id", ">=", 2500), ("id", "<", 5200)]),
    (["x"], [[("name", "==", "name-3")], [("id", "<", 10)]]),
    (None, [("name", "in", ["name-1", "name-2"])]),
])
def test_csv_columns_and_filters_match_pandas(dataset_dir, columns, filters):
    plan = plan_fragments(str(dataset_dir / "csv"), columns, filters, partition_bytes=30_000,
                          format="csv", storage=FIXED)
    got, _ = read_all(plan)
    both = pd.concat([pd.read_csv(dataset_dir / "csv" / f"part-{i}.csv") for i in range(2)])
    table = pa.Table.from_pandas(both, preserve_index=False)
    pd.testing.assert_frame_equal(got, expected(table, columns, filters))


def test_csv_long_lines_no_trailing_newline_and_options(tmp_path):
    long = "y" * (3 * CSV_PROBE)  # a line longer than one probe at a split point
    lines = [f"{i};{long if i % 5 == 0 else 'v'};{i * 0.25}" for i in range(40)]
    path = tmp_path / "long.csv"
    path.write_text("\n".join(lines))  # no header, no final newline
    fmt = CsvFormat(delimiter=";", header=False, schema={"f2": "float32"})
    plan = plan_fragments(str(path), format=fmt, partition_bytes=CSV_PROBE, storage=FIXED)
    assert plan.schema.names == ["f0", "f1", "f2"]
    assert plan.schema.field("f2").type == pa.float32()
    assert len(plan.fragments) > 2
    got, _ = read_all(plan)
    want = pacsv.read_csv(path, pacsv.ReadOptions(autogenerate_column_names=True),
                          pacsv.ParseOptions(delimiter=";"),
                          pacsv.ConvertOptions(column_types={"f2": pa.float32()}))
    pd.testing.assert_frame_equal(got, want.to_pandas())
    with pytest.raises(OptionError, match="delimiter='ab'"):
        format_for("csv", delimiter="ab")
    with pytest.raises(OptionError, match="unknown type 'int99'"):
        CsvFormat(schema={"f0": "int99"})


def test_csv_hive_folders_become_columns(tmp_path, sample_table):
    for year in (2023, 2024):
        folder = tmp_path / f"year={year}"
        folder.mkdir()
        pacsv.write_csv(sample_table(year, 50), folder / "part.csv")
    plan = plan_fragments(str(tmp_path), format="csv", filters=[("year", "==", 2024)],
                          storage=FIXED)
    assert (plan.files_total, len(plan.files)) == (2, 1)
    got, _ = read_all(plan)
    want = pd.read_csv(tmp_path / "year=2024" / "part.csv")
    want["year"] = pd.Series([2024] * 50, dtype="int32")
    pd.testing.assert_frame_equal(got, want)


def test_csv_errors_name_the_file_or_option(dataset_dir):
    good, bad = str(dataset_dir / "csv" / "part-0.csv"), dataset_dir / "bad_csv"
    with pytest.raises(SchemaMismatchError,
                       match=f"{good} and {bad}/renamed.csv disagree on column 'x'"):
        plan_fragments([good, str(bad / "renamed.csv")], format="csv")
    with pytest.raises(SchemaMismatchError, match="disagree on column 'x': double vs string"):
        plan_fragments([good, str(bad / "typed.csv")], format="csv")
    with pytest.raises(CorruptFileError, match=f"{bad}/empty.csv is empty"):
        plan_fragments(str(bad / "empty.csv"), format="csv")
    with pytest.raises(CorruptFileError, match=f"{bad}/binary.csv"):
        plan_fragments(str(bad / "binary.csv"), format="csv")
    with pytest.raises(ColumnNotFoundError, match=f"'nope' is not in {good}"):
        plan_fragments(good, columns=["id", "nope"], format="csv")
    with pytest.raises(FilterError, match="value 'abc' does not fit column 'id' of type int64"):
        plan_fragments(good, filters=[("id", ">", "abc")], format="csv")
    with pytest.raises(SourceNotFoundError, match="no such file: .*nothere.csv"):
        plan_fragments(str(bad / "nothere.csv"), format="csv")
    with pytest.raises(OptionError, match="format='json'"):
        plan_fragments(good, format="json")


def test_csv_values_that_break_the_sampled_types_name_the_bytes(tmp_path):
    path = tmp_path / "late.csv"
    path.write_text("a,b\n" + "1,x\n" * 300_000 + "oops,x\n")  # past the 1 MiB sample
    plan = plan_fragments(str(path), format="csv", storage=FIXED)
    with pytest.raises(CorruptFileError, match=r"late.csv bytes 4-\d+: .*give them with schema="):
        read_all(plan)
    fixed = plan_fragments(str(path), format=CsvFormat(schema={"a": pa.string()}), storage=FIXED)
    got, _ = read_all(fixed)
    assert len(got) == 300_001 and got["a"].iloc[-1] == "oops"


def test_csv_with_newlines_in_values_reads_each_file_whole_like_pandas(tmp_path):
    # Most newlines are inside quoted fields, the last one of the sampled MiB among them.
    more = "more\n" * 40
    text = "id,note,n\n" + "".join(f'{i},"say ""{i}""\n{more}end",{i}\n' for i in range(10_000))
    path = tmp_path / "notes.csv"
    path.write_text(text)
    head = text.encode()[:CSV_SAMPLE]
    assert len(text) > 2 * CSV_SAMPLE and head.count(b'"', 0, head.rfind(b"\n")) % 2
    fmt = format_for("csv", newlines_in_values=True)
    plan = plan_fragments(str(path), format=fmt, partition_bytes=4096, storage=FIXED)
    assert len(plan.fragments) == 1 and plan.units_total == 1
    got, _ = read_all(plan)
    pd.testing.assert_frame_equal(got, pd.read_csv(path))
    with pytest.raises(CorruptFileError, match="(?s)notes.csv cannot be read as CSV: .*"
                                               "newlines_in_values=True"):
        plan_fragments(str(path), format="csv", storage=FIXED)
    with pytest.raises(OptionError, match="newlines_in_values='yes' must be True or False"):
        format_for("csv", newlines_in_values="yes")


@pytest.mark.parametrize("kind", ["orc", "csv"])
def test_http_reads_ranges_like_local(dataset_dir, http_server, kind):
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


def test_s3_csv_and_orc(dataset_dir, s3_server, closed_port):
    options = s3_server.options(requests_in_flight=2)
    for kind in ("csv", "orc"):
        plan = plan_fragments(s3_server.url(kind), format=kind, storage=options,
                              partition_bytes=40_000)
        local = plan_fragments(str(dataset_dir / kind), format=kind, storage=FIXED,
                               partition_bytes=40_000)
        pd.testing.assert_frame_equal(read_all(plan)[0], read_all(local)[0])
    with pytest.raises(UnreachableError, match=f"127.0.0.1:{closed_port}"):
        plan_fragments(f"http://127.0.0.1:{closed_port}/csv/part-0.csv", format="csv")


def test_parquet_page_reads_decode_a_file_s_footer_once(tmp_path, sample_table, monkeypatch):
    """The fragments of one file share its decoded footer, and read pandas' rows."""
    from gpuframe.io import formats

    path = tmp_path / "paged.parquet"
    table = sample_table(0, 8000)
    pq.write_table(table, path, row_group_size=1000, data_page_size=1024, write_page_index=True)
    decoded = []

    class CountedFooter(formats.ParquetFooter):
        def __init__(self, raw: bytes, path: str):
            decoded.append(path)
            super().__init__(raw, path)

    monkeypatch.setattr(formats, "ParquetFooter", CountedFooter)
    formats.page_footer.cache_clear()
    filters = [("id", "in", [5, 2500, 7999])]
    plan = plan_fragments(str(path), ["x", "name"], filters, partition_bytes=1, storage=FIXED)
    result, _ = read_all(plan)
    assert len(plan.fragments) == 3 and decoded == [str(path)]  # row groups 0, 2 and 7
    pd.testing.assert_frame_equal(result, expected(table, ["x", "name"], filters))
