"""Fixtures of the io tests: each test starts without the process's measurements and planned
metadata, and reads plans with the pandas backend's reader here. The files and servers they
read are tests/served_datasets.py's."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from served_datasets import sample_table

from gpuframe.io.planning.metadata import PLANNED_METADATA
from gpuframe.io.readers.task import READERS
from gpuframe.io.tasks import fragment_tasks
from gpuframe.io.tuning import stores


@pytest.fixture(name="sample_table")
def _sample_table():
    """The table maker behind the dataset, for tests that write files of their own."""
    return sample_table


@pytest.fixture(autouse=True)
def _fresh_measurements():
    """Little's-law measurements and planned metadata are kept per process; each test starts
    without them."""
    stores.forget_measurements()
    PLANNED_METADATA.clear()
    yield
    stores.forget_measurements()
    PLANNED_METADATA.clear()


@pytest.fixture(name="read_all")
def _read_all():
    """Every fragment of a plan read by the pandas backend's reader, in plan order: (the rows,
    each task's stats)."""
    def read_all(plan) -> tuple[pd.DataFrame, list]:
        results = [READERS["pandas"]().read("test", [task]) for task in fragment_tasks(plan)]
        tables = [table for table, _ in results] or [plan.schema.empty_table()]
        return pa.concat_tables(tables).to_pandas(), [stats for _, stats in results]

    return read_all


@pytest.fixture(name="expected")
def _expected():
    """A table's rows that pass ``filters``, of ``columns``, as pandas."""
    def expected(table: pa.Table, columns=None, filters=None) -> pd.DataFrame:
        if filters is not None:
            table = table.filter(pq.filters_to_expression(filters))
        return table.select(columns or table.column_names).to_pandas()

    return expected


@pytest.fixture(name="compressed")
def _compressed():
    """Compressed bytes of a Parquet file's ``columns`` in ``row_groups``, counted independently
    of the planner."""
    def compressed(path, columns=None, row_groups=None) -> int:
        metadata = pq.ParquetFile(path).metadata
        total = 0
        for g in row_groups if row_groups is not None else range(metadata.num_row_groups):
            group = metadata.row_group(g)
            for i in range(group.num_columns):
                if columns is None or group.column(i).path_in_schema in columns:
                    total += group.column(i).total_compressed_size
        return total

    return compressed
