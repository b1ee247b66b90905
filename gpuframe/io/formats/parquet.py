"""Parquet: units are row groups, pruned by the footer's statistics, fetched column chunk by
column chunk; a selective read fetches only the pages holding surviving rows (:mod:`.pages`).
"""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..device_streams import thread_stream
from ..errors import CorruptFileError, PageReadUnsupportedError, TruncatedFileError
from ..statistics import (
    HiveValue,
    Statistics,
    chunk_statistics,
    statistics_may_match,
    value_range,
)
from .base import FOOTER_PROBE, CudfReader, Fetcher, FileFormat, FileUnits, Unit
from .pages import MAGIC, ParquetFooter, coalesce, read_rows

if TYPE_CHECKING:
    import cudf
    import rmm

    from ..filters import Dnf
    from ..storage.base import RangeSource


class ParquetFormat(FileFormat[pq.FileMetaData]):
    """Parquet: units are row groups; the footer's statistics prune them; chunks are fetched
    column by column."""

    name = "parquet"
    unit_name = "row groups"
    selective = True
    sparse_copies = True
    reusable_metadata = True

    def read_metadata(self, source: RangeSource, partition_bytes: int) -> pq.FileMetaData:
        return read_footer(source)

    def metadata_bytes(self, metadata: pq.FileMetaData) -> int:
        return metadata.serialized_size

    def arrow_schema(self, path: str, metadata: pq.FileMetaData) -> pa.Schema:
        try:
            return footer_layout(metadata).arrow_schema
        except (pa.ArrowException, OSError) as exc:
            raise CorruptFileError(f"{path}: its schema has no arrow equivalent: {exc}") from exc

    def sent_metadata(self, metadata: pq.FileMetaData) -> object:
        return FOOTER_BYTES.bytes_of(metadata)

    def received_metadata(self, sent: object) -> pq.FileMetaData:
        if not isinstance(sent, bytes):
            raise TypeError(f"a Parquet footer is sent as bytes, not {type(sent).__name__}")
        return FOOTER_BYTES.footer_of(sent)

    def units(self, metadata: pq.FileMetaData, columns: Sequence[str],
              result_columns: Sequence[str]) -> list[Unit]:
        layout = footer_layout(metadata)
        read = layout.sizes[:, layout.indices(columns)].sum(axis=1)
        result = layout.sizes[:, layout.indices(result_columns)].sum(axis=1)
        return [Unit(group, int(layout.rows[group]), int(read[group]), int(result[group]))
                for group in range(metadata.num_row_groups)]

    def unit_may_match(self, metadata: pq.FileMetaData, unit: Unit,
                       hive_values: Mapping[str, HiveValue], dnf: Dnf | None) -> bool:
        layout = footer_layout(metadata)
        return statistics_may_match(dnf, hive_values, int(layout.rows[unit.index]),
                                    lambda column: layout.statistics(unit.index, column))

    def unit_rows(self, metadata: pq.FileMetaData, index: int) -> int:
        return int(footer_layout(metadata).rows[index])

    def column_range(self, metadata: pq.FileMetaData, column: str) -> tuple[Any, Any] | None:
        layout = footer_layout(metadata)
        return value_range(layout.statistics(group, column) for group in range(len(layout.rows)))

    def ranges(self, metadata: pq.FileMetaData, units: Sequence[int],
               columns: Sequence[str]) -> list[tuple[int, int]]:
        return column_chunk_ranges(metadata, units, columns)

    def fetched_bytes(self, metadata: pq.FileMetaData, units: Sequence[int],
                      columns: Sequence[str]) -> int:
        """Summed from the footer's chunk sizes, without listing the ranges: every read task
        counts its bytes, and a large file has thousands of column chunks."""
        layout = footer_layout(metadata)
        return int(layout.sizes[np.ix_(list(units), layout.indices(columns))].sum())

    def read_units(self, task: FileUnits[pq.FileMetaData], fetcher: Fetcher, units: Sequence[int],
                   columns: Sequence[str]) -> pa.Table:
        handle = fetcher.file(self.ranges(task.metadata, units, columns))
        # Pages written with a CRC are checked: a corrupt uncompressed page decodes without
        # an error, into other values.
        parquet = pq.ParquetFile(handle, metadata=task.metadata,
                                 page_checksum_verification=True)
        try:
            return parquet.read_row_groups(list(units), columns=list(columns),
                                           use_threads=False)
        except (OSError, pa.ArrowException):
            for group in units if len(units) > 1 else ():  # which one is at fault
                with fetcher.naming_failures([group]):
                    parquet.read_row_group(group, columns=list(columns), use_threads=False)
            raise

    def read_rows(self, task: FileUnits[pq.FileMetaData], fetcher: Fetcher, rows: Mapping[int,
                  np.ndarray],
                  columns: Sequence[str]) -> pa.Table:
        """Only the pages holding ``rows`` where the file has a page index and the columns
        are flat (:func:`.pages.read_rows`); else whole row groups."""
        leaves = [column_indices(task.metadata, [name]) for name in columns]
        try:
            if any(len(found) != 1 for found in leaves):
                raise PageReadUnsupportedError(f"{task.path}: nested columns are read by "
                                               "whole row groups")
            footer = page_footer(footer_bytes(task.metadata), task.path)
            arrays = read_rows(footer, fetcher.bytes, rows, [found[0] for found in leaves])
        except PageReadUnsupportedError:
            return super().read_rows(task, fetcher, rows, columns)
        return pa.table(dict(zip(columns, arrays)))

    def sparse_layout(self, metadata: pq.FileMetaData, size: int
                      ) -> tuple[int, dict[int, bytes]]:
        # The footer, serialized again, goes after the file's bytes: a reader finds it by the
        # last 8 bytes, and it cannot overlap the data however long it serializes.
        footer = footer_bytes(metadata)
        tail = footer + len(footer).to_bytes(4, "little") + MAGIC
        return size + len(tail), {0: MAGIC, size: tail}

    def read_cudf(self, tasks: Sequence[FileUnits[pq.FileMetaData]],
                  copies: Sequence[rmm.DeviceBuffer] | None = None
                  ) -> tuple[cudf.DataFrame, list[int]]:
        """Local reads of few column chunks decode their plain strings (and plain numbers
        beside them) on the host (:func:`host_decoded_columns`), the rest on the GPU."""
        host = [] if copies else host_decoded_columns(tasks)
        if not host:
            return super().read_cudf(tasks, copies)
        import cudf

        columns = list(tasks[0].file_columns)
        frame = cudf.DataFrame.from_arrow(read_on_host(tasks, host))
        device = [name for name in columns if name not in host]
        if device:
            decoded = read_on_thread_stream([task.path for task in tasks], device,
                                            [list(task.units) for task in tasks])
            frame = cudf.concat([decoded, frame], axis=1)[columns]
        return frame, self.task_rows(tasks)

    def _cudf_reader(self) -> CudfReader:
        return read_on_thread_stream


