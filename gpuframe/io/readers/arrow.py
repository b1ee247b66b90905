"""The pandas backend's reader: fragments read with pyarrow, selectively where filters allow
(the filter columns first, the other columns only where rows survive).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..statistics import HiveValue
from ..storage.base import scheme_of
from ..tasks import FragmentTask
from .base import ReadStats
from .fetch import FileFetcher

_ROW = "__gpuframe_row__"


class ArrowReader:
    """Reads fragments with pyarrow; the pandas backend's reader.

    Remote fragments are read at once, by as many threads as the task has requests in flight,
    which they share (:class:`~.fetch.FileFetcher`): a selective read waits for three rounds of
    requests per fragment (filter columns, page indexes, pages), and one fragment after another
    would leave the store idle in each round's tail and during each decode (a GPU host's task
    holds all 16 files of benchmarks/ingest_selective.py)."""

    def read(self, key: str, tasks: Sequence[FragmentTask]) -> tuple[pa.Table, ReadStats]:
        start = time.perf_counter()
        at_once = min(len(tasks), tasks[0].concurrency.requests_in_flight)
        if at_once > 1 and any(scheme_of(task.path) != "file" for task in tasks):
            with ThreadPoolExecutor(at_once, thread_name_prefix="gpuframe-fragment") as pool:
                results = list(pool.map(lambda task: read_fragment(task, at_once), tasks))
        else:
            results = [read_fragment(task, 1) for task in tasks]
        tables = [table for table, _ in results]
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        fetched, requests, units = (sum(counts[i] for _, counts in results) for i in range(3))
        return table, ReadStats(key, tasks[0].path, fetched, requests, units, table.num_rows,
                                time.perf_counter() - start)


def read_fragment(task: FragmentTask, sharing: int = 1
                  ) -> tuple[pa.Table, tuple[int, int, int]]:
    """One fragment's rows, and (bytes, requests, units) fetched for them; ``sharing``: the
    fragments read at once with it."""
    with FileFetcher(task, sharing) as fetcher:
        table = _read_selective(task, fetcher)
        return table, (fetcher.bytes_read, fetcher.requests, fetcher.units_read)


def _read_selective(task: FragmentTask, fetcher: FileFetcher) -> pa.Table:
    """The fragment's rows that pass the filters, in the output schema.

    When filters are given, the format reads units column by column, and some result columns
    are not filter columns, the filter columns are read first; the others are fetched only at
    the surviving rows (Parquet with a page index: only the pages holding them; else the units
    holding them).
    """
    filter_names = list(dict.fromkeys(t[0] for conj in task.filters or () for t in conj))
    head_columns = [c for c in task.file_columns if c in filter_names]
    rest_columns = [c for c in task.file_columns if c not in filter_names]
    if not task.filters or not rest_columns or not task.format.selective:
        table = _with_hive_values(fetcher.read(task.units, task.file_columns), task)
        if task.filters:
            table = table.filter(pq.filters_to_expression(task.filters))
        return _finish(table, task)
    head = _with_hive_values(fetcher.read(task.units, head_columns), task)
    head = head.append_column(_ROW, pa.array(np.arange(head.num_rows, dtype=np.int64)))
    survivors = head.filter(pq.filters_to_expression(task.filters))
    rows = survivors[_ROW].to_numpy()
    sizes = np.array([task.format.unit_rows(task.metadata, u) for u in task.units])
    starts = np.concatenate([[0], np.cumsum(sizes)])
    bounds = np.searchsorted(rows, starts)  # rows are in order: a unit's are a run of them
    kept = {task.units[i]: rows[a:b] - starts[i]
            for i, (a, b) in enumerate(itertools.pairwise(bounds)) if b > a}
    if not kept:
        return _finish(survivors.drop_columns([_ROW]), task, empty_rest=rest_columns)
    rest = fetcher.read_rows(kept, rest_columns)
    table = survivors.drop_columns([_ROW])
    for name in rest_columns:
        table = table.append_column(rest.schema.field(name), rest[name])
    return _finish(table, task)


def _with_hive_values(table: pa.Table, task: FragmentTask) -> pa.Table:
    for name, value in task.hive_values:
        kind = task.hive_schema.field(name).type
        table = table.append_column(pa.field(name, kind), hive_column(value, kind, table.num_rows))
    return table


def hive_column(value: HiveValue, kind: pa.DataType, rows: int) -> pa.Array:
    """``rows`` copies of a hive value (a null where it is None)."""
    if value is None:
        return pa.nulls(rows, kind)
    indices = pa.array(np.zeros(rows, dtype=np.int32))
    return pa.DictionaryArray.from_arrays(indices, pa.array([value], kind)).cast(kind)


def _finish(table: pa.Table, task: FragmentTask, empty_rest: Sequence[str] = ()) -> pa.Table:
    for name in empty_rest:
        kind = task.schema.field(name).type if name in task.schema.names else pa.null()
        table = table.append_column(pa.field(name, kind), pa.nulls(table.num_rows, kind))
    return table.select(task.schema.names).cast(task.schema)


