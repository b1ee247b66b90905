"""Parquet page by page: where a column chunk's pages lie, and a one-column file made of some of
them, so a selective read fetches only the pages that hold surviving rows.

pyarrow reads whole column chunks, and exposes neither the page index (the OffsetIndex) nor
where it lies (``ColumnChunkMetaData`` tells only ``has_offset_index``), so this module reads
the footer's Thrift itself (:mod:`.thrift`), by the field ids of parquet-format's
``parquet.thrift``.

A read of surviving ``rows`` of flat leaf column ``i`` in row group ``g``::

    footer = ParquetFooter(raw_footer, path)
    chunk = footer.column_chunk(g, i)             # PageReadUnsupportedError: read whole groups
    locations = chunk.page_locations(fetch(*chunk.offset_index))
    selection = select_pages(rows, locations, chunk.num_rows)
    dictionary = chunk.dictionary_range(locations)
    dictionary_page = fetch(*dictionary) if dictionary else None
    pages = [(fetch(locations[p].offset, locations[p].compressed_page_size), n)
             for p, n in zip(selection.pages, selection.page_rows)]
    file = single_column_file(footer, g, i, dictionary_page, pages)
    column = pq.ParquetFile(pa.BufferReader(file)).read().column(0).take(selection.take)
"""

from __future__ import annotations

import base64
import bisect
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptFileError, PageReadUnsupportedError
from .thrift import (
    BINARY,
    I32,
    I64,
    LIST,
    STRUCT,
    ThriftList,
    ThriftStruct,
    decode_struct,
    encode_struct,
    field_of,
    struct_of,
)

MAGIC = b"PAR1"
INDEX_GAP = 16 * 2**10
"""Bytes between two wanted OffsetIndexes (those of columns not read) fetched with them rather
than ending a request there: in a request's latency, more than this would arrive
(benchmarks/results/2026-11-25-figures-from-io-comments.md)."""
PAGE_GAP_SHARE = 0.1
"""Bytes between wanted pages fetched with them, at most this share of the pages' own bytes: the
closest pages are fetched as one range. Each request costs its latency and the CPU of a client
and server, and a read of scattered rows wants hundreds of pages whose gaps (64 KiB to 1 MiB)
are too wide for :data:`INDEX_GAP`: a quarter fewer requests for a few percent more bytes made
a selective read faster (benchmarks/results/2026-11-25-figures-from-io-comments.md)."""


# Field ids of parquet.thrift's structs (apache/parquet-format), those this module reads or writes


class _FileMetaData:
    VERSION, SCHEMA, NUM_ROWS, ROW_GROUPS, KEY_VALUE_METADATA, CREATED_BY = 1, 2, 3, 4, 5, 6
    COLUMN_ORDERS, ENCRYPTION_ALGORITHM = 7, 8


class _SchemaElement:
    TYPE, REPETITION_TYPE, NAME, NUM_CHILDREN = 1, 3, 4, 5
    REQUIRED, OPTIONAL = 0, 1


class _RowGroup:
    COLUMNS, TOTAL_BYTE_SIZE, NUM_ROWS, FILE_OFFSET, TOTAL_COMPRESSED_SIZE = 1, 2, 3, 5, 6


class _ColumnChunk:
    FILE_OFFSET, META_DATA, OFFSET_INDEX_OFFSET, OFFSET_INDEX_LENGTH = 2, 3, 4, 5
    CRYPTO_METADATA, ENCRYPTED_COLUMN_METADATA = 8, 9


class _ColumnMetaData:
    TYPE, ENCODINGS, PATH_IN_SCHEMA, CODEC, NUM_VALUES = 1, 2, 3, 4, 5
    TOTAL_UNCOMPRESSED_SIZE, TOTAL_COMPRESSED_SIZE, KEY_VALUE_METADATA = 6, 7, 8
    DATA_PAGE_OFFSET, DICTIONARY_PAGE_OFFSET = 9, 11


class _PageHeader:
    TYPE, UNCOMPRESSED_PAGE_SIZE, COMPRESSED_PAGE_SIZE = 1, 2, 3
    DATA_PAGE_HEADER, DATA_PAGE_HEADER_V2 = 5, 8
    DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 2, 3
    NUM_VALUES, V2_NUM_ROWS = 1, 3  # of DataPageHeader and DataPageHeaderV2


class _KeyValue:
    KEY, VALUE = 1, 2


