"""The ORC tail decoder against what pyarrow reads of the same files."""

from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyarrow import orc

from gpuframe.io.formats import orc_tail


@pytest.mark.parametrize("compression", ["uncompressed", "zlib", "snappy"])
def test_stripes_and_their_statistics_are_what_the_stripes_hold(tmp_path, compression):
    rng = np.random.default_rng(5)
    rows = 20_000
    table = pa.table({
        "i": pa.array(rng.integers(-10**12, 10**12, rows)),
        "x": pa.array(rng.normal(size=rows)),
        "s": pa.array([f"w{v}" if v % 9 else None for v in rng.integers(0, 10**6, rows)]),
        "d": pa.array([datetime.date(1960, 1, 1) + datetime.timedelta(days=int(v))
                       for v in rng.integers(0, 40_000, rows)]),
    })
    path = tmp_path / "random.orc"
    orc.write_table(table, path, compression=compression, stripe_size=4096, batch_size=1000)
    opened = orc.ORCFile(str(path))
    file_tail = opened.reader.serialized_file_tail()
    stripes = orc_tail.stripes(file_tail)
    assert len(stripes) == opened.nstripes >= 3
    assert [r for _, _, r in stripes] == [opened.read_stripe(i).num_rows
                                          for i in range(opened.nstripes)]
    raw = path.read_bytes()
    assert all(raw[offset:offset + length] for offset, length, _ in stripes)
    tail_length = (opened.file_postscript_length + 1 + opened.file_footer_length
                   + opened.stripe_statistics_length)
    start = len(raw) - tail_length
    section = raw[start:start + opened.stripe_statistics_length]
    statistics = orc_tail.stripe_statistics(file_tail, section, opened.compression,
                                            table.schema, stripes)
    assert len(statistics) == len(stripes)
    for i, stats in enumerate(statistics):
        stripe = opened.read_stripe(i)
        for name in table.column_names:
            column = stripe.column(name)
            low, high, nulls = stats[name]
            assert nulls == column.null_count, (i, name)
            assert (low, high) == tuple(v.as_py() for v in pc.min_max(column).values()), (i, name)


def test_a_section_that_does_not_parse_gives_no_statistics():
    assert orc_tail.stripe_statistics(b"\x12\x00", b"\xff\xff\xff", "ZLIB",
                                      pa.schema([("i", pa.int64())]), ((3, 10, 5),)) == ()