HOST_DECODE_CHUNKS = 64
"""A local read of fewer column chunks (row groups times columns) than this decodes its plain
columns on the host's cores (:func:`host_decoded_columns`). cuDF decompresses and decodes a page
per thread block, and some writers put a whole column chunk in one page (DuckDB: 122,880 rows),
so such a read keeps a few of the GPU's SMs busy for as long as one page takes: the names of a
worker's half of TPC-H's `part` decode faster on the host's cores and copied over
(``benchmarks/host_decode.py``; benchmarks/results/2026-11-28-s34-gpus-h100x2.md)."""
HOST_DECODE_BYTES = 64 * 2**20
"""The most compressed bytes of such a read decoded on the host: past it the host's cores take
longer than the GPU's few blocks would."""
_HOST_DECODED_TYPES = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer,
                       pa.types.is_boolean, pa.types.is_float32, pa.types.is_float64)
"""Types that pyarrow's reader and cuDF's give alike, so a column decodes on either; not
decimals (pyarrow gives 128 bits where cuDF gives 32 or 64), times, binary or nested."""


def host_decoded_columns(tasks: Sequence[FileUnits[pq.FileMetaData]]) -> list[str]:
    """The columns of a read of local ``tasks`` to decode on the host, where it has fewer column
    chunks than :data:`HOST_DECODE_CHUNKS`: those of a type both readers give alike whose
    chunks have no dictionary (cuDF decodes dictionaries fast: their pages are small), provided
    a string column is among them (numbers alone gain too little to pay for a second decode)
    and they hold at most :data:`HOST_DECODE_BYTES`; else none."""
    columns = tasks[0].file_columns
    if sum(len(task.units) for task in tasks) * len(columns) >= HOST_DECODE_CHUNKS:
        return []
    chosen = [name for name in columns if all(_plain(task, name) for task in tasks)]
    schema = footer_layout(tasks[0].metadata).arrow_schema
    if not any(pa.types.is_string(schema.field(name).type)
               or pa.types.is_large_string(schema.field(name).type) for name in chosen):
        return []
    size = 0
    for task in tasks:
        layout = footer_layout(task.metadata)
        size += int(layout.sizes[np.ix_(task.units, layout.indices(chosen))].sum())
    return chosen if size <= HOST_DECODE_BYTES else []


