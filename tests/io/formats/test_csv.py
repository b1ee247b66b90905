"""CSV behind the format seam: line-aligned byte ranges planned and read from real files,
against pandas and pyarrow reading the same files."""

from __future__ import annotations

import itertools

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from gpuframe.errors import OptionError
from gpuframe.io.errors import (
    ColumnNotFoundError,
    CorruptFileError,
    FilterError,
    SchemaMismatchError,
    SourceNotFoundError,
)
from gpuframe.io.formats import format_for
from gpuframe.io.formats.csv import CSV_PROBE, CSV_SAMPLE, CsvFormat, _cudf_dtype
from gpuframe.io.planning.plan import plan_fragments
from gpuframe.readers import read_csv

FIXED = {"requests_in_flight": 3}


def test_csv_ranges_start_on_lines_and_cover_the_file(dataset_dir, read_all):
    path = dataset_dir / "csv" / "part-0.csv"
    data = path.read_bytes()
    plan = plan_fragments(str(path), format="csv", partition_bytes=20_000, storage=FIXED)
    ranges = plan.footers[str(path)].ranges
    header_end = data.index(b"\n") + 1
    assert ranges[0][0] == header_end and ranges[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
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
def test_csv_columns_and_filters_match_pandas(dataset_dir, columns, filters, read_all, expected):
    plan = plan_fragments(str(dataset_dir / "csv"), columns, filters, partition_bytes=30_000,
                          format="csv", storage=FIXED)
    got, _ = read_all(plan)
    both = pd.concat([pd.read_csv(dataset_dir / "csv" / f"part-{i}.csv") for i in range(2)])
    table = pa.Table.from_pandas(both, preserve_index=False)
    pd.testing.assert_frame_equal(got, expected(table, columns, filters))


def test_csv_long_lines_no_trailing_newline_and_options(tmp_path, read_all):
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


def test_csv_hive_folders_become_columns(tmp_path, sample_table, read_all):
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


def test_csv_values_that_break_the_sampled_types_name_the_bytes(tmp_path, read_all):
    path = tmp_path / "late.csv"
    path.write_text("a,b\n" + "1,x\n" * 300_000 + "oops,x\n")  # past the 1 MiB sample
    plan = plan_fragments(str(path), format="csv", storage=FIXED)
    with pytest.raises(CorruptFileError, match=r"late.csv bytes 4-\d+: .*give them with schema="):
        read_all(plan)
    fixed = plan_fragments(str(path), format=CsvFormat(schema={"a": pa.string()}), storage=FIXED)
    got, _ = read_all(fixed)
    assert len(got) == 300_001 and got["a"].iloc[-1] == "oops"


@pytest.mark.parametrize("newlines_in_values", [False, True])
def test_a_row_that_does_not_parse_is_named_by_the_byte_it_starts_at(tmp_path, read_all,
                                                                       newlines_in_values):
    """Arrow numbers rows from the start of the bytes it parsed, a range's own: the error names
    the file's byte where the row starts (and its line, in the sample that starts the file);
    a newline inside quotes does not end a row."""
    note = '"two\nlines"' if newlines_in_values else "one line"
    rows = [f"{i},{note}\n" for i in range(CSV_SAMPLE // 10)]
    fmt = format_for("csv", newlines_in_values=newlines_in_values)
    for bad, line in ((5, " \\(line 7\\)"), (len(rows) - 5, "")):
        path = tmp_path / f"bad-{bad}.csv"
        text = "id,note\n" + "".join(rows[:bad]) + "1,2,3\n" + "".join(rows[bad + 1:])
        path.write_text(text)
        offset = len("id,note\n" + "".join(rows[:bad]))
        where = f"the row at byte {offset}{line if not newlines_in_values else ''}: "
        with pytest.raises(CorruptFileError, match=f"{where}Expected 2 columns, got 3: 1,2,3"):
            read_all(plan_fragments(str(path), format=fmt, partition_bytes=2**18,
                                    storage=FIXED))


@pytest.mark.parametrize("newlines_in_values", [False, True])
def test_a_quote_left_open_is_an_error_not_one_value(tmp_path, read_all, newlines_in_values):
    """Arrow reads a quoted field that never closes as one value holding the rest of the rows;
    pandas fails ('EOF inside string'), and so does the read, naming the row, in the sample and
    in a range past it, whatever columns it reads. A quote inside an unquoted value is a
    character like any other."""
    rows = [f"{i},note {i}\n" for i in range(CSV_SAMPLE // 10)]
    fmt = format_for("csv", newlines_in_values=newlines_in_values)
    for bad in (5, len(rows) - 5):
        path = tmp_path / f"open-{bad}.csv"
        path.write_text("id,note\n" + "".join(rows[:bad]) + '1,"never closed\n'
                        + "".join(rows[bad + 1:]))
        offset = len("id,note\n" + "".join(rows[:bad]))
        with pytest.raises(CorruptFileError, match=f"open-{bad}.csv.*: the row at byte {offset}"
                                                   ".* opens a quote that is not closed by byte"):
            read_all(plan_fragments(str(path), ["id"], format=fmt, partition_bytes=2**18,
                                    storage=FIXED))
    path = tmp_path / "inches.csv"
    path.write_text("id,note\n1,5'11\"\n2,6'\n")
    got, _ = read_all(plan_fragments(str(path), format=fmt, storage=FIXED))
    assert got["note"].tolist() == ["5'11\"", "6'"]


def test_csv_with_newlines_in_values_reads_each_file_whole_like_pandas(tmp_path, read_all):
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


def test_csv_split_inside_a_quoted_newline_names_the_option_that_reads_it(engine, tmp_path,
                                                                          check_same):
    path = tmp_path / "quoted.csv"
    path.write_text("a,b,c\n" + "".join(f'{i},"note {i}\nx,y",{i}\n' for i in range(2000)))
    with pytest.raises(CorruptFileError, match=r"(?s)quoted.csv bytes .*newlines_in_values=True"):
        read_csv(str(path), partition_bytes=4096).persist()
    frame = read_csv(str(path), partition_bytes=4096, newlines_in_values=True)
    assert frame.npartitions == 1
    check_same(frame, pd.read_csv(path))


def test_cudf_reader_is_given_a_dtype_for_every_column():
    """cuDF's CSV reader gets the sampled Arrow types as dtypes, strings and nulls as str."""
    kinds = [pa.int64(), pa.float64(), pa.bool_(), pa.string(), pa.large_string(), pa.null()]
    assert [_cudf_dtype(kind) for kind in kinds] == ["int64", "float64", "bool", "str", "str",
                                                     "str"]


def _latin1_csv(path, rows: int = 2000):
    """A Latin-1 CSV whose accented names reach past the first MiB's sample when ``rows`` is
    large."""
    names = ["café", "naïve", "plain", "Ærø"]
    text = "id,name\n" + "".join(f"{i},{names[i % 4]}\n" for i in range(rows))
    path.write_bytes(text.encode("latin-1"))
    return pd.read_csv(path, encoding="latin-1")


def test_bytes_that_are_not_utf8_are_an_error_naming_the_file_and_the_byte(tmp_path, read_all):
    path = tmp_path / "latin.csv"
    _latin1_csv(path)
    with pytest.raises(CorruptFileError, match=r"latin\.csv: byte 13 .* is not UTF-8; give the "
                                               r"file's encoding, e.g. encoding='latin-1'"):
        plan_fragments(str(path), format="csv", storage=FIXED)


def test_bytes_that_are_not_utf8_past_the_sample_name_the_range_and_the_option(tmp_path,
                                                                              read_all):
    path = tmp_path / "late.csv"
    text = "id,name\n" + "".join(f"{i},plain\n" for i in range(CSV_SAMPLE // 8)) + "9,café\n"
    path.write_bytes(text.encode("latin-1"))
    plan = plan_fragments(str(path), format="csv", storage=FIXED)
    with pytest.raises(CorruptFileError, match=r"late\.csv bytes .*UTF8.*encoding="):
        read_all(plan)


@pytest.mark.parametrize("partition_bytes", [None, 4000])
def test_a_latin1_file_read_with_its_encoding_equals_pandas(engine, tmp_path, partition_bytes):
    path = tmp_path / "latin.csv"
    expected = _latin1_csv(path)
    frame = read_csv(str(path), encoding="latin-1", partition_bytes=partition_bytes)
    got = frame.to_pandas()
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    assert frame.npartitions > 1 or partition_bytes is None


@pytest.mark.parametrize("encoding, message", [
    ("utf-16", "does not write as ASCII does"), ("klingon", "not a text encoding")])
def test_encodings_that_cannot_be_split_on_newlines_or_do_not_exist_are_refused(encoding,
                                                                                message):
    with pytest.raises(OptionError, match=f"encoding={encoding!r}: .*{message}|"
                                          f"encoding={encoding!r} is {message}"):
        format_for("csv", encoding=encoding)


@pytest.mark.gpu
def test_a_latin1_file_on_the_gpus_is_transcoded_on_the_host(gpu_engine, tmp_path):
    """cuDF reads UTF-8 only: the reader takes Arrow's path for another encoding."""
    path = tmp_path / "latin.csv"
    expected = _latin1_csv(path)
    got = read_csv(str(path), encoding="latin-1", engine=gpu_engine).to_pandas()
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
