"""Parquet page by page against pyarrow: page locations of files pyarrow writes with a page
index, and files made of chosen pages read back to pyarrow's rows of the original."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpuframe.io.errors import CorruptFileError, PageReadUnsupportedError
from gpuframe.io.formats.pages import (
    PAGE_GAP_SHARE,
    ParquetFooter,
    coalesce,
    read_rows,
    select_pages,
    single_column_file,
)
from gpuframe.io.formats.thrift import (
    STRUCT,
    ThriftStruct,
    decode_struct,
    encode_struct,
)

NESTED = ("tags", "point")
MANY_PAGES = 3
"""Leaf index of ``note``: unique strings, many pages whichever way they are written."""


def flat_columns(footer: ParquetFooter) -> list[tuple[int, str]]:
    return [(i, leaf.path[0]) for i, leaf in enumerate(footer.leaves)
            if leaf.path[0] not in NESTED]


def read_survivors(data: bytes, footer: ParquetFooter, group: int, column: int,
                   rows: np.ndarray) -> tuple[pa.ChunkedArray, bytes, int]:
    """``rows`` of a column chunk read from a file of the pages holding them, as the selective
    read will: the file, and the bytes fetched (page index, dictionary and pages)."""
    chunk = footer.column_chunk(group, column)
    offset, length = chunk.offset_index
    locations = chunk.page_locations(data[offset:offset + length])
    selection = select_pages(rows, locations, chunk.num_rows)
    dictionary_range = chunk.dictionary_range(locations)
    dictionary = None
    if dictionary_range:
        dictionary = data[dictionary_range[0]:sum(dictionary_range)]
    pages = [(data[locations[p].offset:locations[p].offset + locations[p].compressed_page_size],
              int(n)) for p, n in zip(selection.pages, selection.page_rows)]
    file = single_column_file(footer, group, column, dictionary, pages)
    fetched = length + len(dictionary or b"") + sum(len(page) for page, _ in pages)
    return pq.read_table(pa.BufferReader(file)).column(0).take(selection.take), file, fetched


def assert_same(result: pa.ChunkedArray, expected: pa.ChunkedArray) -> None:
    """Equal types and values, NaNs equal where their bits are (Arrow's equals says NaN != NaN)."""
    assert result.type == expected.type
    result, expected = result.combine_chunks(), expected.combine_chunks()
    if pa.types.is_floating(result.type):
        result, expected = result.view(pa.int64()), expected.view(pa.int64())
    assert result.equals(expected)


def row_sets(rows: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"none": np.array([], np.int64), "one": np.array([rng.integers(rows)]),
            "scattered": np.sort(rng.choice(rows, 25, replace=False)),
            "all": np.arange(rows)}


def test_page_locations_tile_the_column_chunk(written):
    path, data, footer, _ = written
    metadata = pq.read_metadata(path)
    for group in range(metadata.num_row_groups):
        for column, name in flat_columns(footer):
            theirs = metadata.row_group(group).column(column)
            chunk = footer.column_chunk(group, column)
            offset, length = chunk.offset_index
            locations = chunk.page_locations(data[offset:offset + length])
            assert theirs.has_offset_index and name in chunk.where
            assert chunk.num_rows == metadata.row_group(group).num_rows
            assert chunk.end - chunk.start == theirs.total_compressed_size
            assert locations[0].offset == theirs.data_page_offset
            dictionary = chunk.dictionary_range(locations)
            assert (dictionary is not None) == theirs.has_dictionary_page
            if dictionary:
                assert dictionary[0] == theirs.dictionary_page_offset
            ends = [loc.offset + loc.compressed_page_size for loc in locations]
            assert [loc.offset for loc in locations[1:]] == ends[:-1]
            assert ends[-1] == chunk.end
            values = 0
            for location in locations:
                page = data[location.offset:location.offset + location.compressed_page_size]
                header, size = decode_struct(page)
                assert size + header[3] == len(page)
                values += (header.get(5) or header.get(8))[1]  # num_values, v1 or v2
            assert values == chunk.num_rows
    chunk = footer.column_chunk(0, MANY_PAGES)
    offset, length = chunk.offset_index
    assert len(chunk.page_locations(data[offset:offset + length])) > 4


@pytest.mark.parametrize("kind", ["none", "one", "scattered", "all"])
def test_survivors_read_from_their_pages_equal_pyarrow(written, kind):
    path, data, footer, _ = written
    original = pq.ParquetFile(path)
    for group in range(original.num_row_groups):
        expected_group = original.read_row_group(group)
        rows = row_sets(expected_group.num_rows, group)[kind]
        for column, name in flat_columns(footer):
            result, _, _ = read_survivors(data, footer, group, column, rows)
            assert_same(result, expected_group.column(name).take(rows))


def test_page_edges_and_neighbours(written):
    """The first and last row of every page, and the rows either side of each page break."""
    _, data, footer, _ = written
    original = pq.ParquetFile(written[0]).read_row_group(1)
    chunk = footer.column_chunk(1, MANY_PAGES)
    offset, length = chunk.offset_index
    firsts = np.array([loc.first_row_index
                       for loc in chunk.page_locations(data[offset:offset + length])])
    rows = np.unique(np.concatenate([firsts, firsts - 1, firsts + 1, [chunk.num_rows - 1]]))
    rows = rows[(rows >= 0) & (rows < chunk.num_rows)]
    for column, name in flat_columns(footer):
        result, _, _ = read_survivors(data, footer, 1, column, rows)
        assert_same(result, original.column(name).take(rows))


def test_one_row_fetches_one_page(written):
    _, data, footer, _ = written
    chunk = footer.column_chunk(0, MANY_PAGES)
    offset, length = chunk.offset_index
    locations = chunk.page_locations(data[offset:offset + length])
    row = locations[2].first_row_index + 1
    selection = select_pages(np.array([row]), locations, chunk.num_rows)
    assert selection.pages.tolist() == [2]
    assert selection.take.tolist() == [1]
    _, _, fetched = read_survivors(data, footer, 0, MANY_PAGES, np.array([row]))
    dictionary = chunk.dictionary_range(locations)
    assert fetched == (length + locations[2].compressed_page_size
                       + (dictionary[1] if dictionary else 0))
    assert fetched < chunk.end - chunk.start


def test_coalesce_joins_the_closest_ranges_within_the_spare_bytes():
    pieces = [(300, 10), (0, 10), (10, 5), (20, 10), (100, 10), (112, 10), (100, 10)]
    assert coalesce(pieces) == [(0, 15), (20, 30), (100, 110), (112, 122), (300, 310)]
    assert coalesce(pieces, gap=5) == [(0, 30), (100, 122), (300, 310)]
    assert coalesce(pieces, spare=6) == [(0, 15), (20, 30), (100, 122), (300, 310)]
    assert coalesce(pieces, spare=7) == [(0, 30), (100, 122), (300, 310)]
    assert coalesce([], spare=7) == []


def test_rows_of_every_other_page_come_in_fewer_requests_than_pages(tmp_path, raw_footer):
    """The closest pages are fetched together, the bytes between them at most
    PAGE_GAP_SHARE of the pages': 20 of 40 pages, a page apart, in 18 requests."""
    path = tmp_path / "every-other-page.parquet"
    values = np.random.default_rng(5).random(20_000)
    pq.write_table(pa.table({"x": values}), path, data_page_size=4096, write_batch_size=512,
                   write_page_index=True, use_dictionary=False)
    data = path.read_bytes()
    footer = ParquetFooter(raw_footer(data), str(path))
    chunk = footer.column_chunk(0, 0)
    offset, length = chunk.offset_index
    locations = chunk.page_locations(data[offset:offset + length])
    wanted = locations[::2]
    rows = np.array([location.first_row_index + 1 for location in wanted])
    requests = []

    def fetch(ranges):
        requests.append(ranges)
        return [data[start:start + n] for start, n in ranges]

    [result] = read_rows(footer, fetch, {0: rows}, [0])
    assert result.to_numpy().tolist() == values[rows].tolist()
    _, pages = requests
    needed = sum(location.compressed_page_size for location in wanted)
    assert (len(locations), len(wanted), len(pages)) == (40, 20, 18)
    assert needed < sum(n for _, n in pages) <= needed * (1 + PAGE_GAP_SHARE)


def test_single_column_file_footer(written):
    """Of all a chunk's pages: its sizes and counts, its Arrow type, no statistics or index."""
    path, data, footer, _ = written
    original = pq.read_metadata(path)
    arrow_schema = pq.read_schema(path)
    for column, name in flat_columns(footer):
        _, file, _ = read_survivors(data, footer, 1, column,
                                    np.arange(original.row_group(1).num_rows))
        metadata = pq.read_metadata(pa.BufferReader(file))
        assert metadata.num_columns == 1 and metadata.num_row_groups == 1
        assert metadata.created_by == original.created_by
        chunk = metadata.row_group(0).column(0)
        assert chunk.path_in_schema == name
        assert chunk.num_values == metadata.num_rows == metadata.row_group(0).num_rows
        assert not chunk.is_stats_set and not chunk.has_offset_index
        theirs = original.row_group(1).column(column)
        assert chunk.compression == theirs.compression
        assert chunk.physical_type == theirs.physical_type
        for size in ("num_values", "total_compressed_size", "total_uncompressed_size",
                     "has_dictionary_page", "encodings"):
            assert getattr(chunk, size) == getattr(theirs, size)
        assert pq.read_schema(pa.BufferReader(file)).field(0).type == arrow_schema.field(name).type
        kept = set(metadata.metadata or {}) - {b"ARROW:schema"}
        assert not kept


def test_nested_columns_are_refused_by_name(written):
    _, _data, footer, _ = written
    nested = [(i, leaf) for i, leaf in enumerate(footer.leaves) if leaf.path[0] in NESTED]
    assert {leaf.path[0] for _, leaf in nested} == set(NESTED)
    for column, leaf in nested:
        name = ".".join(leaf.path)
        with pytest.raises(PageReadUnsupportedError, match=f"column '{name}' is nested"):
            footer.column_chunk(0, column)
        with pytest.raises(PageReadUnsupportedError, match=f"column '{name}' is nested"):
            single_column_file(footer, 0, column, None, [])


def test_pages_off_row_boundaries_are_refused(written):
    _, data, footer, _ = written
    chunk = footer.column_chunk(0, MANY_PAGES)
    offset, length = chunk.offset_index
    index, _ = decode_struct(data[offset:offset + length])
    index[1][2][3] = index[1][1][3]  # a page starting at the previous page's first row
    with pytest.raises(PageReadUnsupportedError, match="'note': its pages do not start at row"):
        chunk.page_locations(encode_struct(index))
    index, _ = decode_struct(data[offset:offset + length])
    index[1][1][1] -= 1  # a page overlapping the one before
    with pytest.raises(PageReadUnsupportedError, match="'note': its OffsetIndex places pages"):
        chunk.page_locations(encode_struct(index))
    locations = chunk.page_locations(data[offset:offset + length])
    page = data[locations[1].offset:locations[1].offset + locations[1].compressed_page_size]
    rows = locations[2].first_row_index - locations[1].first_row_index
    dictionary = chunk.dictionary_range(locations)
    dictionary_page = data[dictionary[0]:sum(dictionary)] if dictionary else None
    counts = rf"'note': a page's header counts \[{rows}\]"
    with pytest.raises(PageReadUnsupportedError, match=counts):
        single_column_file(footer, 0, MANY_PAGES, dictionary_page, [(page, rows + 1)])
    with pytest.raises(PageReadUnsupportedError, match="'note': a page of type"):
        single_column_file(footer, 0, MANY_PAGES, page, [(page, rows)])  # data page as dictionary


def test_no_page_index_or_encryption_is_refused(tmp_path, written, raw_footer):
    path = tmp_path / "no-index.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3]}), path, write_page_index=False)
    footer = ParquetFooter(raw_footer(path.read_bytes()), str(path))
    with pytest.raises(PageReadUnsupportedError, match="column 'id' has no page index"):
        footer.column_chunk(0, 0)
    fields, _ = decode_struct(written[3])
    fields.put(8, STRUCT, ThriftStruct([(1, STRUCT, ThriftStruct())]))  # encryption_algorithm
    with pytest.raises(PageReadUnsupportedError, match="column 'id' is encrypted"):
        ParquetFooter(encode_struct(fields), "encrypted").column_chunk(0, 0)


def test_select_pages_maps_rows_and_checks_them():
    class Location:
        def __init__(self, first):
            self.first_row_index = first

    locations = [Location(0), Location(10), Location(25), Location(40)]
    selection = select_pages(np.array([3, 26, 27, 45]), locations, 50)
    assert selection.pages.tolist() == [0, 2, 3]
    assert selection.page_rows.tolist() == [10, 15, 10]
    assert selection.take.tolist() == [3, 11, 12, 30]
    for bad in ([5, 3], [1, 1], [-1], [50]):
        with pytest.raises(ValueError, match="sorted, distinct"):
            select_pages(np.array(bad), locations, 50)


def test_mangled_footers_fail_only_as_corrupt_or_unsupported(written):
    """Flipped bytes that still decode as Thrift must not escape as IndexError or TypeError."""
    _, _data, _, raw = written
    rng = np.random.default_rng(3)
    for _ in range(300):
        mangled = bytearray(raw)
        for at in rng.integers(0, len(raw), 3):
            mangled[at] = rng.integers(0, 256)
        try:
            footer = ParquetFooter(bytes(mangled), "mangled")
            for group in range(len(footer.row_groups)):
                for column in range(len(footer.leaves)):
                    try:
                        footer.column_chunk(group, column)
                        single_column_file(footer, group, column, None, [])
                    except PageReadUnsupportedError:
                        pass
        except CorruptFileError:
            pass
