"""Parquet behind the format seam: footers, row groups and page reads of real files."""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq

from gpuframe.io.formats import parquet
from gpuframe.io.plan import plan_fragments

FIXED = {"requests_in_flight": 3}


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
