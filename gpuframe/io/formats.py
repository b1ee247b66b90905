"""The file formats a dataset may be in, behind one small class each: Parquet, ORC and CSV.

Planning and reading are the same for every format (:mod:`~gpuframe.io.plan`,
:mod:`~gpuframe.io.read`); a :class:`FileFormat` answers only what differs:

- its *metadata*: what one request for the file's tail (or head) tells: the Parquet footer, the
  ORC file tail with its stripes, or a CSV file's header, sampled types and line-aligned ranges.
  Read once per file on the client and sent to the read tasks, so workers never fetch it again;
- its *units*: the pieces a fragment is made of, with their rows and bytes: Parquet row groups,
  ORC stripes, CSV byte ranges that start and end on line boundaries;
- whether statistics can prove a unit holds no matching row (Parquet's and ORC's min/max; CSV
  has none: there the filters only apply to rows);
- how to read some units' columns: with pyarrow (the pandas backend), or with cuDF.

Formats are small picklable objects; their options (CSV's delimiter, header and types) travel
with each read task.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import OptionError
from .errors import CorruptFileError, PageReadUnsupportedError, TruncatedFileError
from .filters import Statistics, Term, range_may_match
from .pages import MAGIC, ParquetFooter, coalesce, read_rows
from . import orc_tail
from .storage.base import RangeSource as Source
from .storage.ranges import RangeFile

ORC_MAGIC = b"ORC"
ORC_TAIL_GUESS = 16 * 2**10
"""Bytes Arrow's ORC reader fetches from a file's end before it knows the tail's length."""
FOOTER_PROBE = 64 * 2**10
"""Bytes of a file's end read in one request for its footer or tail."""
CSV_SAMPLE = 2**20
"""Bytes of a CSV file's head whose rows give the column types."""
CSV_PROBE = 64 * 2**10
"""Bytes read at a split point to find the next line's start (more if the line is longer)."""


@dataclass(frozen=True)
class Unit:
    """One piece of a file that a fragment is packed from."""

    index: int
    rows: int | None
    """Rows, where the metadata says (not for CSV)."""
    bytes: int
    """Bytes a read of the planned columns fetches."""
    result_bytes: int
    """Bytes of the result's columns alone."""