ARROW_SCHEMA = b"ARROW:schema"


@dataclass(frozen=True)
class _Leaf:
    path: tuple[str, ...]
    element: ThriftStruct
    top: int
    """Index among the root's children of the top-level field holding it."""


class ParquetFooter:
    """A Parquet file's FileMetaData (the thrift bytes before its length and the closing
    ``PAR1``), decoded field by field to find the page index and write subset files."""

    def __init__(self, raw: bytes, path: str = "<footer>"):
        self.path = path
        self.fields, _ = decode_struct(raw, what=f"the footer of {path}")
        schema = field_of(self.fields, _FileMetaData.SCHEMA, ThriftList, f"{path}: FileMetaData")
        self.leaves = _leaves(schema, f"{path}: the schema")
        self.row_groups = field_of(self.fields, _FileMetaData.ROW_GROUPS, ThriftList,
                                 f"{path}: FileMetaData")

    def column_chunk(self, row_group: int, column: int) -> ColumnChunkLayout:
        """Where leaf ``column``'s chunk in ``row_group`` lies, its pages and page index.

        Raises :class:`PageReadUnsupportedError` where it cannot be read by pages."""
        chunk, meta, name = self._flat_chunk(row_group, column)
        where = f"{self.path}: row group {row_group} column {name!r}"
        if _ColumnChunk.OFFSET_INDEX_OFFSET not in chunk:
            raise PageReadUnsupportedError(f"{where} has no page index (its writer was not "
                                           "asked for one: write_page_index=True)")
        data_start = field_of(meta, _ColumnMetaData.DATA_PAGE_OFFSET, int, where)
        dictionary = field_of(meta, _ColumnMetaData.DICTIONARY_PAGE_OFFSET, int, where, 0)
        start = dictionary if 0 < dictionary < data_start else data_start
        return ColumnChunkLayout(
            where, field_of(self.row_groups[row_group], _RowGroup.NUM_ROWS, int, where), start,
            start + field_of(meta, _ColumnMetaData.TOTAL_COMPRESSED_SIZE, int, where),
            (field_of(chunk, _ColumnChunk.OFFSET_INDEX_OFFSET, int, where),
             field_of(chunk, _ColumnChunk.OFFSET_INDEX_LENGTH, int, where)))

    def _flat_chunk(self, row_group: int, column: int
                    ) -> tuple[ThriftStruct, ThriftStruct, str]:
        """The ColumnChunk and ColumnMetaData of a flat, unencrypted column, and its name."""
        if not 0 <= row_group < len(self.row_groups):
            raise IndexError(f"{self.path} has {len(self.row_groups)} row groups, "
                             f"not a row group {row_group}")
        if not 0 <= column < len(self.leaves):
            raise IndexError(f"{self.path} has {len(self.leaves)} leaf columns, "
                             f"not a column {column}")
        leaf = self.leaves[column]
        name = ".".join(leaf.path)
        where = f"{self.path}: row group {row_group} column {name!r}"
        repetition = leaf.element.get(_SchemaElement.REPETITION_TYPE)
        if len(leaf.path) > 1 or repetition not in (_SchemaElement.REQUIRED,
                                                    _SchemaElement.OPTIONAL):
            raise PageReadUnsupportedError(f"{where} is nested (lists, structs, maps): its "
                                           "pages are read by whole row groups only")
        columns = field_of(self.row_groups[row_group], _RowGroup.COLUMNS, ThriftList, where)
        if len(columns) != len(self.leaves):
            raise CorruptFileError(f"{where}: the row group has {len(columns)} column chunks "
                                   f"for {len(self.leaves)} leaf columns")
        chunk = columns[column]
        if not isinstance(chunk, ThriftStruct):
            raise CorruptFileError(f"{where}: its ColumnChunk is corrupt")
        if (_FileMetaData.ENCRYPTION_ALGORITHM in self.fields
                or _ColumnChunk.CRYPTO_METADATA in chunk
                or _ColumnChunk.ENCRYPTED_COLUMN_METADATA in chunk):
            raise PageReadUnsupportedError(f"{where} is encrypted: its pages cannot be moved")
        return chunk, field_of(chunk, _ColumnChunk.META_DATA, ThriftStruct, where), name


