"""ORC behind the format seam: stripes planned, pruned and read from real files, against
pyarrow reading the same files."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from pyarrow import orc

from gpuframe.io.errors import (
    ColumnNotFoundError,
    CorruptFileError,
    FilterError,
    SchemaMismatchError,
    SourceNotFoundError,
    TruncatedFileError,
)
from gpuframe.io.formats.orc import OrcFormat
from gpuframe.io.planning.plan import plan_fragments

FIXED = {"requests_in_flight": 3}


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
def test_orc_fragments_read_like_pyarrow(dataset_dir, columns, filters, kept, read_all, expected):
    plan = plan_fragments(str(dataset_dir / "orc"), columns, filters, partition_bytes=1,
                          format="orc", storage=FIXED)
    got, _ = read_all(plan)
    pd.testing.assert_frame_equal(got, expected(orc_table(dataset_dir / "orc"), columns,
                                                filters))
    assert (plan.units_kept, plan.units_total) == (kept, 8)


def test_orc_reads_each_stripe_once(dataset_dir, read_all):
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
def test_orc_stripe_statistics_skip_stripes_like_parquet_row_groups(tmp_path, compression, prunes,
                                                                    read_all, expected):
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
    metadata = plan.footers[str(path)]
    known = OrcFormat().column_range(metadata, "id"), OrcFormat().column_range(metadata, "day")
    if prunes:
        assert known == ((0, rows - 1), (datetime.date(2024, 1, 1), datetime.date(2024, 2, 9)))
    else:
        assert known == (None, None)
    assert OrcFormat().column_range(metadata, "flag") is None


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
