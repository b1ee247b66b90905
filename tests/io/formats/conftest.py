"""Parquet files that pyarrow writes with a page index, for the page and Thrift tests."""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpuframe.io.formats.pages import ParquetFooter

ROWS = 6000


GROUP_ROWS = 2500


NESTED = ("tags", "point")


MANY_PAGES = 3


WRITES = {  # dictionaries over 16 KiB fall back to plain pages in the same chunk
    "dictionary-snappy-v1": {"use_dictionary": True, "compression": "snappy",
                             "data_page_version": "1.0", "dictionary_pagesize_limit": 2**14},
    "plain-none-v2": {"use_dictionary": False, "compression": "none",
                      "data_page_version": "2.0"},
    "dictionary-none-v2": {"use_dictionary": True, "compression": "none",
                           "data_page_version": "2.0", "dictionary_pagesize_limit": 2**14},
    "plain-snappy-v1-no-arrow-schema": {"use_dictionary": False, "compression": "snappy",
                                        "data_page_version": "1.0", "store_schema": False},
}


def source_table() -> pa.Table:
    """Every flat type the brief names, with nulls and NaNs, and two nested columns."""
    rng = np.random.default_rng(7)
    ids = np.arange(ROWS, dtype=np.int64) * 3
    x = rng.normal(size=ROWS)
    x[::7] = np.nan
    cities = ["ams", "oslo", "rome", "lima", None]
    return pa.table({
        "id": ids,
        "x": pa.array(x, mask=np.arange(ROWS) % 11 == 0),
        "city": pa.array([cities[i] for i in rng.integers(0, 5, ROWS)]),
        "note": pa.array([f"note-{v}-{i}" for i, v in enumerate(rng.integers(0, 10**9, ROWS))]),
        "label": pa.array([f"label-{i % 9}" for i in range(ROWS)], pa.large_string()),
        "kind": pa.array([f"k{i % 4}" for i in range(ROWS)]).dictionary_encode(),
        "when": pa.array(1_700_000_000_000_000 + ids * 10**6,
                         pa.timestamp("us", tz="America/New_York"),
                         mask=np.arange(ROWS) % 13 == 0),
        "flag": pa.array([None if i % 17 == 0 else i % 3 == 0 for i in range(ROWS)]),
        "price": pa.array([decimal.Decimal(int(v)).scaleb(-3) for v in ids * 7919 - 10**6],
                          pa.decimal128(12, 3)),
        "tags": pa.array([[i, i + 1] if i % 5 else None for i in range(ROWS)]),
        "point": pa.array([{"x": float(i), "y": -float(i)} for i in range(ROWS)]),
    })


@pytest.fixture(scope="module", params=sorted(WRITES))
def written(request, tmp_path_factory):
    """(path, file bytes, decoded footer, raw footer) of the source table written one way."""
    path = tmp_path_factory.mktemp("pages") / f"{request.param}.parquet"
    pq.write_table(source_table(), path, write_page_index=True, data_page_size=4096,
                   row_group_size=GROUP_ROWS, write_batch_size=256, **WRITES[request.param])
    data = path.read_bytes()
    raw = raw_footer_of(data)
    return str(path), data, ParquetFooter(raw, str(path)), raw


def raw_footer_of(data: bytes) -> bytes:
    """The Thrift FileMetaData of a Parquet file's bytes."""
    length = int.from_bytes(data[-8:-4], "little")
    return data[-8 - length:-8]


@pytest.fixture(name="raw_footer")
def _raw_footer():
    return raw_footer_of