def _plain(task: FileUnits[pq.FileMetaData], name: str) -> bool:
    """Column ``name`` of ``task``'s file has a type both readers give alike, and no
    dictionary in the task's row groups."""
    layout = footer_layout(task.metadata)
    if not any(alike(layout.arrow_schema.field(name).type) for alike in _HOST_DECODED_TYPES):
        return False
    return not any(task.metadata.row_group(group).column(leaf).has_dictionary_page
                   for group in task.units for leaf in layout.indices([name]))


def read_on_host(tasks: Sequence[FileUnits[pq.FileMetaData]], columns: list[str]) -> pa.Table:
    """``columns`` of the tasks' row groups, each row group decoded by pyarrow on a thread of
    its own (:func:`_host_threads`), in order. Pages written with a CRC are checked, as the
    pandas backend's reads check them."""
    def row_group(task: FileUnits[pq.FileMetaData], group: int) -> pa.Table:
        parquet = pq.ParquetFile(task.path, metadata=task.metadata,
                                 page_checksum_verification=True)
        return parquet.read_row_group(group, columns=columns, use_threads=False)

    pieces = [(task, group) for task in tasks for group in task.units]
    return pa.concat_tables(_host_threads().map(lambda piece: row_group(*piece), pieces))


@functools.cache
def _host_threads() -> ThreadPoolExecutor:
    """The process's threads for :func:`read_on_host`, one per core: the worker threads that
    read share them, as they share the cores."""
    return ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="gpuframe-host-decode")


def read_on_thread_stream(sources: list[str] | list[rmm.DeviceBuffer], columns: list[str],
                          units: list[list[int]]) -> cudf.DataFrame:
    """``columns`` of each source's ``units`` (row groups) as one cuDF frame, decoded on the
    calling thread's stream (:func:`~gpuframe.io.device_streams.thread_stream`), synchronized
    before it returns: reads on several worker threads overlap on the GPU. pylibcudf's reader,
    as ``cudf.read_parquet`` calls it, without the pandas metadata: a read names its columns
    (an index's among them) and gets those, as columns."""
    import cudf
    import pylibcudf as plc

    if not columns:  # no table to count the rows of: cuDF's reader makes them an index
        return cudf.read_parquet(sources, columns=[], row_groups=units)
    options = plc.io.parquet.ParquetReaderOptions.builder(
        plc.io.SourceInfo(sources)).use_pandas_metadata(False).build()
    options.set_column_names(columns)
    options.set_row_groups(units)
    stream = thread_stream()
    table = plc.io.parquet.read_parquet(options, stream=stream)
    stream.synchronize()
    return cudf.DataFrame.from_pylibcudf(table)