class FileFormat:
    """What planning and reading need to know of one file format; see the module docstring."""

    name = ""
    unit_name = "units"
    selective = False
    """Units can be read a few columns at a time, with known rows (filter columns first)."""
    sparse_copies = False
    """A remote file's planned ranges and the plan's bytes make a copy cuDF can open
    (:meth:`sparse_layout`)."""
    reusable_metadata = False
    """The metadata is the file's own (Parquet footer, ORC tail), whatever the format's options
    and the partition budget: planning reuses it while the file is unchanged
    (:class:`~gpuframe.io.plan.MetadataCache`)."""

    def read_metadata(self, source: Source, partition_bytes: int) -> Any:
        raise NotImplementedError

    def arrow_schema(self, path: str, metadata: Any) -> pa.Schema:
        raise NotImplementedError

    def metadata_bytes(self, metadata: Any) -> int:
        """Bytes of ``metadata`` as its file holds it (what a cache of it is charged)."""
        raise NotImplementedError

    def units(self, metadata: Any, columns: Sequence[str],
              result_columns: Sequence[str]) -> list[Unit]:
        raise NotImplementedError

    def unit_may_match(self, metadata: Any, unit: Unit, partition: Mapping[str, Any],
                       dnf: list[list[Term]] | None) -> bool:
        """False only when what is known without reading proves no row can match."""
        return unit.rows != 0

    def unit_rows(self, metadata: Any, index: int) -> int:
        raise NotImplementedError

    def describe_units(self, metadata: Any, units: Sequence[int]) -> str:
        """``units`` as an error message names them ('row group 3', 'stripes 0-7')."""
        name = self.unit_name if len(units) != 1 else self.unit_name[:-1]
        if len(units) > 2 and list(units) == list(range(units[0], units[-1] + 1)):
            return f"{name} {units[0]}-{units[-1]}"
        return f"{name} " + ", ".join(map(str, units))

    def file_size(self, metadata: Any) -> int | None:
        """The file's size when it was planned, where the metadata says."""
        return None

    def ranges(self, metadata: Any, units: Sequence[int],
               columns: Sequence[str]) -> list[tuple[int, int]]:
        """(offset, length) of the bytes reading ``columns`` of ``units`` fetches."""
        raise NotImplementedError

    def read_units(self, task: Any, fetcher: Any, units: Sequence[int],
                   columns: Sequence[str]) -> pa.Table:
        """``columns`` of ``units`` of the task's file as an Arrow table (the pandas backend).

        ``fetcher`` (:class:`gpuframe.io.read.Fetcher`) fetches byte ranges and counts them;
        its ``naming_failures([unit])`` names the unit at fault where a format can tell."""
        raise NotImplementedError

    def read_rows(self, task: Any, fetcher: Any, rows: Mapping[int, np.ndarray],
                  columns: Sequence[str]) -> pa.Table:
        """``columns`` at ``rows`` (unit -> sorted row indices in it, units in order), in
        order: here the whole units are read, then the rows taken."""
        units = list(rows)
        table = self.read_units(task, fetcher, units, columns)
        sizes = [self.unit_rows(task.metadata, unit) for unit in units]
        starts = np.cumsum([0] + sizes[:-1])
        return table.take(pa.array(np.concatenate(
            [start + np.asarray(r, dtype=np.int64) for start, r in zip(starts, rows.values())])))

    def read_cudf(self, tasks: Sequence[Any], sources: Sequence[Any] | None = None
                  ) -> tuple[Any, list[int]]:
        """The file columns of the tasks' units as one cuDF frame, read by cuDF in as few calls
        as the format allows, and the rows each task gave, in order. ``sources``: a file object
        per task (:meth:`sparse_layout` copies of remote files), else the tasks' local paths.

        Formats whose units have known rows read every file in one call of
        :meth:`_cudf_reader`."""
        frame = self._cudf_reader()(list(sources) if sources else [t.path for t in tasks],
                                    list(tasks[0].file_columns),
                                    [list(task.units) for task in tasks])
        return frame, [sum(self.unit_rows(task.metadata, u) for u in task.units)
                       for task in tasks]

    def _cudf_reader(self) -> Callable[[list[Any], list[str], list[list[int]]], Any]:
        """cuDF's reader of this format: (sources, columns, units per source) -> frame."""
        raise NotImplementedError

    def sparse_layout(self, metadata: Any, size: int) -> tuple[int, dict[int, bytes]] | None:
        """How to lay out a sparse copy of a remote file that cuDF can open: (its length, the
        bytes the plan already holds by offset: magic numbers, footer), the planned ranges
        going at their own offsets. None where a reader needs more than those (CSV)."""
        return None

    def resolve_schema(self, schema: pa.Schema) -> pa.Schema:
        """The dataset's file schema, once every file agreed on it."""
        return schema

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


def format_for(format: str | FileFormat, **options: Any) -> FileFormat:
    """The :class:`FileFormat` called ``format`` ('parquet', 'orc', 'csv') with ``options``."""
    if isinstance(format, FileFormat):
        if options:
            raise OptionError(f"options {sorted(options)} given with a {format!r} object")
        return format
    kinds = {"parquet": ParquetFormat, "orc": OrcFormat, "csv": CsvFormat}
    if format not in kinds:
        raise OptionError(f"format={format!r} is not one of " + ", ".join(kinds))
    return kinds[format](**options)




