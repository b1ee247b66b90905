"""Local files by range."""

from __future__ import annotations

import pytest

from gpuframe.io.errors import (
    SourceNotFoundError,
)
from gpuframe.io.storage import open_source

PART = "flat/part-0.parquet"


def test_local_source(dataset_dir):
    data = (dataset_dir / PART).read_bytes()
    with open_source(str(dataset_dir / PART)) as source:
        assert source.size() == len(data)
        assert source.read_range(10, 20) == data[10:30]
        assert source.read_tail(100) == (len(data), data[-100:])
        assert source.read_range(len(data) - 5, 50) == data[-5:]
    missing = dataset_dir / "flat" / "missing.parquet"
    with pytest.raises(SourceNotFoundError, match="missing.parquet"):
        open_source(str(missing))