class FooterBytes:
    """Footers and their bytes as pyarrow pickles them, each kept both ways, the most recently
    used up to ``budget`` bytes.

    A read task carries its files' footers from the client through the scheduler to a worker.
    pyarrow writes a footer out at every pickling and decodes it at every unpickling, a few
    milliseconds per file of a hundred row groups, on each hop of each task of each query and
    on the event loops that deliver them; kept here, the footers planning reuses are written
    once, and a process decodes each footer once, into one object whose
    :func:`footer_layout` is made once too."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._footers: OrderedDict[bytes, pq.FileMetaData] = OrderedDict()
        self._written: dict[int, bytes] = {}  # by the id of a footer in _footers
        self._bytes = 0
        self._lock = threading.Lock()

    def bytes_of(self, metadata: pq.FileMetaData) -> bytes:
        """``metadata`` written out, as pyarrow pickles it."""
        with self._lock:
            data = self._written.get(id(metadata))
            if data is not None and self._footers.get(data) is metadata:
                self._footers.move_to_end(data)
                return data
        _, (buffer,) = metadata.__reduce__()
        data = buffer.to_pybytes()
        self._keep(data, metadata, replace=True)
        return data

    def footer_of(self, data: bytes) -> pq.FileMetaData:
        """The footer :meth:`bytes_of` wrote out as ``data``: the one this process keeps."""
        with self._lock:
            metadata = self._footers.get(data)
            if metadata is not None:
                self._footers.move_to_end(data)
                return metadata
        try:
            metadata = pq.read_metadata(pa.BufferReader(data + len(data).to_bytes(4, "little")
                                                        + MAGIC))
        except (OSError, pa.ArrowException) as exc:
            raise CorruptFileError(f"a Parquet footer sent to this process does not decode: "
                                   f"{exc}") from exc
        return self._keep(data, metadata, replace=False)

    def _keep(self, data: bytes, metadata: pq.FileMetaData, replace: bool) -> pq.FileMetaData:
        """Keep ``metadata`` as the footer of ``data``, in place of one kept already where
        ``replace`` (a footer written out: the planner's own object, which it sends again);
        the kept one."""
        with self._lock:
            kept = self._footers.pop(data, None)
            if kept is not None:
                self._bytes -= len(data)
                if replace and kept is not metadata:
                    self._written.pop(id(kept), None)
                    kept = None
            if kept is None:
                kept = metadata
            self._footers[data] = kept
            self._written[id(kept)] = data
            self._bytes += len(data)
            while self._bytes > self.budget and len(self._footers) > 1:
                oldest, footer = self._footers.popitem(last=False)
                self._written.pop(id(footer), None)
                self._bytes -= len(oldest)
            return kept


FOOTER_BYTES = FooterBytes(256 * 2**20)
"""This process's :class:`FooterBytes`: 256 MiB, a thousand footers of two hundred row
groups."""


@functools.lru_cache(maxsize=8)
def page_footer(raw: bytes, path: str) -> ParquetFooter:
    """The footer ``raw`` of ``path`` decoded for page reads, once per process for all the
    file's fragments (a file larger than the partition budget is several): Python decodes a
    wide footer slowly (benchmarks/results/2026-11-25-figures-from-io-comments.md)."""
    return ParquetFooter(raw, path)


def footer_bytes(metadata: pq.FileMetaData) -> bytes:
    """The Thrift FileMetaData of a footer, serialized again (what sits before its length and
    the closing magic)."""
    sink = pa.BufferOutputStream()
    metadata.write_metadata_file(sink)  # b"PAR1", footer, its length, b"PAR1"
    return sink.getvalue().to_pybytes()[len(MAGIC):-8]


def read_footer(source: RangeSource) -> pq.FileMetaData:
    """The footer of one Parquet file: the last 64 KiB in one request, more only if needed.

    Raises :class:`TruncatedFileError` when the file starts like Parquet but its end (footer or
    data) is missing, :class:`CorruptFileError` when it is not Parquet or the footer is garbage.
    """
    path = source.path
    size, tail = source.read_tail(FOOTER_PROBE)
    if size == 0:
        raise CorruptFileError(f"{path} is empty, not a Parquet file")
    if size < 12 or tail[-4:] != MAGIC:
        head = tail[:4] if len(tail) == size else source.read_range(0, 4)
        if head == MAGIC:
            raise TruncatedFileError(f"{path} is truncated: it starts like Parquet but its "
                                     f"{size} bytes end without a footer")
        raise CorruptFileError(f"{path} is not a Parquet file (no PAR1 magic at either end)")
    length = int.from_bytes(tail[-8:-4], "little")
    if length + 12 > size:
        raise CorruptFileError(f"corrupt footer in {path}: it claims {length} bytes of a "
                               f"{size}-byte file")
    if length + 8 > len(tail):
        missing = length + 8 - len(tail)
        tail = source.read_range(size - len(tail) - missing, missing) + tail
    try:
        metadata = pq.read_metadata(pa.BufferReader(tail[-(length + 8):]))
    except (OSError, pa.ArrowException) as exc:
        raise CorruptFileError(f"corrupt footer in {path}: {exc}") from exc
    data_end = size - length - 8
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for i in range(row_group.num_columns):
            chunk = row_group.column(i)
            start, length_ = chunk_range(chunk)
            if start < 0 or start + length_ > data_end:
                raise TruncatedFileError(
                    f"{path} is truncated or corrupt: row group {group} column "
                    f"{chunk.path_in_schema!r} lies at bytes {start}-{start + length_}, past "
                    f"the data's end at {data_end}")
    return metadata



class FooterLayout:
    """What planning asks of one footer, over and over: each top-level column's leaves, each
    column chunk's offset and compressed size, each row group's rows, and (as first asked) each
    chunk's statistics and the schema as pyarrow's. pyarrow answers each through a Python
    object made anew; a footer of hundreds of row groups took a query's planning tens of
    milliseconds per read, every query."""

    def __init__(self, metadata: pq.FileMetaData) -> None:
        self.leaves: dict[str, list[int]] = {}
        for i in range(metadata.num_columns):
            top = metadata.schema.column(i).path.split(".", 1)[0]
            self.leaves.setdefault(top, []).append(i)
        groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
        self.rows = np.array([group.num_rows for group in groups], dtype=np.int64)
        ranges = np.array([[chunk_range(group.column(i)) for i in range(metadata.num_columns)]
                           for group in groups],
                          dtype=np.int64).reshape(len(groups), metadata.num_columns, 2)
        self.starts = ranges[:, :, 0]
        """Where each chunk (row group, leaf) starts in the file, its dictionary included."""
        self.sizes = ranges[:, :, 1]
        self._metadata = metadata
        self._statistics: dict[tuple[int, str], Statistics | None] = {}

    @functools.cached_property
    def arrow_schema(self) -> pa.Schema:
        """The footer's schema as pyarrow's: every plan of the file asks for it, at least
        twice."""
        return self._metadata.schema.to_arrow_schema()

    def indices(self, names: Sequence[str]) -> list[int]:
        """Leaf column indices (in the footer) of the top-level columns ``names``, in the
        footer's order."""
        wanted = set(names)
        return sorted(i for name, leaves in self.leaves.items() if name in wanted
                      for i in leaves)

    def statistics(self, group: int, column: str) -> Statistics | None:
        """What row group ``group``'s chunk of ``column`` says of its values (None: nothing,
        or a nested column)."""
        key = (group, column)
        if key not in self._statistics:
            leaves = self.leaves.get(column, [])
            self._statistics[key] = (chunk_statistics(self._metadata.row_group(group)
                                                      .column(leaves[0]))
                                     if len(leaves) == 1 else None)
        return self._statistics[key]


_LAYOUTS: OrderedDict[int, tuple[pq.FileMetaData, FooterLayout]] = OrderedDict()
_LAYOUTS_KEPT = 1024
"""Footers whose layouts are kept, the most recently asked: as many as the planned-metadata
cache keeps by default, so that a footer's layout does not keep it alive much longer."""
_layouts_lock = threading.Lock()


def footer_layout(metadata: pq.FileMetaData) -> FooterLayout:
    """``metadata``'s layout, made once per footer object (the planner reuses the footers it
    read: :data:`~gpuframe.io.planning.metadata.PLANNED_METADATA`). Kept by the object's
    identity, the object with it, so that the identity stays its own."""
    with _layouts_lock:
        kept = _LAYOUTS.get(id(metadata))
        if kept is not None and kept[0] is metadata:
            _LAYOUTS.move_to_end(id(metadata))
            return kept[1]
    layout = FooterLayout(metadata)
    with _layouts_lock:
        _LAYOUTS[id(metadata)] = (metadata, layout)
        while len(_LAYOUTS) > _LAYOUTS_KEPT:
            _LAYOUTS.popitem(last=False)
    return layout


def column_indices(metadata: pq.FileMetaData, names: Sequence[str]) -> list[int]:
    """Leaf column indices (in the footer) of the top-level columns ``names``."""
    return footer_layout(metadata).indices(names)


def chunk_range(chunk: pq.ColumnChunkMetaData) -> tuple[int, int]:
    """(offset, length) of a column chunk in its file, dictionary page included."""
    start, dictionary = chunk.data_page_offset, chunk.dictionary_page_offset
    if chunk.has_dictionary_page and dictionary is not None and 0 < dictionary < start:
        start = dictionary
    return start, chunk.total_compressed_size


def column_chunk_ranges(metadata: pq.FileMetaData, row_groups: Sequence[int],
                        names: Sequence[str]) -> list[tuple[int, int]]:
    """Byte ranges of the chunks of columns ``names`` in ``row_groups``, adjacent ones merged."""
    layout = footer_layout(metadata)
    rows = np.asarray(row_groups, dtype=np.int64)[:, None]
    leaves = np.asarray(layout.indices(names), dtype=np.int64)[None, :]
    spans = zip(layout.starts[rows, leaves].ravel().tolist(),
                layout.sizes[rows, leaves].ravel().tolist())
    return [(start, end - start) for start, end in coalesce(spans)]