class ParquetFormat(FileFormat):
    """Parquet: units are row groups; the footer's statistics prune them; chunks are fetched
    column by column."""

    name = "parquet"
    unit_name = "row groups"
    selective = True
    sparse_copies = True
    reusable_metadata = True

    def read_metadata(self, source: Source, partition_bytes: int) -> pq.FileMetaData:
        return read_footer(source)

    def metadata_bytes(self, metadata: pq.FileMetaData) -> int:
        return metadata.serialized_size

    def arrow_schema(self, path: str, metadata: pq.FileMetaData) -> pa.Schema:
        try:
            return metadata.schema.to_arrow_schema()
        except (pa.ArrowException, OSError) as exc:
            raise CorruptFileError(f"{path}: its schema has no arrow equivalent: {exc}") from exc

    def units(self, metadata: pq.FileMetaData, columns: Sequence[str],
              result_columns: Sequence[str]) -> list[Unit]:
        indices = column_indices(metadata, columns)
        result_indices = column_indices(metadata, result_columns)
        units = []
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            units.append(Unit(
                group, row_group.num_rows,
                sum(row_group.column(i).total_compressed_size for i in indices),
                sum(row_group.column(i).total_compressed_size for i in result_indices)))
        return units

    def unit_may_match(self, metadata: pq.FileMetaData, unit: Unit,
                       partition: Mapping[str, Any], dnf: list[list[Term]] | None) -> bool:
        return row_group_may_match(metadata.row_group(unit.index), metadata, partition, dnf)

    def unit_rows(self, metadata: pq.FileMetaData, index: int) -> int:
        return metadata.row_group(index).num_rows

    def ranges(self, metadata: pq.FileMetaData, units: Sequence[int],
               columns: Sequence[str]) -> list[tuple[int, int]]:
        return column_chunk_ranges(metadata, units, columns)

    def read_units(self, task: Any, fetcher: Any, units: Sequence[int],
                   columns: Sequence[str]) -> pa.Table:
        handle = fetcher.file(self.ranges(task.metadata, units, columns))
        parquet = pq.ParquetFile(handle, metadata=task.metadata)
        try:
            return parquet.read_row_groups(list(units), columns=list(columns),
                                           use_threads=False)
        except (OSError, pa.ArrowException):
            for group in units if len(units) > 1 else ():  # which one is at fault
                with fetcher.naming_failures([group]):
                    parquet.read_row_group(group, columns=list(columns), use_threads=False)
            raise

    def read_rows(self, task: Any, fetcher: Any, rows: Mapping[int, np.ndarray],
                  columns: Sequence[str]) -> pa.Table:
        """Only the pages holding ``rows`` where the file has a page index and the columns
        are flat (:func:`gpuframe.io.pages.read_rows`); else whole row groups."""
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

    def _cudf_reader(self) -> Callable[[list[Any], list[str], list[list[int]]], Any]:
        import cudf

        return lambda sources, columns, units: cudf.read_parquet(
            sources, columns=columns, row_groups=units)


@functools.lru_cache(maxsize=8)
def page_footer(raw: bytes, path: str) -> ParquetFooter:
    """The footer ``raw`` of ``path`` decoded for page reads, once per process for all the
    file's fragments (a file larger than the partition budget is several): Python decodes
    about 1.5 KB a millisecond (a footer of 40 row groups x 50 columns, 260 KB: 168 ms)."""
    return ParquetFooter(raw, path)


def footer_bytes(metadata: pq.FileMetaData) -> bytes:
    """The Thrift FileMetaData of a footer, serialized again (what sits before its length and
    the closing magic)."""
    sink = pa.BufferOutputStream()
    metadata.write_metadata_file(sink)  # b"PAR1", footer, its length, b"PAR1"
    return sink.getvalue().to_pybytes()[len(MAGIC):-8]


def read_footer(source: Source) -> pq.FileMetaData:
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



def column_indices(metadata: pq.FileMetaData, names: Sequence[str]) -> list[int]:
    """Leaf column indices (in the footer) of the top-level columns ``names``."""
    wanted = set(names)
    return [i for i in range(metadata.num_columns)
            if metadata.schema.column(i).path.split(".", 1)[0] in wanted]


def chunk_range(chunk: pq.ColumnChunkMetaData) -> tuple[int, int]:
    """(offset, length) of a column chunk in its file, dictionary page included."""
    start = chunk.data_page_offset
    if chunk.has_dictionary_page and 0 < chunk.dictionary_page_offset < start:
        start = chunk.dictionary_page_offset
    return start, chunk.total_compressed_size


def column_chunk_ranges(metadata: pq.FileMetaData, row_groups: Sequence[int],
                        names: Sequence[str]) -> list[tuple[int, int]]:
    """Byte ranges of the chunks of columns ``names`` in ``row_groups``, adjacent ones merged."""
    indices = column_indices(metadata, names)
    spans = [chunk_range(metadata.row_group(g).column(i)) for g in row_groups for i in indices]
    return [(start, end - start) for start, end in coalesce(spans)]


def row_group_may_match(row_group: pq.RowGroupMetaData, metadata: pq.FileMetaData,
                        partition: Mapping[str, Any], dnf: list[list[Term]] | None) -> bool:
    """False only when statistics or hive values prove no row can satisfy ``dnf``."""
    return statistics_may_match(dnf, partition, row_group.num_rows,
                                lambda column: _chunk_statistics(row_group, metadata, column))


