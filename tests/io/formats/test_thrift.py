"""The compact-protocol codec on bytes worked out by hand, and on real, extended and corrupt
Parquet footers."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpuframe.io.errors import CorruptFileError
from gpuframe.io.formats.pages import (
    ParquetFooter,
)
from gpuframe.io.formats.thrift import (
    BINARY,
    BOOL,
    BYTE,
    DOUBLE,
    I16,
    I32,
    I64,
    LIST,
    SET,
    STRUCT,
    ThriftList,
    ThriftStruct,
    decode_struct,
    encode_struct,
)


def test_compact_protocol_bytes_by_hand():
    """Bytes worked out from the compact protocol's spec, not from this codec."""
    data = bytes([0x15, 0x01,                    # 1: i32 -1 (zigzag 1)
                  0x18, 0x02]) + b"ab" + bytes([  # 2: binary "ab"
                  0x11,                          # 3: bool true
                  0x06, 0x28, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40,  # 20 (long form): i64 2**40
                  0x19, 0x2C, 0x22, 0x00, 0x00,  # 21: list of 2 structs {2: bool false}, {}
                  0x1A, 0xF4, 0x0F]) + bytes(range(15)) + bytes([  # 22: set of 15 i16 0,-1,..
                  0x13, 0xFF,                    # 23: byte -1
                  0x17]) + bytes.fromhex("000000000000f83f") + bytes([  # 24: double 1.5
                  0x00])
    fields, end = decode_struct(data)
    assert end == len(data)
    assert fields == {1: -1, 2: b"ab", 3: True, 20: 2**40, 21: [{2: False}, {}],
                      22: [0, -1, 1, -2, 2, -3, 3, -4, 4, -5, 5, -6, 6, -7, 7], 23: -1,
                      24: 1.5}
    assert fields.kinds == {1: I32, 2: BINARY, 3: BOOL, 20: I64, 21: LIST, 22: SET, 23: BYTE,
                            24: DOUBLE}
    assert encode_struct(fields) == data


def test_real_footer_round_trips_byte_for_byte(written):
    _, data, footer, raw = written
    assert encode_struct(footer.fields) == raw
    chunk = footer.column_chunk(0, 2)
    offset, length = chunk.offset_index
    index, end = decode_struct(data[offset:offset + length])
    assert end == length and encode_struct(index) == data[offset:offset + length]
    header, end = decode_struct(data, chunk.start)  # the first page's header
    assert header[1] in (0, 2, 3) and encode_struct(header) == data[chunk.start:end]


def test_unknown_fields_survive(written):
    path, _, _, raw = written
    fields, _ = decode_struct(raw)
    unknown = ThriftList(STRUCT, [ThriftStruct([(1, BOOL, False), (2, DOUBLE, -0.25),
                                                (3, BYTE, -7), (40, SET, ThriftList(I16, [3, -3])),
                                                (41, LIST, ThriftList(BOOL, [True, False]))])])
    fields.put(100, LIST, unknown)
    fields.put(101, BINARY, b"\x00future\xff")
    fields[4][0][1][0][3].put(99, I64, -(2**62))  # in the first ColumnMetaData
    extended = encode_struct(fields)
    again, _ = decode_struct(extended)
    assert again[100] == unknown and again[101] == b"\x00future\xff"
    assert again[4][0][1][0][3][99] == -(2**62)
    assert encode_struct(again) == extended
    read = pq.read_metadata(pa.BufferReader(
        b"PAR1" + extended + len(extended).to_bytes(4, "little") + b"PAR1"))
    ours, theirs = read.to_dict(), pq.read_metadata(path).to_dict()
    assert ours.pop("serialized_size") == len(extended)
    theirs.pop("serialized_size")
    assert ours == theirs


def test_corrupt_thrift_raises_corrupt_file_error(written):
    _, _data, _, raw = written
    for end in [0, 1, 2, 10, len(raw) // 3, len(raw) // 2, len(raw) - 1]:
        with pytest.raises(CorruptFileError, match="footer of cut is corrupt"):
            ParquetFooter(raw[:end], "cut")
    for garbage, problem in [(bytes([0x19, 0xFC, 0xFF, 0xFF, 0xFF, 0x0F]), "claims"),
                             (bytes([0x1C]) * 100, "nest deeper"),
                             (bytes([0x1D, 0x00]), "compact type 13"),
                             (bytes([0x16]) + b"\xff" * 11, "past 10 bytes")]:
        with pytest.raises(CorruptFileError, match=problem):
            decode_struct(garbage)