def _leaves(schema: ThriftList, what: str) -> list[_Leaf]:
    """The leaf columns of a flattened (depth-first) schema, in column order."""
    if not schema:
        raise CorruptFileError(f"{what} is corrupt: it has no root")
    root_children = field_of(schema[0], _SchemaElement.NUM_CHILDREN, int, what)
    leaves = []
    groups: list[tuple[int, tuple[str, ...]]] = [(root_children, ())]  # children left, path
    top = -1
    for value in schema[1:]:
        while groups and groups[-1][0] == 0:
            groups.pop()
        if not groups:
            raise CorruptFileError(f"{what} is corrupt: it has elements past its tree")
        remaining, parent = groups[-1]
        groups[-1] = (remaining - 1, parent)
        element = struct_of(value, what)
        name = field_of(element, _SchemaElement.NAME, bytes, what).decode(errors="replace")
        path = parent + (name,)
        top += not parent
        children = field_of(element, _SchemaElement.NUM_CHILDREN, int, what, 0)
        if _SchemaElement.TYPE in element and not children:
            leaves.append(_Leaf(path, element, top))
        else:
            groups.append((children, path))
    if any(left for left, _ in groups):
        raise CorruptFileError(f"{what} is corrupt: it ends inside a group")
    return leaves


@dataclass(frozen=True)
class PageLocation:
    """One data page of a column chunk, from its OffsetIndex."""

    offset: int
    compressed_page_size: int
    """Bytes of the page in the file, its header included."""
    first_row_index: int
    """Its first row's index in the row group."""


@dataclass(frozen=True)
class ColumnChunkLayout:
    """Where one flat column chunk lies in its file, as its footer says."""

    where: str
    """File, row group and column, for messages."""
    num_rows: int
    """Rows of its row group."""
    start: int
    """Its first byte: the dictionary page's, else the first data page's."""
    end: int
    offset_index: tuple[int, int]
    """(offset, length) of its OffsetIndex."""

    def page_locations(self, offset_index: bytes | memoryview) -> list[PageLocation]:
        """The data pages listed by the OffsetIndex bytes at :attr:`offset_index`, checked to
        start at rows 0, 1, ... in order and to lie in the chunk, one after another.

        Raises :class:`PageReadUnsupportedError` where they do not (the chunk can still be
        read whole), :class:`CorruptFileError` where the bytes are not an OffsetIndex."""
        what = f"{self.where}: the OffsetIndex"
        index, _ = decode_struct(offset_index, what=what)
        locations = [PageLocation(*(field_of(location, n, int, what) for n in (1, 2, 3)))
                     for location in field_of(index, 1, ThriftList, what)]
        rows = [location.first_row_index for location in locations]
        if self.num_rows and (not rows or rows[0] != 0 or rows[-1] >= self.num_rows
                              or any(a >= b for a, b in itertools.pairwise(rows))):
            raise PageReadUnsupportedError(
                f"{self.where}: its pages do not start at row boundaries of its "
                f"{self.num_rows} rows (first rows {rows[:8]}...)")
        ends = [self.start] + [loc.offset + loc.compressed_page_size for loc in locations]
        if any(loc.offset < end or loc.compressed_page_size <= 0
               for loc, end in zip(locations, ends)) or ends[-1] > self.end:
            raise PageReadUnsupportedError(f"{self.where}: its OffsetIndex places pages "
                                           f"outside bytes {self.start}-{self.end} or "
                                           "overlapping")
        return locations

    def dictionary_range(self, locations: Sequence[PageLocation]) -> tuple[int, int] | None:
        """(offset, length) of the bytes before the first data page (its dictionary page),
        None where there are none."""
        if not locations or locations[0].offset == self.start:
            return None
        return self.start, locations[0].offset - self.start


@dataclass(frozen=True)
class PageSelection:
    """The data pages holding some rows of a row group, and where those rows land in a file
    made of these pages alone (:func:`single_column_file`)."""

    pages: np.ndarray
    """Indices of the pages (into the page locations), increasing."""
    page_rows: np.ndarray
    """Rows of each of them."""
    take: np.ndarray
    """The rows' indices in the file of these pages: ``table.take(take)`` gives them in order."""