def _chunk_statistics(row_group: pq.RowGroupMetaData, metadata: pq.FileMetaData,
                      column: str) -> Statistics | None:
    indices = column_indices(metadata, [column])
    if len(indices) != 1:
        return None
    stats = row_group.column(indices[0]).statistics
    if stats is None:
        return None
    nulls = stats.null_count if stats.has_null_count else None
    if not stats.has_min_max:
        return None, None, nulls
    return stats.min, stats.max, nulls


def statistics_may_match(dnf: list[list[Term]] | None, partition: Mapping[str, Any],
                         rows: int, statistics: Callable[[str], Statistics | None]) -> bool:
    """False only when a unit's hive values or column statistics prove none of its ``rows``
    can satisfy ``dnf``; ``statistics(column)``: what the unit's metadata knows of a column,
    None where nothing."""
    if rows == 0:
        return False
    if dnf is None:
        return True

    def term_may_match(column: str, op: str, value: Any) -> bool:
        if column in partition:
            known = partition[column]
            return range_may_match(op, value, known, known, 1 if known is None else 0, 1)
        stats = statistics(column)
        if stats is None:
            return True
        low, high, nulls = stats
        if low is None or high is None:
            return not (nulls is not None and nulls == rows)
        return range_may_match(op, value, low, high, nulls, rows)

    return any(all(term_may_match(*term) for term in conj) for conj in dnf)


@dataclass(frozen=True)
class OrcMetadata:
    """What an ORC file's tail says: its stripes and schema, and how long the tail is."""

    size: int
    tail_length: int
    """Postscript, footer and stripe statistics at the file's end."""
    stripes: tuple[tuple[int, int, int], ...]
    """(offset, length, rows) of each stripe; length counts its index, data and footer."""
    schema: pa.Schema
    tail: bytes
    """The file's last bytes as Arrow's reader opens it (at least :data:`ORC_TAIL_GUESS`), so
    read tasks open the file without fetching its tail again."""
    statistics: tuple[Mapping[str, Statistics], ...] = ()
    """Each stripe's min, max and nulls by top-level column, where the tail holds them in a
    form read here (:func:`~gpuframe.io.orc_tail.stripe_statistics`); () where not."""


