"""CSV: units are byte ranges that start and end on line boundaries, found at planning; no
statistics, so filters apply to rows only.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyarrow import csv

from ...errors import OptionError
from ..errors import CorruptFileError
from .base import Fetcher, FileFormat, FileUnits, Unit

if TYPE_CHECKING:
    import cudf
    import rmm

    from ..storage.base import RangeSource

CSV_SAMPLE = 2**20
"""Bytes of a CSV file's head whose rows give the column types."""
CSV_PROBE = 64 * 2**10
"""Bytes read at a split point to find the next line's start (more if the line is longer)."""
_ARROW_ROW = re.compile(r"Row #(\d+)")
"""How Arrow's CSV errors name a row: counted from 1 at the start of the bytes it parsed."""


@dataclass(frozen=True)
class CsvMetadata:
    """A CSV file's size, column names, sampled types, and line-aligned byte ranges."""

    size: int
    names: tuple[str, ...]
    schema: pa.Schema
    """Types as read from the file's first :data:`CSV_SAMPLE` bytes (nulls where all empty)."""
    ranges: tuple[tuple[int, int], ...]
    """(start, end) of each range; each starts where a line starts, after the header."""


class CsvFormat(FileFormat[CsvMetadata]):
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
                 schema: pa.Schema | Mapping[str, pa.DataType | str] | None = None,
                 newlines_in_values: bool = False, encoding: str = "utf-8"):
        if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in "\r\n\"":
            raise OptionError(f"delimiter={delimiter!r} must be one character, not a quote or "
                              "newline")
        if not isinstance(header, bool):
            raise OptionError(f"header={header!r} must be True or False")
        if not isinstance(newlines_in_values, bool):
            raise OptionError(f"newlines_in_values={newlines_in_values!r} must be True or False")
        self.encoding = _checked_encoding(encoding, delimiter)
        self.device_decodes = self.encoding == "utf-8"
        self.delimiter = delimiter
        self.header = header
        self.newlines_in_values = newlines_in_values
        self.types = _csv_types(schema)

    def read_metadata(self, source: RangeSource, partition_bytes: int) -> CsvMetadata:
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
        def parse(data: bytes) -> pa.Table:
            return csv.read_csv(pa.BufferReader(data), self._read_options(None),
                                self._parse_options(), self._convert_options(self.types))

        try:
            sample = parse(complete)
        except pa.ArrowException as exc:
            raise CorruptFileError(f"{path} cannot be read as CSV: "
                                   f"{self._failure(exc, complete, 0)}{self._hint}") from exc
        self._check_quotes_close(path, complete, 0, sample.num_rows, sample.num_columns, parse)
        if b"\x00" in complete:
            raise CorruptFileError(f"{path} is not a CSV file (it holds NUL bytes)")
        if self.encoding == "utf-8":
            try:
                complete.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorruptFileError(
                    f"{path}: byte {exc.start} ({complete[exc.start:exc.start + 1]!r}) is not "
                    "UTF-8; give the file's encoding, e.g. encoding='latin-1'") from exc
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

    def read_units(self, task: FileUnits[CsvMetadata], fetcher: Fetcher, units: Sequence[int],
                   columns: Sequence[str]) -> pa.Table:
        types = {c: task.read_schema.field(c).type for c in columns}
        if not units:
            return pa.schema(list(types.items())).empty_table()
        ranges = self.ranges(task.metadata, units, columns)
        data = b"".join(fetcher.bytes(ranges))
        convert = self._convert_options(types)
        convert.include_columns = list(columns)
        # A fragment's ranges are consecutive units: its bytes are the file's from ``first``.
        first, last = ranges[0][0], ranges[-1][0] + ranges[-1][1]

        def parse(data: bytes) -> pa.Table:
            return csv.read_csv(pa.BufferReader(data), self._read_options(task.metadata.names),
                                self._parse_options(), convert)

        try:
            table = parse(data)
        except pa.ArrowException as exc:
            encoding = (" or the file's encoding (encoding=)" if "UTF8" in str(exc)
                        and self.encoding == "utf-8" else "")
            sampled = (f" (the types were inferred from the file's first MiB; give them with "
                       f"schema={encoding})" if "conversion error" in str(exc) or encoding
                       else "")
            raise CorruptFileError(f"{task.path} bytes {first}-{last}: "
                                   f"{self._failure(exc, data, first)}{sampled}{self._hint}"
                                   ) from exc
        self._check_quotes_close(f"{task.path} bytes {first}-{last}", data, first,
                                 table.num_rows, len(task.metadata.names), parse)
        return table

    def read_cudf(self, tasks: Sequence[FileUnits[CsvMetadata]],
                  copies: Sequence[rmm.DeviceBuffer] | None = None
                  ) -> tuple[cudf.DataFrame, list[int]]:
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

    def _read_options(self, names: Sequence[str] | None) -> csv.ReadOptions:
        if names is not None:
            return csv.ReadOptions(column_names=list(names), use_threads=False,
                                   encoding=self.encoding)
        return csv.ReadOptions(use_threads=False, autogenerate_column_names=not self.header,
                               encoding=self.encoding)

    def _parse_options(self) -> csv.ParseOptions:
        return csv.ParseOptions(delimiter=self.delimiter,
                                newlines_in_values=self.newlines_in_values)

    def _failure(self, exc: pa.ArrowException, data: bytes, start: int) -> str:
        """Arrow's error for ``data``, the file's bytes from byte ``start``, with the row it
        names told by the byte of the file where the row starts (and, where ``data`` starts
        the file, by its line): Arrow counts rows from the start of the bytes it parsed, which
        for a byte range is not the file's."""
        text = str(exc)
        found = _ARROW_ROW.search(text)
        offset = None if found is None else self._row_offset(data, int(found.group(1)))
        if found is None or offset is None:
            return text
        where = self._row_at(start + offset, start, int(found.group(1)))
        return text[:found.start()] + where + text[found.end():]

    def _check_quotes_close(self, what: str, data: bytes, start: int, rows: int, columns: int,
                            parse: Callable[[bytes], pa.Table]) -> None:
        """Raise where a quoted field of ``data`` (the file's bytes from ``start``, of
        ``columns`` columns, which ``parse`` made ``rows`` rows of) is still open at its end:
        Arrow reads the rest as that one value, rows and all, where pandas fails ('EOF inside
        string'). Quotes come in pairs, so only data with an odd count of them is parsed again,
        followed by a row of empty fields, which a quote left open swallows (an odd count may
        also be a quote inside an unquoted value, which Arrow keeps as it is)."""
        if data.count(b'"') % 2 == 0 or rows == 0:
            return
        empty_row = self.delimiter.join(['""'] * columns).encode("ascii")
        try:
            swallowed = parse(data + b"\n" + empty_row + b"\n").num_rows == rows
        except pa.ArrowException:
            return  # the row at the end holds what cannot be told apart: leave the rows be
        if not swallowed:
            return
        row = rows + (self.header and start == 0)
        offset = self._row_offset(data, row)
        where = "a row" if offset is None else self._row_at(start + offset, start, row)
        raise CorruptFileError(f"{what}: {where} opens a quote that is not closed by byte "
                               f"{start + len(data)}; read as one value, it would hold the rest "
                               f"of the rows{self._hint}")

    def _row_at(self, offset: int, start: int, row: int) -> str:
        """'the row at byte 123', and ' (line 5)' where ``row`` counts the file's lines from
        its start."""
        where = f"the row at byte {offset}"
        if start == 0 and not self.newlines_in_values:
            where += f" (line {row})"
        return where

    def _row_offset(self, data: bytes, row: int) -> int | None:
        """Where the ``row``-th record of ``data`` (counted from 1) starts; None past its end.
        With ``newlines_in_values``, a newline inside quotes does not end a record."""
        position, quoted = 0, False
        while row > 1:
            newline = data.find(b"\n", position)
            if newline < 0:
                return None
            quoted ^= data.count(b'"', position, newline) % 2 == 1
            position = newline + 1
            if not (self.newlines_in_values and quoted):
                row -= 1
        return position

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
        it (a doubled quote inside a field counts twice); 0 where none. The quotes are counted
        once, each newline tried adding or taking away those between it and the one before: a
        quote left open makes every newline after it fail the test, and counting from the start
        for each would take time quadratic in the lines."""
        end = data.find(b"\n") if not last else data.rfind(b"\n")
        if not self.newlines_in_values or end < 0:
            return end + 1
        quotes = data.count(b'"', 0, end)
        while end >= 0 and quotes % 2:
            if not last:
                following = data.find(b"\n", end + 1)
                quotes += data.count(b'"', end, following)
                end = following
            else:
                previous = data.rfind(b"\n", 0, end)
                quotes -= data.count(b'"', previous + 1, end)
                end = previous
        return end + 1

    def _convert_options(self, types: Mapping[str, pa.DataType]) -> csv.ConvertOptions:
        return csv.ConvertOptions(column_types=dict(types), strings_can_be_null=True)

    def resolve_schema(self, schema: pa.Schema) -> pa.Schema:
        """Columns that were empty in every sampled row are read as strings."""
        return pa.schema([pa.field(f.name, pa.string()) if pa.types.is_null(f.type) else f
                          for f in schema], schema.metadata)

    def __repr__(self) -> str:
        return (f"<CsvFormat delimiter={self.delimiter!r} header={self.header} "
                f"newlines_in_values={self.newlines_in_values} encoding={self.encoding!r}>")


def _checked_encoding(encoding: str, delimiter: str) -> str:
    """``encoding``'s canonical name, where the file's lines can be found in its raw bytes:
    newlines, quotes and the delimiter must each be one byte of their ASCII value (UTF-8,
    Latin-1, cp1252, ... but not UTF-16)."""
    try:
        name = codecs.lookup(encoding).name
    except (LookupError, TypeError) as exc:
        raise OptionError(f"encoding={encoding!r} is not a text encoding Python knows") from exc
    if any(char.encode(name) != char.encode("ascii") for char in ("\n", '"', delimiter)):
        raise OptionError(f"encoding={encoding!r}: CSV files are split at their newlines' "
                          "bytes, which this encoding does not write as ASCII does; convert "
                          "the file to UTF-8")
    return "utf-8" if name == "utf-8" else name


def _csv_types(schema: pa.Schema | Mapping[str, pa.DataType | str] | None
               ) -> dict[str, pa.DataType]:
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


def _next_line_start(source: RangeSource, position: int, size: int) -> int:
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
    """The dtype cuDF's CSV reader is given for a column of Arrow type ``kind``."""
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind):
        return "str"
    import numpy as np

    return np.dtype(kind.to_pandas_dtype()).name