def select_pages(rows: np.ndarray, locations: Sequence[PageLocation], num_rows: int
                 ) -> PageSelection:
    """The pages holding ``rows`` (sorted, distinct row indices in a row group of ``num_rows``
    rows whose pages are ``locations``)."""
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) and (rows[0] < 0 or rows[-1] >= num_rows or np.any(np.diff(rows) <= 0)):
        raise ValueError(f"rows must be sorted, distinct and in [0, {num_rows})")
    first = np.array([location.first_row_index for location in locations], dtype=np.int64)
    sizes = np.diff(np.append(first, num_rows))
    # the rows are sorted, so each page's rows are a run of them: where the pages' first rows
    # fall among the rows bounds the runs, without a search per row
    counts = np.diff(np.append(np.searchsorted(rows, first), len(rows)))
    pages = np.flatnonzero(counts)
    page_starts = np.cumsum(sizes[pages]) - sizes[pages]  # of the pages in the subset file
    take = rows + np.repeat(page_starts - first[pages], counts[pages])
    return PageSelection(pages, sizes[pages], take)


def single_column_file(footer: ParquetFooter, row_group: int, column: int,
                       dictionary_page: bytes | memoryview | None,
                       data_pages: Sequence[tuple[bytes | memoryview, int]]) -> bytes:
    """A Parquet file of one row group holding leaf ``column`` of ``row_group`` alone, made of
    its dictionary page (None where it has none) and some of its data pages, each given as
    (bytes with its header, rows), in file order.

    The footer keeps what a reader needs to decode the pages as in the original file (type,
    codec, encodings, the schema element, created_by for writer-version workarounds, the column
    order) and the ``ARROW:schema`` entry reduced to the column, so it reads back with its Arrow
    type (time zone, large or dictionary strings). Offsets, sizes and counts are those of the
    given pages; statistics, page index, bloom filter and sorting fields, which describe the
    whole chunk, are dropped. No data pages gives a file of no row groups. The pages are copied
    once, into the file.

    Raises :class:`PageReadUnsupportedError` for nested or encrypted columns, or where a page's
    header disagrees with its rows (pages not at row boundaries)."""
    _, meta, name = footer._flat_chunk(row_group, column)
    where = f"{footer.path}: row group {row_group} column {name!r}"
    contents = [MAGIC, dictionary_page or b""] + [page for page, _ in data_pages]
    uncompressed = 0
    if dictionary_page:
        uncompressed += _page_size(dictionary_page, (_PageHeader.DICTIONARY_PAGE,), None, where)
    for page, page_rows in data_pages:
        uncompressed += _page_size(page, (_PageHeader.DATA_PAGE, _PageHeader.DATA_PAGE_V2),
                                   page_rows, where)
    rows = sum(page_rows for _, page_rows in data_pages)
    compressed = sum(len(part) for part in contents) - len(MAGIC)
    column_meta = meta.subset([_ColumnMetaData.TYPE, _ColumnMetaData.ENCODINGS,
                               _ColumnMetaData.PATH_IN_SCHEMA, _ColumnMetaData.CODEC,
                               _ColumnMetaData.KEY_VALUE_METADATA])
    column_meta.put(_ColumnMetaData.NUM_VALUES, I64, rows)  # flat: a value a row, nulls too
    column_meta.put(_ColumnMetaData.TOTAL_UNCOMPRESSED_SIZE, I64, uncompressed)
    column_meta.put(_ColumnMetaData.TOTAL_COMPRESSED_SIZE, I64, compressed)
    column_meta.put(_ColumnMetaData.DATA_PAGE_OFFSET, I64,
                    len(MAGIC) + len(dictionary_page or b""))
    if dictionary_page:
        column_meta.put(_ColumnMetaData.DICTIONARY_PAGE_OFFSET, I64, len(MAGIC))
    group = ThriftStruct([
        (_RowGroup.COLUMNS, LIST, ThriftList(STRUCT, [ThriftStruct([
            (_ColumnChunk.FILE_OFFSET, I64, 0),  # deprecated: 0 as the format asks
            (_ColumnChunk.META_DATA, STRUCT, column_meta)])])),
        (_RowGroup.TOTAL_BYTE_SIZE, I64, uncompressed),
        (_RowGroup.NUM_ROWS, I64, rows),
        (_RowGroup.FILE_OFFSET, I64, len(MAGIC)),
        (_RowGroup.TOTAL_COMPRESSED_SIZE, I64, compressed)])
    schema = field_of(footer.fields, _FileMetaData.SCHEMA, ThriftList, where)
    root = struct_of(schema[0], where)
    root = root.subset(root.keys())
    root.put(_SchemaElement.NUM_CHILDREN, I32, 1)
    leaf = footer.leaves[column]
    fields = footer.fields.subset([_FileMetaData.VERSION, _FileMetaData.CREATED_BY])
    fields.put(_FileMetaData.SCHEMA, LIST, ThriftList(STRUCT, [root, leaf.element]))
    fields.put(_FileMetaData.NUM_ROWS, I64, rows)
    fields.put(_FileMetaData.ROW_GROUPS, LIST, ThriftList(STRUCT, [group] if data_pages else []))
    arrow_schema = _arrow_schema_entry(footer.fields.get(_FileMetaData.KEY_VALUE_METADATA, ()),
                                       leaf, where)
    if arrow_schema is not None:
        fields.put(_FileMetaData.KEY_VALUE_METADATA, LIST, ThriftList(STRUCT, [arrow_schema]))
    orders = footer.fields.get(_FileMetaData.COLUMN_ORDERS)
    if isinstance(orders, ThriftList) and len(orders) == len(footer.leaves):
        fields.put(_FileMetaData.COLUMN_ORDERS, LIST, ThriftList(orders.kind, [orders[column]]))
    encoded = encode_struct(fields)
    return b"".join(contents + [encoded, len(encoded).to_bytes(4, "little"), MAGIC])