class OrcFormat(FileFormat):
    """ORC: units are stripes, read with ``pyarrow.orc.ORCFile.read_stripe``.

    The stripes' places come from the file tail (``serialized_file_tail``, decoded by
    :mod:`~gpuframe.io.orc_tail`: Arrow gives no accessor for them), and so do their
    statistics (pyarrow 26 exposes only their count): filters skip the stripes whose min/max
    prove no row matches, as Parquet's skip row groups, then apply to rows
    (:func:`~gpuframe.io.orc_tail.stripe_statistics` says which columns and compressions give
    statistics). A stripe's bytes are counted and fetched whole: its own footer, not the
    file's, says how they split between columns. So a filter-columns-first read would fetch a
    surviving stripe twice, and is not done.
    """

    name = "orc"
    unit_name = "stripes"
    sparse_copies = True
    reusable_metadata = True

    def read_metadata(self, source: Source, partition_bytes: int) -> OrcMetadata:
        import pyarrow.orc as orc

        path = source.path
        size, tail = source.read_tail(FOOTER_PROBE)
        if size == 0:
            raise CorruptFileError(f"{path} is empty, not an ORC file")
        head = tail[:3] if len(tail) == size else source.read_range(0, 3)
        if head != ORC_MAGIC:
            raise CorruptFileError(f"{path} is not an ORC file (no 'ORC' magic at its start)")
        handle = pa.PythonFile(RangeFile(source, {size - len(tail): tail}), mode="r")
        try:
            opened = orc.ORCFile(handle)
            file_tail = opened.reader.serialized_file_tail()
            stripes = orc_tail.stripes(file_tail)
            tail_length = (opened.file_postscript_length + 1 + opened.file_footer_length
                           + opened.stripe_statistics_length)
            schema = opened.schema
            compression = opened.compression
            statistics_length = opened.stripe_statistics_length
        except (OSError, pa.ArrowException, ValueError, IndexError) as exc:
            raise TruncatedFileError(
                f"{path} is truncated or its tail is corrupt: it starts like ORC, but its "
                f"{size} bytes end without a readable postscript and footer ({exc})") from exc
        keep = min(size, max(ORC_TAIL_GUESS, tail_length))
        if keep > len(tail):
            tail = source.read_range(size - keep, keep - len(tail)) + tail
        data_end = size - tail_length
        for index, (offset, length, _) in enumerate(stripes):
            if offset + length > data_end:
                raise TruncatedFileError(
                    f"{path} is truncated or corrupt: stripe {index} lies at bytes "
                    f"{offset}-{offset + length}, past the data's end at {data_end}")
        start = len(tail) - tail_length
        statistics = orc_tail.stripe_statistics(
            file_tail, tail[start:start + statistics_length], compression, schema, stripes)
        return OrcMetadata(size, tail_length, stripes, schema, tail[-keep:], statistics)

    def metadata_bytes(self, metadata: OrcMetadata) -> int:
        return len(metadata.tail)

    def arrow_schema(self, path: str, metadata: OrcMetadata) -> pa.Schema:
        return metadata.schema

    def file_size(self, metadata: OrcMetadata) -> int:
        return metadata.size

    def units(self, metadata: OrcMetadata, columns: Sequence[str],
              result_columns: Sequence[str]) -> list[Unit]:
        return [Unit(i, rows, length, length)
                for i, (_, length, rows) in enumerate(metadata.stripes)]

    def unit_may_match(self, metadata: OrcMetadata, unit: Unit, partition: Mapping[str, Any],
                       dnf: list[list[Term]] | None) -> bool:
        known = metadata.statistics[unit.index] if metadata.statistics else {}
        return statistics_may_match(dnf, partition, unit.rows or 0, known.get)

    def unit_rows(self, metadata: OrcMetadata, index: int) -> int:
        return metadata.stripes[index][2]

    def ranges(self, metadata: OrcMetadata, units: Sequence[int],
               columns: Sequence[str]) -> list[tuple[int, int]]:
        return [metadata.stripes[i][:2] for i in units]

    def read_units(self, task: Any, fetcher: Any, units: Sequence[int],
                   columns: Sequence[str]) -> pa.Table:
        import pyarrow.orc as orc

        metadata = task.metadata
        handle = fetcher.file(self.ranges(metadata, units, columns),
                              known={metadata.size - len(metadata.tail): metadata.tail})
        opened = orc.ORCFile(handle)
        schema = pa.schema([task.metadata.schema.field(c) for c in columns])
        batches = []
        for i in units:
            with fetcher.naming_failures([i]):
                batches.append(opened.read_stripe(i, columns=list(columns)).select(list(columns)))
        return pa.Table.from_batches(batches, schema=schema)

    def sparse_layout(self, metadata: OrcMetadata, size: int
                      ) -> tuple[int, dict[int, bytes]]:
        return size, {0: ORC_MAGIC, size - len(metadata.tail): metadata.tail}

    def _cudf_reader(self) -> Callable[[list[Any], list[str], list[list[int]]], Any]:
        import cudf

        return lambda sources, columns, units: cudf.read_orc(
            sources, columns=columns, stripes=units)


@dataclass(frozen=True)
class CsvMetadata:
    """A CSV file's size, column names, sampled types, and line-aligned byte ranges."""

    size: int
    names: tuple[str, ...]
    schema: pa.Schema
    """Types as read from the file's first :data:`CSV_SAMPLE` bytes (nulls where all empty)."""
    ranges: tuple[tuple[int, int], ...]
    """(start, end) of each range; each starts where a line starts, after the header."""