def read_rows(footer: ParquetFooter, fetch: Callable[[list[tuple[int, int]]], list[bytes]],
              rows: Mapping[int, np.ndarray], columns: Sequence[int]) -> list[pa.ChunkedArray]:
    """Leaf ``columns`` at ``rows`` (row group -> sorted row indices in it, groups in file
    order), each as one array of those rows in order, fetched page by page: ``fetch(ranges)``
    (concurrent range reads, counted by the caller) is called twice, for the chunks'
    OffsetIndexes, then for their dictionary pages and the data pages holding ``rows``; each
    time adjacent ranges are fetched as one. Writers put all OffsetIndexes together, so they
    come in one request, not one per chunk, those of other columns between them included
    (:data:`INDEX_GAP`); the closest pages come in one request too, the bytes between them
    included up to :data:`PAGE_GAP_SHARE` of the pages' bytes.

    Raises :class:`PageReadUnsupportedError` before fetching anything where a chunk cannot be
    read by pages."""
    chunks = {(group, column): footer.column_chunk(group, column)
              for group in rows for column in columns}
    indexes = _fetch_coalesced(fetch, [chunk.offset_index for chunk in chunks.values()],
                               INDEX_GAP)
    wanted: dict[tuple[int, int], tuple[PageSelection, tuple[int, int] | None,
                                        list[tuple[int, int]]]] = {}
    for where, chunk in chunks.items():
        locations = chunk.page_locations(indexes[chunk.offset_index])
        selection = select_pages(rows[where[0]], locations, chunk.num_rows)
        wanted[where] = (selection, chunk.dictionary_range(locations),
                         [(locations[p].offset, locations[p].compressed_page_size)
                          for p in selection.pages])
    pieces = [piece for _, dictionary, pages in wanted.values()
              for piece in ([dictionary] if dictionary else []) + pages]
    fetched = _fetch_coalesced(fetch, pieces, spare=PAGE_GAP_SHARE * sum(n for _, n in pieces))
    arrays: dict[int, list[pa.ChunkedArray]] = {column: [] for column in columns}
    for (group, column), (selection, dictionary, pages) in wanted.items():
        file = single_column_file(footer, group, column,
                                  fetched[dictionary] if dictionary else None,
                                  [(fetched[page], int(n))
                                   for page, n in zip(pages, selection.page_rows)])
        table = pq.ParquetFile(pa.BufferReader(file), page_checksum_verification=True
                               ).read(use_threads=False)
        arrays[column].append(table.column(0).take(pa.array(selection.take)))
    return [pa.chunked_array([c for part in arrays[column] for c in part.chunks],
                             arrays[column][0].type) for column in columns]


def _fetch_coalesced(fetch: Callable[[list[tuple[int, int]]], list[bytes]],
                     pieces: Sequence[tuple[int, int]], gap: int = 0, spare: float = 0
                     ) -> dict[tuple[int, int], memoryview]:
    """Each (offset, length) piece's bytes, fetched as the ranges :func:`coalesce` makes of
    them, as views of the fetched ranges (not copied: a read copies its pages once, into
    :func:`single_column_file`'s file)."""
    runs = coalesce(pieces, gap, spare)
    data = fetch([(start, end - start) for start, end in runs])
    starts = [start for start, _ in runs]
    out = {}
    for offset, length in pieces:
        run = bisect.bisect_right(starts, offset) - 1
        at = offset - starts[run]
        out[(offset, length)] = memoryview(data[run])[at:at + length]
    return out