class CsvFormat(FileFormat):
    """CSV: units are byte ranges of about ``partition_bytes`` that start and end on line
    boundaries, found at planning by a small read at each split point.

    Types are inferred from the first MiB of each file (``schema=`` gives some or all of them);
    empty fields are nulls, as in pandas. CSV has no statistics: filters apply to rows after
    parsing, and every range is read whole.

    A split point can fall inside a quoted field that holds a newline, which no small read
    can tell from a line's end: such files need ``newlines_in_values=True``, which reads each
    file whole, as one unit (Arrow's ``ParseOptions.newlines_in_values``), whatever
    ``partition_bytes`` says.
    """

    name = "csv"
    unit_name = "byte ranges"
    selective = False

    def __init__(self, delimiter: str = ",", header: bool = True,
                 schema: pa.Schema | Mapping[str, Any] | None = None,
                 newlines_in_values: bool = False):
        if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in "\r\n\"":
            raise OptionError(f"delimiter={delimiter!r} must be one character, not a quote or "
                              "newline")
        if not isinstance(header, bool):
            raise OptionError(f"header={header!r} must be True or False")
        if not isinstance(newlines_in_values, bool):
            raise OptionError(f"newlines_in_values={newlines_in_values!r} must be True or False")
        self.delimiter = delimiter
        self.header = header
        self.newlines_in_values = newlines_in_values
        self.types = _csv_types(schema)

    def read_metadata(self, source: Source, partition_bytes: int) -> CsvMetadata:
        import pyarrow.csv as csv

        path = source.path
        size = source.size()
        if size == 0:
            raise CorruptFileError(f"{path} is empty, not a CSV file")
        head = source.read_range(0, min(size, CSV_SAMPLE))
        complete = head if len(head) == size else head[:self._record_end(head, last=True)]
        if not complete:
            raise CorruptFileError(f"{path}: its first line is longer than {CSV_SAMPLE} bytes")
        data_start = 0
        if self.header:
            newline = self._record_end(head, last=False)
            data_start = size if newline == 0 else newline
        try:
            sample = csv.read_csv(pa.BufferReader(complete), self._read_options(None),
                                  self._parse_options(), self._convert_options(self.types))
        except pa.ArrowException as exc:
            raise CorruptFileError(f"{path} cannot be read as CSV: {exc}{self._hint}") from exc
        if b"\x00" in complete:
            raise CorruptFileError(f"{path} is not a CSV file (it holds NUL bytes)")
        starts = [data_start]
        point = data_start + partition_bytes
        while point < size and not self.newlines_in_values:
            start = _next_line_start(source, point, size)
            if start >= size:
                break
            starts.append(start)
            point = start + partition_bytes
        ranges = tuple((a, b) for a, b in zip(starts, starts[1:] + [size]) if b > a)
        return CsvMetadata(size, tuple(sample.schema.names), sample.schema, ranges)

    def arrow_schema(self, path: str, metadata: CsvMetadata) -> pa.Schema:
        return metadata.schema

    def describe_units(self, metadata: CsvMetadata, units: Sequence[int]) -> str:
        return f"bytes {metadata.ranges[units[0]][0]}-{metadata.ranges[units[-1]][1]}"

    def file_size(self, metadata: CsvMetadata) -> int:
        return metadata.size

    def units(self, metadata: CsvMetadata, columns: Sequence[str],
              result_columns: Sequence[str]) -> list[Unit]:
        return [Unit(i, None, end - start, end - start)
                for i, (start, end) in enumerate(metadata.ranges)]

    def ranges(self, metadata: CsvMetadata, units: Sequence[int],
               columns: Sequence[str]) -> list[tuple[int, int]]:
        return [(metadata.ranges[i][0], metadata.ranges[i][1] - metadata.ranges[i][0])
                for i in units]

    def read_units(self, task: Any, fetcher: Any, units: Sequence[int],
                   columns: Sequence[str]) -> pa.Table:
        import pyarrow.csv as csv

        types = {c: task.read_schema.field(c).type for c in columns}
        if not units:
            return pa.schema(list(types.items())).empty_table()
        ranges = self.ranges(task.metadata, units, columns)
        data = b"".join(fetcher.bytes(ranges))
        convert = self._convert_options(types)
        convert.include_columns = list(columns)
        try:
            return csv.read_csv(pa.BufferReader(data), self._read_options(task.metadata.names),
                                self._parse_options(), convert)
        except pa.ArrowException as exc:
            first, last = ranges[0][0], ranges[-1][0] + ranges[-1][1]
            raise CorruptFileError(
                f"{task.path} bytes {first}-{last}: {exc} (the types were inferred from the "
                f"file's first MiB; give them with schema=){self._hint}") from exc

    def read_cudf(self, tasks: Sequence[Any], sources: Sequence[Any] | None = None
                  ) -> tuple[Any, list[int]]:
        """One cuDF call per byte range of a local file: cuDF's CSV reader takes one range of
        one file (remote CSV has no sparse layout: its ranges need the bytes around them)."""
        import cudf

        columns = list(tasks[0].file_columns)
        dtypes = {c: _cudf_dtype(tasks[0].read_schema.field(c).type) for c in columns}
        frames, rows = [], []
        for task in tasks:
            rows.append(0)
            for start, end in (task.metadata.ranges[i] for i in task.units):
                # cuDF reads the rows that start inside the range; from the newline that ends
                # the previous line, the first of them is the line at ``start``.
                offset = start - 1 if start > 0 else 0
                frames.append(cudf.read_csv(
                    task.path, names=list(task.metadata.names), header=None, usecols=columns,
                    dtype=dtypes, sep=self.delimiter,
                    byte_range=(offset, end - offset - (start > 0))))
                rows[-1] += len(frames[-1])
        frame = cudf.concat(frames, ignore_index=True) if frames else cudf.DataFrame(
            {c: cudf.Series([], dtype=d) for c, d in dtypes.items()})
        return frame, rows

    def _read_options(self, names: Sequence[str] | None) -> Any:
        import pyarrow.csv as csv

        if names is not None:
            return csv.ReadOptions(column_names=list(names), use_threads=False)
        return csv.ReadOptions(use_threads=False, autogenerate_column_names=not self.header)

    def _parse_options(self) -> Any:
        import pyarrow.csv as csv

        return csv.ParseOptions(delimiter=self.delimiter,
                                newlines_in_values=self.newlines_in_values)

    @property
    def _hint(self) -> str:
        """What a parse error adds: the option that reads quoted newlines, where it is off."""
        if self.newlines_in_values:
            return ""
        return ("; if a quoted field holds a newline, read the file with "
                "newlines_in_values=True")

    def _record_end(self, data: bytes, last: bool) -> int:
        """Where the first (``last``: the last) record of ``data`` that ends in it ends: after
        a newline, which with ``newlines_in_values`` must have an even count of quotes before
        it (a doubled quote inside a field counts twice); 0 where none."""
        if not last:
            end = data.find(b"\n")
            while self.newlines_in_values and end >= 0 and data.count(b'"', 0, end) % 2:
                end = data.find(b"\n", end + 1)
            return end + 1
        end = data.rfind(b"\n")
        while self.newlines_in_values and end >= 0 and data.count(b'"', 0, end) % 2:
            end = data.rfind(b"\n", 0, end)
        return end + 1

    def _convert_options(self, types: Mapping[str, pa.DataType]) -> Any:
        import pyarrow.csv as csv

        return csv.ConvertOptions(column_types=dict(types), strings_can_be_null=True)

    def resolve_schema(self, schema: pa.Schema) -> pa.Schema:
        """Columns that were empty in every sampled row are read as strings."""
        return pa.schema([pa.field(f.name, pa.string()) if pa.types.is_null(f.type) else f
                          for f in schema], schema.metadata)

    def __repr__(self) -> str:
        return (f"<CsvFormat delimiter={self.delimiter!r} header={self.header} "
                f"newlines_in_values={self.newlines_in_values}>")


def _csv_types(schema: pa.Schema | Mapping[str, Any] | None) -> dict[str, pa.DataType]:
    if schema is None:
        return {}
    items = schema.items() if isinstance(schema, Mapping) else ((f.name, f.type) for f in schema)
    types = {}
    for name, kind in items:
        try:
            types[name] = kind if isinstance(kind, pa.DataType) else pa.type_for_alias(str(kind))
        except (ValueError, pa.ArrowException) as exc:
            raise OptionError(f"schema= gives column {name!r} the unknown type {kind!r}") from exc
    return types


def _next_line_start(source: Source, position: int, size: int) -> int:
    """The first line start at or after ``position`` (the byte after a newline), or ``size``."""
    offset = position - 1
    while offset < size:
        chunk = source.read_range(offset, CSV_PROBE)
        if not chunk:
            break
        newline = chunk.find(b"\n")
        if newline >= 0:
            return offset + newline + 1
        offset += len(chunk)
    return size


def _cudf_dtype(kind: pa.DataType) -> str:
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind):
        return "str"
    import numpy as np

    return np.dtype(kind.to_pandas_dtype()).name