def coalesce(pieces: Iterable[tuple[int, int]], gap: int = 0, spare: float = 0
             ) -> list[tuple[int, int]]:
    """(start, end) of the ranges that cover the (offset, length) ``pieces``, in file order:
    pieces at most ``gap`` bytes apart in one range, then ranges joined across the smallest
    gaps first while the gaps joined total at most ``spare`` bytes (each join saves one
    request whatever its gap, so the smallest first leave the fewest)."""
    runs: list[list[int]] = []  # [offset, end]
    for offset, length in sorted(set(pieces)):
        if runs and offset <= runs[-1][1] + gap:
            runs[-1][1] = max(runs[-1][1], offset + length)
        else:
            runs.append([offset, offset + length])
    gaps = np.array([b[0] - a[1] for a, b in itertools.pairwise(runs)], dtype=np.int64)
    order = np.argsort(gaps, kind="stable")
    joined = np.zeros(len(gaps), dtype=bool)  # gap i: between runs i and i + 1
    joined[order[np.cumsum(gaps[order]) <= spare]] = True
    out: list[tuple[int, int]] = []
    for i, (start, end) in enumerate(runs):
        if i and joined[i - 1]:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def _page_size(page: bytes | memoryview, types: tuple[int, ...], rows: int | None,
               where: str) -> int:
    """Bytes of ``page`` uncompressed, header included, once its header is checked to be one
    of ``types``, to span the page, and (data pages) to hold ``rows`` rows."""
    what = f"{where}: a page header"
    header, length = decode_struct(page, what=what)
    kind = field_of(header, _PageHeader.TYPE, int, what)
    if kind not in types:
        raise PageReadUnsupportedError(f"{where}: a page of type {kind} was given where "
                                       f"types {types} go")
    if length + field_of(header, _PageHeader.COMPRESSED_PAGE_SIZE, int, what) != len(page):
        raise CorruptFileError(f"{what} does not span its {len(page)} bytes")
    if rows is not None:
        if kind == _PageHeader.DATA_PAGE:
            data = field_of(header, _PageHeader.DATA_PAGE_HEADER, ThriftStruct, what)
            counts = {field_of(data, _PageHeader.NUM_VALUES, int, what)}
        else:
            data = field_of(header, _PageHeader.DATA_PAGE_HEADER_V2, ThriftStruct, what)
            counts = {field_of(data, n, int, what)
                      for n in (_PageHeader.NUM_VALUES, _PageHeader.V2_NUM_ROWS)}
        if counts != {rows}:
            raise PageReadUnsupportedError(f"{where}: a page's header counts {sorted(counts)} "
                                           f"values or rows where its page index says {rows}")
    return length + field_of(header, _PageHeader.UNCOMPRESSED_PAGE_SIZE, int, what)


def _arrow_schema_entry(key_values: object, leaf: _Leaf, where: str) -> ThriftStruct | None:
    """The ``ARROW:schema`` key-value of a file of ``leaf``'s column alone, where the footer
    has one: readers match its fields to the Parquet schema's by position, so it keeps the
    column's field only (without the schema's metadata, which describes the whole file)."""
    for entry in key_values if isinstance(key_values, ThriftList) else ():
        if isinstance(entry, ThriftStruct) and entry.get(_KeyValue.KEY) == ARROW_SCHEMA:
            try:
                schema = pa.ipc.read_schema(pa.py_buffer(
                    base64.b64decode(field_of(entry, _KeyValue.VALUE, bytes, where))))
                field = schema.field(leaf.top)
                name = field.name  # a str decoded from the bytes, which may not be UTF-8
            except (pa.ArrowException, OSError, ValueError, IndexError) as exc:
                raise CorruptFileError(f"{where}: its ARROW:schema is corrupt: {exc}") from exc
            if name != leaf.path[0]:
                raise CorruptFileError(f"{where}: its ARROW:schema names field {leaf.top} "
                                       f"{name!r}")
            value = base64.b64encode(pa.schema([field]).serialize().to_pybytes())
            return ThriftStruct([(_KeyValue.KEY, BINARY, ARROW_SCHEMA),
                                 (_KeyValue.VALUE, BINARY, value)])
    return None
